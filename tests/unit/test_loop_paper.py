"""The loop as Algorithm 1 of the paper means it: what the planner sees after a backtrack,
repairs that keep the real error, a coder without code, M refinements, a finalyzer told how
the rounds ended, and a planner that concludes the files cannot answer. Run through the
core loop with the scripted model server (see test_loop.py for the runtime)."""

from __future__ import annotations

from fake_llm import text_of
from scenarios import ANSWER, FINAL_ONLY_ANSWER, JOIN, LOAD, backtrack, fence, never_satisfied
from test_loop import PROBLEM, solve
from test_loop import runtime as runtime  # noqa: F401  (the fixture)

from dsstar.algorithm import loop
from dsstar.algorithm.runtime import NO_CODE, Budget
from dsstar.algorithm.verdict import Status, Verdict

BROKEN = "import pandas as pd\npd.read_csv('data/no_such_file.csv')\n"


def test_after_a_backtrack_the_planner_sees_what_was_dropped_and_why(llm, runtime) -> None:
    backtrack(llm)
    solve(runtime)

    replanned = text_of(llm.calls("planner")[2])  # round 02, after "Step 2 is wrong!"
    assert "Steps dropped as wrong" in replanned
    assert "2. Average the unit prices per region." in replanned
    assert "Step 2 is wrong!" in replanned  # the router's reply: why
    assert "still implemented the dropped steps" in replanned
    assert "WRONG_STEP_MARKER" in replanned  # the output it refers to
    assert "Output of the code implementing the plan so far" not in replanned


def test_a_debugger_reply_without_code_keeps_the_real_error(llm, runtime) -> None:
    llm.script("planner", "Load the orders and compute revenue per region.")
    llm.script("coder", fence(BROKEN))
    llm.default("debugger", lambda req: "The file name looks wrong; check the data folder.")
    llm.script("verifier", "Yes")
    outcome = loop.rounds(runtime, PROBLEM, Budget(max_debug_attempts=2))

    result = outcome.script.result
    assert not result.ok and "FileNotFoundError" in result.output  # the round's real result
    assert NO_CODE.output not in result.output
    assert outcome.script.code.strip() == BROKEN.strip()
    assert "FileNotFoundError" in text_of(llm.calls("verifier")[0])
    second = text_of(llm.calls("debugger")[1])
    assert "FileNotFoundError" in second and "no_such_file" in second
    assert [a["code"] is None for a in outcome.script.attempts] == [False, True, True]


def test_a_coder_reply_without_code_is_asked_again(llm, runtime) -> None:
    llm.script("planner", "Compute revenue per region and find its manager.")
    llm.script("coder", "I will load the orders, group them by region and join the managers.")
    llm.script("coder", fence(JOIN))
    llm.script("verifier", "Yes")
    outcome = loop.rounds(runtime, PROBLEM, Budget())

    assert outcome.status is Status.VERIFIED and outcome.script.result.ok
    assert runtime.labels[:4] == ["planner r00", "coder r00", "coder r00 #1", "execute r00"]
    again = llm.calls("coder")[1]["messages"]
    assert again[-2]["role"] == "assistant" and "held no code" in again[-1]["content"]
    assert llm.calls("debugger") == []


def test_without_code_the_debugger_writes_the_script_from_the_plan_and_base_code(
    llm, runtime
) -> None:
    llm.script(
        "planner",
        "Load the orders and compute revenue per region.",
        "Join the best region with regions.json to find its manager.",
    )
    prose = "Join the region codes with regions.json and print the manager."
    llm.script("coder", fence(LOAD), prose, prose)
    llm.script("debugger", fence(JOIN))
    llm.script("verifier", "No", "Yes")
    llm.script("router", "Add Step")
    outcome = loop.rounds(runtime, PROBLEM, Budget())

    assert outcome.status is Status.VERIFIED and outcome.script.result.ok
    request = text_of(llm.calls("debugger")[0])
    assert "2. Join the best region with regions.json to find its manager." in request
    assert 'orders = pd.read_csv("data/orders_2024.csv")' in request  # the base code
    assert "had no code block" in request


def test_max_rounds_means_m_refinements(llm, runtime) -> None:
    never_satisfied(llm)
    outcome = loop.rounds(runtime, PROBLEM, Budget(max_rounds=1))
    assert outcome.status is Status.MAX_ROUNDS
    assert len(llm.calls("verifier")) == 2 and len(llm.calls("coder")) == 2


def test_the_finalyzer_is_told_how_the_rounds_ended(llm, runtime) -> None:
    never_satisfied(llm)
    outcome, final = solve(runtime, Budget(max_rounds=1))
    told = text_of(llm.calls("finalyzer")[0])
    assert "ran out before a reviewer judged the plan sufficient" in told
    assert "FINAL ANSWER:" in told and PROBLEM.guidelines in told
    assert "may print that value directly" in told
    assert final.result.stdout.strip() == ANSWER


def test_the_final_scripts_debugger_sees_the_guidelines(llm, runtime) -> None:
    llm.script("planner", "Compute revenue per region and find its manager.")
    llm.script("coder", fence(JOIN))
    llm.script("verifier", "Yes")
    llm.script("finalyzer", fence(BROKEN))
    llm.script("debugger", fence(FINAL_ONLY_ANSWER))
    outcome, final = solve(runtime)

    assert final.result.ok and final.result.stdout.strip() == ANSWER
    assert PROBLEM.guidelines in text_of(llm.calls("debugger")[0])


def test_an_unclear_verdict_is_asked_again_once(llm, runtime) -> None:
    llm.script("planner", "Compute revenue per region and find its manager.")
    llm.script("coder", fence(JOIN))
    llm.script("verifier", "It depends on whether the manager's title matters.", "**Yes**")
    outcome = loop.rounds(runtime, PROBLEM, Budget())

    assert outcome.status is Status.VERIFIED
    assert runtime.labels[-2:] == ["verifier r00", "verifier r00 #1"]
    assert runtime.rounds[0].verdict is Verdict.SUFFICIENT


def test_a_verdict_after_reasoning_ends_the_loop(llm, runtime) -> None:
    llm.script("planner", "Compute revenue per region and find its manager.")
    llm.script("coder", fence(JOIN))
    llm.script(
        "verifier",
        "<think>The output names Northeast and Ada Park.</think>\n\nThe plan answers both"
        " parts of the question.\n\n**Verdict:** Yes",
    )
    outcome = loop.rounds(runtime, PROBLEM, Budget())
    assert outcome.status is Status.VERIFIED and len(llm.calls("verifier")) == 1


def test_the_planner_may_conclude_that_the_files_cannot_answer(llm, runtime) -> None:
    reason = "no region in regions.json has a manager named in the question"
    llm.script("planner", "Compute revenue per region.", f"Not Applicable: {reason}")
    llm.script("coder", fence(LOAD))
    llm.script("verifier", "No")
    llm.script("router", "Add Step")
    llm.script("finalyzer", fence('print("FINAL ANSWER:", "Not Applicable")'))
    outcome, final = solve(runtime)

    assert outcome.status is Status.NOT_APPLICABLE and outcome.reason == reason
    assert outcome.plan == ["Compute revenue per region."]
    told = text_of(llm.calls("finalyzer")[0])
    assert reason in told and "Not Applicable" in told
    assert final.result.stdout.strip() == "FINAL ANSWER: Not Applicable"
