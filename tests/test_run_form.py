"""The run form: the ds-star flow's parameters are one typed model derived from Settings, so
Prefect stores a form with types, descriptions and bounds; old parameter files still work."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO
from prefect import get_client
from prefect.exceptions import ParameterTypeError
from prefect.utilities.callables import parameter_schema
from pydantic import ValidationError

from dsstar.inputs.form import OPTION_FIELDS, SECRET_FIELDS, WORKER_FIELDS, RunForm, explain
from dsstar.settings import Settings
from flows.ds_star import ds_star
from flows.nightly import ds_star_nightly


def _option(schema: dict, name: str) -> dict:
    """An optional field's non-null branch (type and bounds)."""
    [branch] = [b for b in schema["properties"][name]["anyOf"] if b.get("type") != "null"]
    return branch


def test_the_flow_schema_is_a_typed_form_with_descriptions_and_bounds():
    schema = parameter_schema(ds_star).model_dump_for_openapi()
    props = schema["properties"]
    assert schema["required"] == ["question", "data"]
    assert list(props)[:4] == ["question", "data", "guidelines", "model"]
    for name, prop in props.items():
        assert prop.get("description"), name  # every field explains itself in the form
    assert _option(schema, "max_rounds") == {"type": "integer", "minimum": 1}
    assert _option(schema, "exec_timeout") == {"type": "number", "exclusiveMinimum": 0}
    assert _option(schema, "reuse") == {"type": "boolean"}
    assert "DSSTAR_MAX_ROUNDS" in props["max_rounds"]["description"]
    assert "else 20" in props["max_rounds"]["description"]


def test_the_form_holds_every_setting_but_the_secrets_and_the_worker_policy():
    props = parameter_schema(ds_star).model_dump_for_openapi()["properties"]
    assert set(Settings.model_fields) - set(props) == SECRET_FIELDS | WORKER_FIELDS
    assert set(OPTION_FIELDS) <= set(props) and "ask_human" in props
    with pytest.raises(ValidationError, match="worker's environment"):
        RunForm(question="q", data="d", api_key="sk-not-here")


def test_nightly_form_has_its_question_set_and_the_same_options():
    props = parameter_schema(ds_star_nightly).model_dump_for_openapi()["properties"]
    assert props["questions_file"]["default"] == "deployments/questions.yaml"
    assert set(OPTION_FIELDS) <= set(props)


def test_old_parameter_files_still_validate():
    old = {"question": "q", "data": "d", "max_rounds": 3, "options": {"exec_timeout": 60}}
    assert ds_star.validate_parameters(old)["max_rounds"] == 3
    form = RunForm(**old)
    settings = form.settings()
    assert (settings.max_rounds, settings.exec_timeout) == (3, 60)
    assert "options" not in form.parameters()


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
    assert form.parameters() == {"question": "q", "data": "d", "guidelines": "", "max_rounds": 4}
    settings = form.settings()
    assert (settings.sandbox, settings.max_rounds) == ("none", 4)


def test_a_deployment_stores_the_typed_form():
    deployment_id = ds_star.to_deployment(name="form-check").apply()
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment(deployment_id)
    schema = deployment.parameter_openapi_schema
    assert schema["required"] == ["question", "data"]
    assert _option(schema, "max_debug_attempts") == {"type": "integer", "minimum": 0}
    assert schema["properties"]["question"]["description"].startswith("The question to answer")
    assert deployment.entrypoint.endswith("ds_star.py:ds_star")
    assert (REPO / "flows" / "ds_star.py").is_file()


@pytest.mark.slow
def test_the_ui_renders_and_submits_the_run_form(tmp_path):
    """The deployment's Run > Custom run page in headless Chromium: typed fields with their
    descriptions; filled in and submitted, the flow run gets exactly what was typed (unset
    fields stay unset: the worker's settings apply). SCREENSHOT_DIR=DIR keeps the screenshot
    (scripts/screenshots: the docs' run-form.png)."""
    import os
    import shutil

    from conftest import require_binary
    from playwright.sync_api import sync_playwright
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    chromium = require_binary(shutil.which("chromium"), "chromium")
    deployment_id = ds_star.to_deployment(name="form-ui").apply()
    ui = os.environ["PREFECT_API_URL"].removesuffix("/api")
    shot = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path) / "run-form.png"
    flags = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=flags)
        page = browser.new_page(viewport={"width": 1300, "height": 1400})
        page.goto(f"{ui}/deployments/deployment/{deployment_id}/run")
        page.get_by_text("The question to answer", exact=False).first.wait_for(timeout=60_000)
        text = page.inner_text("body")
        page.locator("textarea").nth(0).fill("Which region sold most?")
        page.locator("textarea").nth(1).fill("examples/sales")
        page.screenshot(path=str(shot), full_page=False)
        page.get_by_role("button", name="Submit").click()
        page.wait_for_url("**tab=Runs**", timeout=60_000)  # the deployment's runs, after submit
        browser.close()
    for shown in ("Folder, single file or URL", "Most refinement rounds", "DSSTAR_SANDBOX"):
        assert shown in text, shown
    assert shot.stat().st_size > 10_000
    with get_client(sync_client=True) as client:
        [run] = client.read_flow_runs(
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
        )
    given = {k: v for k, v in run.parameters.items() if v not in (None, "")}
    assert given == {"question": "Which region sold most?", "data": "examples/sales"}


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
