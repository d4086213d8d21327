"""What Prefect shows of a run is what happened: an answer is Completed, a run without one is
Failed with its reason and how to continue it (the CLI's exit code and --json stay as they
were), a run whose process was killed ends Crashed with nobody watching and is continued in
its own flow run, and each
round, the rounds table and the answer are one card each in the flow run's Artifacts tab,
even when the server lost the reply to a request (headless Chromium). Against the session's
Prefect server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit
from uuid import UUID

import forked_cli
import pytest
from artifact_cards import (
    artifact_keys,
    artifacts_tab,
    card,
    cards,
    clicked_card,
    flow_run_page,
    table_width,
)
from conftest import REPO, prefect_api
from prefect import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterId,
    FlowRunFilterName,
    FlowRunFilterStartTime,
)
from prefect.states import Failed
from scenarios import ANSWER, always_first_time, answered, asked, fence, never_satisfied, two_rounds
from tcp_proxy import TcpProxy

from flows.ds_star import completed_result
from flows.workers import SILENT_RUN

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"


def dsstar(*args: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=300, env=os.environ.copy(), cwd=REPO,
    )  # fmt: skip


def flow_run_state(flow_run_id: str):
    with get_client(sync_client=True) as client:
        return client.read_flow_run(UUID(flow_run_id)).state


def run_json(env: dict, run_id: str) -> dict:
    return json.loads((Path(env["DSSTAR_STORAGE"]) / "runs" / run_id / "run.json").read_text())


def test_a_run_without_an_answer_is_failed_with_its_reason(env, llm, sales, tmp_path):
    """(A run with an answer is Completed: the resumed run of the next test.)"""
    always_first_time(llm)
    llm.default("finalyzer", lambda req: fence("print('table ready')\nprint('chart ready')"))
    failed = dsstar("run", "--data", str(sales), "--question", QUESTION, "--json",
                    "--run-id", "no-answer", "--no-reuse")  # fmt: skip
    assert failed.returncode == 1, failed.stderr  # the CLI's contract, as before
    result = json.loads(failed.stdout)
    assert result["status"] == "failed" and result["answer"] is None
    assert result["error"].startswith("the final script stated no answer")
    state = flow_run_state(result["flow_run_id"])
    assert state.is_failed() and state.name == "Failed", state
    # Its reason, on one line, and how to continue it.
    assert state.message == f"{result['error']}; continue with: dsstar resume no-answer"
    assert run_json(env, "no-answer")["status"] == "failed"
    # A busy server can hand the engine the final state back without its data: the result
    # is then the one the run stored, not Prefect's bare error.
    lost = completed_result(Failed(message=state.message), env["DSSTAR_STORAGE"], "no-answer")
    assert lost == result

    # Its card says why, where it stopped, what it spent, where it is and how to go on.
    ended = answer_card(result["flow_run_id"], "no-answer")
    assert ended.startswith("### Failed: Which region had the highest revenue"), ended
    assert f"**Error**\n\n```\n{result['error']}\n```" in ended
    assert "**Where it stopped:** in the final script, after round 00 (sufficient; step 1:" in ended
    assert f"**LLM calls:** {result['llm_calls']} · **tokens:** " in ended
    assert "**Scripts ran in:** " in ended and run_json(env, "no-answer")["sandbox"] in ended
    assert f"**Stored:** `{result['artifacts_uri']}`" in ended
    assert "**Continue:** `dsstar resume no-answer`" in ended and "Retry" not in ended
    # As a person sees it in the UI (headless Chromium): listed in the Artifacts tab, and
    # rendered once clicked, its text as it was written (no markdown read in it).
    title = "Failed: Which region had the highest revenue in 2024 H1, and who manages it?"
    tab, text = clicked_card(result["flow_run_id"], "no-answer-answer", tmp_path / "failed.png",
                             title)  # fmt: skip
    assert "Failed: why, and how to continue" in tab, tab
    for shown in ("Where it stopped: in the final script, after round 00 (sufficient; step 1:",
                  f"LLM calls: {result['llm_calls']} · tokens:",
                  "Continue: dsstar resume no-answer", result["error"],
                  result["artifacts_uri"]):  # fmt: skip
        assert shown in text, text


def answer_card(flow_run_id: str, run_id: str) -> str:
    return card(UUID(flow_run_id), f"{run_id}-answer")


def has_card(flow_run_id: str, run_id: str) -> bool:
    return f"{run_id}-answer" in artifact_keys(UUID(flow_run_id))


@pytest.fixture
def short_heartbeat(monkeypatch):
    """The runs of the test set the server's silent-run automation to a 15 s timeout (they
    beat every 5 s); it is removed after: the next run on the session's server makes it
    again, with the default."""
    monkeypatch.setenv("DSSTAR_HEARTBEAT_TIMEOUT", str(HEARTBEAT_TIMEOUT_S))
    yield
    with get_client(sync_client=True) as client:
        for automation in client.read_automations_by_name(SILENT_RUN):
            client.delete_automation(automation.id)


HEARTBEAT_TIMEOUT_S = 15
HOLD = "import os, time\nwhile os.path.exists('data/hold.txt'): time.sleep(0.1)\n"


def start_held_run(llm, sales: Path, run_id: str) -> forked_cli.Forked:
    """`dsstar run` whose round 00 script waits while data/hold.txt exists; returned once
    that script runs."""
    (sales / "hold.txt").write_text("")
    llm.reset()
    two_rounds(llm, prelude=HOLD)
    proc = forked_cli.popen(
        [sys.executable, "-m", "dsstar", "run", "--data", str(sales), "--question", QUESTION,
         "--json", "--run-id", run_id],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not llm.calls("coder"):  # round 00's script runs next, and waits
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.2)
    while not (flow_run := run_json(os.environ, run_id).get("flow_run_id")) or (
        unfinished_task_runs(flow_run) != ["execute r00 (RUNNING)"]
    ):  # the server knows that the script runs
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.2)
    return proc


def until_ended(flow_run_id: str, deadline_s: float = 120):
    """The flow run's state once final, and the seconds that took; fails past the deadline."""
    start = time.monotonic()
    while not (state := flow_run_state(flow_run_id)).is_final():
        assert time.monotonic() - start < deadline_s, f"still {state.type.value}"
        time.sleep(0.5)
    return state, time.monotonic() - start


def unfinished_task_runs(flow_run_id: str) -> list[str]:
    with get_client(sync_client=True) as client:
        task_runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[UUID(flow_run_id)]))
        )
    return [
        f"{t.name} ({t.state.type.value if t.state else 'no state yet'})"
        for t in task_runs
        if t.state is None or not t.state.is_final()
    ]


@pytest.mark.timeout(600)  # two runs killed, one resumed, two pages in Chromium
def test_a_killed_run_ends_crashed_unwatched_and_resumes_in_its_own_flow_run(
    env, llm, sales, short_heartbeat, tmp_path
):
    """SIGKILL, with no dsstar command run after it: the run's watcher marks its flow run
    Crashed at once, task runs included; killed with its whole process group (the watcher
    too), the server's automation does once the heartbeats stop, and the next command that
    sees the run dead settles its task runs. `dsstar resume` continues the same flow run."""
    flow_runs, started = {}, datetime.now(UTC)
    for run_id, kill in (("killed", os.kill), ("killed-group", os.killpg)):
        proc = start_held_run(llm, sales, run_id)
        flow_runs[run_id] = run_json(env, run_id)["flow_run_id"]
        kill(proc.pid, signal.SIGKILL)  # forked commands lead their own process group
        proc.wait(timeout=30)
        proc.stderr.close()
        state, seconds = until_ended(flow_runs[run_id])
        print(f"{run_id}: {state.type.value} {seconds:.1f} s after SIGKILL")
        assert state.is_crashed(), state
        if run_id == "killed":  # the watcher: its process, and how to continue it
            assert "died without a word: killed by SIGKILL" in state.message, state
            assert state.message.endswith("continue with: dsstar resume killed"), state
            wait_for(lambda: not unfinished_task_runs(flow_runs["killed"]), "task runs")
            # and its card, which the watcher writes after the state: why, and how to go on
            wait_for(lambda: has_card(flow_runs["killed"], "killed"), "its card")
            crashed = answer_card(flow_runs["killed"], "killed")
            assert crashed.startswith("### Crashed: Which region"), crashed
            assert "died without a word: killed by SIGKILL" in crashed, crashed
            assert "**Continue:** `dsstar resume killed`" in crashed, crashed
        else:  # the automation: no template reaches a state's message
            assert state.message.startswith(f"no heartbeat for {HEARTBEAT_TIMEOUT_S} s"), state
            hint = "dsstar resume RUN_ID, the run id being the first word of this flow run's name"
            assert hint in state.message, state
            assert unfinished_task_runs(flow_runs[run_id]) == ["execute r00 (RUNNING)"]
            assert not has_card(flow_runs[run_id], run_id)  # nobody saw it dead yet
            page = flow_run_page(flow_runs[run_id], tmp_path / "crashed.png")  # as users see it
            assert "Crashed" in page and f"no heartbeat for {HEARTBEAT_TIMEOUT_S} s" in page
    (sales / "hold.txt").unlink()

    listed = dsstar("runs", "list")
    assert listed.stdout.count("stale (process gone)") == 2, listed.stdout
    assert unfinished_task_runs(flow_runs["killed-group"]) == []
    # Its card, written by the command that found it dead: what it did and spent, counted
    # from the replies its store kept (its run.json had no totals yet), and how to go on.
    ended = answer_card(flow_runs["killed-group"], "killed-group")
    kept = list((Path(env["DSSTAR_STORAGE"]) / "runs" / "killed-group" / "replies").iterdir())
    assert ended.startswith("### Crashed: Which region"), ended
    assert "found stale by dsstar runs list" in ended, ended
    stopped = "after the file analysis (4 files), in round 00"  # hold.txt is one of them
    assert f"**Where it stopped:** {stopped}" in ended, ended
    # Its plan and code at least (the files' analyses are the first killed run's, reused).
    assert f"**LLM calls:** {len(kept)} · " in ended and len(kept) >= 2
    assert "**Continue:** `dsstar resume killed-group`" in ended
    shown = dsstar("runs", "show", "killed-group")
    assert "killed-group · stale (process gone)" in shown.stdout, shown.stdout  # as listed
    assert "(none yet: a run's calls reach the ledger when it ends)" in shown.stdout

    before = list(llm.requests)
    llm.reset()
    two_rounds(llm)
    resumed = dsstar("resume", "killed", "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "verified" and result["answer"] == ANSWER
    assert answered(before) & asked(llm.requests) == set()  # nothing asked twice
    assert result["flow_run_id"] == flow_runs["killed"]  # the same flow run, run again
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(UUID(flow_runs["killed"]))
        history = [s.type.value for s in client.read_flow_run_states(flow_run.id)]
        named = client.read_flow_runs(  # named by its run id, then its question: among
            flow_run_filter=FlowRunFilter(  # this test's (tests/test_operate.py has a `killed`)
                name=FlowRunFilterName(like_="killed · "),
                start_time=FlowRunFilterStartTime(after_=started),
            )
        )
    assert flow_run.state.is_completed() and flow_run.run_count == 2, flow_run
    assert flow_run.state.name == "Verified", flow_run.state
    assert history[-3:] == ["CRASHED", "RUNNING", "COMPLETED"], history
    assert [f.id for f in named] == [flow_run.id]  # one flow run of that name
    assert unfinished_task_runs(flow_runs["killed"]) == []
    # Its answer card replaced the card of its crash.
    assert card(flow_run.id, "killed-answer").startswith("### Which region"), flow_run

    page = flow_run_page(flow_runs["killed"], tmp_path / "resumed.png")
    assert "Verified" in page and "Run Count\n2" in page, page


def wait_for(check, what: str, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.5)


def test_three_rounds_under_a_lost_reply_show_one_table_and_one_card_per_round(
    env, llm, sales, tmp_path
):
    """Round 00's card is created, and the server's reply is lost, as under a stalled server:
    Prefect's client sends it again. The run still shows one card per round, one table of
    its three rounds and one answer."""
    from flows.ds_star import ds_star

    never_satisfied(llm)  # rounds 00, 01 and 02, then the answer (max_rounds)
    api = urlsplit(os.environ["PREFECT_API_URL"])
    proxy = TcpProxy(api.port)
    proxy.lose_reply(rb"^POST \S*/artifacts/ ", rb"three-round-00")
    try:
        with prefect_api(f"{proxy.url}{api.path}"):
            state = ds_star(question=QUESTION, data=str(sales), run_id="three", max_rounds=2,
                            reuse=False, return_state=True)  # fmt: skip
    finally:
        proxy.close()
    assert proxy.lost == 1  # the create was sent again
    assert state.is_completed() and state.name == "MaxRounds", state  # not Verified
    flow_run_id = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        name = client.read_flow_run(flow_run_id).name
    assert name == "three · Which region had the highest revenue in 2024 H1, and who ma…"
    expected = {"three-rounds", "three-answer", "three-round-00", "three-round-01",
                "three-round-02"}  # fmt: skip
    assert artifact_keys(flow_run_id) == Counter(expected)
    with get_client(sync_client=True) as client:
        [table] = [
            a
            for a in client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])
                )
            )
            if a.key == "three-rounds"
        ]
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert [row["round"] for row in rows] == ["00", "01", "02"]  # the table, updated in place

    text = artifacts_tab(flow_run_id, tmp_path / "three-rounds.png")
    assert cards(text, "three") == Counter(dict.fromkeys(expected, 1)), text
    # The table fits a laptop's window: no column runs off the page.
    right, page = table_width(table.id, tmp_path / "rounds-table.png")
    assert right <= page, (right, page)
