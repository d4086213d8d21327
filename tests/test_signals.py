"""Stopping runs: SIGINT and SIGTERM mark the run `interrupted` (run.json and ledger), print how
to resume it and exit 130/143; after SIGKILL no child outlives the CLI, and the dead run is
shown as stale and resumed. Every run here is the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from uuid import UUID

import forked_cli
import psutil
import pytest
from fake_llm import Error
from prefect import get_client
from prefect.artifacts import Artifact
from scenarios import ANSWER, answered, asked, describe_script, two_rounds
from sqlmodel import Session

from dsstar.records.ledger import Ledger, RunRow
from tasks.cache_keys import artifact_key

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
CODES = [(signal.SIGINT, 130), (signal.SIGTERM, 143)]


def start(*args: str) -> subprocess.Popen | forked_cli.Forked:
    return forked_cli.popen(
        [sys.executable, "-m", "dsstar", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def dsstar(*args: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip


def run_json(env: dict, run_id: str) -> dict:
    return json.loads((Path(env["DSSTAR_STORAGE"]) / "runs" / run_id / "run.json").read_text())


def ledger_status(env: dict, run_id: str) -> str | None:
    with Session(Ledger(env["DSSTAR_DATABASE_URL"], env["DSSTAR_STORAGE"]).engine) as session:
        row = session.get(RunRow, run_id)
        return row.status if row else None


def family(pid: int) -> list[psutil.Process]:
    """The process and every descendant it has now."""
    try:
        parent = psutil.Process(pid)
        return [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def survivors(processes: list[psutil.Process], timeout: float = 20) -> list[str]:
    """Those still alive once `timeout` has passed (zombies count as gone)."""
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    left = []
    for proc in alive:
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                left.append(" ".join(proc.cmdline())[:200])
        except psutil.NoSuchProcess:
            pass
    return left


def ended(flow_run_id: str, deadline_s: float = 60):
    """The flow run's final state: set by the run as it stops, else by its watcher."""
    deadline = time.monotonic() + deadline_s
    with get_client(sync_client=True) as client:
        while not (state := client.read_flow_run(UUID(flow_run_id)).state).is_final():
            assert time.monotonic() < deadline, state
            time.sleep(0.5)
    return state


def signal_on_coder_call(llm, proc: subprocess.Popen, signum: int, seen: list) -> None:
    """In round 01, while the coder is thinking (its reply is slow), `signum` reaches the CLI."""
    coder_calls = []

    def stop_mid_round(request):
        coder_calls.extend([request] if request["agent"] == "coder" else [])
        if len(coder_calls) == 2:
            seen.extend(family(proc.pid)[1:])
            os.kill(proc.pid, signum)
            time.sleep(2)  # the reply would come late; the CLI stops before it
            return Error(503, "gone")
        return None

    llm.intercept(stop_mid_round)


@pytest.mark.parametrize(("signum", "code"), CODES)
def test_signal_during_a_run_marks_it_interrupted_and_resume_repeats_nothing(
    env, llm, sales, signum, code
):
    two_rounds(llm)
    run_id = f"stopped-{code}"
    proc = start("run", "--data", str(sales), "--question", QUESTION, "--json", "--run-id", run_id)
    children: list[psutil.Process] = []
    signal_on_coder_call(llm, proc, signum, children)
    out, err = proc.communicate(timeout=120)

    assert proc.returncode == code, err
    assert f"run {run_id}" in err.splitlines()[0]  # the id, as soon as the run starts
    assert f"dsstar resume {run_id}" in err
    result = json.loads(out)  # still exactly one JSON object on stdout
    assert result["status"] == "interrupted" and result["run_id"] == run_id
    stored = run_json(env, run_id)
    assert stored["status"] == "interrupted"
    assert signal.Signals(signum).name in stored["error"]
    assert ledger_status(env, run_id) == "interrupted"
    assert survivors(children) == []
    state = ended(result["flow_run_id"])  # the flow run says which signal, and how to go on
    name = signal.Signals(signum).name
    assert state.is_crashed(), state
    assert state.message == f"interrupted by {name}; continue with: dsstar resume {run_id}"
    if signum != signal.SIGTERM:
        return  # both signals leave the same interrupted run: resumed once, after SIGTERM

    before = list(llm.requests)
    llm.intercept(None)
    resumed = dsstar("resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "verified" and result["answer"] == ANSWER
    assert result["flow_run_id"] == stored["flow_run_id"]  # the same flow run, continued
    after = llm.requests[len(before) :]
    assert answered(before) & asked(after) == set()  # 0 repeated LLM calls
    assert run_json(env, run_id)["status"] == "verified"
    assert ledger_status(env, run_id) == "verified"


def test_a_stop_during_the_file_analysis_counts_every_reply_received(env, llm, sales):
    """A slow model is neither a hang nor free: while the third file's analyzer call is in
    flight the log says so, each interval (DSSTAR_PROGRESS_INTERVAL, a minute by default),
    and SIGTERM during it leaves a run whose --json result, run.json, `runs show` and card
    count the two replies received, though no file analysis had been recorded yet."""
    run_id = "stopped-analyzing"
    proc = forked_cli.popen(
        [sys.executable, "-m", "dsstar", "run", "--data", str(sales), "--question", QUESTION,
         "--json", "--run-id", run_id, "--llm-concurrency", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "DSSTAR_PROGRESS_INTERVAL": "0.5"},
    )  # fmt: skip
    asked = []

    def slow_third_file(request):
        if request["agent"] != "analyzer":
            return None
        asked.append(request)
        if len(asked) < 3:
            return describe_script(request)
        time.sleep(3)  # a slow model, in flight: the log says so
        os.kill(proc.pid, signal.SIGTERM)
        time.sleep(2)  # the reply would come late; the run stops before it
        return Error(503, "gone")

    llm.intercept(slow_third_file)
    out, err = proc.communicate(timeout=120)

    assert proc.returncode == 143, err
    in_flight = re.compile(r"analyzer \S+ in flight 00:0[1-9]")
    flying = [line for line in err.splitlines() if in_flight.search(line)]
    assert flying and " · 0 tokens · " not in flying[-1], err  # the two replies count
    kept = [json.loads(p.read_text()) for p in
            (Path(env["DSSTAR_STORAGE"]) / "runs" / run_id / "replies").iterdir()]  # fmt: skip
    assert len(kept) == 2  # the replies received: paid for, whatever came after
    spent = {"llm_calls": 2, "input_tokens": sum(r["input_tokens"] for r in kept),
             "output_tokens": sum(r["output_tokens"] for r in kept)}  # fmt: skip
    assert spent["input_tokens"] > 0 and spent["output_tokens"] > 0
    result = json.loads(out)
    assert result["status"] == "interrupted"
    assert {k: result[k] for k in spent} == spent
    assert {k: run_json(env, run_id)[k] for k in spent} == spent
    shown = json.loads(dsstar("runs", "show", run_id, "--json").stdout)
    assert (shown["figures"]["LLM calls"], shown["figures"]["input tokens"]) == (
        2, spent["input_tokens"],
    )  # fmt: skip
    assert [(a["agent"], a["calls"]) for a in shown["agents"]] == [("analyzer", 2)]
    assert "LLM calls: 2" in dsstar("runs", "show", run_id).stdout
    found = Artifact.get(artifact_key(f"{run_id}-answer"))
    assert found is not None, err
    ended = found.data
    assert ended.startswith("### Interrupted: ") and "interrupted by SIGTERM" in ended
    assert f"**LLM calls:** 2 · **tokens:** {spent['input_tokens']:,} in" in ended
    assert "**Where it stopped:** in the file analysis, before round 00" in ended
    assert f"**Continue:** `dsstar resume {run_id}`" in ended


@pytest.mark.parametrize(("signum", "code"), CODES)
def test_signal_stops_describe(env, llm, sales, signum, code):
    proc = start("describe", "--data", str(sales), "--json")
    children: list[psutil.Process] = []

    def slow_analyzer(request):
        if request["agent"] == "analyzer":
            if not children:
                children.extend(family(proc.pid)[1:] or [psutil.Process(proc.pid)])
                os.kill(proc.pid, signum)
            time.sleep(3)  # a slow model: the stop must not wait for every file
            return describe_script(request)
        return None

    llm.intercept(slow_analyzer)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert survivors(children) == []


def test_sigkill_leaves_no_process_behind_and_the_run_is_stale_then_resumed(
    env, llm, sales, tmp_path, monkeypatch
):
    # No PREFECT_API_URL: the CLI needs a temporary Prefect server of its own.
    prefect_url = os.environ["PREFECT_API_URL"]
    monkeypatch.delenv("PREFECT_API_URL")
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    # Round scripts wait while data/hold.txt exists. A run reads a snapshot of the data
    # folder, so the file stays for the killed run and is gone for the resumed one.
    hold = sales / "hold.txt"
    hold.write_text("")
    two_rounds(
        llm, prelude="import os, time\nwhile os.path.exists('data/hold.txt'): time.sleep(0.1)\n"
    )
    run_id = "sigkilled"
    proc = start("run", "--data", str(sales), "--question", QUESTION, "--json", "--run-id", run_id)

    deadline = time.monotonic() + 240
    while not llm.calls("coder"):  # round 00's script is next, and it waits
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.2)
    time.sleep(2)
    assert llm.calls("verifier") == []  # the script is still waiting
    processes = family(proc.pid)
    cmdlines = [" ".join(p.cmdline()) for p in _alive(processes)]
    assert any("uvicorn" in c for c in cmdlines)  # the temporary Prefect server
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)

    assert survivors(processes) == []
    stored = run_json(env, run_id)
    assert stored["status"] == "running" and stored["pid"] == proc.pid
    assert stored["host"] == socket.gethostname()
    listed = json.loads(dsstar("runs", "list", "--json").stdout)["runs"]
    assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "stale")]
    assert "stale (process gone)" in dsstar("runs", "list").stdout

    monkeypatch.setenv("PREFECT_API_URL", prefect_url)
    before = list(llm.requests)
    hold.unlink()  # round 00's script may finish now
    llm.reset()
    two_rounds(llm)
    resumed = dsstar("resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] in {"verified", "max_rounds"}
    assert answered(before) & asked(llm.requests) == set()


def test_resume_refuses_a_run_whose_process_still_works(env, tmp_path):
    folder = Path(env["DSSTAR_STORAGE"]) / "runs" / "alive"
    folder.mkdir(parents=True)
    me = psutil.Process()
    record = {
        "run_id": "alive", "question": QUESTION, "data": str(tmp_path), "guidelines": "",
        "status": "running", "started_at": "2026-01-01T00:00:00+00:00",
        "host": socket.gethostname(), "pid": me.pid, "pid_started": int(me.create_time()),
    }  # fmt: skip
    (folder / "run.json").write_text(json.dumps(record))
    refused = dsstar("resume", "alive", "--json")
    assert refused.returncode == 2
    assert "still running" in json.loads(refused.stdout)["error"]
    listed = json.loads(dsstar("runs", "list", "--json").stdout)["runs"]
    assert [r["status"] for r in listed] == ["running"]


def test_temporary_folders_go_away_and_dead_ones_are_swept(env, llm, sales, tmp_path):
    cache = Path(env["DSSTAR_WORK_DIR"]) / "dsstar-cache"
    dead = cache / f"p999999-1-{socket.gethostname()}" / "data-x"  # a crashed process's
    dead.mkdir(parents=True)
    (dead / "orders.csv").write_text("a,b\n1,2\n")
    two_rounds(llm)
    single = sales / "orders_2024.csv"  # a single file is staged in a folder of its own
    done = dsstar("run", "--data", str(single), "--question", QUESTION, "--json")
    assert done.returncode in {0, 1}, done.stderr  # regions.json is not there: may fail
    assert not dead.parent.exists()
    assert list(cache.iterdir()) == []


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    alive = []
    for proc in processes:
        try:
            proc.cmdline()
            alive.append(proc)
        except psutil.Error:
            pass
    return alive
