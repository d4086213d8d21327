"""The bounds `dsstar runs show` reports are read from the spec a run's run.json keeps."""

from __future__ import annotations

import json
from pathlib import Path

from dsstar.inputs.spec import run_spec
from dsstar.settings import Settings
from dsstar.views.report import run_bounds


def _stored(**settings) -> dict:
    settings.setdefault("model", "openai/m")
    spec = run_spec(Settings(**settings), "r1", "/tmp/s", Path("/tmp/d"))
    return {"run_id": "r1", "spec": json.loads(json.dumps(spec.to_dict()))}


def test_the_bounds_come_from_the_stored_spec():
    record = _stored(max_rounds=7, max_cost=0.5, max_tokens=2000, exec_timeout=45,
                     exec_memory_mb=512, agent_models={"verifier": "openai/small"})  # fmt: skip
    assert run_bounds(record) == {
        "models": "openai/m, openai/small",
        "most rounds": "7",
        "debug attempts per script": str(Settings().max_debug_attempts),
        "ceiling": "$0.5000 and 2,000 tokens",
        "a script": f"45 s, 512 MB, {Settings().exec_outputs} output files",
        "asks a person": "no",
        "sandbox": "auto",  # a run stored before it kept the one its scripts ran in
    }


def test_the_bounds_name_the_sandbox_that_ran_and_a_recording_as_one():
    record = _stored(model="recorded//srv/runs/r0") | {"sandbox": "bwrap"}
    bounds = run_bounds(record)
    assert bounds["sandbox"] == "bwrap"
    assert bounds["models"] == "replies recorded at /srv/runs/r0"


def test_a_run_without_a_ceiling_says_none():
    assert run_bounds(_stored())["ceiling"] == "none"


def test_a_run_stored_before_its_spec_was_kept_has_no_bounds():
    assert run_bounds({"run_id": "old", "settings": {"max_rounds": 3}}) == {}
