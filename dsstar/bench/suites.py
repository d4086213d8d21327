"""The benchmark suites as lists of tasks: DABStep (tasks file + context folder) and
KramaBench (a domain's workload file and input folder)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsstar.bench.score import load_records
from dsstar.errors import UsageError

__all__ = ["BenchTask", "dabstep_tasks", "kramabench_tasks", "select"]

# KramaBench's workload gives no formatting guidelines; these say how each type is read back.
KRAMA_GUIDELINES = {
    "numeric_exact": "Answer with the number only, no units or words.",
    "numeric_approximate": "Answer with the number only, no units or words.",
    "string_exact": "Answer with the exact text only, no quotes or explanation.",
    "string_approximate": "Answer with a short text only, no explanation.",
    "list_exact": 'Answer with a JSON list only, e.g. ["a", "b"] or [1, 2].',
    "list_approximate": 'Answer with a JSON list only, e.g. ["a", "b"] or [1, 2].',
}


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


def dabstep_tasks(tasks: str | Path, data: str | Path, truth: str | Path | None) -> list[BenchTask]:
    """DABStep's tasks (task_id, question, guidelines, level) over its context folder."""
    if not Path(data).expanduser().is_dir():
        raise UsageError(f"--data {data}: no such folder (DABStep's context files)")
    answers = {r["task_id"]: r for r in load_records(truth)} if truth else {}
    found = []
    for record in load_records(tasks):
        level = str(record.get("level") or "unknown").lower()
        known = answers.get(record["task_id"])
        if known is None and record.get("answer") not in (None, ""):
            known = record  # the dev set carries its answers
        found.append(
            BenchTask(
                task_id=record["task_id"],
                question=record["question"],
                data=str(Path(data).expanduser().resolve()),
                guidelines=record.get("guidelines") or "",
                level=level,
                domain="dabstep",
                truth=None if known is None else {"task_id": record["task_id"],
                                                  "answer": known["answer"], "level": level},
            )
        )  # fmt: skip
    return found


def kramabench_tasks(root: str | Path, domain: str) -> list[BenchTask]:
    """KramaBench's `workload/DOMAIN.json` over `data/DOMAIN/input`."""
    root = Path(root).expanduser().resolve()
    workload, data = root / "workload" / f"{domain}.json", root / "data" / domain / "input"
    if not workload.is_file():
        raise UsageError(f"no workload {workload}")
    if not data.is_dir():
        raise UsageError(f"no input folder {data}")
    try:
        records = json.loads(workload.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {workload}: {exc}") from exc
    found = []
    for record in records:
        kind = record["answer_type"]
        truth = {k: record[k] for k in ("answer", "answer_type", "accepted_answers") if k in record}
        found.append(
            BenchTask(
                task_id=record["id"],
                question=record["query"],
                data=str(data),
                guidelines=KRAMA_GUIDELINES.get(kind, ""),
                level="hard" if "-hard-" in record["id"] else "easy",
                domain=domain,
                truth={"task_id": record["id"], "domain": domain, **truth},
            )
        )
    return found


def select(tasks: list[BenchTask], ids: list[str] | None, limit: int | None) -> list[BenchTask]:
    """The tasks named by `ids` (all when None), in file order, at most `limit` of them."""
    if ids:
        wanted = {part.strip() for item in ids for part in item.split(",") if part.strip()}
        unknown = sorted(wanted - {task.task_id for task in tasks})
        if unknown:
            raise UsageError(f"unknown task ids: {', '.join(unknown)}")
        tasks = [task for task in tasks if task.task_id in wanted]
    return tasks[:limit] if limit else tasks
