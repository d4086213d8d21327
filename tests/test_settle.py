"""The end a run whose process is gone is given in Prefect (flows/_settle.py), and the
automation that marks silent runs Crashed, as a run makes or keeps it on the session's
server (flows/_alive.py). Whole runs killed and resumed: test_run_states.py."""

from __future__ import annotations

import os
import uuid

import pytest
from artifact_cards import artifact_keys, card
from prefect import get_client
from prefect.client.schemas.objects import StateType
from prefect.states import Crashed, Running

import flows._alive as alive
from dsstar.storage import Store
from flows._settle import ended_state, exit_cause, settle
from flows.ds_star import ds_star
from flows.workers import SILENT_RUN, silent_run_automation

GONE = "its process (pid 7 on h) died without a word"


@pytest.mark.parametrize(
    ("stored", "kind", "name", "said"),
    [
        ({"status": "running"}, StateType.CRASHED, "Crashed",
         f"{GONE}; continue with: dsstar resume r1"),
        ({"status": "interrupted", "error": "interrupted by SIGTERM"}, StateType.CRASHED,
         "Crashed", "interrupted by SIGTERM; continue with: dsstar resume r1"),
        ({"status": "failed", "error": "the final script failed"}, StateType.FAILED, "Failed",
         "the final script failed; continue with: dsstar resume r1"),
        ({"status": "over_budget", "error": "over budget: ... dsstar resume r1 --max-cost N"},
         StateType.FAILED, "OverBudget", "over budget: ... dsstar resume r1 --max-cost N"),
        ({"status": "stopped"}, StateType.CANCELLED, "Cancelled", "stopped by a person"),
        ({"status": "verified"}, StateType.COMPLETED, "Verified",
         "answered (verified); its process ended before it said so"),
    ],
)  # fmt: skip
def test_a_dead_runs_state_is_what_its_record_says(stored, kind, name, said):
    state = ended_state({"run_id": "r1", **stored}, GONE)
    assert (state.type, state.name, state.message) == (kind, name, said)


@pytest.mark.parametrize(
    ("reported", "cause"),
    [
        ("Flow run process exited with non-zero status code -9.",
         "was killed by SIGKILL (kill -9, or the kernel when out of memory)"),
        ("Flow run infrastructure exited with non-zero status code 143.", "was killed by SIGTERM"),
        ("Flow run process exited with non-zero status code 1.", "exited 1"),
    ],
)  # fmt: skip
def test_a_served_run_that_crashed_is_told_by_the_signal_that_ended_it(reported, cause):
    """What `dsstar serve`'s runner says of a question's run whose process ended unreported
    (Prefect's words are its exit code)."""
    assert exit_cause(reported) == cause


def test_an_answered_run_marked_crashed_is_completed_and_its_task_runs_end():
    """Killed after it stored its answer, before Prefect heard it: whoever settles it next
    (here as `dsstar resume` does) leaves it Completed, with no task run Running."""
    with get_client(sync_client=True) as client:
        flow_run = client.create_flow_run(ds_star, parameters={"question": "q", "data": "d"})
        client.set_flow_run_state(flow_run.id, Running())
        task_run = client.create_task_run(
            task=_a_task(), flow_run_id=flow_run.id, dynamic_key="0", state=Running()
        )
        client.set_flow_run_state(flow_run.id, Crashed(message="no heartbeat for 90 s"))
    record = {"run_id": "r1", "flow_run_id": str(flow_run.id), "status": "verified"}
    settle(record, GONE)
    with get_client(sync_client=True) as client:
        assert client.read_flow_run(flow_run.id).state.is_completed()
        assert client.read_task_run(task_run.id).state.is_crashed()


def test_a_crashed_run_is_given_its_card_once_by_whoever_settles_it(tmp_path):
    """It cannot write its own: the settler writes it from its stored run.json (where it
    stopped, what it spent), with why it crashed and how to continue; once per crash."""
    run_id = f"gone-{uuid.uuid4().hex[:6]}"
    with get_client(sync_client=True) as client:
        flow_run = client.create_flow_run(ds_star, parameters={"question": "q", "data": "d"})
        client.set_flow_run_state(flow_run.id, Running())
    stored = {"run_id": run_id, "flow_run_id": str(flow_run.id), "status": "running",
              "question": "Which region sold most?", "started_at": "2026-01-01T00:00:00+00:00",
              "files": 3, "llm_calls": 2, "input_tokens": 900, "output_tokens": 80}  # fmt: skip
    Store(str(tmp_path)).write_json(f"runs/{run_id}/run.json", stored)
    known = {"run_id": run_id, "flow_run_id": str(flow_run.id), "status": "running"}
    settle(known, GONE, storage=str(tmp_path))  # as `runs list` knows it: its id and flow run
    with get_client(sync_client=True) as client:
        assert client.read_flow_run(flow_run.id).state.is_crashed()
    shown = card(flow_run.id, f"{run_id}-answer")
    assert shown.startswith("### Crashed: Which region sold most"), shown
    assert f"```\n{GONE}\n```" in shown, shown
    assert "**Where it stopped:** after the file analysis (3 files), in round 00" in shown
    assert "**LLM calls:** 2 · **tokens:** 900 in / 80 out" in shown, shown
    assert f"**Continue:** `dsstar resume {run_id}`" in shown, shown
    settle(known, "found again", storage=str(tmp_path))  # a second settler writes none
    assert artifact_keys(flow_run.id)[f"{run_id}-answer"] == 1
    assert "found again" not in card(flow_run.id, f"{run_id}-answer")


def test_a_run_makes_the_automation_keeps_the_servers_timeout_and_sets_its_own(monkeypatch):
    url = os.environ["PREFECT_API_URL"]
    drop_automation()
    try:
        monkeypatch.setattr(alive, "_timeouts", {})  # as a process that never asked
        assert alive.silent_run_timeout(url, None) == 90  # made with the default
        monkeypatch.setattr(alive, "_timeouts", {})
        assert alive.silent_run_timeout(url, None) == 90  # kept: asked, not changed
        assert alive.silent_run_timeout(url, 20) == 20  # DSSTAR_HEARTBEAT_TIMEOUT set
        with get_client(sync_client=True) as client:
            [made] = client.read_automations_by_name(SILENT_RUN)
        assert made.trigger.within.total_seconds() == 20 and made.enabled
        expected = silent_run_automation(20).actions[0].message
        assert made.actions[0].message == expected
    finally:
        drop_automation()


def drop_automation() -> None:
    with get_client(sync_client=True) as client:
        for automation in client.read_automations_by_name(SILENT_RUN):
            client.delete_automation(automation.id)


def _a_task():
    from prefect import task

    @task(name="execute r00")
    def execute() -> None:
        pass

    return execute
