"""Agent calls as the flow uses them: render the prompt (core), ask the model (a task), parse
the reply (core). Also the repair loop shared by file analysis and solution scripts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsstar import agents, progress
from dsstar.agents import FileInfo
from dsstar.errors import AgentError
from dsstar.llm import Message, config_for
from dsstar.sandbox import ExecResult
from dsstar.settings import AGENTS, Settings
from dsstar.text import clean

from ._common import result_storage
from .execute import execute
from .llm import ask

__all__ = ["AgentCalls", "RunSpec", "Script"]


@dataclass(frozen=True)
class RunSpec:
    """What every agent call and execution of a run needs. JSON-safe, without secrets."""

    run_id: str
    storage: str
    data_dir: str
    llm: dict[str, dict[str, Any]]  # agent -> LLMConfig fields
    limits: dict[str, Any]
    sandbox: str
    work_dir: str | None
    max_debug_attempts: int
    summarize_over_chars: int
    llm_retries: int
    llm_retry_delay: float
    max_output_chars: int = agents.PROMPT_OUTPUT_CHARS
    max_parallel: int | None = None  # None: DSSTAR_MAX_PARALLEL where the task runs
    llm_concurrency: int | None = None  # None: DSSTAR_LLM_CONCURRENCY where the task runs

    @classmethod
    def from_settings(
        cls, settings: Settings, run_id: str, storage: str, data_dir: Path
    ) -> RunSpec:
        return cls(
            run_id=run_id,
            storage=storage,
            data_dir=str(data_dir),
            llm={agent: vars(config_for(settings, agent)) for agent in AGENTS},
            limits={
                "timeout_s": settings.exec_timeout,
                "memory_mb": settings.exec_memory_mb,
                "output_bytes": settings.exec_output_bytes,
                "processes": settings.exec_processes,
                "disk_mb": settings.exec_disk_mb,
                "cpu_s": settings.exec_cpu_seconds,
                "warm": settings.exec_pool,
            },
            sandbox=settings.sandbox,
            work_dir=str(settings.work_dir) if settings.work_dir else None,
            max_debug_attempts=settings.max_debug_attempts,
            summarize_over_chars=settings.summarize_over_chars,
            llm_retries=settings.llm_retries,
            llm_retry_delay=settings.llm_retry_delay,
            max_output_chars=settings.max_output_chars,
            max_parallel=settings.max_parallel,
            llm_concurrency=settings.llm_concurrency,
        )


@dataclass
class Script:
    """A script after the repair loop: the last version tried and what running it gave."""

    code: str
    result: ExecResult
    attempts: list[dict[str, Any]] = field(default_factory=list)


_NO_CODE = ExecResult(
    ok=False,
    exit_code=None,
    output="[dsstar] The reply contained no ```python code block, so nothing was run.",
    timed_out=False,
    duration_s=0.0,
    truncated=False,
    sandbox="none",
)


class AgentCalls:
    """The agents of one run. Every model reply it receives is appended to `calls`."""

    def __init__(self, spec: RunSpec, *, inline: bool = False) -> None:
        self.spec = spec
        self.calls: list[dict[str, Any]] = []
        if inline:  # inside a task that is itself the unit of caching and retry
            self._ask, self._execute = ask.fn, execute.fn
            return
        delays = [spec.llm_retry_delay * 2**i for i in range(spec.llm_retries)]
        storage = result_storage(spec.storage)
        self._ask = ask.with_options(
            retries=spec.llm_retries, retry_delay_seconds=delays or 0, result_storage=storage
        )
        self._execute = execute.with_options(result_storage=storage)

    # -- the model and the sandbox ---------------------------------------------------------

    def ask(self, agent: str, label: str, messages: list[Message]) -> str:
        label = clean(label)  # it names a task run; a file name in it may not be valid UTF-8
        progress.emit("llm", agent=agent, label=label)
        reply = self._ask(
            label=label,
            agent=agent,
            messages=messages,
            config=self.spec.llm[agent],
            run_id=self.spec.run_id,
            concurrency=self.spec.llm_concurrency,
        )
        self.calls.append(reply)
        progress.emit("llm_done", **reply)
        return reply["text"]

    def execute(self, label: str, code: str | None) -> ExecResult:
        if code is None:
            return _NO_CODE
        label = clean(label)
        progress.emit("execute", label=label)
        return ExecResult.from_dict(
            self._execute(
                label=label,
                code=code,
                run_id=self.spec.run_id,
                data_dir=self.spec.data_dir,
                limits=self.spec.limits,
                sandbox=self.spec.sandbox,
                work_dir=self.spec.work_dir,
                max_parallel=self.spec.max_parallel,
            )
        )

    def run_with_repair(
        self, label: str, code: str | None, fix: Callable[[str, str], list[Message]]
    ) -> Script:
        """Execute `code`; while it fails, summarize the error if long and ask the debugger
        (with the messages `fix(code, error)` builds) for a repaired script, at most
        `max_debug_attempts` times."""
        result = self.execute(f"execute {label}", code)
        attempts = [_attempt(code, result)]
        for n in range(1, self.spec.max_debug_attempts + 1):
            if result.ok:
                break
            error = self.summarize(f"{label} #{n}", result.output)
            fixed = agents.debugger.parse(
                self.ask("debugger", f"debugger {label} #{n}", fix(code or "", error))
            )
            code = fixed or code
            result = self.execute(f"execute {label} #{n}", fixed)
            attempts.append(_attempt(fixed, result))
        return Script(code=code or "", result=result, attempts=attempts)

    # -- one method per agent --------------------------------------------------------------

    def summarize(self, label: str, error: str) -> str:
        if len(error) <= self.spec.summarize_over_chars:
            return error
        summary = agents.summarizer.parse(
            self.ask("summarizer", f"summarizer {label}", agents.summarizer.render(error=error))
        )
        return summary or agents.clip(error, self.spec.summarize_over_chars)

    def plan_first(
        self, label: str, question: str, files: list[FileInfo], previous_plan: list[str]
    ) -> str:
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
    ) -> str:
        messages = agents.planner.render_next(
            question=question,
            files=files,
            plan=plan,
            last_output=last_output,
            max_output_chars=self.spec.max_output_chars,
            guidance=guidance,
        )
        return self._step(label, messages)

    def _step(self, label: str, messages: list[Message]) -> str:
        # An empty reply is a failed attempt; the planner gets as many tries as the debugger.
        for n in range(self.spec.max_debug_attempts + 1):
            suffix = f" #{n}" if n else ""
            step = agents.planner.parse(self.ask("planner", f"planner {label}{suffix}", messages))
            if step:
                return step
        raise AgentError(f"the planner gave no usable step in round {label}")

    def code(self, label: str, messages: list[Message]) -> str | None:
        return agents.coder.parse(self.ask("coder", f"coder {label}", messages))

    def verify(
        self, label: str, question: str, plan: list[str], script: Script
    ) -> tuple[bool, str]:
        messages = agents.verifier.render(
            question=question,
            plan=plan,
            code=script.code,
            output=script.result.output,
            max_output_chars=self.spec.max_output_chars,
        )
        reply = self.ask("verifier", f"verifier {label}", messages)
        return agents.verifier.parse(reply), reply

    def route(
        self,
        label: str,
        question: str,
        plan: list[str],
        output: str,
        files: list[FileInfo],
        guidance: str = "",
    ) -> agents.router.Route:
        """Ask the router; an unclear reply is asked again once, then read as Add Step."""
        messages = agents.router.render(
            question=question,
            plan=plan,
            output=output,
            files=files,
            max_output_chars=self.spec.max_output_chars,
            guidance=guidance,
        )
        route = agents.router.parse(self.ask("router", f"router {label}", messages), len(plan))
        if route.clear:
            return route
        again = agents.router.render_again(messages, route.reply, len(plan))
        return agents.router.parse(self.ask("router", f"router {label} #1", again), len(plan))

    def finalize(self, messages: list[Message]) -> str | None:
        return agents.finalyzer.parse(self.ask("finalyzer", "finalyzer", messages))


def _attempt(code: str | None, result: ExecResult) -> dict[str, Any]:
    return {"code": code, "ok": result.ok, "output": result.output}
