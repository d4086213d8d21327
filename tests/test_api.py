"""The Python API (`dsstar.ask`, `describe`, `runs`) has the CLI's semantics, and a run,
from the API or the CLI, builds its form, checks its question and runs its preflight once; a
flow run started from parameters (the Prefect UI, the API) still does all three itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import forked_cli
import pytest
from artifact_cards import card
from fake_llm import Error
from scenarios import ANSWER, always_first_time, two_rounds

import dsstar
from dsstar.errors import RunIdInUse, UsageError
from dsstar.events import (
    AnalysisStarted,
    Analyzed,
    Event,
    Executing,
    LLMCall,
    LLMReplied,
    Retrieved,
    RoundDone,
)
from dsstar.inputs.form import RunForm

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"


@pytest.fixture
def counted(llm, monkeypatch):
    """How often each once-per-run step ran in this process: the form's settings built, the
    question checked, the model probed (the preflight's request to the scripted server)."""
    import flows.ds_star
    from dsstar.algorithm import context_budget as budget

    counts = {"settings": 0, "question": 0, "probe": 0}
    check, settings = budget.check_question, RunForm.settings

    def check_question(*args, **kwargs):
        counts["question"] += 1
        return check(*args, **kwargs)

    def form_settings(self):
        counts["settings"] += 1
        return settings(self)

    monkeypatch.setattr(budget, "check_question", check_question)
    monkeypatch.setattr(flows.ds_star, "check_question", check_question)
    monkeypatch.setattr(RunForm, "settings", form_settings)
    llm.on_models(lambda: counts.__setitem__("probe", counts["probe"] + 1))
    return counts


def test_importing_dsstar_loads_neither_prefect_nor_the_api():
    code = "import sys, dsstar; print([m for m in ('prefect', 'dsstar.api') if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr


def test_ask_answers_with_a_typed_answer_stored_and_listed_once_per_run(env, llm, sales, counted):
    two_rounds(llm)
    answer = dsstar.ask(QUESTION, sales, max_rounds=5)
    assert isinstance(answer, dsstar.Answer)
    assert (answer.status, answer.answer, answer.rounds) == ("verified", ANSWER, 2)
    assert answer.answered and answer.error is None and answer.flow_run_id
    assert answer.llm_calls == len(llm.requests) and answer.input_tokens > 0
    assert answer.artifacts_uri.endswith(f"runs/{answer.run_id}")
    assert len(answer.plan) == 2
    assert counted == {"settings": 1, "question": 1, "probe": 1}

    listed = dsstar.runs()
    assert [(r.run_id, r.answer, r.status) for r in listed] == [(answer.run_id, ANSWER, "verified")]
    with pytest.raises(RunIdInUse, match=answer.run_id):  # as `dsstar run --run-id` refuses it
        dsstar.ask(QUESTION, sales, run_id=answer.run_id)


def test_ask_hands_each_typed_event_to_on_event_in_order(env, llm, sales):
    """The handler hears the run as it happens: the files analyzed, then the files shown to
    the agents, then each round judged; every model call announced, then answered once."""
    two_rounds(llm)
    heard: list[Event] = []
    answer = dsstar.ask(QUESTION, sales, max_rounds=5, on_event=heard.append)
    assert answer.status == "verified" and all(isinstance(e, Event) for e in heard)

    stages = (AnalysisStarted, Analyzed, Retrieved, RoundDone)
    told = [e for e in heard if isinstance(e, stages)]
    assert [type(e) for e in told] == [AnalysisStarted, Analyzed, Retrieved, RoundDone, RoundDone]
    started, analyzed, retrieved, *rounds = told
    files = {p.relative_to(sales).as_posix() for p in sales.rglob("*") if p.is_file()}
    assert started.total == len(files) and {f["path"] for f in analyzed.files} == files
    assert retrieved.total == len(files) and retrieved.paths
    assert [(r.number, r.sufficient) for r in rounds] == [(0, False), (1, True)]
    assert heard.index(rounds[0]) < heard.index(rounds[1]) < len(heard) - 1  # finalize after

    asked = [e for e in heard if isinstance(e, LLMCall)]
    replied = [e for e in heard if isinstance(e, LLMReplied)]
    assert len(replied) == answer.llm_calls == len(llm.requests)
    assert sorted(e.label for e in asked) == sorted(e.label for e in replied)
    assert sum(e.input_tokens for e in replied) == answer.input_tokens
    assert replied[-1].agent == "finalyzer" and isinstance(heard[-1], Executing)


def test_a_model_that_refuses_a_call_fails_the_run_without_raising(env, llm, sales):
    """The preflight passed, the run is stored: a model the server does not know (HTTP 404
    at the first call) is a failed run, as docs/python.md says, shown or not (`verbose`); at
    the command line it exits 1, and its flow run says how to continue it."""
    from prefect import get_client

    llm.default("analyzer", lambda request: Error(404, "The model does not exist"))
    answer = dsstar.ask(QUESTION, sales, verbose=True)
    assert answer.status == "failed" and "was not found (HTTP 404)" in answer.error
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(answer.flow_run_id).state
    assert state.is_failed(), state
    assert state.message.endswith(f"; continue with: dsstar resume {answer.run_id}"), state
    done = forked_cli.run(
        [sys.executable, "-m", "dsstar", "run", "--data", str(sales), "--question", QUESTION,
         "--json"],
        capture_output=True, text=True, timeout=300, env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # a run that failed, not bad usage (2)
    assert json.loads(done.stdout)["status"] == "failed"


@pytest.mark.parametrize(
    ("question", "settings", "message"),
    [
        ("", {}, "the question is empty"),
        (QUESTION, {"max_rounds": 0}, "max_rounds 0: should be greater than or equal to 1"),
        (QUESTION, {"max_roundz": 3}, "max_roundz 3: no such setting"),
        (QUESTION, {"api_key": "sk-x"}, "api_key is a secret and cannot be given here"),
    ],
)
def test_bad_input_raises_a_usage_error_before_anything_is_stored(
    env, sales, question, settings, message
):
    with pytest.raises(UsageError, match=message):
        dsstar.ask(question, sales, **settings)
    assert not os.path.exists(os.path.join(env["DSSTAR_STORAGE"], "runs"))


def test_a_refused_preflight_raises_naming_the_keyword(env, sales, tmp_path):
    with pytest.raises(UsageError, match="no such file or folder"):
        dsstar.ask(QUESTION, tmp_path / "nowhere")


def test_describe_offline_gives_typed_descriptions(env, sales):
    files = {f.path: f for f in dsstar.describe(sales, offline=True)}
    assert set(files) >= {"orders_2024.csv", "regions.json"}
    assert (
        files["orders_2024.csv"].format == "csv"
        and "region_code" in files["orders_2024.csv"].description
    )


def test_a_flow_run_from_parameters_checks_everything_itself(env, llm, sales, counted):
    """Parameters from the Prefect API are untrusted: the flow validates them, checks the
    question and runs the preflight (and a question too long is refused there)."""
    from flows.ds_star import ds_star

    always_first_time(llm)
    result = ds_star(question=QUESTION, data=str(sales), run_id="from-parameters")
    assert result["answer"] == ANSWER
    assert counted == {"settings": 1, "question": 1, "probe": 1}
    state = ds_star(question="x" * 100_000, data=str(sales), run_id="too-long", return_state=True)
    assert state.is_failed() and "more than the" in str(state.result(raise_on_failure=False))
    # Refused before it started, it has a card all the same: why, and nothing spent.
    ended = card(state.state_details.flow_run_id, "too-long-answer")
    assert ended.startswith("### Failed: " + "x" * 199 + "…\n") and "more than the" in ended
    assert "**Where it stopped:** before it started: its checks refused it" in ended
    assert "**Stored:** nothing" in ended and "then run it again." in ended


def test_after_an_ask_a_form_through_the_api_is_still_the_worker_s_to_judge(env, llm, sales):
    """Whose form it is is decided per call: `ask` runs its caller's own settings (a cap
    above the worker's included), and a flow run created from parameters later in the same
    process is judged by the worker's environment all the same."""
    from flows.ds_star import ds_star

    always_first_time(llm)
    own = dsstar.ask(QUESTION, sales, max_rounds=40)  # the worker's own: 20
    assert own.status == "verified", own
    before = len(llm.requests)
    state = ds_star(question=QUESTION, data=str(sales), max_rounds=40, run_id="raised",
                    return_state=True)  # fmt: skip
    assert state.is_failed()
    said = str(state.result(raise_on_failure=False))
    assert "max_rounds=40 (above this worker's own max_rounds=20)" in said, said
    assert len(llm.requests) == before  # refused before any model call
