"""One method per agent call, as the algorithm makes them: render the prompt, ask through the
runtime, parse the reply. Every prompt of the loop is rendered here, beside its call. Retries
of unusable replies live here (planner, coder, verifier, router); transient errors are the
runtime's to retry."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dsstar.algorithm import agents
from dsstar.algorithm.agents import FileInfo
from dsstar.algorithm.agents.router import Route
from dsstar.algorithm.repair import run_with_repair
from dsstar.algorithm.runtime import Budget, Calls, Script
from dsstar.algorithm.verdict import Verdict
from dsstar.errors import AgentError
from dsstar.execution.deliverables import outputs_text
from dsstar.execution.sandbox.keep import is_figure
from dsstar.model.llm import Message

__all__ = ["AgentCalls", "Problem", "Proposal"]

# The reader is shown at most this many charts of one script, each at most this large (a
# chart is a few hundred KB; a provider takes images up to about 5 MB).
MOST_CHARTS_READ = 4
CHART_READ_BYTES = 4 << 20


@dataclass(frozen=True)
class Problem:
    """The question, its formatting guidelines, the files the agents see and the libraries
    the scripts may import."""

    question: str
    guidelines: str = ""
    files: list[FileInfo] = field(default_factory=list)
    libraries: Sequence[str] = ()  # installed where the scripts run, named to the coder


@dataclass(frozen=True)
class Proposal:
    """The planner's answer: a step, or (`unanswerable` set) the conclusion that the files
    cannot answer the question, with its reason."""

    step: str
    unanswerable: str | None = None


class AgentCalls:
    """The agent calls of one run, over `calls` (the runtime) and within `budget`."""

    def __init__(self, calls: Calls, budget: Budget) -> None:
        self.calls = calls
        self.budget = budget

    def run_solution(
        self,
        label: str,
        code: str | None,
        problem: Problem,
        plan: Sequence[str] = (),
        base_code: str = "",
        final: bool = False,
        before: Script | None = None,
    ) -> Script:
        """Execute `code`, repaired by the solution debugger while it fails. The debugger sees
        the script, its error, the descriptions and the plan it implements (with the base
        code, for when the coder gave no script at all); the final script's debugger also
        sees the answer's guidelines. Its charts are then read (`read_charts`; a chart the
        script `before` saved, to the byte, keeps that script's reading)."""

        def fix(code: str, error: str) -> list[Message]:
            return agents.debugger.render_solution(
                question=problem.question,
                code=code,
                error=error,
                files=problem.files,
                plan=list(plan),
                base_code=base_code,
                guidelines=problem.guidelines if final else "",
                libraries=problem.libraries,
            )

        script = run_with_repair(self.calls, label, code, fix, self.budget)
        return self.read_charts(label, problem.question, script, before)

    def read_charts(
        self, label: str, question: str, script: Script, before: Script | None = None
    ) -> Script:
        """`script` with the reader's description ('reading') on each PNG or JPEG chart it
        saved (the first MOST_CHARTS_READ, up to CHART_READ_BYTES each), when the setting
        `read_charts` is on and the reader's model can see images. The image's bytes are the
        deliverable itself, so what the reader says of them is dsstar's own reading, where
        the figure hook's description is the script's word. A chart of the same name and
        bytes as one `before` saved keeps its reading: the same image is not paid for twice
        (rounds that redraw an unchanged chart, a final script that saves it again)."""
        if not (self.budget.read_charts and script.result.ok and script.result.figures):
            return script
        read = {_identity(item): item["reading"] for item in before.result.outputs
                if item.get("reading")} if before else {}  # fmt: skip
        outputs: list[dict[str, Any]] = []
        shown = 0
        for item in script.result.outputs:
            if not _readable(item):  # a table, a model, an empty or large file: not hashed
                outputs.append(item)
                continue
            identity = _identity(item)
            if identity in read:
                item = {**item, "reading": read[identity]}
            elif shown < MOST_CHARTS_READ:
                data = self.calls.image("reader", item)
                if data is None:  # the reader's model sees no images: nothing is read
                    return script
                kind = agents.reader.image_type(data)
                if kind is not None:
                    shown += 1
                    messages = agents.reader.render(
                        name=item["name"], question=question, data=data, kind=kind
                    )
                    reply = self.calls.ask("reader", f"reader {label} {item['name']}", messages)
                    reading = agents.reader.parse(reply)
                    item = {**item, "reading": reading} if reading else item
            outputs.append(item)
        return replace(script, result=replace(script.result, outputs=outputs))

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

    def code_first(self, label: str, problem: Problem, step: str) -> str | None:
        """The coder's script for a plan of one step, from scratch."""
        messages = agents.coder.render_initial(
            question=problem.question, files=problem.files, step=step, libraries=problem.libraries
        )
        return self._code(label, messages)

    def code_next(
        self, label: str, problem: Problem, plan: list[str], base_code: str
    ) -> str | None:
        """The coder's script for the whole `plan`, rewritten from `base_code` (the script of
        the plan without its last step)."""
        messages = agents.coder.render_next(
            question=problem.question,
            files=problem.files,
            plan=plan,
            base_code=base_code,
            libraries=problem.libraries,
        )
        return self._code(label, messages)

    def _code(self, label: str, messages: list[Message]) -> str | None:
        # A reply without code is asked again once, with a reminder (models sometimes answer
        # with an explanation alone); None when it still has none.
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
            outputs=outputs_text(script.result.outputs),
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

    def finalize(
        self, problem: Problem, plan: list[str], script: Script, status: str, reason: str
    ) -> str | None:
        """The finalyzer's script, which states the answer in the required format, told how
        the rounds ended (`status`, and the planner's `reason` when the files cannot
        answer); None when its reply holds no code."""
        messages = agents.finalyzer.render(
            question=problem.question,
            guidelines=problem.guidelines,
            files=problem.files,
            plan=plan,
            code=script.code,
            output=script.result.output if script.code else "",
            max_output_chars=self.budget.max_output_chars,
            status=status,
            reason=reason,
            asked=agents.finalyzer.asked_files(problem.question, problem.guidelines),
        )
        return agents.finalyzer.parse(self.calls.ask("finalyzer", "finalyzer", messages))


def _readable(item: dict[str, Any]) -> bool:
    return is_figure(item["name"]) and 0 < item["bytes"] <= CHART_READ_BYTES


def _identity(item: dict[str, Any]) -> tuple[str, str]:
    """A file by its name and content: the hash storage gave it, else that of its bytes."""
    digest = item.get("sha256") or hashlib.sha256(item.get("data", "").encode()).hexdigest()
    return item["name"], digest
