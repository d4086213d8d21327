"""Seconds to validate one file against its data contract, by format and size.

Builds a contract per file (dsstar.data.contracts), then validates the unchanged file a few times.
The first validation in a process also pays for importing Great Expectations and creating the
ephemeral context; that one-time cost is printed separately.

    PYTHONPATH=. .venv/bin/python benchmarks/contract_validation.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dsstar.data.contracts import create_contract, validate_file
from dsstar.data.contracts._validate import _context
from dsstar.storage import Store


@dataclass
class File:
    path: str
    format: str


def frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {
            "order_id": np.arange(rows),
            "region": rng.choice(["NE", "SW", "MW", "SE"], rows),
            "units": rng.integers(1, 50, rows),
            "price": rng.choice([2.5, 12.0, 30.0], rows),
            "day": pd.date_range("2024-01-01", periods=rows, freq="min"),
            "note": [f"n{i % 997}" for i in range(rows)],
        }
    )


def write(root: Path, rows: int) -> list[File]:
    data = frame(rows)
    files = [File(f"orders_{rows}.csv", "csv"), File(f"orders_{rows}.parquet", "parquet")]
    data.to_csv(root / files[0].path, index=False)
    data.to_parquet(root / files[1].path, index=False)
    if rows <= 10_000:  # openpyxl is slow to write big sheets
        files.append(File(f"orders_{rows}.xlsx", "excel"))
        data.to_excel(root / files[2].path, index=False)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dsstar-bench-"))
    store = Store(str(root / "storage"))
    started = time.perf_counter()
    _context()
    once = time.perf_counter() - started
    print(f"GX import + ephemeral context (once per process): {once:.2f} s")
    print(f"{'file':<24} {'rows':>8} {'expectations':>12} {'create s':>9} {'validate s':>11}")
    for rows in (100, 10_000, 100_000):
        for file in write(root, rows):
            t0 = time.perf_counter()
            document = create_contract(store, "bench", root, file)
            created = time.perf_counter() - t0
            times = []
            for _ in range(args.repeat):
                check = validate_file(store, "bench", root, file)
                assert check.status == "validated", check.failures
                times.append(check.seconds)
            count = sum(len(t["suite"]["expectations"]) for t in document["tables"])
            print(f"{file.path:<24} {rows:>8} {count:>12} {created:>9.3f}"
                  f" {statistics.median(times):>11.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
