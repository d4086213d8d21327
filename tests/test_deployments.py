"""Recurring questions on a real Prefect server: `dsstar serve` registers both deployments,
runs triggered through the API complete, the UI shows their artifacts (headless Chromium),
a failed run retried the way the UI's Retry button does resumes, and a nightly batch shares
one analysis per data root."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import forked_cli
import httpx
import pytest
from artifact_cards import artifacts_tab, run_id_of
from conftest import EXAMPLE, REPO, require_binary
from fake_llm import Error, FakeLLM, text_of
from prefect import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectNotFound
from prefect.states import Scheduled
from processes import stop
from rendered import cells_shown
from scenarios import ANSWER, always_first_time, answered, asked, coder_outage, two_rounds

from dsstar.inputs.form import SECTIONS
from dsstar.inputs.questions import load_questions
from dsstar.records.ledger import Ledger, question_key
from flows.ds_star import run_name

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
CHROMIUM = shutil.which("chromium")
NIGHT = ("Top region tonight?", "Manager of tonight's top region?")  # a ledger history of their own


@pytest.fixture(scope="module")
def served(prefect_server, tmp_path_factory):
    """`dsstar serve` in its own process, talking to one fake model server."""
    root = tmp_path_factory.mktemp("served")
    llm = FakeLLM().start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSSTAR_")}
    env.update(
        DSSTAR_MODEL="openai/gpt-4o-mini",
        DSSTAR_API_BASE=llm.base_url,
        DSSTAR_API_KEY="sk-test-not-secret",
        DSSTAR_STORAGE=str(root / "storage"),
        DSSTAR_DATABASE_URL=f"sqlite:///{root / 'ledger.db'}",
        DSSTAR_WORK_DIR=str(root),
        DSSTAR_LLM_RETRY_DELAY="0.05",
        DSSTAR_DATA_ROOTS=str(tmp_path_factory.getbasetemp()),  # the tests' data folders
        # Nightly tests give each batch a storage of its own; the demo's form names its model.
        DSSTAR_FORM_ALLOW="storage,model",
        PREFECT_RUNNER_POLL_FREQUENCY="1",
        PREFECT_LOGGING_LEVEL="INFO",  # the default outside tests: dsstar's lines reach the UI
    )
    with get_client(sync_client=True) as client:  # another test file's serve may have left them
        for name in ("ds-star-nightly/nightly", "ds-star/on-demand",
                     "ds-star-report/report-on-demand"):  # fmt: skip
            try:
                client.delete_deployment(client.read_deployment_by_name(name).id)
            except ObjectNotFound:
                pass
        # What `prefect deploy` of deployments/prefect.yaml leaves for a work pool: the served
        # deployment of that name takes it over, and its runs find the flow's code.
        client.create_deployment(
            client.create_flow_from_name("ds-star"), "on-demand", path=None,
            entrypoint="flows.ds_star:ds_star",
            pull_steps=[{"prefect.deployments.steps.set_working_directory": {
                "directory": str(REPO)}}],
        )  # fmt: skip
    log = open(root / "serve.log", "w")
    proc = forked_cli.start(
        [sys.executable, "-m", "dsstar", "serve", "--timezone", "Europe/Paris"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        with get_client(sync_client=True) as client:
            deadline = time.monotonic() + 90
            while True:
                try:
                    for name in ("ds-star-nightly/nightly", "ds-star/on-demand",
                                 "ds-star-report/report-on-demand"):  # fmt: skip
                        client.read_deployment_by_name(name)
                    break
                except Exception:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError((root / "serve.log").read_text()[-3000:]) from None
                    time.sleep(0.5)
        ledger = Ledger(env["DSSTAR_DATABASE_URL"], env["DSSTAR_STORAGE"])
        yield SimpleNamespace(llm=llm, root=root, ledger=ledger)
    finally:
        stop(proc)
        llm.stop()
        log.close()


@pytest.fixture
def llm(served):
    served.llm.reset()
    return served.llm


@pytest.fixture
def data(tmp_path) -> Path:
    target = tmp_path / "sales"
    shutil.copytree(EXAMPLE, target)
    return target


def trigger(parameters: dict, name: str = "ds-star/on-demand"):
    return run_deployment(name, parameters=parameters, timeout=300, poll_interval=1)


@pytest.fixture(scope="module")
def on_demand(served, tmp_path_factory):
    """One two-round on-demand run triggered through the API, which the tests of its stored
    records and of its page in the UI both read: the flow run, the model's requests during it
    and the served ledger's history of its question right after it."""
    data = tmp_path_factory.mktemp("on-demand") / "sales"
    shutil.copytree(EXAMPLE, data)
    two_rounds(served.llm.reset())
    flow_run = trigger({"question": QUESTION, "data": str(data)})
    return SimpleNamespace(
        flow_run=flow_run,
        requests=list(served.llm.requests),
        history=served.ledger.history(question_key(QUESTION)),
    )


def retry_from_the_ui(flow_run_id):
    """What the UI's Retry button sends; returns the flow run's final state."""
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(
            flow_run_id, Scheduled(name="AwaitingRetry", message="Retry from the UI"), force=True
        )
        deadline = time.monotonic() + 300
        while not (state := client.read_flow_run(flow_run_id).state).is_final():
            assert time.monotonic() < deadline, state
            time.sleep(1)
    return state


def test_serve_registers_both_deployments_with_a_form_and_a_schedule(served):
    with get_client(sync_client=True) as client:
        on_demand = client.read_deployment_by_name("ds-star/on-demand")
        nightly = client.read_deployment_by_name("ds-star-nightly/nightly")
    # Served from the folder of this process, whatever the deployment of that name was before.
    assert (on_demand.path, on_demand.pull_steps) == (".", None)
    assert on_demand.entrypoint == "flows/ds_star.py:ds_star"
    schema = on_demand.parameter_openapi_schema
    assert schema["required"] == ["question", "data"]
    # The question first, the other settings in sections; nothing else is taken. The UI lays
    # the form out by each field's position (a server on PostgreSQL keeps no key order).
    fields = sorted(schema["properties"], key=lambda name: schema["properties"][name]["position"])
    assert fields == ["question", "data", "guidelines", "model", *SECTIONS]
    assert schema["additionalProperties"] is False and on_demand.enforce_parameter_schema
    for name in ("question", "data", "guidelines", "model"):
        assert schema["properties"][name]["description"]
    # The typed run form: a bound, and unset means the worker's DSSTAR_MAX_ROUNDS, else 20.
    max_rounds = schema["definitions"]["Limits"]["properties"]["max_rounds"]
    assert (max_rounds["type"], max_rounds["minimum"]) == ("integer", 1)
    assert "else 20" in max_rounds["description"]
    assert "storage" in schema["definitions"]["AdvancedRun"]["properties"]
    assert nightly.parameter_openapi_schema["additionalProperties"] is False
    [schedule] = nightly.schedules
    assert schedule.schedule.cron == "0 2 * * *"
    assert schedule.schedule.timezone == "Europe/Paris"
    assert nightly.parameters["questions_file"].endswith("deployments/questions.yaml")
    # Reports on demand, with the report's form: its bounds beside the run's settings.
    with get_client(sync_client=True) as client:
        report = client.read_deployment_by_name("ds-star-report/report-on-demand")
    assert report.entrypoint == "flows/report.py:ds_star_report" and not report.schedules
    fields = report.parameter_openapi_schema["properties"]
    for name in ("question", "data", "guidelines", "sub_questions", "refinements"):
        assert fields[name]["description"]
    assert set(SECTIONS) <= set(fields)  # the run's settings, in the run form's sections
    assert report.parameter_openapi_schema["additionalProperties"] is False  # closed


def test_on_demand_run_from_the_api_stores_artifacts_and_ledger_rows(served, on_demand, tmp_path):
    flow_run = on_demand.flow_run
    assert flow_run.state.is_completed(), flow_run.state

    run_id = run_id_of(flow_run)
    run = json.loads((served.root / "storage" / "runs" / run_id / "run.json").read_text())
    assert run["status"] == "verified" and run["answer"] == ANSWER
    assert run["flow_run_id"] == str(flow_run.id)
    [row] = on_demand.history
    assert (row.run_id, row.answer, row.rounds) == (run_id, ANSWER, 2)
    assert len(served.ledger.calls(run_id)) == len(on_demand.requests)
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run.id]))
        )
    keys = {a.key for a in artifacts}
    assert {f"{run_id}-round-00", f"{run_id}-round-01", f"{run_id}-rounds"} <= keys

    # The UI: the flow run's page in headless Chromium shows the run's artifacts.
    page_text = artifacts_tab(flow_run.id, tmp_path / "flow-run.png")
    assert run_id in page_text
    assert f"{run_id}-round-01" in page_text and f"{run_id}-rounds" in page_text
    assert (tmp_path / "flow-run.png").stat().st_size > 10_000


def open_page(url: str, path: Path, wait_for: str) -> str:
    """Open `url` of the Prefect UI in headless Chromium, wait until `wait_for` shows, write a
    full-page screenshot to `path` and return the page's text."""
    from playwright.sync_api import sync_playwright

    chromium = require_binary(CHROMIUM, "chromium")
    ui = os.environ["PREFECT_API_URL"].removesuffix("/api")
    flags = [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=flags)
        page = browser.new_page(viewport={"width": 1600, "height": 1400})
        page.goto(f"{ui}{url}")
        page.get_by_text(wait_for).first.wait_for(timeout=60_000)
        page.screenshot(path=str(path), full_page=True)
        text = page.inner_text("body")
        browser.close()
    return text


def test_the_ui_shows_dsstars_lines_and_the_nightly_questions(
    served, on_demand, llm, data, tmp_path
):
    flow_run = on_demand.flow_run
    assert flow_run.state.is_completed(), flow_run.state
    # The flow run's Logs tab (its first tab) tells the run: stages, rounds, route, answer.
    logs = open_page(f"/runs/flow-run/{flow_run.id}", tmp_path / "logs.png", "answer (verified")
    assert re.search(r"stage analyze: \d+ files described", logs)
    assert "stage retrieve:" in logs
    assert "round 00: verdict not sufficient · ran ok · step 1: Load the orders" in logs
    assert "route into round 01: Add Step" in logs
    assert "round 01: verdict sufficient · ran ok · step 2: Join the best region" in logs
    assert f"answer (verified, 2 rounds): {ANSWER}" in logs

    # The batch's data path is relative to its questions file; the model's log holds this
    # batch's requests only (the on-demand run's are the module's).
    always_first_time(llm.reset())
    questions = tmp_path / "questions.yaml"
    questions.write_text("".join(f"- question: {q}\n  data: {data.name}\n" for q in NIGHT))
    # A storage of its own: its analysis cache starts empty (the other tests filled theirs).
    parameters = {
        "questions_file": str(questions),
        "advanced": {"storage": str(tmp_path / "storage")},
    }
    first = trigger(parameters, "ds-star-nightly/nightly")
    assert first.state.is_completed(), first.state
    files = sorted(p.name for p in data.iterdir())
    analyzed = sorted(
        r["messages"][0]["content"].split("`data/")[1].split("`")[0] for r in llm.calls("analyzer")
    )
    assert analyzed == files  # once per file, for both questions
    # The runs are in the batch's storage: the ledger shows them for that storage only.
    ledger = Ledger(served.ledger.url, str(tmp_path / "storage"))
    runs = [ledger.history(question_key(q)) for q in NIGHT]
    assert [[(r.status, r.answer) for r in history] for history in runs] == [
        [("verified", ANSWER)]
    ] * len(NIGHT)
    assert not served.ledger.history(question_key(NIGHT[0]))

    second = trigger(parameters, "ds-star-nightly/nightly")
    for night in (first, second):
        assert night.state.is_completed(), night.state
        assert night.name == f"questions {night.expected_start_time:%Y-%m-%d}"
    tables = [nightly_table(night.id) for night in (first, second)]
    assert [[(r["question"], r["answer"], r["change"]) for r in t[:-1]] for t in tables] == [
        [(q, ANSWER, "new") for q in NIGHT],
        [(q, ANSWER, "same") for q in NIGHT],
    ]
    # The nightly table in the UI: the questions themselves, their answers and the marks.
    artifact = nightly_artifact(second.id)
    page = open_page(f"/artifacts/artifact/{artifact.id}", tmp_path / "nightly.png", NIGHT[0])
    assert NIGHT[1] in page and ANSWER.split(",")[0] in page and "same" in page
    assert (tmp_path / "nightly.png").stat().st_size > 10_000
    parent = open_page(f"/runs/flow-run/{second.id}", tmp_path / "nightly-logs.png", "question:")
    assert f"question: {NIGHT[0]} · verified · answer: {ANSWER} (same)" in parent


def nightly_artifact(flow_run_id):
    """The table artifact a nightly batch publishes (its tasks publish others)."""
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    [artifact] = [a for a in artifacts if a.type == "table" and (a.key or "").endswith("nightly")]
    return artifact


def nightly_table(flow_run_id) -> list[dict]:
    """The rows of a nightly batch's table artifact, as the UI shows them."""
    data = nightly_artifact(flow_run_id).data
    return cells_shown(json.loads(data) if isinstance(data, str) else data)


def test_retry_of_a_failed_run_resumes_without_repeating_answers(served, llm, data):
    two_rounds(llm)
    coder_outage(llm)
    flow_run = trigger({"question": QUESTION, "data": str(data)})
    assert flow_run.state.is_failed(), flow_run.state
    before = list(llm.requests)

    llm.intercept(None)
    state = retry_from_the_ui(flow_run.id)
    assert state.is_completed(), state
    retried = llm.requests[len(before) :]
    assert retried and answered(before) & asked(retried) == set()
    run = json.loads((served.root / "storage/runs" / run_id_of(flow_run) / "run.json").read_text())
    assert run["status"] == "verified" and run["answer"] == ANSWER


def test_a_retried_batch_answers_again_only_the_failed_question_and_repeats_nothing(
    served, llm, data, tmp_path
):
    always_first_time(llm)
    # Questions of their own: the ledger's history of NIGHT is another test's.
    fine, doomed = "Which region sold the most?", "Which manager leads the weakest region?"
    # That question's coder is refused for good (503 on every try), after its planner answered.
    llm.intercept(lambda req: Error(503, "model overloaded") if doomed in text_of(req)
                  and req["agent"] == "coder" else None)  # fmt: skip
    # One data path relative to the questions file, one absolute: the same folder.
    questions = tmp_path / "questions.yaml"
    questions.write_text(f"- question: {fine}\n  data: {data.name}\n"
                         f"- question: {doomed}\n  data: {data}\n")  # fmt: skip
    parameters = {
        "questions_file": str(questions),
        "advanced": {"storage": str(tmp_path / "storage")},
    }
    flow_run = trigger(parameters, "ds-star-nightly/nightly")
    assert flow_run.state.is_failed() and "1 of 2 questions failed" in flow_run.state.message
    before = list(llm.requests)
    # The failed question got that far: its planner's answer is kept for the retry.
    assert any(r["agent"] == "planner" and doomed in text_of(r) for r in before)

    llm.intercept(None)
    state = retry_from_the_ui(flow_run.id)
    assert state.is_completed(), state
    retried = llm.requests[len(before) :]
    # Only the failed question is asked again, and none of its answered calls is paid twice.
    assert retried and all(doomed in text_of(r) for r in retried if r["agent"] != "analyzer")
    assert answered(before) & asked(retried) == set()
    records = [json.loads(p.read_text()) for p in (tmp_path / "storage").glob("runs/*/run.json")]
    outcomes = {(record["question"], record["status"], record["answer"]) for record in records}
    assert outcomes == {(fine, "verified", ANSWER), (doomed, "verified", ANSWER)}


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_form_too_deep_for_prefect_neither_is_stored_nor_stops_serve(served):
    """Issue 47's form: `options` holding 300 levels of lists, 699 bytes. Prefect's server
    stored it, answered 500 to every read of it (the run list, serve's poll) and serve
    stopped. The served deployment's schema refuses it now, with nothing stored; and a flow
    run stored anyway (its creator turned the schema check off) is made readable by serve,
    which goes on serving."""
    body = {"parameters": {"question": "q", "data": "d", "options": {"x": _nested(300)}}}
    assert len(json.dumps(body)) < 700
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("ds-star/on-demand")
        create = f"deployments/{deployment.id}/create_flow_run"
        before = runs_of(client, deployment.id)
        refused = api_post(create, body)
        assert refused.status_code == 409 and "options" in refused.text
        assert runs_of(client, deployment.id) == before  # nothing stored
        assert api_post("flow_runs/filter", {"limit": 50}).status_code == 200

        # The check turned off for one flow run: Prefect stores it and cannot read it back.
        body |= {"enforce_parameter_schema": False, "name": "too-deep"}
        for _ in range(10):  # 503: the server's SQLite was busy, nothing was stored
            created = api_post(create, body)
            if created.status_code != 503:
                break
            time.sleep(2)
        assert created.status_code == 500  # stored, and its answer could not be written
        deadline = time.monotonic() + 120
        while api_post("flow_runs/filter", {"limit": 50}).status_code != 200:
            assert time.monotonic() < deadline, "serve left the flow run unreadable"
            time.sleep(1)
        [bad] = [r for r in runs_of(client, deployment.id) if r.name == "too-deep"]
        while not bad.state.is_failed():  # readable once cleared, then marked Failed
            assert time.monotonic() < deadline, bad
            time.sleep(1)
            bad = client.read_flow_run(bad.id)
    assert bad.state.is_failed() and "could not be read back" in bad.state.message
    assert bad.parameters == {}
    log = (served.root / "serve.log").read_text()
    assert f"flow run {bad.id} could not be read back: cleared and marked Failed" in log
    # Serve goes on: a run after it completes.
    two_rounds(served.llm.reset())
    data = served.root / "after-deep" / "sales"
    shutil.copytree(EXAMPLE, data)
    assert trigger({"question": QUESTION, "data": str(data)}).state.is_completed()


def api_post(path: str, body: dict) -> httpx.Response:
    """A POST to the Prefect API on a connection of its own (the server drops one after a
    500), answered whatever its status."""
    return httpx.post(f"{os.environ['PREFECT_API_URL']}/{path}", json=body, timeout=60)


def runs_of(client, deployment_id) -> list:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    found = DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
    return client.read_flow_runs(deployment_filter=found)


def test_the_demo_question_from_the_run_form_completes_with_the_recorded_replies(served, tmp_path):
    """The demo (`dsstar demo`) from the Prefect UI's form: its question and data, the
    model of its recorded replies, every other field as the form leaves it (reuse on).
    Asked twice, the second run reuses the first's verified solution, which the recording
    answers too; a name typed for the run is kept."""
    demo = load_questions(REPO / "examples" / "sales-questions.yaml")[0]
    shutil.copytree(EXAMPLE, tmp_path / "sales")  # under the worker's data roots
    replies = tmp_path / "sales-replies.yaml"
    shutil.copy(REPO / "examples" / "sales-replies.yaml", replies)
    untouched = {"guidelines": demo.guidelines, **dict.fromkeys(SECTIONS, {})}  # as sent
    form = {"question": demo.question, "data": str(tmp_path / "sales"),
            "model": f"recorded/{replies}", **untouched}  # fmt: skip
    first = run_deployment("ds-star/on-demand", parameters=form, flow_run_name="demo from the form",
                           timeout=300, poll_interval=1)  # fmt: skip
    second = trigger(form)
    for flow_run in (first, second):
        assert flow_run.state.is_completed(), flow_run.state
    assert first.name == "demo from the form"  # kept, not the run id
    stored = [json.loads(p.read_text()) for p in (served.root / "storage").glob("runs/*/run.json")]
    by_flow_run = {record.get("flow_run_id"): record for record in stored}
    records = [by_flow_run[str(flow_run.id)] for flow_run in (first, second)]
    assert [r["status"] for r in records] == ["verified", "verified"]
    assert [r["replies"] for r in records] == ["recorded", "recorded"]
    assert records[0]["answer"] == records[1]["answer"]
    assert records[1]["reused_from"] == records[0]["run_id"]
    # No name given: the run id, then the question.
    assert second.name == run_name(records[1]["run_id"], demo.question)
