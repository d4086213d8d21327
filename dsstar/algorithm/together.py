"""A round's verifier, router and planner asked at once (`Budget.ask_ahead`, off by default).

Once a round's script has run, and no person is to be asked, the inputs of the next two
decisions are already known: the router sees the plan, the question, the last output and
the files; for `Add Step` (nothing dropped) the planner sees the plan as it stands and the
last output. So the three are asked together, and the round waits for the slowest of them
instead of for all three in turn. The decisions are applied exactly as one after another:
Yes ends the loop (the router's and planner's replies go unused); a backtrack discards the
planner's reply, and the loop asks the planner again with what was dropped. A reply that
is discarded was still asked and paid for: it is returned as `unused`, for the round's
record. That is what asking ahead costs, and why it is an option (for a person waiting on
the answer) and not the default (for a batch, where cost matters more than seconds). Calls
go through the runtime as any other (recorded, counted, checked against the ceiling before
they are sent, cached by label and request, so a resumed run reuses them).

The calls run in threads, each in a copy of the caller's context (an orchestrator keeps
its run's context in context variables).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dsstar.algorithm.agents.router import Route
from dsstar.algorithm.calls import AgentCalls, Problem, Proposal
from dsstar.algorithm.runtime import Asked, Budget, Calls, Script
from dsstar.algorithm.verdict import Verdict
from dsstar.errors import OverBudget
from dsstar.execution.sandbox import ExecResult
from dsstar.model.llm import Message, prompt_hash

__all__ = ["Judged", "judge"]

T = TypeVar("T")


@dataclass
class Judged:
    """The three replies of one round. `route` is None when the verifier said Yes;
    `proposal` is the next step when the router said `Add Step` and the planner's reply
    can be followed (None: the loop asks the planner, as one after another)."""

    verdict: Verdict
    reply: str
    route: Route | None = None
    proposal: Proposal | None = None
    unused: tuple[Asked, ...] = field(default_factory=tuple)


def judge(
    calls: Calls,
    budget: Budget,
    problem: Problem,
    number: int,
    plan: list[str],
    script: Script,
) -> Judged:
    """Ask round `number`'s verifier and router and the next round's planner at once, and
    apply the decisions. A call refused at the run's ceiling while the others were in flight
    is asked again, alone, when its reply is needed; any other failure of a needed call is
    raised, once every call has settled."""
    label, following = f"r{number:02d}", f"r{number + 1:02d}"
    question, files, output = problem.question, problem.files, script.result.output
    verifier, router, planner = _Tracked(calls), _Tracked(calls), _Tracked(calls)
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="round") as pool:
        verifying = _submit(
            pool, AgentCalls(verifier, budget).verify, label, question, plan, script, files
        )
        routing = _submit(
            pool, AgentCalls(router, budget).route, label, question, plan, output, files
        )
        planning = _submit(
            pool, AgentCalls(planner, budget).plan_next, following, question, files, plan, output
        )
    agents = AgentCalls(calls, budget)
    verdict, reply = _needed(verifying) or agents.verify(
        label, question, plan, script, files
    )  # fmt: skip
    if verdict.sufficient:
        return Judged(verdict, reply, unused=(*router.asked, *planner.asked))
    route = _needed(routing) or agents.route(label, question, plan, output, files)
    if route.wrong_step is not None:  # the planner must be told what was dropped
        return Judged(verdict, reply, route, unused=tuple(planner.asked))
    return Judged(verdict, reply, route, _needed(planning))


def _submit(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> Future[T]:
    return pool.submit(contextvars.copy_context().run, fn, *args)


def _needed(future: Future[T]) -> T | None:
    """The result of a call whose reply is needed; None when the ceiling refused it (it is
    asked again, alone: what the others spent is known by then)."""
    try:
        return future.result()
    except OverBudget:
        return None


class _Tracked:
    """`calls`, noting every call answered through it (to mark them unused if discarded)."""

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.asked: list[Asked] = []

    def ask(self, agent: str, label: str, messages: list[Message]) -> str:
        reply = self.calls.ask(agent, label, messages)
        self.asked.append(Asked(agent, label, prompt_hash(messages)))
        return reply

    def execute(self, label: str, code: str, files: Any = None) -> ExecResult:
        return self.calls.execute(label, code, files)

    def image(self, agent: str, output: dict[str, Any]) -> bytes | None:
        return self.calls.image(agent, output)
