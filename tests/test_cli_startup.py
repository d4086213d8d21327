"""What the `dsstar` command loads before it needs it: help and usage errors import neither
Prefect nor litellm (seconds of import, paid by every call); a run's preflight names the
provider of a `provider/name` model without litellm (its import then overlaps the flow's
start), and starts the contract check's table reader beside it instead of after the flow has
started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scenarios import two_rounds

HEAVY = ("prefect", "litellm")
SALES = str(Path(__file__).resolve().parents[1] / "examples" / "sales")


def imported(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `python -X importtime -m dsstar ARGS`; the top-level packages it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=120, env=os.environ.copy(),
    )  # fmt: skip
    names = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return done, names


@pytest.mark.parametrize(
    "args, code",
    [
        (["--help"], 0),
        (["run", "--help"], 0),
        (["--version"], 0),
        (["run", "--data", SALES], 2),  # no --question: a usage error
        (["run", "--data", SALES, "-q", "?", "--max-rounds", "-1"], 2),  # a value out of bounds
    ],
)
def test_help_and_usage_errors_import_neither_prefect_nor_litellm(args, code):
    done, names = imported(*args)
    assert done.returncode == code, done.stderr[-2000:]
    assert "dsstar" in names  # the import log was read
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


_PREPARED = """
import json, sys, psutil
from dsstar.api import prepare_run

prepare_run(question="Which region had the highest revenue?", data=sys.argv[1])
commands = [" ".join(c.cmdline()) for c in psutil.Process().children()]
print(json.dumps({"children": commands, "litellm": "litellm" in sys.modules}))
"""


@pytest.mark.slow
def test_a_prepared_run_has_its_reader_started_and_litellm_still_to_import(env, llm, sales):
    """Once the preflight has passed (the model's server asked, the key accepted), the reader
    that the contract check reads tables with is already running, and litellm is not yet
    imported: both load beside the command's own work."""
    probes: list[bool] = []
    llm.on_models(lambda: probes.append(True))
    done = subprocess.run(
        [sys.executable, "-c", _PREPARED, str(sales)],
        capture_output=True, text=True, timeout=300, env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    prepared = json.loads(done.stdout.splitlines()[-1])
    assert any("dsstar.data.contracts._bounded" in c for c in prepared["children"]), prepared
    assert prepared["litellm"] is False
    assert probes and not llm.requests  # the preflight asked the server; no chat yet


_ASKED = """
import json, sys
import dsstar

answer = dsstar.ask("Which region had the highest revenue?", sys.argv[1], run_id="no-fastapi",
                    max_rounds=3, agent_models={"verifier": "openai/gpt-4o-mini"})
print(json.dumps({"status": answer.status, "fastapi": "fastapi" in sys.modules}))
"""


@pytest.mark.slow
def test_a_run_records_its_parameters_without_importing_fastapi(env, llm, sales):
    """Prefect records a flow run's parameters with FastAPI's encoder, whose import would
    come just before the first model request; the ds-star flow records them itself, the
    same JSON, and the run's process never imports FastAPI."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    two_rounds(llm)
    done = subprocess.run(
        [sys.executable, "-c", _ASKED, str(sales)],
        capture_output=True, text=True, timeout=300, env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"status": "verified", "fastapi": False}
    named = FlowRunFilter(name=FlowRunFilterName(like_="no-fastapi · "))  # then the question
    with get_client(sync_client=True) as client:
        [flow_run] = client.read_flow_runs(flow_run_filter=named)
    assert {k: v for k, v in flow_run.parameters.items() if v not in (None, "", {})} == {
        "question": "Which region had the highest revenue?", "data": str(sales),
        "limits": {"max_rounds": 3},
        "advanced": {"run_id": "no-fastapi", "agent_models": {"verifier": "openai/gpt-4o-mini"}},
    }  # fmt: skip


@pytest.mark.parametrize(
    "model", ["openai/gpt-4o-mini", "openai/served-here", "anthropic/claude-sonnet-4-5",
              "gemini/gemini-2.5-pro"],
)  # fmt: skip
@pytest.mark.parametrize("api_base", [None, "http://127.0.0.1:9/v1"])
def test_a_provider_is_named_as_litellm_routes_it(model, api_base, monkeypatch):
    import litellm

    from dsstar.model import llm

    _name, provider, _key, base = litellm.get_llm_provider(model, api_base=api_base)
    assert llm.provider_of(model, api_base) == (provider, base)
    monkeypatch.setattr(litellm, "use_litellm_proxy", True)  # then litellm routes it otherwise
    routed = litellm.get_llm_provider(model, api_base=api_base)
    assert llm.provider_of(model, api_base) == (routed[1], routed[3])


def test_a_second_preload_does_not_wait_for_the_import(monkeypatch):
    """The analysis asks for litellm again while the first preload still imports it: that
    call returns at once, so the profiler's sandbox starts beside the import, not after."""
    import threading

    from dsstar.model import llm

    monkeypatch.setattr(llm, "_preloading", True)  # a first preload started the import...
    with llm._loading:  # ...which holds this lock until litellm is imported
        caller = threading.Thread(target=llm.preload, daemon=True)
        caller.start()
        caller.join(timeout=10)
        assert not caller.is_alive()


def test_the_reader_warm_up_leaves_a_bad_read_bound_to_the_check(monkeypatch):
    """A DSSTAR_READ_MEMORY_MB that Settings refuses is reported where it was before (the
    contract check's own start of the reader), not by the warm-up beside the preflight."""
    from dsstar.data.contracts import warm_reader

    monkeypatch.setenv("DSSTAR_READ_MEMORY_MB", "-5")
    warm_reader()  # no error, no reader
