"""The DABStep-Research suite: open questions over DABStep's context files, each answered with a
report (the ds-star-report flow), each report graded by a judge model against its task's
checklist for content and for format, from 1 to 5, as that benchmark grades
(`dsstar.bench.research_judge`).

A task is a record `task_id, category, question, guidelines, checklist` (a JSON list or JSON
lines); its category is one of the benchmark's five kinds: data_preparation, analysis,
insight, report (a report with a given outline, in `guidelines`) and open_research. A task's
score is the mean of its two grades over 5 (both 5: 1.0); the summary gives, overall and per
category, the score in percent, the mean content and format grades, and the tasks' cost and
seconds. benchmarks/dabstep_research/tasks.jsonl is a slice of such tasks of our own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsstar.bench import registry
from dsstar.bench.score import load_records
from dsstar.bench.suites import BenchTask
from dsstar.errors import UsageError

__all__ = ["CATEGORIES", "research_tasks"]

CATEGORIES = ("data_preparation", "analysis", "insight", "report", "open_research")


def research_tasks(tasks: str | Path, data: str | Path) -> list[BenchTask]:
    """The tasks of `tasks` over the context folder `data` (see the module)."""
    if not Path(data).expanduser().is_dir():
        raise UsageError(f"--data {data}: no such folder (DABStep's context files)")
    found = []
    for record in load_records(tasks):
        category = str(record.get("category") or "").lower()
        checklist = record.get("checklist")
        if category not in CATEGORIES:
            raise UsageError(f"task {record['task_id']}: category {category!r} is not one of"
                             f" {', '.join(CATEGORIES)}")  # fmt: skip
        if not isinstance(checklist, list) or not checklist:
            raise UsageError(f"task {record['task_id']}: its checklist is not a list of items")
        truth = {"task_id": record["task_id"], "category": category,
                 "question": record["question"], "guidelines": record.get("guidelines") or "",
                 "checklist": [str(item) for item in checklist]}  # fmt: skip
        found.append(
            BenchTask(
                task_id=record["task_id"],
                question=record["question"],
                data=str(Path(data).expanduser().resolve()),
                guidelines=truth["guidelines"],
                level=category,
                domain="dabstep-research",
                truth=truth,
            )  # fmt: skip
        )
    return found


def _tasks(source: registry.TaskSource) -> list[BenchTask]:
    if not source.tasks or not source.data:
        raise UsageError("--suite dabstep-research needs --tasks and --data")
    return research_tasks(source.tasks, source.data)


def _score_task(item: dict[str, Any], record: dict[str, Any] | None, judge: Any) -> dict[str, Any]:
    """The task's grades, judged against its checklist; 0 without a report or a grade."""
    report = None if record is None else record.get("agent_answer", record.get("answer"))
    row: dict[str, Any] = {"category": item.get("category") or "unknown", "content": None,
                           "format": None, "score": 0.0}  # fmt: skip
    for name in ("cost_usd", "seconds"):
        row[name] = (record or {}).get(name) or 0.0
    if not report:
        return row | {"why": "no report"}
    if judge is None:
        return row | {"why": "no judge: a model (--model or DSSTAR_MODEL) grades the reports"}
    grades = judge.grade(item["question"], item.get("guidelines") or "",
                         list(item.get("checklist") or []), str(report))  # fmt: skip
    if grades is None:
        return row | {"why": "the judge gave no grade (its reply held none, or it failed)"}
    score = (grades["content"] + grades["format"]) / 10
    return row | grades | {"score": score}


def _graded(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """`registry.group` with the mean grades, and the tasks' cost and seconds together."""

    def mean(name: str) -> float | None:
        grades = [row[name] for row in rows if row.get(name) is not None]
        return round(sum(grades) / len(grades), 2) if grades else None

    return registry.group(rows) | {
        "content": mean("content"),
        "format": mean("format"),
        "cost_usd": round(sum(row.get("cost_usd") or 0.0 for row in rows), 6),
        "seconds": round(sum(row.get("seconds") or 0.0 for row in rows), 1),
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Overall and per category: score in percent, mean grades, cost and seconds."""
    by_category: dict[str, list] = {}
    for row in rows:
        by_category.setdefault(row["category"], []).append(row)
    return {
        "all": _graded(rows),
        "by_category": {name: _graded(items) for name, items in sorted(by_category.items())},
    }


def _research_judge(settings: Any, cache_file: Path | None) -> Any:
    from dsstar.bench.research_judge import ResearchJudge

    return ResearchJudge(settings, cache_file=cache_file)


registry.register(
    registry.Suite(
        name="dabstep-research",
        tasks=_tasks,
        score_task=_score_task,
        summarize=_summary,
        read_answers=load_records,
        read_truth=load_records,
        uses_judge=True,
        judge=_research_judge,
        reports=True,
    )
)
