"""One method per agent, as the loop uses them: render the prompt, ask through the runtime,
parse the reply. Retries of unusable replies live here (planner, router); transient errors
are the runtime's to retry."""

from __future__ import annotations

from dataclasses import dataclass

from dsstar.algorithm import agents
from dsstar.algorithm.agents import FileInfo
from dsstar.algorithm.agents.router import Route
from dsstar.algorithm.repair import Fix, run_with_repair
from dsstar.algorithm.runtime import Budget, Calls, Script
from dsstar.algorithm.verdict import Verdict
from dsstar.errors import AgentError
from dsstar.model.llm import Message

__all__ = ["Agents", "Proposal"]


@dataclass(frozen=True)
class Proposal:
    """The planner's answer: a step, or (`unanswerable` set) the conclusion that the files
    cannot answer the question, with its reason."""

    step: str
    unanswerable: str | None = None


class Agents:
    """The agents of one run, over `calls` (the runtime) and within `budget`."""

    def __init__(self, calls: Calls, budget: Budget) -> None:
        self.calls = calls
        self.budget = budget

    def repair(self, label: str, code: str | None, fix: Fix) -> Script:
        """Execute `code`, repairing it with the debugger while it fails."""
        return run_with_repair(self.calls, label, code, fix, self.budget)

    def plan_first(
        self, label: str, question: str, files: list[FileInfo], previous_plan: list[str]
    ) -> Proposal:
        messages = agents.planner.render_initial(
            question=question, files=files, previous_plan=previous_plan
        )
        return self._step(label, messages)

    def plan_next(
        self,
        label: str,
        question: str,
        files: list[FileInfo],
        plan: list[str],
        last_output: str,
        guidance: str = "",
        dropped: list[str] | None = None,
        why: str = "",
    ) -> Proposal:
        """The next step from the last result. After a backtrack, `dropped` are the steps
        the router cut and `why` its reply: the planner sees what went wrong."""
        messages = agents.planner.render_next(
            question=question,
            files=files,
            plan=plan,
            last_output=last_output,
            max_output_chars=self.budget.max_output_chars,
            guidance=guidance,
            dropped=dropped or [],
            why=why,
        )
        return self._step(label, messages)

    def _step(self, label: str, messages: list[Message]) -> Proposal:
        # An empty reply is a failed attempt; the planner gets as many tries as the debugger.
        for n in range(self.budget.max_debug_attempts + 1):
            suffix = f" #{n}" if n else ""
            reply = self.calls.ask("planner", f"planner {label}{suffix}", messages)
            why = agents.planner.unanswerable(reply)
            if why:
                return Proposal("", unanswerable=why)
            step = agents.planner.parse(reply)
            if step:
                return Proposal(step)
        raise AgentError(f"the planner gave no usable step in round {label}")

    def code(self, label: str, messages: list[Message]) -> str | None:
        """The coder's script. A reply without code is asked again once, with a reminder
        (models sometimes answer with an explanation alone); None when it still has none."""
        reply = self.calls.ask("coder", f"coder {label}", messages)
        code = agents.coder.parse(reply)
        if code is None:
            again = agents.coder.render_again(messages, reply)
            code = agents.coder.parse(self.calls.ask("coder", f"coder {label} #1", again))
        return code

    def verify(
        self,
        label: str,
        question: str,
        plan: list[str],
        script: Script,
        files: list[FileInfo] | None = None,
    ) -> tuple[Verdict, str]:
        """The verifier's decision on `plan` as `script` implements it, and its reply. A reply
        that says neither Yes nor No is asked again once, then reads as No."""
        messages = agents.verifier.render(
            question=question,
            plan=plan,
            code=script.code,
            output=script.result.output,
            max_output_chars=self.budget.max_output_chars,
            files=files,
        )
        reply = self.calls.ask("verifier", f"verifier {label}", messages)
        sufficient = agents.verifier.read(reply)
        if sufficient is None:  # neither Yes nor No: asked once more, like the router
            again = agents.verifier.render_again(messages, reply)
            reply = self.calls.ask("verifier", f"verifier {label} #1", again)
            sufficient = agents.verifier.read(reply)
        return Verdict.of(bool(sufficient)), reply

    def route(
        self,
        label: str,
        question: str,
        plan: list[str],
        output: str,
        files: list[FileInfo],
        guidance: str = "",
    ) -> Route:
        """Ask the router; an unclear reply is asked again once, then read as Add Step."""
        messages = agents.router.render(
            question=question,
            plan=plan,
            output=output,
            files=files,
            max_output_chars=self.budget.max_output_chars,
            guidance=guidance,
        )
        route = agents.router.parse(
            self.calls.ask("router", f"router {label}", messages), len(plan)
        )
        if route.clear:
            return route
        again = agents.router.render_again(messages, route.reply, len(plan))
        return agents.router.parse(self.calls.ask("router", f"router {label} #1", again), len(plan))

    def finalize(self, messages: list[Message]) -> str | None:
        return agents.finalyzer.parse(self.calls.ask("finalyzer", "finalyzer", messages))
