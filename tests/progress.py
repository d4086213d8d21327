"""A line on stderr every minute of a test session: how many tests are done, how many failed,
and which files are running now, so a long run is never silent (pytest-xdist prints nothing
until tests finish, and the longest files run for minutes)."""

from __future__ import annotations

import sys
import threading
import time

__all__ = ["Progress"]

EVERY_S = 60


class Progress:
    """A pytest plugin for the session's controller (the xdist controller, or pytest alone)."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.failed: set[str] = set()
        self.running: dict[str, float] = {}  # test id -> when it started
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._tick, name="test-progress", daemon=True)

    def pytest_sessionstart(self, session) -> None:
        self.thread.start()

    def pytest_sessionfinish(self, session) -> None:
        self.stop.set()

    def pytest_collection_finish(self, session) -> None:
        self.total = len(session.items)  # pytest alone (under xdist, the workers collect)

    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self.total = max(self.total, len(ids))

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        with self.lock:
            self.running[nodeid] = time.monotonic()

    def pytest_runtest_logreport(self, report) -> None:
        with self.lock:
            if report.failed:
                self.failed.add(report.nodeid)
            if report.when == "teardown":
                self.done += 1
                self.running.pop(report.nodeid, None)

    def line(self) -> str:
        with self.lock:
            now = time.monotonic()
            files: dict[str, float] = {}
            for nodeid, since in self.running.items():
                name = nodeid.split("::")[0].rsplit("/", 1)[-1]
                files[name] = min(files.get(name, now), since)
            running = ", ".join(f"{name} ({now - since:.0f} s)" for name, since in files.items())
            elapsed = int(now - self.started)
            if not self.total:
                return f"[pytest {elapsed // 60}:{elapsed % 60:02d}] collecting the tests"
            failed = f" ({', '.join(sorted(self.failed)[:5])})" if self.failed else ""
            return (
                f"[pytest {elapsed // 60}:{elapsed % 60:02d}] {self.done} of {self.total} tests"
                f" done, {len(self.failed)} failed{failed}; running: {running or 'nothing'}"
            )

    def _tick(self) -> None:
        while not self.stop.wait(EVERY_S):
            # On a line of its own: pytest's dots on stdout have no newline yet.
            print(f"\n{self.line()}", file=sys.stderr, flush=True)
