"""Reading the tables of untrusted files outside the dsstar process, under bounds.

pandas, pyarrow and sqlite parse a file in a child process: its address space is capped
(`RLIMIT_AS`), it may not write files (`RLIMIT_FSIZE` 0), it dies with its parent, and a
file that takes longer than the time bound gets it killed and restarted for the next file.
A file beyond a bound raises `TableSkipped` naming it. What crosses the boundary is plain
data, sized before it is read (no pickle):

- a new file's contract is built in the child (`suites_bounded`), which sends the suites as
  JSON: a run over new files never imports pandas or pyarrow in the dsstar process;
- a stored contract is checked in the dsstar process (Great Expectations runs there), so
  `read_tables_bounded` gets each canonical frame back as an Arrow IPC stream;
- a table a script wrote is previewed there (`preview_bounded`: shape, columns, first rows,
  as JSON), its file's own statement of its decoded size checked first (`_preview`).

Each request may spend the time bound in CPU too (`RLIMIT_CPU`, set afresh per request): a
reader's threads together cannot pass it while the wall clock is still short of it.

One child serves the whole process (pandas is imported once), one file at a time. A run
starts it early (`warm_reader`), so that its imports overlap the run's own start-up on another
core instead of delaying the first contract check.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsstar.data.contracts._read import MAX_ROWS, Table, TableSkipped, canonical, read_tables
from dsstar.data.formats import child_environment

__all__ = [
    "ReadBounds",
    "preview_bounded",
    "read_tables_bounded",
    "suites_bounded",
    "warm_reader",
]


@dataclass(frozen=True)
class ReadBounds:
    """Per file: wall seconds, and the reader's address space in MB."""

    timeout_s: float = 30.0
    memory_mb: int = 1024

    @classmethod
    def from_settings(cls) -> ReadBounds:
        from dsstar.settings import Settings

        settings = Settings()
        return cls(settings.read_timeout, settings.read_memory_mb)


# Of the reader's bound, what this process may receive of tables. The reader holds several
# copies of what it sends (rows, frame, canonical frame, Arrow), so its own cap usually
# binds first; this guard keeps the bound here too whatever the reader's copies.
_MAX_SHIPPED_SHARE = 0.25
_MAX_SUITES_BYTES = 16 << 20  # a file's suites, as JSON: value sets and ranges, never rows
_MAX_PREVIEW_BYTES = 4 << 20  # a preview, as JSON: at most rows x COLUMNS_SHOWN short cells
# Of the reader's bound, how many bytes a preview's first rows may decode from.
_DECODED_SHARE = 0.25
_LOCK = threading.Lock()
_CHILD: dict[str, subprocess.Popen] = {}


def read_tables_bounded(
    path: Path, fmt: str, bounds: ReadBounds | None = None, max_rows: int = MAX_ROWS
) -> list[Table]:
    """`read_tables` in the bounded reader. Raises TableSkipped past a bound, and
    ValueError with the reader's message for a file that does not parse."""
    tables = _ask({"path": str(path), "fmt": fmt, "max_rows": max_rows}, bounds)
    return [Table(t["name"], canonical(_frame(blob)), t["truncated"]) for t, blob in tables]


def suites_bounded(
    path: Path, fmt: str, shown: str, bounds: ReadBounds | None = None, max_rows: int = MAX_ROWS
) -> list[tuple[str | None, dict]]:
    """(table name, suite) for each table of the file: `build_suite` of what
    `read_tables_bounded` would return, run in the reader. `shown` is the file's name in
    the suites' names. Raises as `read_tables_bounded`."""
    request = {"path": str(path), "fmt": fmt, "max_rows": max_rows, "suites_of": shown}
    return [(t["name"], json.loads(blob)) for t, blob in _ask(request, bounds)]


def preview_bounded(
    path: Path, name: str, rows: int, bounds: ReadBounds | None = None
) -> dict[str, Any]:
    """The preview of the table at `path` (`name` says its kind: CSV, TSV, Parquet or
    Excel), read in the reader: {'shape', 'columns', 'head'}, see `_preview.read_preview`.
    Its first rows may decode from a quarter of the reader's memory at most. Raises as
    `read_tables_bounded`."""
    bounds = bounds or ReadBounds.from_settings()
    decoded_max = int(_DECODED_SHARE * (bounds.memory_mb << 20))
    request = {"path": str(path), "preview_of": name, "rows": rows, "decoded_max": decoded_max}
    [(_, blob)] = _ask(request, bounds)
    return json.loads(blob)


def _ask(request: dict, bounds: ReadBounds | None) -> list[tuple[dict, bytes]]:
    """Send one request to the reader; its tables' headers, each with its blob."""
    bounds = bounds or ReadBounds.from_settings()
    request = {**request, "cpu_s": bounds.timeout_s}
    if "suites_of" in request:
        what, limit = "its contract takes", _MAX_SUITES_BYTES
    elif "preview_of" in request:
        what, limit = "its preview takes", _MAX_PREVIEW_BYTES
    else:
        what, limit = "its tables take", int(_MAX_SHIPPED_SHARE * (bounds.memory_mb << 20))
    with _LOCK:
        child = _reader(bounds)
        try:
            child.stdin.write(json.dumps(request).encode() + b"\n")
            child.stdin.flush()
            deadline = time.monotonic() + bounds.timeout_s
            header = json.loads(_read_line(child, deadline))
            sizes = [t["size"] for t in header.get("tables", [])]
            if sum(sizes) > limit:
                _stop(child)  # what it holds would be as big here, where no cap holds it
                raise TableSkipped(
                    f"{what} {sum(sizes):,} bytes, more than {limit:,} (the reader may"
                    f" use {bounds.memory_mb} MB: DSSTAR_READ_MEMORY_MB)"
                )
            blobs = [_read_exact(child, size, deadline) for size in sizes]
        except (OSError, ValueError, TimeoutError) as exc:
            _stop(child)
            code = child.returncode
            if isinstance(exc, TimeoutError):
                why = f"reading it took longer than {bounds.timeout_s:g} s (DSSTAR_READ_TIMEOUT)"
            elif code == -signal.SIGXCPU:
                why = (f"reading it took more than {bounds.timeout_s:g} s of CPU"
                       " (DSSTAR_READ_TIMEOUT)")  # fmt: skip
            elif code is not None and (code < 0 or code == 3):  # a signal, or MemoryError
                why = f"reading it needs more than {bounds.memory_mb} MB (DSSTAR_READ_MEMORY_MB)"
            else:
                why = f"the reader stopped (exit {code}: {exc})"
            raise TableSkipped(why) from exc
    if header.get("skipped"):
        raise TableSkipped(header["skipped"])
    if header.get("error"):
        raise ValueError(header["error"])
    return list(zip(header["tables"], blobs, strict=True))


def warm_reader() -> None:
    """Start the reader that `read_tables_bounded` will use (bounds from the environment, as
    that call takes them), if it is not running yet. It imports pandas and pyarrow at once and
    then waits for requests; it dies with this process. One that cannot start is no error
    here: the check starts its own and reports what stops it."""
    try:
        with _LOCK:
            _reader(ReadBounds.from_settings())
    except (ValueError, OSError):  # a DSSTAR_READ_* value Settings refuses; no process left
        pass


def _reader(bounds: ReadBounds) -> subprocess.Popen:
    formats = child_environment()  # the user's format modules load there too
    key = f"{bounds.memory_mb} {sorted(formats.items())}"  # a format added: a fresh reader
    child = _CHILD.get(key)
    if child is not None and child.poll() is None:
        return child
    memory = bounds.memory_mb << 20

    def limit() -> None:  # in the child, before exec
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    child = subprocess.Popen(
        [sys.executable, "-m", "dsstar.data.contracts._bounded"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        preexec_fn=limit,  # noqa: PLW1509 - only setrlimit and prctl, async-signal-safe enough
        env={
            **os.environ,
            **formats,
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
        },
    )
    _CHILD[key] = child
    return child


def _stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.kill()
    child.wait()


def _wait_readable(child: subprocess.Popen, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([child.stdout], [], [], left)[0]:
        raise TimeoutError


def _read_line(child: subprocess.Popen, deadline: float) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        _wait_readable(child, deadline)
        chunk = os.read(child.stdout.fileno(), 1)
        if not chunk:
            child.wait()
            raise OSError("the reader exited")
        line += chunk
    return line


def _read_exact(child: subprocess.Popen, size: int, deadline: float) -> bytes:
    parts, left = [], size
    while left:
        _wait_readable(child, deadline)
        chunk = os.read(child.stdout.fileno(), min(left, 1 << 20))
        if not chunk:
            child.wait()
            raise OSError("the reader exited")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _frame(blob: bytes):  # noqa: ANN202 - a pandas DataFrame, imported lazily
    import pyarrow as pa

    return pa.ipc.open_stream(blob).read_all().to_pandas()


def _serve() -> None:
    """The child: one JSON request per line in; a JSON header line and its blobs out (Arrow
    streams, or JSON)."""
    import pandas  # noqa: F401  (every table is read with it: imported before the first request)

    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        request = json.loads(line)
        _limit_cpu(request["cpu_s"])
        try:
            answered = _preview(request) if "preview_of" in request else _tables(request)
            header = {"tables": [table for table, _ in answered]}
            blobs = [blob for _, blob in answered]
        except TableSkipped as exc:
            header, blobs = {"skipped": str(exc)}, []
        except MemoryError:
            os._exit(3)  # the parent names the memory bound
        except Exception as exc:  # a malformed file: the parent reports it as such
            header, blobs = {"error": f"{type(exc).__name__}: {exc}"}, []
        out.write(json.dumps(header).encode() + b"\n")
        for blob in blobs:
            out.write(blob)
        out.flush()


def _tables(request: dict) -> list[tuple[dict, bytes]]:
    """Each table of the file with its blob: its suites as JSON, or its frame as Arrow."""
    import pyarrow as pa

    from dsstar.data.contracts._build import build_suite, suite_name

    answered = []
    for table in read_tables(Path(request["path"]), request["fmt"], request["max_rows"]):
        if "suites_of" in request:
            name = suite_name(request["suites_of"], table.name)
            suite = build_suite(name, Table(table.name, canonical(table.frame), table.truncated))
            blob = json.dumps(suite, default=str).encode()  # as stored
        else:
            sink = pa.BufferOutputStream()
            arrow = pa.Table.from_pandas(table.frame, preserve_index=False)
            with pa.ipc.new_stream(sink, arrow.schema) as writer:
                writer.write_table(arrow)
            blob = sink.getvalue().to_pybytes()
        header = {"name": table.name, "truncated": table.truncated, "size": len(blob)}
        answered.append((header, blob))
    return answered


def _preview(request: dict) -> list[tuple[dict, bytes]]:
    from dsstar.data.contracts._preview import read_preview

    path, name = Path(request["path"]), request["preview_of"]
    found = read_preview(path, name, request["rows"], request["decoded_max"])
    blob = json.dumps(found, default=str).encode()
    return [({"name": None, "truncated": False, "size": len(blob)}, blob)]


def _limit_cpu(seconds: float) -> None:
    """This request may use `seconds` of CPU beyond what the reader used so far: past that,
    the kernel sends SIGXCPU, which ends the reader (the parent names the bound)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime + seconds) + 1
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard < 0 else min(soft, hard), hard))


if __name__ == "__main__":
    _serve()
