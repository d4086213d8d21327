"""Slot requests against a SQLite-backed Prefect server: how long taking and giving back a
slot of a global concurrency limit (with a lease, as `tasks.slots` does for every model call
and script) takes when several threads of one process do it at once, with the process's
requests sent one at a time (as `tasks/slots/_api.py` sends them) and all at once (as before).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/slot_requests.py --seconds 60 --threads 6

Each mode gets a fresh `prefect server start` (SQLite, a fresh PREFECT_HOME) and a limit of 8
slots; each thread takes a slot, holds it 10 ms and gives it back, for the given time. Printed:
pairs done, the slowest and 99th-percentile take and give, and how many pairs took over 5 s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from overhead import load, start_prefect  # noqa: E402


def hammer(api_url: str, seconds: float, threads: int, one_at_a_time: bool) -> list[tuple]:
    from prefect import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from tasks.slots import _api

    timed: list[tuple[float, float]] = []
    saved = _api._one_at_a_time
    _api._one_at_a_time = saved if one_at_a_time else contextlib.nullcontext()
    try:
        with temporary_settings(updates={PREFECT_API_URL: api_url}):
            with get_client(sync_client=True) as client:
                client.create_global_concurrency_limit(
                    GlobalConcurrencyLimitCreate(name="bench-slots", limit=8)
                )
            until = time.monotonic() + seconds

            def work() -> None:
                while time.monotonic() < until:
                    started = time.monotonic()
                    taken = _api.post("/v2/concurrency_limits/increment-with-lease",
                                      {"names": ["bench-slots"], "slots": 1,
                                       "mode": "concurrency", "lease_duration": 300})  # fmt: skip
                    took = time.monotonic() - started
                    time.sleep(0.01)
                    started = time.monotonic()
                    _api.post("/v2/concurrency_limits/decrement-with-lease",
                              {"lease_id": taken.json()["lease_id"]})  # fmt: skip
                    timed.append((took, time.monotonic() - started))

            workers = [threading.Thread(target=work) for _ in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
    finally:
        _api._one_at_a_time = saved
    return timed


def summary(timed: list[tuple[float, float]]) -> str:
    takes, gives = sorted(t for t, _ in timed), sorted(g for _, g in timed)
    p99 = int(len(timed) * 0.99)
    slow = sum(1 for t, g in timed if max(t, g) > 5)
    return (f"{len(timed):,} pairs; take max {takes[-1]:.2f} s, p99 {takes[p99]:.2f} s;"
            f" give max {gives[-1]:.2f} s, p99 {gives[p99]:.2f} s; over 5 s: {slow}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--threads", type=int, default=6)
    args = parser.parse_args()
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    print(f"before: {load()}")
    for one_at_a_time in (False, True):
        home = Path(tempfile.mkdtemp(prefix="dsstar-slots-"))
        server, api_url = start_prefect(home)
        try:
            timed = hammer(api_url, args.seconds, args.threads, one_at_a_time)
        finally:
            server.terminate()
            server.wait(timeout=30)
        mode = "one at a time" if one_at_a_time else "all at once  "
        print(f"{mode}: {summary(timed)}")
    print(f"after: {load()}")


if __name__ == "__main__":
    main()
