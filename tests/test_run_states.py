"""What Prefect shows of a run is what happened: an answer is Completed, a run without one is
Failed with its reason (the CLI's exit code and --json stay as they were), a run whose
process was killed is marked Crashed by the next dsstar command that sees it, and each
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
from pathlib import Path
from urllib.parse import urlsplit
from uuid import UUID

import forked_cli
import pytest
from artifact_cards import artifact_keys, artifacts_tab, card, cards, clicked_card
from conftest import REPO, prefect_api
from prefect import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
from prefect.states import Failed
from scenarios import ANSWER, always_first_time, answered, asked, fence, never_satisfied, two_rounds
from tcp_proxy import TcpProxy

from flows.ds_star import completed_result

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
    assert state.message == result["error"]  # its reason, on one line
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


def test_a_killed_run_is_marked_crashed_by_the_next_command_that_sees_it(env, llm, sales):
    """Two runs killed with SIGKILL stay Running in Prefect until dsstar sees them dead:
    `dsstar resume` of one marks its old flow run Crashed, `dsstar runs list` the other."""
    hold = sales / "hold.txt"  # round 00's script waits while the file is there
    wait = "import os, time\nwhile os.path.exists('data/hold.txt'): time.sleep(0.1)\n"
    flow_runs = {}
    for run_id in ("killed-resumed", "killed-listed"):
        hold.write_text("")
        llm.reset()
        two_rounds(llm, prelude=wait)
        proc = forked_cli.popen(
            [sys.executable, "-m", "dsstar", "run", "--data", str(sales), "--question", QUESTION,
             "--json", "--run-id", run_id],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=os.environ.copy(),
        )  # fmt: skip
        deadline = time.monotonic() + 240
        while not llm.calls("coder"):  # round 00's script runs next, and waits
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.2)
        time.sleep(1)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stderr.close()
        flow_runs[run_id] = run_json(env, run_id)["flow_run_id"]
        assert flow_run_state(flow_runs[run_id]).is_running()  # nobody told Prefect
    hold.unlink()

    before = list(llm.requests)
    llm.reset()
    two_rounds(llm)
    resumed = dsstar("resume", "killed-resumed", "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "verified" and result["answer"] == ANSWER
    assert result["flow_run_id"] != flow_runs["killed-resumed"]
    assert answered(before) & asked(llm.requests) == set()
    old = flow_run_state(flow_runs["killed-resumed"])
    assert old.is_crashed() and "is gone" in old.message, old
    assert f"continues in flow run {result['flow_run_id']}" in old.message
    assert flow_run_state(flow_runs["killed-listed"]).is_running()  # not seen yet
    assert flow_run_state(result["flow_run_id"]).name == "Verified"
    crashed = answer_card(flow_runs["killed-resumed"], "killed-resumed")
    assert crashed.startswith("### Crashed: ") and "is gone" in crashed

    listed = dsstar("runs", "list")
    assert "stale (process gone)" in listed.stdout, listed.stdout
    state = flow_run_state(flow_runs["killed-listed"])
    assert state.is_crashed() and "dsstar resume killed-listed" in state.message, state
    # Its card, written by the command that found it dead: what it did and spent, counted
    # from the replies its store kept (its run.json had no totals yet), and how to go on.
    ended = answer_card(flow_runs["killed-listed"], "killed-listed")
    kept = list((Path(env["DSSTAR_STORAGE"]) / "runs" / "killed-listed" / "replies").iterdir())
    assert ended.startswith("### Crashed: Which region"), ended
    stopped = "after the file analysis (4 files), in round 00"  # hold.txt is one of them
    assert f"**Where it stopped:** {stopped}" in ended, ended
    # Its plan and code at least (the files' analyses are the first killed run's, reused).
    assert f"**LLM calls:** {len(kept)} · " in ended and len(kept) >= 2
    assert "**Continue:** `dsstar resume killed-listed`" in ended
    # The others stay as they are; the resumed run, with its answer, is Completed.
    assert flow_run_state(result["flow_run_id"]).is_completed()


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
