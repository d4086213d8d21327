"""The UI's Retry is resume: a Failed ds-star flow run set to Scheduled through the API, as
the UI's Retry button does, runs again under the same run id, into the same run folder,
asking the model nothing it was answered before. An over-budget run goes on when the worker
that picks it up has a higher ceiling; the resumed flow run still shows one card per round
and one rounds table (headless Chromium). Against `dsstar serve` on the session's server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import forked_cli
import pytest
import report_scenario
from artifact_cards import artifact_keys, artifacts_tab, card, cards, run_id_of
from conftest import EXAMPLE, REPO
from fake_llm import Error, FakeLLM
from prefect import get_client
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.states import Cancelling, Scheduled
from processes import stop
from scenarios import ANSWER, answered, asked, fence, two_rounds

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
CEILING = "0.0055"  # lets a few of the scripted calls through (see test_ceiling_flow.py)


@contextmanager
def serving(root: Path, llm: FakeLLM, **worker: str):
    """`dsstar serve` in its own process, with `worker` settings in its environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSSTAR_")}
    env.update(
        DSSTAR_MODEL="openai/gpt-4o-mini",
        DSSTAR_API_BASE=llm.base_url,
        DSSTAR_API_KEY="sk-test-not-secret",
        DSSTAR_STORAGE=str(root / "storage"),
        DSSTAR_DATABASE_URL=f"sqlite:///{root / 'ledger.db'}",
        DSSTAR_WORK_DIR=str(root),
        DSSTAR_LLM_RETRY_DELAY="0.05",
        DSSTAR_DATA_ROOTS=str(root),
        PREFECT_RUNNER_POLL_FREQUENCY="1",
        **worker,
    )
    # Deployments are kept (serve updates them by name): a flow run names its deployment by
    # id, and the serve process that picks up its retry must find it among its own.
    log_path = root / "serve.log"
    with open(log_path, "a") as log:
        offset = log.tell()
        proc = forked_cli.start(
            [sys.executable, "-m", "dsstar", "serve"], cwd=REPO, env=env, stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 90
            while not (
                "serving ds-star/on-demand" in log_path.read_text()[offset:] and _deployed()
            ):
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.5)
            yield
        finally:
            stop(proc)


def _deployed() -> bool:
    with get_client(sync_client=True) as client:
        try:
            client.read_deployment_by_name("ds-star/on-demand")
            client.read_deployment_by_name("ds-star-report/report-on-demand")
        except ObjectNotFound:
            return False
    return True


@pytest.fixture
def served(tmp_path, llm):
    shutil.copytree(EXAMPLE, tmp_path / "sales")
    return SimpleNamespace(root=tmp_path, data=str(tmp_path / "sales"), llm=llm)


def trigger(parameters: dict):
    return run_deployment("ds-star/on-demand", parameters=parameters, timeout=300, poll_interval=1)


def retry_from_the_ui(flow_run_id):
    """What the UI's Retry button sends; returns the flow run once it is final again."""
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(
            flow_run_id, Scheduled(name="AwaitingRetry", message="Retry from the UI"), force=True
        )
        deadline = time.monotonic() + 300
        while not (flow_run := client.read_flow_run(flow_run_id)).state.is_final():
            assert time.monotonic() < deadline, flow_run.state
            time.sleep(1)
    return flow_run


def run_folders(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "storage" / "runs").iterdir())


def test_an_over_budget_run_retried_by_a_worker_with_a_higher_ceiling_goes_on(served, tmp_path):
    llm, root = served.llm, served.root
    two_rounds(llm)
    with serving(root, llm, DSSTAR_MAX_COST=CEILING):
        flow_run = trigger({"question": QUESTION, "data": served.data})
    state = flow_run.state
    assert state.is_failed() and state.name == "OverBudget", state
    assert state.message.startswith("over budget: spent $")
    run_id = run_id_of(flow_run)
    run = root / "storage" / "runs" / run_id
    assert json.loads((run / "run.json").read_text())["status"] == "over_budget"
    ended = card(flow_run.id, f"{run_id}-answer")  # the card says how to go on, Retry too
    assert ended.startswith("### Over budget: ") and state.message in ended
    assert f"`dsstar resume {run_id} --max-cost N`" in ended
    assert "Or Retry it in the Prefect UI for a worker with a higher ceiling." in ended
    before = list(llm.requests)
    assert before

    with serving(root, llm, DSSTAR_MAX_COST="1"):  # the worker that picks the retry up
        retried = retry_from_the_ui(flow_run.id)
    assert retried.state.is_completed(), retried.state
    assert retried.run_count > flow_run.run_count and retried.name == flow_run.name
    after = llm.requests[len(before) :]
    assert after and answered(before) & asked(after) == set()  # nothing paid for twice
    assert {r["run"] for r in llm.requests} == {run_id}  # one run id, from first to last
    record = json.loads((run / "run.json").read_text())
    assert (record["status"], record["answer"]) == ("verified", ANSWER)
    assert record["flow_run_id"] == str(flow_run.id)
    assert run_folders(root) == [run_id]  # the result is in the run's own folder
    assert len(list((run / "claims").iterdir())) == 2  # the first attempt, then the retry

    # The retried flow run published its rounds again: still one card each, one table.
    expected = {f"{run_id}-{k}" for k in ("rounds", "answer", "round-00", "round-01")}
    assert artifact_keys(flow_run.id) == Counter(expected)
    text = artifacts_tab(flow_run.id, tmp_path / "retried.png")
    assert cards(text, run_id) == Counter(dict.fromkeys(expected, 1)), text


def test_a_failed_run_retried_continues_its_run_and_repeats_nothing(served):
    """A run whose final script stated no answer: the retry reads every reply and script
    result back from the run's cache, and fails again for the same reason; nothing is
    asked twice, nothing lands outside its folder."""
    llm, root = served.llm, served.root
    two_rounds(llm)
    final = "print('table ready')\nprint('chart ready')"
    llm.intercept(lambda req: fence(final) if req["agent"] == "finalyzer" else None)
    with serving(root, llm):
        flow_run = trigger({"question": QUESTION, "data": served.data})
        state = flow_run.state
        assert state.is_failed() and state.name == "Failed", state
        assert state.message.startswith("the final script stated no answer")
        before = list(llm.requests)
        retried = retry_from_the_ui(flow_run.id)
    assert retried.state.is_failed() and retried.state.message == state.message
    assert retried.name == flow_run.name and retried.run_count > flow_run.run_count
    assert answered(before) & asked(llm.requests[len(before) :]) == set()
    assert {r["run"] for r in llm.requests} == {run_id_of(flow_run)}
    assert run_folders(root) == [run_id_of(flow_run)]


@pytest.mark.timeout(900)
def test_a_report_whose_writer_failed_retried_from_the_ui_asks_only_the_writer_again(served):
    """A report on demand whose every sub-question was answered, then its writer's model
    refused: Retry on its flow run resumes the report (same run id, same child flow runs'
    work from storage) and asks the writer, nothing else."""
    llm, root = served.llm, served.root
    report_scenario.script(llm)
    llm.intercept(
        lambda req: Error(400, "the writer's model is not available")
        if req["agent"] == "writer" else None
    )  # fmt: skip
    parameters = {"question": report_scenario.QUESTION, "data": served.data,
                  "sub_questions": 3, "refinements": 0}  # fmt: skip
    with serving(root, llm):
        flow_run = run_deployment("ds-star-report/report-on-demand", parameters=parameters,
                                  timeout=600, poll_interval=1)  # fmt: skip
        assert flow_run.state.is_failed(), flow_run.state
        before = list(llm.requests)
        assert {r["agent"] for r in before} >= {"decomposer", "planner", "writer"}
        llm.intercept(None)
        retried = retry_from_the_ui(flow_run.id)
    assert retried.state.is_completed(), retried.state
    again = llm.requests[len(before) :]
    assert {r["agent"] for r in again} == {"writer"}, [r["agent"] for r in again]
    [run_id] = {r["run"] for r in llm.requests if r["agent"] == "writer"}
    record = json.loads((root / "storage" / "runs" / run_id / "run.json").read_text())
    assert record["status"] == "reported" and len(record["sub_runs"]) == 3
    assert (root / "storage" / "runs" / run_id / "final" / "report.md").is_file()


@pytest.mark.timeout(600)
def test_a_run_cancelled_in_the_ui_ends_cancelled_with_a_card_that_says_how_to_go_on(served):
    """The UI's Cancel on a deployment's run mid-round: `dsstar serve` stops its process,
    the flow run ends Cancelled, and its card says it was interrupted, where, what it spent,
    and how to continue (resume, or Retry)."""
    llm, root = served.llm, served.root
    two_rounds(llm)
    coding, release = threading.Event(), threading.Event()

    def hold(request):
        if request["agent"] == "coder":
            coding.set()
            release.wait(120)
        return None

    llm.intercept(hold)
    try:
        with serving(root, llm):
            parameters = {"question": QUESTION, "data": served.data}
            flow_run = run_deployment("ds-star/on-demand", parameters=parameters, timeout=0)
            assert coding.wait(240), "the run never reached its coder"
            with get_client(sync_client=True) as client:  # what the UI's Cancel sends
                client.set_flow_run_state(flow_run.id, Cancelling(message="Cancelled in the UI"))
                deadline = time.monotonic() + 180
                while not (ended := client.read_flow_run(flow_run.id)).state.is_final():
                    assert time.monotonic() < deadline, ended.state
                    time.sleep(1)
    finally:
        release.set()
    assert ended.state.is_cancelled(), ended.state
    run_id = run_id_of(ended)
    text = card(ended.id, f"{run_id}-answer")
    assert text.startswith("### Interrupted: Which region"), text
    assert "interrupted by SIGTERM" in text and "in round 00" in text, text
    assert f"`dsstar resume {run_id}`" in text and "Retry this flow run" in text, text
    assert "**LLM calls:** " in text and "**LLM calls:** 0 " not in text, text
