"""The suites a benchmark run or a score knows, each one module that registers itself here.

A suite says where its tasks come from (`tasks`, from the command line's options), how one
task is scored (`score_task`) and summed up (`summarize`), how submissions and truth are read
from disk (`read_answers`, `read_truth`), and what a finished run hands to its scorer
(`collect`). The CLI, the scoring and the benchmark flow look a suite up by name and ask it;
none of them names a suite.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsstar.errors import UsageError

__all__ = ["Suite", "TaskSource", "by", "get", "group", "names", "register", "why_zero"]


@dataclass(frozen=True)
class TaskSource:
    """Where a suite's tasks are, as the command line gave it (each suite reads its own)."""

    tasks: Path | None = None
    data: Path | None = None
    truth: Path | None = None
    root: Path | None = None
    domain: str | None = None


def _no_collect(task: Any, record: dict[str, Any], store: Any, out: Path) -> dict[str, Any]:
    return {}


def _llm_judge(settings: Any, cache_file: Path | None) -> Any:
    from dsstar.bench.judge import LLMJudge

    return LLMJudge(settings, cache_file=cache_file)


@dataclass(frozen=True)
class Suite:
    """One benchmark: its tasks, its scorer and its summary."""

    name: str
    tasks: Callable[[TaskSource], list]  # -> list[BenchTask]
    # (truth record, answer record or None, judge) -> the row's fields, `score` (0..1) among them
    score_task: Callable[[dict[str, Any], dict[str, Any] | None, Any], dict[str, Any]]
    summarize: Callable[[list[dict[str, Any]]], dict[str, Any]]
    read_answers: Callable[[Path], list[dict[str, Any]]]
    read_truth: Callable[[Path], list[dict[str, Any]]]
    uses_judge: bool = False  # answers judged by the configured model
    # (settings, the file its grades are kept in, or None) -> the judge `score_task` is given
    judge: Callable[[Any, Path | None], Any] = field(default=_llm_judge)
    reports: bool = False  # each task answered with a report (the ds-star-report flow)
    # (task, its run.json, the run store, the benchmark's output folder) -> fields added to the
    # task's answer record (e.g. the folder the run's deliverables were copied to)
    collect: Callable[[Any, dict[str, Any], Any, Path], dict[str, Any]] = field(default=_no_collect)


_SUITES: dict[str, Suite] = {}


def register(suite: Suite) -> Suite:
    _SUITES[suite.name] = suite
    return suite


def names() -> tuple[str, ...]:
    return tuple(_SUITES)


def get(name: str) -> Suite:
    try:
        return _SUITES[name]
    except KeyError:
        raise UsageError(f"unknown suite {name!r}; known: {', '.join(_SUITES)}") from None


def group(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Tasks, the mean score in percent, and how many had an answer."""
    scores = [row["score"] for row in rows]
    return {
        "tasks": len(rows),
        "score": round(100 * sum(scores) / len(scores), 2) if scores else 0.0,
        "answered": sum(not row.get("missing") for row in rows),
    }


def by(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """`group` of the rows sharing each value of `key`, by value."""
    groups: dict[str, list] = defaultdict(list)
    for row in rows:
        groups[row[key]].append(row)
    return {name: group(items) for name, items in sorted(groups.items())}


def why_zero(row: dict[str, Any]) -> str:
    """Why a scored row has 0: the suite's own reason, else what was answered and expected."""
    if row.get("why"):
        return str(row["why"])
    if row.get("missing"):
        return "no answer for this task"
    if row.get("error"):
        return str(row["error"])
    if row.get("answer") in (None, ""):
        return "no answer"
    return f"the answer {row.get('answer')!r} does not match the truth {row.get('truth')!r}"
