"""Untrusted files are never parsed unbounded in the dsstar process (issue 19). Each hostile
file of the issue is read the way a run reads it, in a fresh process whose tree is sampled
for peak resident memory: the data-contract step (one-line CSVs of 'x,' repeated, an 8 KB
SQLite file with a generated zeroblob(4e8) column) and archive expansion (a 1.5 MB tar.gz
with a 1.5 GiB pax header, a tar of 400,000 folder entries). Each ends in bounded time and
memory with the bound it hit stated. Set HOSTILE_REPORT=1 to print the figures."""

from __future__ import annotations

import gzip
import io
import json
import os
import sqlite3
import subprocess
import sys
import tarfile
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

PEAK_MB = 700  # the tree: dsstar's imports (~150 MB) plus the table reader's (~200 MB)
SECONDS = 60


def measure(code: str) -> tuple[dict, float, float]:
    """Run `code` (which prints one JSON line) in a fresh interpreter; its result, its
    wall seconds and the peak resident MB of its process tree (sampled every 20 ms)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    peak, started = 0, time.monotonic()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        root = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree))
            except psutil.Error:
                pass
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate(timeout=SECONDS * 3)
    seconds = time.monotonic() - started
    done.set()
    sampler.join()
    assert proc.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    if os.environ.get("HOSTILE_REPORT"):
        print(f"\n{result}: {seconds:.1f} s, peak {peak / 2**20:.0f} MB", file=sys.stderr)
    return result, seconds, peak / 2**20


CONTRACT = """
    import json
    from pathlib import Path
    from types import SimpleNamespace
    from dsstar.data.contracts import check_data_root
    from dsstar.storage import Store
    root = Path({root!r})
    file = SimpleNamespace(path={name!r}, format={fmt!r}, sha256="")
    report = check_data_root(Store({store!r}), str(root), root, [file])
    print(json.dumps(report["skipped"]))
"""


def contract_report(tmp_path: Path, name: str, fmt: str) -> tuple[list, float, float]:
    code = CONTRACT.format(root=str(tmp_path), name=name, fmt=fmt, store=str(tmp_path / "s"))
    return measure(code)


@pytest.mark.parametrize("size", [80_000, 400_000, 4_000_000])
def test_a_one_line_csv_of_empty_columns_is_skipped_with_its_bound(tmp_path, size):
    (tmp_path / "wide.csv").write_text("x," * (size // 2))
    skipped, seconds, peak = contract_report(tmp_path, "wide.csv", "csv")
    [entry] = skipped
    assert entry["path"] == "wide.csv"
    assert (
        "columns (more than 2,000)" in entry["reason"]
        or "first line is longer" in (entry["reason"])
    )
    assert seconds < SECONDS and peak < PEAK_MB


def test_a_sqlite_file_with_a_zeroblob_column_is_skipped_with_its_bound(tmp_path):
    with sqlite3.connect(tmp_path / "bomb.sqlite") as con:
        con.execute("CREATE TABLE t (a, b GENERATED ALWAYS AS (zeroblob(400000000)))")
        con.executemany("INSERT INTO t (a) VALUES (?)", [(i,) for i in range(32)])
    assert (tmp_path / "bomb.sqlite").stat().st_size <= 16_384
    skipped, seconds, peak = contract_report(tmp_path, "bomb.sqlite", "sqlite")
    assert skipped == [
        {"path": "bomb.sqlite", "reason": "not read: a value is larger than 16,777,216 bytes"}
    ]
    assert seconds < SECONDS and peak < PEAK_MB


def test_a_table_past_the_memory_bound_is_skipped_not_the_process(tmp_path):
    """Whatever the format's own bounds miss, the reader's address space catches: 200 rows
    of 15 MB values (3 GB) under the default bound of 1024 MB."""
    with sqlite3.connect(tmp_path / "fat.sqlite") as con:
        con.execute("CREATE TABLE t (a, b GENERATED ALWAYS AS (zeroblob(15000000)))")
        con.executemany("INSERT INTO t (a) VALUES (?)", [(i,) for i in range(200)])
    skipped, seconds, peak = contract_report(tmp_path, "fat.sqlite", "sqlite")
    [entry] = skipped
    assert "more than 1024 MB (DSSTAR_READ_MEMORY_MB)" in entry["reason"]
    assert seconds < SECONDS and peak < 1024 + PEAK_MB


EXPAND = """
    import json
    from pathlib import Path
    from dsstar.data.lake.archives import ArchiveError, ArchiveLimits, expand_cached
    try:
        expand_cached({archive!r}, "gz", Path({cache!r}), ArchiveLimits())
        print(json.dumps("expanded"))
    except ArchiveError as exc:
        print(json.dumps(str(exc)))
"""


def expand_report(tmp_path: Path, archive: Path) -> tuple[str, float, float]:
    return measure(EXPAND.format(archive=str(archive), cache=str(tmp_path / "cache")))


def test_a_pax_header_bomb_is_refused_before_it_is_read(tmp_path):
    """1.5 GiB of pax header in a 1.5 MB tar.gz: gzip members of zeros, concatenated."""
    size = 1536 << 20
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, size
    zeros = gzip.compress(bytes(16 << 20), compresslevel=9)
    archive = tmp_path / "bomb.tar.gz"
    with open(archive, "wb") as out:
        out.write(gzip.compress(header.tobuf(format=tarfile.USTAR_FORMAT)))
        for _ in range(size // (16 << 20)):
            out.write(zeros)
    assert archive.stat().st_size < 2 << 20
    error, seconds, peak = expand_report(tmp_path, archive)
    assert error == "a header of 1,610,612,736 bytes (more than 1,048,576)"
    assert seconds < SECONDS and peak < PEAK_MB


def test_four_hundred_thousand_folder_entries_count_as_members(tmp_path):
    buffer = io.BytesIO()
    for n in range(400_000):
        entry = tarfile.TarInfo(f"d{n}")
        entry.type = tarfile.DIRTYPE
        buffer.write(entry.tobuf(format=tarfile.USTAR_FORMAT))
    buffer.write(bytes(1024))
    archive = tmp_path / "folders.tar.gz"
    archive.write_bytes(gzip.compress(buffer.getvalue(), compresslevel=1))
    error, seconds, peak = expand_report(tmp_path, archive)
    assert error == "more than 20,000 members (DSSTAR_ARCHIVE_MAX_MEMBERS)"
    assert seconds < SECONDS and peak < PEAK_MB
