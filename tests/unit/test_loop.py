"""The DS-STAR loop of the core, run without Prefect: the local runtime asks the scripted
model server through litellm (dsstar.model.llm) and runs scripts in the real sandbox. Calls
are made one after another (as by default), in the order the scenarios script their
replies; test_together.py asks a round's calls at once."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from fake_llm import FakeLLM, text_of
from scenarios import (
    ANSWER,
    FINAL_ONLY_ANSWER,
    JOIN,
    LOAD,
    always_first_time,
    backtrack,
    fence,
    never_satisfied,
    two_rounds,
)

from dsstar.algorithm import loop
from dsstar.algorithm.agents import FileInfo
from dsstar.algorithm.guidance import Checkpoint, Choice, Guidance
from dsstar.algorithm.local import LocalRuntime
from dsstar.algorithm.runtime import NO_CODE, Budget, Script
from dsstar.algorithm.verdict import Status, Verdict
from dsstar.data.sources import DataSource
from dsstar.execution import scratch
from dsstar.inputs.spec import run_spec
from dsstar.settings import Settings

REPO = Path(__file__).resolve().parents[2]
QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
FILES = [
    FileInfo("data/orders_2024.csv", "CSV: order_id, date, region_code, units, unit_price"),
    FileInfo("data/regions.json", 'JSON: {"regions": [{"code", "name", "manager": {"name"}}]}'),
]
PROBLEM = loop.Problem(QUESTION, "region name, manager name", FILES)


@pytest.fixture
def runtime(llm: FakeLLM, sales: Path, tmp_path: Path) -> LocalRuntime:
    work = tmp_path / "work"
    work.mkdir()
    source = DataSource(str(sales), scratch.new_dir(work, "loop-test"))
    settings = Settings(
        model="openai/gpt-4o-mini",
        api_base=llm.base_url,
        storage=str(tmp_path / "storage"),
        work_dir=work,
        exec_timeout=60,
    )
    spec = run_spec(settings, "loop-test", settings.storage, source.mount_dir)
    return LocalRuntime(spec, api_key="sk-x")


def answering(*answers: Guidance) -> Callable[[Checkpoint], Guidance | None]:
    """A person who gives `answers`, one after each round that was not sufficient, then
    is not there any more."""
    left = list(answers)
    return lambda checkpoint: left.pop(0) if left else None


def solve(rt: LocalRuntime, budget: Budget | None = None) -> tuple[loop.Outcome, Script | None]:
    budget = budget or Budget()
    outcome = loop.rounds(rt, PROBLEM, budget)
    if outcome.status is Status.STOPPED:
        return outcome, None
    return outcome, loop.finalize(
        rt, PROBLEM, budget, outcome.plan, outcome.script, outcome.status, outcome.reason
    )


def test_verified_in_round_0(llm, runtime) -> None:
    always_first_time(llm)
    outcome, final = solve(runtime)

    assert outcome.status is Status.VERIFIED
    assert outcome.plan == ["Compute revenue per region and find its manager."]
    assert [r.number for r in runtime.rounds] == [0]
    assert runtime.rounds[0].verdict is Verdict.SUFFICIENT and runtime.rounds[0].route is None
    assert runtime.routes == {} and runtime.checkpoints == []
    assert final.result.stdout.strip() == ANSWER
    # The labels name the calls exactly as the flow's tasks (and their cache keys) do.
    assert runtime.labels == [
        "planner r00", "coder r00", "execute r00", "verifier r00", "finalyzer", "execute final"
    ]  # fmt: skip


def test_a_final_script_that_is_the_rounds_own_is_not_run_again(llm, runtime) -> None:
    """The round's script already states the answer and the finalyzer replies with it, its
    comments and blank lines changed: the same program, so the round's run is the final
    run (a model in it would be fitted once)."""
    always_first_time(llm)
    llm.default("coder", lambda req: fence(FINAL_ONLY_ANSWER))
    same = "# The answer, as round 00 computed it.\n" + FINAL_ONLY_ANSWER.replace("\n", "\n\n")
    llm.default("finalyzer", lambda req: "It already prints the answer; unchanged:\n" + fence(same))
    outcome, final = solve(runtime)

    assert runtime.labels[-3:] == ["execute r00", "verifier r00", "finalyzer"]  # run once
    assert final.code == same.strip() and final.result is runtime.rounds[0].script.result
    assert final.result.stdout.strip() == ANSWER and runtime.notes["final_reused_run"] is True
    # Another program, a round whose script failed, or one whose files are not at hand (a
    # runtime that stores files kept only its figures), is run as ever.
    failed = Script(FINAL_ONLY_ANSWER, NO_CODE)
    loop.finalize(runtime, PROBLEM, Budget(), outcome.plan, failed, Status.MAX_ROUNDS)
    assert runtime.labels[-2:] == ["finalyzer", "execute final"]
    table = {"name": "t.csv", "bytes": 4, "sha256": "0" * 64}  # a reference without its bytes
    unheld = replace(final.result, outputs=(table,))
    again = loop.finalize(runtime, PROBLEM, Budget(), outcome.plan,
                          Script(FINAL_ONLY_ANSWER, unheld), Status.VERIFIED)  # fmt: skip
    assert runtime.labels[-2:] == ["finalyzer", "execute final"] and again.result.ok
    assert loop.same_program("x = 1  # one\n\nprint(x)", "x = 1\nprint( x )")
    assert not loop.same_program("x = 1\nprint(x)", "x = 2\nprint(x)")
    assert not loop.same_program("x = (", "x = (")  # no program


def test_two_rounds_add_a_step_on_the_base_code(llm, runtime) -> None:
    two_rounds(llm)
    outcome, final = solve(runtime)

    assert outcome.status is Status.VERIFIED and len(outcome.plan) == 2
    assert [r.verdict for r in runtime.rounds] == [Verdict.NOT_SUFFICIENT, Verdict.SUFFICIENT]
    assert runtime.routes[1].label == "Add Step" and runtime.rounds[1].route == "Add Step"
    assert "207.0" in text_of(llm.calls("planner")[1])  # the last result
    assert 'orders = pd.read_csv("data/orders_2024.csv")' in text_of(llm.calls("coder")[1])
    assert final.result.stdout.strip() == ANSWER


def test_backtracking_drops_the_wrong_step_and_restores_its_base_code(llm, runtime) -> None:
    backtrack(llm)
    outcome, final = solve(runtime)

    assert outcome.status is Status.VERIFIED
    assert outcome.plan == [
        "Load the orders and compute revenue per region.",
        "Join the best region with regions.json to find its manager.",
    ]
    assert [runtime.routes[n].label for n in (1, 2)] == ["Add Step", "Step 2"]
    assert [len(r.plan) for r in runtime.rounds] == [1, 2, 2]
    third = text_of(llm.calls("coder")[2])
    assert "orders.groupby" in third and "WRONG_STEP_MARKER" not in third  # round 0's code
    assert "Average the unit prices" not in third
    assert final.result.stdout.strip() == ANSWER


def test_step_1_wrong_starts_afresh_from_the_last_result(llm, runtime) -> None:
    llm.script("planner", "Count the orders.", "Load the orders and compute revenue per region.")
    llm.script("coder", fence("print('orders: 12')"), fence(LOAD))
    llm.script("verifier", "No", "Yes")
    llm.script("router", "Step 1 is wrong!")
    outcome = loop.rounds(runtime, PROBLEM, Budget())

    assert outcome.plan == ["Load the orders and compute revenue per region."]
    assert "orders: 12" in text_of(llm.calls("planner")[1])  # the planner still sees r
    second = text_of(llm.calls("coder")[1])
    assert "print('orders: 12')" not in second  # a script from scratch, as in round 0


def test_max_rounds_ends_the_loop_and_finalizes_anyway(llm, runtime) -> None:
    never_satisfied(llm)
    outcome, final = solve(runtime, Budget(max_rounds=3))

    assert outcome.status is Status.MAX_ROUNDS
    # M = 3 refinements (rounds 01..03) after round 00, as in the paper; each one judged.
    assert [r.number for r in runtime.rounds] == [0, 1, 2, 3]
    assert sorted(runtime.routes) == [1, 2, 3]  # no route after the last round
    assert len(llm.calls("verifier")) == 4 and len(llm.calls("router")) == 3
    assert final.result.stdout.strip() == ANSWER


def test_a_failing_script_is_repaired_from_its_summarized_error(llm, runtime) -> None:
    llm.script("planner", "Load the orders and compute revenue per region.")
    broken = "import pandas as pd\npd.read_csv('data/no_such_file.csv')\n"
    llm.script("coder", fence(broken))
    llm.script("summarizer", "FileNotFoundError: data/no_such_file.csv does not exist.")
    llm.script("debugger", "I could not fix it.", fence(JOIN))  # no code first, then a fix
    llm.script("verifier", "Yes")
    outcome = loop.rounds(runtime, PROBLEM, Budget(summarize_over_chars=100))

    script = outcome.script
    assert script.result.ok and "best region: Northeast" in script.result.output
    assert script.code.strip() == JOIN.strip()
    assert [a["ok"] for a in script.attempts] == [False, False, True]
    assert script.attempts[1]["code"] is None  # the reply without code ran nothing
    debugger = text_of(llm.calls("debugger")[0])
    assert "FileNotFoundError: data/no_such_file.csv does not exist." in debugger
    assert "no_such_file" in debugger and "data/orders_2024.csv" in debugger  # script, files
    assert runtime.labels[:7] == [  # the short "no code" error is not summarized
        "planner r00", "coder r00", "execute r00", "summarizer r00 #1", "debugger r00 #1",
        "debugger r00 #2", "execute r00 #2",
    ]  # fmt: skip
    assert runtime.rounds[0].script.attempts == script.attempts


def test_an_empty_planner_reply_is_asked_again(llm, runtime) -> None:
    always_first_time(llm)
    llm.script("planner", "   ", "Compute revenue per region.")
    loop.rounds(runtime, PROBLEM, Budget())
    assert runtime.labels[:2] == ["planner r00", "planner r00 #1"]


def test_guidance_text_reaches_the_next_planner_and_router(llm, runtime) -> None:
    two_rounds(llm)
    text = "Use the manager's full name from regions.json."
    runtime.ask_person = answering(Guidance(Choice.GUIDE, text))
    outcome, final = solve(runtime)

    assert outcome.status is Status.VERIFIED
    assert text in text_of(llm.calls("router")[0])
    assert text in text_of(llm.calls("planner")[1])
    assert text not in text_of(llm.calls("planner")[0])
    assert runtime.guidance == {0: Guidance(Choice.GUIDE, text)}  # recorded after round 00
    checkpoint = runtime.checkpoints[0]
    assert checkpoint.run_id == "loop-test" and checkpoint.round == 0
    assert checkpoint.plan == outcome.plan[:1] and checkpoint.verdict == "No"
    assert "revenue by region:" in checkpoint.output
    assert final.result.stdout.strip() == ANSWER


def test_continue_goes_on_as_planned_without_guidance(llm, runtime) -> None:
    two_rounds(llm)
    runtime.ask_person = answering(
        Guidance(Choice.CONTINUE, "ignored unless guiding", timed_out=True)
    )
    outcome, _ = solve(runtime)

    assert outcome.status is Status.VERIFIED and len(runtime.rounds) == 2
    assert "ignored unless guiding" not in text_of(llm.calls("router")[0])
    assert "ignored unless guiding" not in text_of(llm.calls("planner")[1])
    assert runtime.guidance[0].timed_out


def test_guidance_prompts_equal_unguided_ones_when_nobody_answers(llm, runtime) -> None:
    two_rounds(llm)
    solve(runtime)  # ask_human returns None: no checkpoint is recorded
    assert runtime.guidance == {} and len(runtime.checkpoints) == 1
    unguided = [r["messages"] for r in llm.calls("router") + llm.calls("planner")]
    llm.reset()
    two_rounds(llm)
    runtime.ask_person = answering(Guidance(Choice.CONTINUE))
    solve(runtime)
    assert [r["messages"] for r in llm.calls("router") + llm.calls("planner")] == unguided


def test_accept_finalizes_the_current_plan_at_once(llm, runtime) -> None:
    two_rounds(llm)
    runtime.ask_person = answering(Guidance(Choice.ACCEPT))
    outcome, final = solve(runtime)

    assert outcome.status is Status.ACCEPTED
    assert outcome.plan == ["Load the orders and compute revenue per region."]
    assert llm.calls("router") == [] and len(llm.calls("planner")) == 1
    assert len(llm.calls("finalyzer")) == 1 and final.result.ok
    assert runtime.guidance[0].choice is Choice.ACCEPT


def test_stop_ends_the_run_without_finalizing(llm, runtime) -> None:
    two_rounds(llm)
    runtime.ask_person = answering(Guidance(Choice.STOP))
    outcome, final = solve(runtime)

    assert outcome.status is Status.STOPPED and final is None
    assert len(runtime.rounds) == 1 and runtime.guidance[0].choice is Choice.STOP
    assert llm.calls("router") == [] and llm.calls("finalyzer") == []


def test_a_previous_solution_is_reused_or_rejected(llm, runtime) -> None:
    llm.script("verifier", "Yes", "No")
    plan = ["Compute revenue per region and find its manager."]
    script = loop.reuse(runtime, QUESTION, plan, FINAL_ONLY_ANSWER, Budget())
    assert script is not None and script.result.stdout.strip() == ANSWER
    assert runtime.rounds[0].number == 0 and runtime.rounds[0].plan == plan

    assert loop.reuse(runtime, QUESTION, plan, FINAL_ONLY_ANSWER, Budget()) is None
    assert runtime.reuses[0][1] is Verdict.NOT_SUFFICIENT and runtime.reuses[0][2] == "No"
    assert loop.reuse(runtime, QUESTION, plan, "raise SystemExit(3)", Budget()) is None
    assert len(llm.calls("verifier")) == 2  # a failing script is not judged
