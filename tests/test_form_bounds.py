"""Every number a run form gives is bounded both ways (issue 33): walked over every numeric
field of the flows' Prefect parameter schemas, as a flow run created through the API meets
them (Prefect's check of the parameters, then the flow's own, with the worker's caps).
Negative, NaN, infinite, non-numeric and boolean values are refused naming the field; a
value above the worker's own cap, or above a non-cap field's maximum, is refused too. A new
numeric field without a bound above and below fails here."""

from __future__ import annotations

import os
from typing import Any

import pytest
from prefect import Flow
from prefect.utilities.callables import parameter_schema

from dsstar.caps import cap_value, is_cap
from dsstar.settings import Settings
from flows.ds_star import ds_star
from flows.nightly import ds_star_nightly

# What each flow needs besides its options; the data lies under no root, so a form that
# passes every check is still refused, for its data (a message naming no option).
FLOWS = {
    "ds-star": (ds_star, {"question": "q", "data": "/nowhere/lake"}),
    "ds-star-nightly": (ds_star_nightly, {"questions_file": "/nowhere/questions.yaml"}),
}
# Values that are no number a setting could mean, in the forms an API client may send them.
NOT_NUMBERS = [-1, -0.5, float("nan"), float("inf"), float("-inf"), "nan", "inf", "NaN",
               "ten", "", True, False, [1], {"value": 1}]  # fmt: skip


@pytest.fixture
def worker(monkeypatch):
    """A worker's environment: its caps, the unbounded ones given a bound, and no trust in
    the form's author (not the CLI's local user)."""
    for name in [k for k in os.environ if k.startswith("DSSTAR_")]:
        monkeypatch.delenv(name)
    for name, value in {"MODEL": "openai/gpt-4o-mini", "MAX_COST": "1.5",
                        "MAX_TOKENS": "100000", "LLM_RPM": "60"}.items():  # fmt: skip
        monkeypatch.setenv(f"DSSTAR_{name}", value)
    return Settings()


def numeric_fields(flow: Flow) -> dict[str, dict[str, Any]]:
    """The flow's numeric parameters, in whichever section of its form, each with its schema
    branch (type and bounds)."""
    schema = parameter_schema(flow).model_dump_for_openapi()
    fields = dict(schema["properties"])
    for definition in schema["definitions"].values():
        fields |= definition.get("properties", {})
    found = {}
    for name, prop in fields.items():
        numbers = [b for b in prop.get("anyOf", [prop]) if b.get("type") in ("integer", "number")]
        if numbers:
            [found[name]] = numbers
    return found


def said(flow: Flow, base: dict[str, Any], chosen: dict[str, Any]) -> str:
    """Why a flow run with these parameters is refused, as the worker says it."""
    try:
        flow.fn(**flow.validate_parameters({**base, **chosen}))
    except Exception as exc:
        return str(exc)
    raise AssertionError(f"{chosen} was run")  # the data lies nowhere: never reached


def test_the_walk_finds_the_fields_that_stretch_a_runs_time_or_spend():
    walked = set(numeric_fields(ds_star))
    assert {"llm_timeout", "llm_retries", "llm_retry_delay", "max_rounds", "max_debug_attempts",
            "max_parallel", "exec_memory_mb", "exec_output_bytes", "max_tokens",
            "max_cost", "exec_timeout", "human_timeout", "slot_wait"} <= walked  # fmt: skip
    assert walked == set(numeric_fields(ds_star_nightly))


@pytest.mark.parametrize("flow_name", FLOWS)
def test_every_numeric_field_is_bounded_below_and_above(flow_name):
    """Below by the schema; above by the worker's cap or, for a field that bounds no time
    or spend, by the schema. A new numeric field must say which."""
    unbounded = []
    for name, branch in numeric_fields(FLOWS[flow_name][0]).items():
        below = "minimum" in branch or "exclusiveMinimum" in branch
        above = is_cap(name) or "maximum" in branch or "exclusiveMaximum" in branch
        if not (below and above):
            unbounded.append(f"{name} ({'above' if below else 'below'})")
    assert not unbounded, f"numeric fields without a bound: {unbounded}"


@pytest.mark.parametrize("flow_name", FLOWS)
def test_every_numeric_field_refuses_what_is_no_number_naming_it(worker, flow_name):
    flow, base = FLOWS[flow_name]
    for name, branch in numeric_fields(flow).items():
        for value in NOT_NUMBERS:
            reason = said(flow, base, {name: value})
            assert name in reason, f"{name}={value!r} was not refused by name: {reason}"
        if branch.get("minimum", 0) > 0 or "exclusiveMinimum" in branch:  # zero means nothing
            assert name in said(flow, base, {name: 0}), name


@pytest.mark.parametrize("flow_name", FLOWS)
def test_a_form_may_lower_a_cap_and_never_raise_it(worker, flow_name):
    flow, base = FLOWS[flow_name]
    for name, branch in numeric_fields(flow).items():
        integer = branch["type"] == "integer"
        if is_cap(name):
            own = cap_value(worker, name)
            assert own is not None, f"the test's worker sets no {name}"
            above = int(own) * 2 + 1 if integer else own * 2 + 0.5
            reason = said(flow, base, {name: above})
            assert f"above this worker's own {name}=" in reason or name in reason, reason
            lowest = branch.get("minimum", branch.get("exclusiveMinimum", 0) + 1)
            for fine in (own, max(lowest, own // 2 if integer else own / 2)):
                assert name not in said(flow, base, {name: fine}), (name, fine)
        else:  # bounds no time or spend: its schema's maximum holds
            reason = said(flow, base, {name: branch["maximum"] + 1})
            assert name in reason, reason


def test_the_form_of_the_issue_is_refused_by_name(worker):
    """The form that kept a flow run waiting twelve days."""
    flow, base = FLOWS["ds-star"]
    form = {"llm_timeout": -1, "llm_retry_delay": 1000000, "llm_retries": 1}
    assert "llm_timeout" in said(flow, base, form)
    form["llm_timeout"] = "nan"
    assert "llm_timeout" in said(flow, base, form)
    form["llm_timeout"] = 60
    reason = said(flow, base, form)
    assert "llm_retry_delay=1000000.0 (above this worker's own llm_retry_delay=2.0)" in reason
    assert "llm_retries" not in reason.split(". Leave")[0]  # 1 is below the worker's 4
