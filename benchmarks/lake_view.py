"""Figures for reading a lake: building the mount view of a generated 1,560-file lake (cold,
and again with the archive expansions cached), listing it, and profiling every file inside
the sandbox in batches (seconds per file).

    PYTHONPATH=. .venv/bin/python benchmarks/lake_view.py [--files 1560] [--profile-files N]
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import tempfile
import time
import zipfile
from pathlib import Path

from dsstar.data.profiler import ProfileLimits, profile_files
from dsstar.data.sources import DataSource


def make_lake(root: Path, count: int) -> None:
    """`count` small files in 30 folders: CSV, JSON, JSONL, Markdown, text, and one archive
    (zip or .csv.gz) in every 20 files."""
    for i in range(count):
        folder = root / f"domain_{i % 30:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        kind = i % 20
        if kind == 0:
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w") as zf:
                zf.writestr("inner/table.csv", f"id,value\n{i},{i * 2}\n")
            (folder / f"bundle_{i}.zip").write_bytes(buffer.getvalue())
        elif kind == 1:
            (folder / f"metrics_{i}.csv.gz").write_bytes(gzip.compress(f"m,v\n{i},1\n".encode()))
        elif kind % 4 == 0:
            (folder / f"doc_{i}.json").write_text(json.dumps({"id": i, "tags": ["a", "b"]}))
        elif kind % 4 == 1:
            (folder / f"notes_{i}.md").write_text(f"# Notes {i}\nsome text\n")
        elif kind % 4 == 2:
            (folder / f"events_{i}.jsonl").write_text(f'{{"ts": {i}}}\n{{"ts": {i + 1}}}\n')
        else:
            rows = "".join(f"{r},{r * i % 97},name{r}\n" for r in range(20))
            (folder / f"table_{i}.csv").write_text("row,score,name\n" + rows)


def timed(action):
    started = time.perf_counter()
    value = action()
    return value, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1560)
    parser.add_argument("--profile-files", type=int, default=None, help="default: all")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        make_lake(base / "lake", args.files)
        cache = base / "cache"
        cold = DataSource(str(base / "lake"), cache)
        _, cold_s = timed(lambda: cold.mount_dir)
        warm = DataSource(str(base / "lake"), cache)
        _, warm_s = timed(lambda: warm.mount_dir)
        files, list_s = timed(warm.files)
        print(f"lake: {args.files} files -> {len(files)} files in the view")
        print(f"view build, cold (archives expanded): {cold_s:.2f} s")
        print(f"view build, archives cached:          {warm_s:.2f} s")
        print(f"listing with formats and sha256:      {list_s:.2f} s")
        paths = [f.path for f in files][: args.profile_files]
        limits = ProfileLimits(workers=max(1, min(4, os.cpu_count() or 1)))
        texts, profile_s = timed(
            lambda: profile_files(warm.mount_dir, paths, limits=limits, work_root=base / "work")
        )
        _, one_s = timed(
            lambda: profile_files(warm.mount_dir, paths[:1], limits=limits, work_root=base / "work")
        )
        print(f"one file alone (a whole sandboxed script): {one_s:.2f} s")
        failed = sum("not profiled" in t for t in texts.values())
        print(
            f"sandboxed profiling: {len(paths)} files in {profile_s:.1f} s"
            f" ({profile_s / len(paths) * 1000:.0f} ms per file, {limits.batch_files} files per"
            f" script, {limits.workers} scripts at once, {failed} not profiled)"
        )


if __name__ == "__main__":
    main()
