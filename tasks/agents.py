"""The model and the sandbox as Prefect tasks: the `Calls` of the core (`dsstar.runtime`),
with the tasks' caching, retries and run names. What to ask and when lives in the core."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsstar import agents, progress
from dsstar.llm import Message, config_for
from dsstar.runtime import Budget
from dsstar.sandbox import ExecResult
from dsstar.settings import AGENTS, Settings
from dsstar.text import clean

from ._common import result_storage

__all__ = ["RunSpec", "TaskCalls"]


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
                "figures": settings.exec_figures,
                "figures_mb": settings.exec_figures_mb,
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

    @property
    def budget(self) -> Budget:
        """The repair loop's bounds (file analysis has no rounds)."""
        return Budget(
            max_debug_attempts=self.max_debug_attempts,
            summarize_over_chars=self.summarize_over_chars,
            max_output_chars=self.max_output_chars,
        )


class TaskCalls:
    """`ask` and `execute` as the tasks `llm` and `execute` (cached per run, label and
    request; LLM calls retried on transient errors). Every reply is appended to `calls`."""

    def __init__(self, spec: RunSpec, *, inline: bool = False) -> None:
        # The tasks are imported here: RunSpec alone serves commands that import no Prefect.
        from .execute import execute
        from .llm import ask

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
            storage=self.spec.storage,
        )
        self.calls.append(reply)
        progress.emit("llm_done", **reply)
        return reply["text"]

    def execute(self, label: str, code: str) -> ExecResult:
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
