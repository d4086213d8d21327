"""The DS-STAR loop (Algorithm 1 of the paper, steps 3 to 5), free of Prefect.

Round 0 plans one simple step, codes it and executes it. Then, while the verifier says the
plan is not sufficient and fewer than M refinements were made (M = max_rounds, as in the
paper: M+1 verifications in all): a person may be asked (see `guidance`), the router
adds a step or backtracks to a wrong one, the planner proposes the next step from the last
result (told what a backtrack dropped, and why), the coder rewrites the base code for the
whole plan, and the script runs (and is repaired while it fails). The planner may conclude
that the files cannot answer the question. Finally the finalyzer turns the last script into
one that states the answer; when that is the last script itself, its run is kept, not
repeated. Everything the loop does goes through a `Runtime`; every prompt is rendered beside
its call (`calls`). By default the calls are made one after another, so no reply is paid for
that is not read; with `Budget.ask_ahead`, and when no person is to be asked, a round's
verifier, router and planner are asked at once (`together`), with the same decisions.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

from dsstar.algorithm import together
from dsstar.algorithm.agents.router import Route
from dsstar.algorithm.calls import AgentCalls, Problem
from dsstar.algorithm.guidance import Checkpoint, Choice, Guidance
from dsstar.algorithm.repair import FINAL, holds_files
from dsstar.algorithm.runtime import NO_CODE, Budget, Round, Runtime, Script
from dsstar.algorithm.verdict import Status, Verdict

__all__ = ["Outcome", "Plan", "Problem", "finalize", "reuse", "rounds", "same_program"]


@dataclass
class Plan:
    """The steps so far, and the code that implemented each prefix of them: backtracking to
    step N restores the code of steps 1..N-1."""

    steps: list[str] = field(default_factory=list)
    code_for_prefix: dict[int, str] = field(default_factory=dict)

    def extend(self, step: str, code: str) -> None:
        self.steps = [*self.steps, step]
        self.code_for_prefix[len(self.steps)] = code

    def follow(self, route: Route) -> tuple[str, list[str]]:
        """Apply the router's decision: `Step N` drops step N and all after it. Returns the
        base code for the next script ("" when the plan starts afresh) and the dropped
        steps."""
        dropped: list[str] = []
        if route.wrong_step is not None:
            dropped = self.steps[route.wrong_step - 1 :]
            self.steps = self.steps[: route.wrong_step - 1]
        return self.code_for_prefix.get(len(self.steps), ""), dropped


@dataclass(frozen=True)
class Outcome:
    """How the rounds ended: `status` is verified, max_rounds, accepted, not_applicable (with
    the planner's `reason`) or stopped."""

    status: Status
    plan: list[str]
    script: Script
    reason: str = ""


def reuse(
    rt: Runtime, question: str, plan: list[str], code: str | None, budget: Budget
) -> Script | None:
    """Step 0: execute a solution verified before and ask the verifier once. Returns the
    script when it ran and was accepted (it is then round 00), else None."""
    result = rt.execute("execute reuse", code) if code is not None else NO_CODE
    script = Script(code=code or "", result=result)
    if not result.ok or not result.stdout.strip():
        rt.record_reuse(script, Verdict.NOT_SUFFICIENT, "(not asked: it failed or printed nothing)")
        return None
    agents = AgentCalls(rt, budget)
    script = agents.read_charts("reuse", question, script)
    verdict, reply = agents.verify("reuse", question, plan, script)
    if not verdict.sufficient:
        rt.record_reuse(script, verdict, reply)
        return None
    rt.record_round(Round(0, list(plan), script, verdict, reply))
    return script


def rounds(rt: Runtime, problem: Problem, budget: Budget, seed_plan: Sequence[str] = ()) -> Outcome:
    """Steps 3 and 4: round 0, then verify, ask, route, plan, code and execute until the
    verifier says sufficient, M refinements were made, a person accepts or stops, or the
    planner concludes that the files cannot answer."""
    agents = AgentCalls(rt, budget)
    plan = Plan()
    first = agents.plan_first("r00", problem.question, problem.files, previous_plan=list(seed_plan))
    if first.unanswerable:
        return Outcome(Status.NOT_APPLICABLE, [], Script("", NO_CODE), first.unanswerable)
    script = _code_round(agents, problem, plan, "r00", first.step, "", None)
    number, opened_by = 0, None
    while True:
        label = f"r{number:02d}"
        judged = _judge(rt, agents, budget, problem, number, plan.steps, script)
        verdict, reply = judged.verdict, judged.reply
        rt.record_round(Round(number, plan.steps, script, verdict, reply, opened_by, judged.unused))
        if verdict.sufficient:
            return Outcome(Status.VERIFIED, plan.steps, script)
        if number >= budget.max_rounds:  # M refinements made (rounds 1..M), all judged
            return Outcome(Status.MAX_ROUNDS, plan.steps, script)
        guidance = _ask_human(rt, number, plan.steps, script, reply)
        if guidance.choice is Choice.ACCEPT:
            return Outcome(Status.ACCEPTED, plan.steps, script)
        if guidance.choice is Choice.STOP:
            return Outcome(Status.STOPPED, plan.steps, script)
        hint = guidance.text_for_prompts
        route = judged.route or agents.route(
            label, problem.question, plan.steps, script.result.output, problem.files, hint
        )
        kept = list(plan.steps)
        base_code, dropped = plan.follow(route)
        number, opened_by = number + 1, route.label
        rt.record_route(number, route)
        proposal = judged.proposal or agents.plan_next(
            f"r{number:02d}", problem.question, problem.files, plan.steps,
            script.result.output, guidance=hint, dropped=dropped,
            why=route.reply if dropped else "",
        )  # fmt: skip
        if proposal.unanswerable:  # the plan as it stood is what the finalyzer sees
            plan.steps = kept
            return Outcome(Status.NOT_APPLICABLE, kept, script, proposal.unanswerable)
        script = _code_round(
            agents, problem, plan, f"r{number:02d}", proposal.step, base_code, script
        )


def _judge(
    rt: Runtime,
    agents: AgentCalls,
    budget: Budget,
    problem: Problem,
    number: int,
    steps: list[str],
    script: Script,
) -> together.Judged:
    """The verifier's decision on round `number`; with it, when they can be asked at once
    (see `together`), the router's and the next step. A person who may be asked sees the
    verdict first and may change what the router and planner are told; after the last
    round nobody is routed."""
    if budget.ask_ahead and number < budget.max_rounds and not rt.asks_human():
        return together.judge(rt, budget, problem, number, steps, script)
    label = f"r{number:02d}"
    verdict, reply = agents.verify(label, problem.question, steps, script, problem.files)
    return together.Judged(verdict, reply)


def _ask_human(rt: Runtime, number: int, plan: list[str], script: Script, reply: str) -> Guidance:
    checkpoint = Checkpoint(rt.run_id, number, list(plan), script.result.output, reply)
    guidance = rt.ask_human(checkpoint)
    if guidance is None:  # nobody is asked: go on as planned
        return Guidance()
    rt.record_guidance(number, guidance)
    return guidance


def _code_round(
    agents: AgentCalls,
    problem: Problem,
    plan: Plan,
    label: str,
    step: str,
    base_code: str,
    last: Script | None,
) -> Script:
    """Code the plan extended by `step` from the base code and run it. With an empty plan
    (round 0, or step 1 was wrong) the script starts from scratch, as in round 0. A chart
    `last` round's script saved and this one saves again unchanged keeps its reading."""
    steps = [*plan.steps, step]
    if plan.steps:
        code = agents.code_next(label, problem, steps, base_code)
    else:
        code = agents.code_first(label, problem, step)
    script = agents.run_solution(label, code, problem, steps, base_code, before=last)
    plan.extend(step, script.code)
    return script


def finalize(
    rt: Runtime,
    problem: Problem,
    budget: Budget,
    plan: list[str],
    script: Script,
    status: Status = Status.VERIFIED,
    reason: str = "",
) -> Script:
    """Step 5: the finalyzer, told how the rounds ended (`status`, and the planner's `reason`
    when the files cannot answer), rewrites the last script into one that states the answer
    in the required format; it is executed, and repaired by a debugger that also sees the
    guidelines. A final script that is the last round's script (the same program: comments
    and layout aside) is not run again: that round's run, which succeeded, is its run (a
    model is fitted once, not twice)."""
    agents = AgentCalls(rt, budget)
    code = agents.finalize(problem, plan, script, status.value, reason)
    result = script.result
    if code is not None and result.ok and holds_files(result) and same_program(code, script.code):
        rt.note(final_reused_run=True)
        attempt = {"code": code, "ok": True, "output": result.output, "reused": True}
        return Script(code=code, result=result, attempts=[attempt])
    return agents.run_solution(FINAL, code, problem, plan, final=True, before=script)


def same_program(code: str, other: str) -> bool:
    """Whether two scripts are the same program: the same syntax tree, whatever their
    comments, blank lines and layout. A script that does not parse is no program."""
    try:
        return ast.dump(ast.parse(code)) == ast.dump(ast.parse(other))
    except (SyntaxError, ValueError):  # ValueError: a null byte in the source
        return False
