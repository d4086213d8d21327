"""The model and the sandbox as Prefect tasks: the `Calls` of the core (`dsstar.algorithm.runtime`),
with the tasks' caching, retries and run names. What to ask and when lives in the core."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsstar import progress
from dsstar.algorithm.spec import RunSpec
from dsstar.events import Executing, LLMCall, LLMFailed, LLMReplied
from dsstar.execution.failure import exception_line
from dsstar.execution.sandbox import ExecResult
from dsstar.model.ceiling import meter
from dsstar.model.llm import Message, sees_images
from dsstar.records.files import read_output
from dsstar.storage import Store
from dsstar.text import clean
from tasks._common import result_storage
from tasks.execute import execute
from tasks.llm import ask

__all__ = ["TaskCalls"]


class TaskCalls:
    """`ask` and `execute` as the tasks `llm` and `execute` (cached per run, label and
    request; LLM calls retried on transient errors). Every reply (with its tokens and cost)
    is appended to `replies`, the caller's list when it gives one, and counted by the run's
    meter (a reply read back from Prefect's cache too: what the run has spent includes it,
    see `dsstar.model.ceiling`)."""

    def __init__(
        self,
        spec: RunSpec,
        *,
        inline: bool = False,
        replies: list[dict[str, Any]] | None = None,
    ) -> None:
        self.spec = spec
        self.replies: list[dict[str, Any]] = [] if replies is None else replies
        if inline:  # inside a task that is itself the unit of caching and retry
            self._ask, self._execute = ask.fn, execute.fn
            return
        storage = result_storage(spec.storage)
        self._ask = ask.with_options(
            retries=spec.llm_retries,
            retry_delay_seconds=spec.retry_delays or 0,
            result_storage=storage,
        )
        self._execute = execute.with_options(result_storage=storage)

    def ask(self, agent: str, label: str, messages: list[Message]) -> str:
        label = clean(label)  # it names a task run; a file name in it may not be valid UTF-8
        progress.emit(LLMCall(agent, label))
        try:
            reply = self._ask(
                label=label,
                agent=agent,
                messages=messages,
                config=self.spec.llm[agent],
                run_id=self.spec.run_id,
                storage=self.spec.storage,
                concurrency=self.spec.llm_concurrency,
                rpm=self.spec.llm_rpm,
                slot_wait=self.spec.slot_wait,
                ceiling=self.spec.ceiling,
            )
        except BaseException as exc:  # whoever shows the call in flight learns it ended
            progress.emit(LLMFailed(agent, label, exception_line(exc)))
            raise
        meter(self.spec.run_id).charge(reply)
        self.replies.append(reply)
        progress.emit(LLMReplied.from_reply(reply))
        return reply["text"]

    def execute(self, label: str, code: str, files: Sequence[str] | None = None) -> ExecResult:
        label = clean(label)
        progress.emit(Executing(label))
        return ExecResult.from_dict(
            self._execute(
                label=label,
                code=code,
                run_id=self.spec.run_id,
                data_dir=self.spec.data_dir,
                limits=self.spec.limits,
                sandbox=self.spec.sandbox,
                python=self.spec.script_python,
                work_dir=self.spec.work_dir,
                max_parallel=self.spec.max_parallel,
                slot_wait=self.spec.slot_wait,
                files=None if files is None else list(files),
                storage=self.spec.storage,
            )
        )

    def image(self, agent: str, output: dict[str, Any]) -> bytes | None:
        if not sees_images(self.spec.llm[agent]["model"]):
            return None
        return read_output(Store(self.spec.storage), output)  # no more than its stated size
