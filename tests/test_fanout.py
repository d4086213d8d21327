"""Bounded fan-out: however large the lake, at most --llm-concurrency LLM requests and at most
--max-parallel scripts are in flight at once; under a Prefect server the bound is a global
concurrency limit that `dsstar serve` creates and every run shares."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import forked_cli
import pytest
from scenarios import ANSWER, describe_script, fence

from tasks.slots import LIMIT_NAMES, RATE_NAME, ensure_limit

pytestmark = pytest.mark.slow

# Prints when its body started and ended, so the overlap of scripts can be computed after
# the run from the descriptions alone (a lower bound of how many processes ran at once).
WINDOW_SCRIPT = """
import time
start = time.time()
time.sleep(0.4)
print(f"window {start:.6f} {time.time():.6f}")
"""


class Gauge:
    """Counts requests in flight in the fake model server and keeps the peak."""

    def __init__(self) -> None:
        self.now = self.peak = 0
        self._lock = threading.Lock()

    @contextmanager
    def hold(self):
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        try:
            yield
        finally:
            with self._lock:
                self.now -= 1


def slow_analyzer(gauge: Gauge, delay: float = 0.3):
    def reply(request):
        with gauge.hold():
            time.sleep(delay)
        return fence(WINDOW_SCRIPT)

    return reply


def make_lake(root: Path, count: int) -> Path:
    """`count` CSVs, each with columns of its own: no two share a script, so every file is
    one analysis (like files would share one, see test_likeness)."""
    for i in range(count):
        folder = root / f"region_{i % 3}" / f"batch_{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"sales_{i:03d}.csv").write_text(f"id,units_{i}\n{i},{i * 2}\n")
    return root


def peak_overlap(descriptions: list[str]) -> int:
    events = []
    for text in descriptions:
        _, start, end = text.split()
        events += [(float(start), 1), (float(end), -1)]
    now = peak = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):  # ends before starts
        now += step
        peak = max(peak, now)
    return peak


def dsstar(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=timeout, env=os.environ.copy(),
    )  # fmt: skip


def describe_json(lake: Path, *flags: str) -> list[dict]:
    done = dsstar("describe", "--data", str(lake), "--json", *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)["files"]


def read_limit(name: str):
    from prefect import get_client

    with get_client(sync_client=True) as client:
        return client.read_global_concurrency_limit_by_name(name)


def test_a_lake_larger_than_the_limits_never_exceeds_them(env, llm, tmp_path, fresh_limits):
    gauge = Gauge()
    llm.default("analyzer", slow_analyzer(gauge))
    lake = make_lake(tmp_path / "lake", 12)
    files = describe_json(lake, "--llm-concurrency", "2", "--max-parallel", "2")
    assert len(files) == 12
    assert all(f["description"].startswith("window ") for f in files), files[0]
    assert len(llm.calls("analyzer")) == 12
    assert 1 <= gauge.peak <= 2
    assert 1 <= peak_overlap([f["description"] for f in files]) <= 2
    # The run created the server's global limits with its own values, since none existed.
    assert read_limit("dsstar-llm").limit == 2
    assert read_limit("dsstar-exec").limit == 2
    # Leases handed from one analysis to the next all went back when the command ended.
    assert read_limit("dsstar-llm").active_slots == 0
    assert read_limit("dsstar-exec").active_slots == 0


def test_runs_take_their_slots_from_the_servers_global_limit(env, llm, tmp_path, fresh_limits):
    ensure_limit("llm", 1, reset=True)  # as `dsstar serve --llm-concurrency 1` leaves it
    gauge = Gauge()
    llm.default("analyzer", slow_analyzer(gauge, delay=0.2))
    lake = make_lake(tmp_path / "lake", 6)
    files = describe_json(lake, "--llm-concurrency", "4", "--max-parallel", "2")
    assert len(files) == 6
    assert gauge.peak == 1  # the run allowed 4; the server's limit allowed 1
    assert read_limit("dsstar-llm").limit == 1  # a run never changes an existing limit
    assert read_limit("dsstar-llm").active_slots == 0  # every slot was given back


def test_serve_creates_the_global_limits(env, fresh_limits):
    proc = forked_cli.popen(
        [sys.executable, "-m", "dsstar", "serve", "--max-parallel", "3",
         "--llm-concurrency", "5"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        limits = {}
        while len(limits) < 2:
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "serve did not create the limits"
            for kind, name in LIMIT_NAMES.items():
                try:
                    limits[kind] = read_limit(name).limit
                except Exception:  # not yet created
                    time.sleep(0.5)
        assert limits == {"exec": 3, "llm": 5}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def test_without_a_server_a_local_bound_applies(env, llm, tmp_path, monkeypatch):
    """The ephemeral server (no PREFECT_API_URL): the same bound, kept in the process."""
    monkeypatch.delenv("PREFECT_API_URL")
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    gauge = Gauge()
    llm.default("analyzer", slow_analyzer(gauge, delay=0.2))
    lake = make_lake(tmp_path / "lake", 8)
    files = describe_json(lake, "--llm-concurrency", "3", "--max-parallel", "1")
    assert 1 <= gauge.peak <= 3
    assert peak_overlap([f["description"] for f in files]) == 1


# Three runs start at once on the test server's SQLite database: on a loaded machine its
# writes can wait out SQLite's 60 s busy timeout a few times in one test (a known limit of
# Prefect's SQLite backend); each wait is slow, not wrong, so the test gets the time.
@pytest.mark.timeout(900)
def test_three_runs_share_one_llm_budget_and_rate(env, llm, sales, fresh_limits):
    """Three `dsstar run`s at once against one server: each allows 4 requests in flight,
    the server's limit allows 2, and DSSTAR_LLM_RPM paces all of them together."""
    ensure_limit("llm", 2, reset=True)
    gauge, starts = Gauge(), []

    def held(reply):
        def respond(request):
            starts.append(time.monotonic())
            with gauge.hold():
                time.sleep(0.2)
            return reply(request) if callable(reply) else reply

        return respond

    answer = fence(f"print({ANSWER!r})")
    llm.default("analyzer", held(describe_script))
    llm.default("planner", held("Compute revenue per region and find its manager."))
    llm.default("coder", held(answer))
    llm.default("verifier", held("Yes"))
    llm.default("finalyzer", held(answer))
    rpm = 60  # one request a second, bursts of one
    run_env = {**os.environ, "DSSTAR_LLM_RPM": str(rpm), "DSSTAR_LLM_CONCURRENCY": "4"}
    runs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dsstar",
                "run",
                "--data",
                str(sales),
                "--json",
                "--no-reuse",
                "--question",
                f"Which region sold most? (run {n})",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=run_env,
        )  # fmt: skip
        for n in range(3)
    ]
    results = [run.communicate(timeout=600) for run in runs]
    for run, (out, err) in zip(runs, results, strict=True):
        assert run.returncode == 0, (out[-2000:], err[-3000:])
        assert json.loads(out)["answer"] == ANSWER
    assert 1 <= gauge.peak <= 2  # never above the server's limit, whatever each run allowed
    assert read_limit("dsstar-llm").active_slots == 0
    rate = read_limit(RATE_NAME)
    assert rate.limit == rpm // 60 and rate.slot_decay_per_second == pytest.approx(rpm / 60)
    # Paced: within any 3 seconds at most 1 (the burst) + 3 (one a second) requests start,
    # where the model alone (2 in flight, 0.2 s each) would take 10 a second.
    starts.sort()
    assert len(starts) >= 3 * 5
    most = max(sum(1 for t in starts if s <= t < s + 3.0) for s in starts)
    assert most <= rate.limit + 3 + 1, most  # + 1: a slot decays continuously, not in steps
