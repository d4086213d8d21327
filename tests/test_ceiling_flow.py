"""A ceiling no run passes, end to end: `dsstar run --max-cost` stops at its ceiling as
over_budget with every artifact kept and exit code 1, `dsstar resume --max-cost` goes on to
the answer without asking anything twice, and a nightly batch with a ceiling skips the
questions it cannot afford. Against the scripted model, priced as gpt-4o-mini."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from uuid import UUID

import forked_cli
import pytest
from artifact_cards import card
from prefect import get_client
from scenarios import ANSWER, always_first_time, answered, asked, two_rounds

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
# gpt-4o-mini may answer with 16,384 tokens; near the ceiling a call asks for fewer, but never
# for less than 8,192: its least bound is about $0.0051, while the scripted replies cost about
# $0.0002 each. This ceiling lets a few calls through.
CEILING = 0.0055


def dsstar(*args: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )


def test_a_run_stops_at_its_ceiling_keeps_its_artifacts_and_resumes_with_a_higher_one(
    env, llm, sales
):
    two_rounds(llm)
    first = dsstar("run", "--data", str(sales), "--question", QUESTION, "--json",
                   "--run-id", "capped", "--max-cost", str(CEILING))  # fmt: skip
    assert first.returncode == 1, first.stderr
    result = json.loads(first.stdout)
    assert result["status"] == "over_budget" and result["answer"] is None
    assert 0 < result["cost_usd"] <= CEILING
    assert result["llm_calls"] == len(llm.requests)
    assert result["error"].startswith(f"over budget: spent ${result['cost_usd']:.4f} of")
    assert result["error"].endswith("dsstar resume capped --max-cost N")
    # In Prefect it failed, under a name of its own, with what it spent as the message.
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(UUID(result["flow_run_id"])).state
    assert state.is_failed() and state.name == "OverBudget", state
    assert state.message == result["error"]
    ended = card(UUID(result["flow_run_id"]), "capped-answer")  # what it spent, how to go on
    assert ended.startswith("### Over budget: ") and result["error"] in ended
    assert f"**LLM calls:** {result['llm_calls']} · " in ended
    assert f"**cost:** ${result['cost_usd']:.4f}" in ended
    assert "`dsstar resume capped --max-cost N` (with a ceiling N above what it spent)" in ended
    run = Path(env["DSSTAR_STORAGE"]) / "runs" / "capped"
    stored = json.loads((run / "run.json").read_text())
    assert stored["status"] == "over_budget"
    assert stored["spec"]["ceiling"] == {"max_cost": CEILING, "max_tokens": None}
    for data_file in ("orders_2024.csv", "regions.json", "README.md"):
        assert (run / "analysis" / data_file / "output.txt").is_file()
    before = list(llm.requests)

    listed = dsstar("runs", "list")
    assert "over_budget" in listed.stdout, listed.stdout

    second = dsstar("resume", "capped", "--json", "--max-cost", "1")
    assert second.returncode == 0, second.stderr
    resumed = json.loads(second.stdout)
    assert resumed["status"] == "verified" and resumed["answer"] == ANSWER
    after = llm.requests[len(before) :]
    assert after and answered(before) & asked(after) == set()  # nothing paid for twice
    assert resumed["llm_calls"] == len(llm.requests)
    # run.json keeps the spec the resumed run ran under, written over the first one's.
    assert json.loads((run / "run.json").read_text())["spec"]["ceiling"]["max_cost"] == 1


def test_a_batch_skips_the_questions_it_cannot_afford(env, llm, sales, tmp_path):
    from flows.nightly import ds_star_nightly

    always_first_time(llm)
    questions = [f"Top region and manager, take {n}?" for n in range(1, 5)]
    question_set = tmp_path / "questions.yaml"
    question_set.write_text("".join(f"- question: {q}\n  data: {sales}\n" for q in questions))
    ceiling = 0.0063  # the shared analysis and about one question
    results = ds_star_nightly(questions_file=str(question_set), max_cost=ceiling)

    statuses = [r["status"] for r in results]
    assert statuses[0] == "verified" and statuses[-1] == "skipped"
    started = [s for s in statuses if s != "skipped"]
    assert set(started[1:]) <= {"verified", "over_budget"} and "over_budget" not in started[:-1]
    for result in results[len(started) :]:  # no run was started for a skipped question
        assert result["error"].startswith("not started: ")
        assert result.get("run_id") is None
    # Requests come from the shared analysis and the started questions only. Each verified
    # question sent some; the one stopped over budget may have sent none, when its very first
    # call could not fit in what the batch had left (the check comes before a call is sent).
    runs = {r["run"] for r in llm.requests}
    analysis = {run for run in runs if run.endswith("-analysis")}
    verified = {r["run_id"] for r in results if r["status"] == "verified"}
    assert len(analysis) == 1 and verified <= runs
    assert runs - analysis <= {r["run_id"] for r in results[: len(started)]}
    spent = sum(r["cost_usd"] for r in results if r.get("cost_usd"))
    assert spent <= ceiling


def test_max_cost_for_a_model_without_a_price_is_refused_before_the_run(env, llm, sales):
    done = dsstar("run", "--data", str(sales), "--question", QUESTION, "--json",
                  "--model", "openai/our-served-model", "--max-cost", "1")  # fmt: skip
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert "cannot bound openai/our-served-model" in error and "--max-tokens" in error
    assert llm.requests == []


def test_a_reply_that_ignores_its_output_limit_is_cut_counted_as_billed_and_the_run_stops(
    env, llm, sales
):
    """`--max-tokens 30000` and a model that writes ~200k characters (50k tokens, as the
    scripted server reports them) for the first plan: every request carried an output limit
    within what the ceiling left, the long reply was kept to its limit in text, but counted
    at the tokens the server reported (what it bills), and the run, now past its ceiling,
    sent nothing more and stopped over budget."""
    two_rounds(llm)
    long = "Load the orders and compute revenue per region.\n\n" + "More on this. " * 14_500
    first_plan = []

    def rambling(request: dict) -> str | None:
        if request["agent"] == "planner" and not first_plan:
            first_plan.append(request)
            return long
        return None

    llm.intercept(rambling)
    done = dsstar("run", "--data", str(sales), "--question", QUESTION, "--json",
                  "--run-id", "rambling", "--max-tokens", "30000")  # fmt: skip
    result = json.loads(done.stdout)
    assert result["status"] == "over_budget", done.stderr
    billed = len(long) // 4
    assert first_plan and billed > 50_000
    assert result["output_tokens"] >= billed
    assert (
        "used " in result["error"] and "of --max-tokens 30,000 tokens (0 left)" in result["error"]
    )
    chats = [r for r in llm.requests if r["body"].get("messages")]
    limits = [r["body"].get("max_tokens") for r in chats]
    assert all(limits) and max(limits) <= 16_384, limits  # gpt-4o-mini's own limit
    assert chats[-1]["agent"] == "planner"  # nothing was sent after the rambling reply
    [kept] = [
        json.loads(path.read_text())
        for path in (Path(env["DSSTAR_STORAGE"]) / "runs" / "rambling" / "replies").iterdir()
        if json.loads(path.read_text())["agent"] == "planner"
        and json.loads(path.read_text())["text"].startswith("Load the orders")
        and len(json.loads(path.read_text())["text"]) > 1000
    ]
    assert kept["output_tokens"] == billed
    limit = first_plan[0]["body"]["max_tokens"]
    assert len(kept["text"]) <= len(long) * limit // billed
