"""The DABStep suite: a tasks file over a context folder, each answer matched to the truth by
DABStep's rules (dsstar.bench.dabstep), accuracy by level as its leaderboard shows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsstar.bench import dabstep, registry
from dsstar.bench.score import load_records
from dsstar.bench.suites import BenchTask
from dsstar.errors import UsageError

__all__ = ["dabstep_tasks"]


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


def _tasks(source: registry.TaskSource) -> list[BenchTask]:
    if not source.tasks or not source.data:
        raise UsageError("--suite dabstep needs --tasks and --data")
    return dabstep_tasks(source.tasks, source.data, source.truth)


def _score_task(item: dict[str, Any], record: dict[str, Any] | None, judge: Any) -> dict[str, Any]:
    predicted = None if record is None else record.get("agent_answer", record.get("answer"))
    text = None if predicted is None else str(predicted)
    return {
        "level": str(item.get("level") or "unknown").lower(),
        "score": float(dabstep.question_scorer(text, str(item["answer"]))),
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy in percent: easy, hard and all, as DABStep's leaderboard shows it."""
    levels = registry.by(rows, "level")
    empty = {"tasks": 0, "score": 0.0, "answered": 0}
    return {
        "easy": levels.pop("easy", empty),
        "hard": levels.pop("hard", empty),
        "all": registry.group(rows),
        **({"other_levels": levels} if levels else {}),
    }


registry.register(
    registry.Suite(
        name="dabstep",
        tasks=_tasks,
        score_task=_score_task,
        summarize=_summary,
        read_answers=load_records,
        read_truth=load_records,
    )
)
