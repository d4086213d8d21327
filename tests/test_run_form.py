"""The run form: the ds-star flow's parameters are one typed model derived from Settings, so
Prefect stores a form with types, descriptions and bounds: the question, its data and the
model first, the other settings in sections; a value outside it is refused by Prefect's
server before a flow run is stored."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import REPO
from prefect import flow, get_client
from prefect.exceptions import ParameterTypeError
from prefect.utilities.callables import parameter_schema
from pydantic import ValidationError

from dsstar.inputs.form import (
    OPTION_FIELDS,
    SECRET_FIELDS,
    SECTIONS,
    WORKER_FIELDS,
    RunForm,
    explain,
)
from dsstar.settings import Settings
from flows._forms import form_deployment
from flows.ds_star import ds_star
from flows.nightly import ds_star_nightly


def _section(schema: dict, name: str) -> dict:
    """The properties of a section of the form, from the schema's definitions."""
    ref = schema["properties"][name]["$ref"].rpartition("/")[2]
    return schema["definitions"][ref]["properties"]


def _setting(schema: dict, name: str) -> dict:
    """The schema of setting `name`, in whichever section holds it."""
    [found] = [
        _section(schema, section)[name] for section in SECTIONS if name in _section(schema, section)
    ]
    return found


def test_the_form_shows_the_question_first_and_groups_the_rest():
    schema = parameter_schema(ds_star).model_dump_for_openapi()
    props = schema["properties"]
    assert schema["required"] == ["question", "data"]
    assert len(props) <= 8
    assert list(props) == ["question", "data", "guidelines", "model", *SECTIONS]
    for name in ("question", "data", "guidelines", "model"):
        assert props[name]["description"] and props[name]["type"] == "string", name
    for section in SECTIONS:
        definition = schema["definitions"][props[section]["$ref"].rpartition("/")[2]]
        assert definition["description"] == SECTIONS[section]  # the group's heading
        assert definition["additionalProperties"] is False
        assert props[section]["default"] == {}
        for name, prop in definition["properties"].items():
            assert prop.get("description"), name  # every field explains itself in the form
            # Shown as its type alone: no "None" choice in Prefect's form, no default sent.
            assert "anyOf" not in prop and prop.get("type") != "null" and "default" not in prop
    limits = _section(schema, "limits")
    assert list(limits)[:3] == ["max_rounds", "max_cost", "max_tokens"]
    assert {k: v for k, v in limits["max_rounds"].items() if k != "description"} == {
        "type": "integer", "minimum": 1, "title": "Max Rounds"
    }  # fmt: skip
    assert "DSSTAR_MAX_ROUNDS" in limits["max_rounds"]["description"]
    assert "else 20" in limits["max_rounds"]["description"]
    assert _setting(schema, "exec_timeout")["exclusiveMinimum"] == 0
    assert _setting(schema, "reuse")["enum"] == [True, False]  # a choice that starts empty
    assert "run_id" in _section(schema, "advanced")


def test_every_text_and_mapping_of_the_form_is_bounded():
    """No field takes arbitrary JSON: Prefect's server checks a value against these bounds
    before it stores a flow run."""
    schema = parameter_schema(ds_star).model_dump_for_openapi()
    fields = dict(schema["properties"])
    for section in SECTIONS:
        fields |= _section(schema, section)
    for name, prop in fields.items():
        if prop.get("type") == "string":
            assert prop["maxLength"] <= 200_000, name
        elif prop.get("type") == "object" and "$ref" not in prop:
            assert prop["maxProperties"] and prop["additionalProperties"]["maxLength"], name
        else:
            kind = "$ref" in prop or prop.get("type") in ("integer", "number") or "enum" in prop
            assert kind, (name, prop)
    assert _setting(schema, "agent_models")["maxProperties"] == 16


def test_the_form_holds_every_setting_but_the_secrets_and_the_worker_policy():
    schema = parameter_schema(ds_star).model_dump_for_openapi()
    held = {"model"} | {n for s in SECTIONS for n in _section(schema, s)} - {"run_id"}
    assert held == set(Settings.model_fields) - SECRET_FIELDS - WORKER_FIELDS
    assert set(OPTION_FIELDS) == held and not held & (SECRET_FIELDS | WORKER_FIELDS)
    with pytest.raises(ValidationError, match="worker's environment"):
        RunForm(question="q", data="d", api_key="sk-not-here")
    with pytest.raises(ValidationError, match="worker's environment"):
        RunForm(question="q", data="d", advanced={"api_key": "sk-not-here"})


def test_nightly_form_has_its_question_set_and_the_same_options():
    schema = parameter_schema(ds_star_nightly).model_dump_for_openapi()
    props = schema["properties"]
    assert list(props) == ["questions_file", "question_deployment", "model", *SECTIONS]
    assert props["questions_file"]["default"] == "deployments/questions.yaml"
    assert set(_section(schema, "limits")) == set(
        _section(parameter_schema(ds_star).model_dump_for_openapi(), "limits")
    )


def test_settings_given_by_name_go_to_their_sections_and_read_back_flat():
    form = RunForm(question="q", data="d", max_rounds=3, exec_timeout=60, run_id="r-1",
                   reuse=False, limits={"max_cost": 0.5})  # fmt: skip
    assert form.parameters() == {
        "question": "q", "data": "d", "guidelines": "", "limits": {"max_rounds": 3,
        "max_cost": 0.5, "exec_timeout": 60.0}, "advanced": {"run_id": "r-1", "reuse": False},
    }  # fmt: skip
    assert form.chosen() == {"max_rounds": 3, "max_cost": 0.5, "exec_timeout": 60.0,
                             "reuse": False}  # fmt: skip
    assert form.run_id == "r-1" and RunForm.model_validate(form.parameters()) == form
    assert (form.settings().max_rounds, form.settings().exec_timeout) == (3, 60)
    assert RunForm.for_question({"question": "q", "data": "d"}, "r-2", {"reuse": False,
            "api_key": "kept out", "max_rounds": None}).chosen() == {"reuse": False}  # fmt: skip
    with pytest.raises(ValidationError, match="max_rounds given twice"):
        RunForm(question="q", data="d", max_rounds=3, limits={"max_rounds": 4})
    # The deprecated `options` (settings as any JSON object) is gone: no such field.
    with pytest.raises(ValidationError, match="options"):
        RunForm(question="q", data="d", options={"exec_timeout": 60})
    validated = ds_star.validate_parameters({"question": "q", "data": "d", "max_rounds": 3})
    assert validated["limits"].max_rounds == 3


def test_prefect_refuses_out_of_bounds_values():
    with pytest.raises(ParameterTypeError, match="max_rounds"):
        ds_star.validate_parameters({"question": "q", "data": "d", "max_rounds": 0})


def test_errors_read_as_one_line_per_field():
    with pytest.raises(ValidationError) as caught:
        RunForm(question=" ", data="d", max_rounds=0, bogus=1)
    line = explain(caught.value, lambda name: f"--{name.replace('_', '-')}")
    assert "\n" not in line
    assert "--question ' ': the question is empty" in line
    assert "--max-rounds 0: should be greater than or equal to 1" in line
    assert "--bogus 1: no such setting" in line


def test_unset_options_leave_the_worker_environment_in_charge(monkeypatch):
    monkeypatch.setenv("DSSTAR_SANDBOX", "none")
    monkeypatch.setenv("DSSTAR_MAX_ROUNDS", "7")
    form = RunForm(question="q", data="d", max_rounds=4)
    assert form.parameters() == {
        "question": "q", "data": "d", "guidelines": "", "limits": {"max_rounds": 4}
    }  # fmt: skip
    settings = form.settings()
    assert (settings.sandbox, settings.max_rounds) == ("none", 4)
    # What Prefect's UI sends for an untouched form: empty text and sections.
    untouched = RunForm.model_validate(
        {"question": "q", "data": "d", "guidelines": "", "model": "", **dict.fromkeys(SECTIONS, {})}
    )
    assert untouched.chosen() == {} and untouched.settings().max_rounds == 7


def test_a_deployment_stores_the_typed_closed_form():
    deployment_id = form_deployment(ds_star, name="form-check").apply()
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment(deployment_id)
    schema = deployment.parameter_openapi_schema
    assert deployment.enforce_parameter_schema and schema["additionalProperties"] is False
    assert schema["required"] == ["question", "data"]
    assert _setting(schema, "max_debug_attempts")["minimum"] == 0
    assert schema["properties"]["question"]["description"].startswith("The question to answer")
    assert deployment.entrypoint.endswith("ds_star.py:ds_star")
    assert (REPO / "flows" / "ds_star.py").is_file()


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_form_nested_too_deep_is_refused_before_prefect_stores_a_flow_run():
    """The form of issue 47: 300 levels of lists under the deprecated `options` (699 bytes).
    Prefect's server stored it and then answered 500 to every read of it, the run list
    included; now the deployment's schema refuses it, and every other place a value could
    hide, with a 4xx, and nothing is stored."""
    import httpx

    deployment_id = form_deployment(ds_star, name="form-deep").apply()
    deep = _nested(300)
    bodies = [
        {"question": "q", "data": "d", "options": {"x": deep}},
        {"question": "q", "data": "d", "anything": deep},
        {"question": deep, "data": "d"},
        {"question": "q", "data": "d", "limits": {"x": deep}},
        {"question": "q", "data": "d", "limits": {"max_rounds": deep}},
        {"question": "q", "data": "d", "advanced": {"agent_models": {"coder": deep}}},
        {"question": "q", "data": "d", "advanced": {"agent_models": {f"a{n}": "m" for n in
                                                                     range(17)}}},
        {"question": "q", "data": "d" * 5000},
    ]  # fmt: skip
    api = os.environ["PREFECT_API_URL"]
    assert len(json.dumps({"parameters": bodies[0]})) < 700
    with httpx.Client(base_url=api, timeout=30) as http:
        for body in bodies:
            answer = http.post(f"/deployments/{deployment_id}/create_flow_run",
                               json={"parameters": body})  # fmt: skip
            assert 400 <= answer.status_code < 500, (answer.status_code, str(body)[:80])
        filtered = http.post("/flow_runs/filter", json={
            "deployments": {"id": {"any_": [str(deployment_id)]}}})  # fmt: skip
        assert filtered.status_code == 200 and filtered.json() == []  # none stored
        assert http.post("/flow_runs/filter", json={"limit": 50}).status_code == 200


@flow(name="not-a-form")
def _not_a_form(options: dict | None = None) -> None:
    """A flow of someone else's on the same server, which takes any JSON."""


def test_dsstar_workers_closes_the_forms_prefect_deploy_left_open():
    """`prefect deploy` builds a flow's schema without closing it: Prefect's server would store
    any other parameter with any JSON under it (issue 47's `options`, 300 levels deep), and
    then fail every read of the flow run. `close_forms`, which `dsstar workers` runs, closes
    the deployments of the form flows (only those), and the deep form is refused with
    nothing stored; run again, it changes nothing."""
    import httpx

    from flows._forms import close_forms

    deployment_id = ds_star.to_deployment(name="form-open").apply()  # as `prefect deploy` does
    other_id = _not_a_form.to_deployment(name="form-open").apply()
    names = {"ds-star/form-open", "not-a-form/form-open"}
    api = os.environ["PREFECT_API_URL"]
    deep = {"parameters": {"question": "q", "data": "d", "options": {"x": _nested(300)}}}
    with get_client(sync_client=True) as client:
        opened = client.read_deployment(deployment_id)
        assert "additionalProperties" not in opened.parameter_openapi_schema
        assert close_forms(only=names) == [
            "deployment ds-star/form-open: its form closed (no other parameter is taken)"
        ]
        closed = client.read_deployment(deployment_id)
        assert closed.parameter_openapi_schema["additionalProperties"] is False
        assert closed.enforce_parameter_schema
        other = client.read_deployment(other_id).parameter_openapi_schema
        assert "additionalProperties" not in other  # not a form flow's: left as it is
    with httpx.Client(base_url=api, timeout=30) as http:
        answer = http.post(f"/deployments/{deployment_id}/create_flow_run", json=deep)
        assert answer.status_code == 409 and "options" in answer.text
        filtered = http.post("/flow_runs/filter", json={
            "deployments": {"id": {"any_": [str(deployment_id)]}}})  # fmt: skip
        assert filtered.status_code == 200 and filtered.json() == []  # none stored
    assert close_forms(only=names) == []  # closed already


@pytest.mark.slow
def test_the_ui_renders_and_submits_the_run_form(tmp_path):
    """The deployment's Run > Custom run page in headless Chromium: its first screen is the
    run's name, the question, its data, the guidelines and the model; the other settings
    follow in sections, each typed, with no "None" choice anywhere. Filled in and submitted,
    the flow run gets exactly what was typed (unset fields stay unset: the worker's settings
    apply) and the name typed. SCREENSHOT_DIR=DIR keeps the screenshot of the first screen
    (scripts/screenshots: the docs' run-form.png)."""
    import shutil

    from conftest import require_binary
    from playwright.sync_api import sync_playwright
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    chromium = require_binary(shutil.which("chromium"), "chromium")
    deployment_id = form_deployment(ds_star, name="form-ui").apply()
    ui = os.environ["PREFECT_API_URL"].removesuffix("/api")
    shot = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path) / "run-form.png"
    flags = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=flags)
        page = browser.new_page(viewport={"width": 1300, "height": 1100})
        page.goto(f"{ui}/deployments/deployment/{deployment_id}/run")
        page.get_by_text("The question to answer", exact=False).first.wait_for(timeout=60_000)
        text = page.inner_text("body")
        first_screen = [
            label
            for label in ("question", "data", "guidelines", "model", "limits")
            if page.get_by_text(label, exact=False).first.is_visible()
            and page.get_by_text(label, exact=False).first.bounding_box()["y"] < 1100
        ]
        nones = page.get_by_role("button", name="None", exact=True).count()
        page.locator(".flow-run-name-input input").fill("Q3 revenue check")
        page.locator("textarea").nth(0).fill("Which region sold most?")
        page.locator("textarea").nth(1).fill("examples/sales")
        page.screenshot(path=str(shot), full_page=False)
        field = page.locator(".schema-form-property", has_text="Max Rounds (Optional)").last
        field.locator("input").fill("3")
        reuse = page.locator(".schema-form-property", has_text="Reuse (Optional)").last
        reuse.locator(".p-select-button__control").focus()  # a choice of true or false
        for key in ("ArrowDown", "ArrowDown", "Enter"):  # the second option: false
            page.keyboard.press(key)
        page.get_by_role("button", name="Submit").click()
        page.wait_for_url("**tab=Runs**", timeout=60_000)  # the deployment's runs, after submit
        browser.close()
    assert first_screen == ["question", "data", "guidelines", "model", "limits"]
    assert nones == 0 and "Property is type" not in text
    for shown in ("Folder, single file or URL", "Most refinement rounds", "DSSTAR_SANDBOX"):
        assert shown in text, shown
    assert shot.stat().st_size > 10_000
    with get_client(sync_client=True) as client:
        [run] = client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
        )
    given = {k: v for k, v in run.parameters.items() if v not in (None, "", {})}
    assert given == {"question": "Which region sold most?", "data": "examples/sales",
                     "limits": {"max_rounds": 3}, "advanced": {"reuse": False}}  # fmt: skip
    assert run.name == "Q3 revenue check"


def test_a_parameter_outside_the_form_is_refused_with_its_reason():
    from dsstar.errors import UsageError
    from dsstar.inputs.form import refuse_unknown

    refuse_unknown({"question": "q", "data": "d", "max_rounds": 3}, RunForm)
    fields = {"question": "q", "api_key": "sk-x", "data_roots": ["/"], "max_round": 3}
    with pytest.raises(UsageError) as refused:
        refuse_unknown(fields, RunForm)
    said = str(refused.value)
    assert "api_key is a secret and cannot be given here" in said
    assert (
        "data_roots is the worker's policy and cannot be given here: only DSSTAR_DATA_ROOTS" in said
    )
    assert "max_round is not a field of the RunForm" in said


def test_the_flow_of_a_prepared_run_is_the_ds_star_flow_given_that_run():
    # `run_question` starts this flow: the same flow as the UI's, its function closing over
    # the run prepared in this process (no parameter can say "checked").
    from dsstar.inputs.form import PreparedRun
    from flows.ds_star import _prepared_flow

    form = RunForm(question="q", data="/tmp", model="openai/m", run_id="r-1")
    flow = _prepared_flow(PreparedRun(form, form.settings(), policy=None))
    assert (flow.name, flow.description) == (ds_star.name, ds_star.description)
    assert flow.parameters == ds_star.parameters
    assert flow.flow_run_name is ds_star.flow_run_name


def test_a_flow_run_prefect_cannot_read_back_is_found_and_made_readable():
    """A flow run created without a deployment has no schema to meet: Prefect's server stores
    300 levels of lists in its parameters, then every list of runs that holds it answers 500.
    `repair_unreadable` (what `dsstar serve` runs) finds it by narrowing down the lists that
    fail, clears it and marks it Failed, and the run list answers again."""
    import asyncio

    import httpx

    from flows._unreadable import REPAIRED, repair_unreadable

    async def repair() -> list:
        async with get_client() as client:
            return await repair_unreadable(client, newest=100, say=said.append)

    said: list[str] = []
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("unreadable-check")
    api = os.environ["PREFECT_API_URL"]

    def post(path: str, body: dict) -> int:  # a connection of its own: a 500 drops one
        return httpx.post(f"{api}/{path}", json=body, timeout=60).status_code

    try:
        deep = {"flow_id": str(flow_id), "name": "deep", "parameters": {"x": _nested(300)}}
        assert post("flow_runs/", deep) == 500  # stored all the same
        assert post("flow_runs/filter", {"limit": 100}) == 500
        [repaired] = asyncio.run(repair())
    finally:
        asyncio.run(repair())  # never leave the session's server unreadable
    assert post("flow_runs/filter", {"limit": 100}) == 200
    with get_client(sync_client=True) as client:
        flow_run = client.read_flow_run(repaired)
    assert (flow_run.name, flow_run.parameters) == ("deep", {})
    assert flow_run.state.is_failed() and flow_run.state.message == REPAIRED
    assert said == [f"flow run {repaired} could not be read back: cleared and marked Failed"]
