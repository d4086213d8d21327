"""The generated lakes of the data-lake benchmark (`lake.py`): many small files of mixed
formats, and a few hundred large CSV files."""

from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = "revenue units region order customer invoice shipment product price margin".split()


def small_lake(root: Path, count: int) -> Path:
    """`count` small files, a quarter each CSV, JSON, Markdown and text, in nested folders."""
    rng = random.Random(7)
    for i in range(count):
        folder = root / f"domain_{i % 12:02d}" / f"year_{2010 + i % 13}" / f"part_{i % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        word = WORDS[i % len(WORDS)]
        kind = i % 4
        if kind == 0:
            rows = "\n".join(f"{n},{word}_{n},{rng.randint(1, 999)}" for n in range(20))
            (folder / f"{word}_{i}.csv").write_text(f"id,name,{word}\n{rows}\n")
        elif kind == 1:
            items = [{"id": n, word: rng.random(), "tags": [word, "x"]} for n in range(10)]
            (folder / f"{word}_{i}.json").write_text(json.dumps({"file": i, "items": items}))
        elif kind == 2:
            (folder / f"notes_{i}.md").write_text(
                f"# {word.title()} notes {i}\n\n## Method\nCounted {word} per day.\n"
            )
        else:
            (folder / f"log_{i}.txt").write_text(f"{i} {word} ok\n" * 15)
    return root


def big_lake(root: Path, count: int, total_mb: int) -> Path:
    """`count` CSV files of about `total_mb` MB together, each with its own content."""
    size = total_mb * 1_000_000 // count
    block = "".join(
        f"{n},{WORDS[n % len(WORDS)]},{n * 7 % 1000}.{n % 100:02d},2024-01-{1 + n % 28:02d}\n"
        for n in range(2000)
    )
    body = (block * (size // len(block) + 1))[:size]
    body = body[: body.rfind("\n") + 1]
    for i in range(count):
        folder = root / f"source_{i % 30:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        word = WORDS[i % len(WORDS)]
        (folder / f"{word}_{i:04d}.csv").write_text(f"id,{word},amount,day\n-{i},x,0,0\n" + body)
    return root
