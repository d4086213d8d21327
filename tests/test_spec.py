"""The run spec is the one run contract: built once from the settings, it holds the loop's
Budget, the spending Ceiling and the sandbox's Limits as typed objects, and crosses a task
boundary as JSON and back unchanged."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from dsstar.algorithm.analysis import config_key
from dsstar.algorithm.runtime import Budget
from dsstar.algorithm.spec import RunSpec
from dsstar.data.retrieval import Embedding
from dsstar.execution.sandbox import Limits
from dsstar.inputs.spec import run_spec
from dsstar.model.ceiling import Ceiling
from dsstar.settings import Settings, default


def _spec(**settings) -> RunSpec:
    chosen = Settings(model="openai/m", **settings)
    return run_spec(chosen, "r1", "/tmp/store", Path("/tmp/data"))


def test_the_spec_holds_typed_bounds_built_from_the_settings():
    spec = _spec(max_rounds=7, max_cost=0.5, exec_timeout=9, ask_ahead=True)
    assert isinstance(spec.budget, Budget) and spec.budget.max_rounds == 7
    assert spec.budget.ask_ahead is True
    assert spec.ceiling == Ceiling(max_cost=0.5, max_tokens=None) and spec.ceiling
    assert isinstance(spec.limits, Limits) and spec.limits.timeout_s == 9


def test_a_spec_without_a_ceiling_has_a_falsy_one():
    assert _spec().ceiling == Ceiling() and not _spec().ceiling


def test_the_spec_crosses_a_task_boundary_as_json_and_back():
    spec = _spec(max_tokens=1000, exec_outputs=3)
    sent = json.loads(json.dumps(spec.to_dict()))
    assert sent["ceiling"] == {"max_cost": None, "max_tokens": 1000}
    assert RunSpec.from_dict(sent) == spec


def test_without_outputs_keeps_every_other_bound():
    spec = _spec(exec_outputs=3, exec_memory_mb=512)
    quiet = spec.without_outputs()
    assert quiet.limits == replace(spec.limits, outputs=0) and quiet.limits.memory_mb == 512
    assert spec.limits.outputs == 3


def test_a_files_analysis_key_is_what_it_was_with_a_dict_of_limits():
    # Descriptions in the catalog are keyed by this: typed limits must not make them stale.
    # Everything it reads is given here, so no DSSTAR_ variable moves it; the value is the
    # one the same spec gave when its limits were a dict.
    llm = {
        a: {"model": "openai/m", "temperature": None}
        for a in ("analyzer", "debugger", "summarizer")
    }
    spec = replace(_spec(), libraries=["pandas 2.2"], limits=Limits(), llm=llm)
    assert config_key({"path": "x.csv", "format": "csv"}, spec) == "cfa6da7d1113c4a57648"


def test_the_embedding_model_travels_in_the_spec(tmp_path):
    spec = _spec(
        embedding_model="openai/e5",
        embedding_api_base="http://127.0.0.1:9/v1",
        embedding_cache_dir=tmp_path / "vectors",
        embedding_input_type=True,
        llm_timeout=7,
    )
    assert spec.embedding == Embedding(
        "openai/e5", "http://127.0.0.1:9/v1", 7.0, str(tmp_path / "vectors"), True
    )
    assert RunSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    similarity = spec.embedding.similarity("r1")
    assert similarity.input_types and similarity.cache.run_id == "r1"
    assert similarity.cache.config.model == "openai/e5" and similarity.cache.config.timeout == 7.0
    assert _spec(embedding_model=None).embedding is None  # BM25 alone


def test_the_spec_says_whether_a_person_is_asked_and_for_how_long():
    # What the flow's runtime reads at a checkpoint: the spec, not the Settings.
    spec = _spec(ask_human=True, human_timeout=12.5)
    assert (spec.ask_human, spec.human_timeout) == (True, 12.5)
    assert RunSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert _spec().ask_human is False and _spec().human_timeout == default("human_timeout")


def test_the_spec_holds_no_secret():
    # The spec is stored in run.json: the API key and the database URL are never in it.
    chosen = Settings(
        model="openai/m",
        api_key="sk-never-stored-4d1e",
        database_url="postgresql://dsstar:pw-never-stored-9b2@db/dsstar",
    )
    written = json.dumps(run_spec(chosen, "r1", "/tmp/store", Path("/tmp/data")).to_dict())
    assert "sk-never-stored-4d1e" not in written and "pw-never-stored-9b2" not in written
    assert "api_key" not in written and "database_url" not in written
