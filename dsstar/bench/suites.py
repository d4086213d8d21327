"""A benchmark task as the flow runs it, and picking tasks by id and count. Each suite's module
(dabstep_suite, kramabench_suite, dacode_suite) reads its own tasks into these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsstar.errors import UsageError

__all__ = ["BenchTask", "select"]


@dataclass(frozen=True)
class BenchTask:
    """One benchmark question: what dsstar is asked, and what it is scored against."""

    task_id: str
    question: str
    data: str
    guidelines: str = ""
    level: str = "unknown"
    domain: str = ""
    truth: dict[str, Any] | None = field(default=None)  # a truth record for score(), if known

    def params(self) -> dict[str, str]:
        """The ds-star flow's question parameters."""
        return {"question": self.question, "data": self.data, "guidelines": self.guidelines}


def select(tasks: list[BenchTask], ids: list[str] | None, limit: int | None) -> list[BenchTask]:
    """The tasks named by `ids` (all when None), in file order, at most `limit` of them."""
    if ids:
        wanted = {part.strip() for item in ids for part in item.split(",") if part.strip()}
        unknown = sorted(wanted - {task.task_id for task in tasks})
        if unknown:
            raise UsageError(f"unknown task ids: {', '.join(unknown)}")
        tasks = [task for task in tasks if task.task_id in wanted]
    return tasks[:limit] if limit else tasks
