"""A flow run that kills its worker every time is not resumed forever. The retry automation
(flows/workers.py) schedules every Crashed dsstar run again; past DSSTAR_MAX_CRASH_RETRIES
crashes in its history, the run fails at its start, before any model call, naming the count
and the last crash's reason in the flow run's state and in run.json; `dsstar resume` still
continues it, in the same flow run. Each flow run is made through the real Prefect API, given
the states a crash loop leaves, and run by Prefect's own flow engine, as a worker runs it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import forked_cli
import pytest
from prefect import get_client
from prefect.flow_engine import run_flow
from prefect.states import AwaitingRetry, Crashed, Running
from scenarios import two_rounds

from flows.ds_star import ds_star

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"


def after_crashes(times: int, parameters: dict) -> object:
    """A ds-star flow run that crashed `times` times, each rescheduled as the retry
    automation does; run now, as the next worker would. Its final state."""
    with get_client(sync_client=True) as client:
        made = client.create_flow_run(ds_star, parameters=parameters)
        for n in range(1, times + 1):
            client.set_flow_run_state(made.id, Running(), force=True)
            lost = Crashed(message=f"no heartbeat for 45 s: its worker is gone ({n})")
            client.set_flow_run_state(made.id, lost, force=True)
            client.set_flow_run_state(made.id, AwaitingRetry(), force=True)
        flow_run = client.read_flow_run(made.id)
    return run_flow(ds_star, flow_run=flow_run, parameters=parameters, return_type="state")


def state_flow_run(state) -> object:
    return state.state_details.flow_run_id


def run_json(env: dict, run_id: str) -> dict:
    return json.loads((Path(env["DSSTAR_STORAGE"]) / "runs" / run_id / "run.json").read_text())


def test_a_run_within_its_crash_retries_resumes_and_answers(env, llm, sales):
    two_rounds(llm)
    parameters = {"question": QUESTION, "data": str(sales), "run_id": "crashed-three-times"}
    state = after_crashes(3, parameters)  # the default allows three
    assert state.is_completed(), state.message
    assert run_json(env, "crashed-three-times")["status"] == "verified"


def test_a_run_that_crashed_once_too_often_fails_before_any_model_call(env, llm, sales):
    two_rounds(llm)
    parameters = {
        "question": QUESTION, "data": str(sales), "run_id": "crash-loop", "max_crash_retries": 1,
    }  # fmt: skip
    state = after_crashes(2, parameters)  # a form may lower the worker's bound
    assert state.is_failed()
    said = "this flow run crashed 2 times (last: no heartbeat for 45 s: its worker is gone (2))"
    assert said in state.message and "DSSTAR_MAX_CRASH_RETRIES=1" in state.message
    assert llm.requests == []
    record = run_json(env, "crash-loop")
    assert record["status"] == "failed" and said in record["error"]
    assert state.message.endswith("then continue with: dsstar resume crash-loop")
    # A person who found the cause continues it as the message says, in the same flow run:
    # the bound is for the workers' retries, not for a person's choice.
    resumed = forked_cli.run(
        [sys.executable, "-m", "dsstar", "resume", "crash-loop", "--json"],
        capture_output=True, text=True, timeout=300, env=os.environ.copy(),
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "verified" and result["flow_run_id"] == str(state_flow_run(state))
