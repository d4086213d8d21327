"""Where the test suite's CPU goes, test by test: a pytest plugin, and the report of what it
recorded.

Each pytest worker records, around each test's whole run (setup, call and teardown), the CPU
time (user + system) of its own process and of the children it reaped meanwhile: a test's
CLI subprocesses, servers, workers and sandboxes, once they have ended, and the `dsstar`
commands tests/forked_cli.py forked for it, once it saw them end. A process that lives
longer than its test (a session's Prefect server, a warm pool) is counted in the test that
ends it, the last one of its worker for the session's servers. Run the suite with it, then
the report:

    PYTHONPATH=benchmarks SUITE_CPU_DIR=/tmp/suite-cpu bash scripts/test -p suite_cpu
    .venv/bin/python benchmarks/suite_cpu.py /tmp/suite-cpu

The report gives the total, then the files and tests that used the most CPU.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

_ROWS: list[list] = []  # nodeid, CPU of the worker, CPU of its reaped children, wall


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, reaped.ru_utime + reaped.ru_stime + _forked()


def _forked() -> float:
    """The CPU of the `dsstar` commands tests/forked_cli.py forked and saw end: they are
    the forking interpreter's children, not the test's. What ended with that interpreter is
    then reaped by the test that stops it, and is not counted twice."""
    forked = sys.modules.get("forked_cli")
    return forked.CPU - forked.CPU_AT_SHUTDOWN if forked else 0.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before, started = _cpu(), time.monotonic()
    yield
    after = _cpu()
    _ROWS.append([item.nodeid, after[0] - before[0], after[1] - before[1],
                  time.monotonic() - started])  # fmt: skip


def pytest_sessionfinish(session):
    folder = Path(os.environ.get("SUITE_CPU_DIR", "suite-cpu"))
    folder.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (folder / f"{worker}.json").write_text(json.dumps({"rows": _ROWS}))


def report(folder: Path, top: int = 30) -> None:
    rows = []
    for path in sorted(folder.glob("*.json")):
        rows += json.loads(path.read_text())["rows"]
    own, reaped = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(
        f"{len(rows)} tests: {(own + reaped) / 60:.1f} min of CPU ({own / 60:.1f} in the"
        f" pytest workers, {reaped / 60:.1f} in their children)"
    )
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for nodeid, mine, theirs, wall in rows:
        entry = files[nodeid.split("::")[0]]
        entry[0] += mine + theirs
        entry[1] += wall
        entry[2] += 1
    print(f"\n{'file':<48} {'CPU s':>7} {'wall s':>7} {'tests':>5}")
    for name, (cpu, wall, count) in sorted(files.items(), key=lambda i: -i[1][0])[:top]:
        print(f"{name:<48} {cpu:7.1f} {wall:7.1f} {count:5d}")
    print(f"\n{'CPU s':>7} {'wall s':>7}  test")
    for nodeid, mine, theirs, wall in sorted(rows, key=lambda r: -(r[1] + r[2]))[:top]:
        print(f"{mine + theirs:7.1f} {wall:7.1f}  {nodeid}")


if __name__ == "__main__":
    report(Path(sys.argv[1] if len(sys.argv) > 1 else "suite-cpu"))
