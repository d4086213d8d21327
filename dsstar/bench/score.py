"""Scoring a submission offline: answers and truth files in, per-task scores and a summary out.

Answers: JSON lines with `task_id` and `agent_answer` (DABStep's submission format; `answer`
is accepted too). Truth: JSON lines with `task_id` (or `id`) and `answer`, plus `level` for
DABStep and `answer_type` for KramaBench; a KramaBench workload file (`workload/NAME.json`, a
JSON list) is a truth file as it is.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from dsstar.bench import dabstep, kramabench
from dsstar.errors import UsageError

__all__ = ["SUITES", "load_records", "score", "score_files"]

SUITES = ("dabstep", "kramabench")


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """A JSON list (.json) or JSON lines; each record keyed by `task_id` (or `id`)."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        if text.lstrip().startswith("["):
            records = json.loads(text)
        else:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON or JSON lines ({exc})") from exc
    for record in records:
        if not isinstance(record, dict) or not ("task_id" in record or "id" in record):
            raise UsageError(f"{path}: every record needs a task_id")
        record.setdefault("task_id", record.get("id"))
        record["task_id"] = str(record["task_id"])
    return records


def _answer_of(record: dict[str, Any]) -> Any:
    return record.get("agent_answer", record.get("answer"))


def score(
    suite: str,
    answers: list[dict[str, Any]],
    truth: list[dict[str, Any]],
    judge: kramabench.Judge | None = None,
) -> dict[str, Any]:
    """`{"tasks": [...], "summary": {...}}` for every task of `truth`; a task without an
    answer scores 0 (and is marked `missing`)."""
    if suite not in SUITES:
        raise UsageError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    given = {record["task_id"]: _answer_of(record) for record in answers}
    rows = []
    for item in truth:
        task_id = item["task_id"]
        predicted = given.get(task_id)
        row: dict[str, Any] = {"task_id": task_id, "answer": predicted, "truth": item["answer"]}
        if task_id not in given:
            row["missing"] = True
        if suite == "dabstep":
            row["level"] = str(item.get("level") or "unknown").lower()
            text = None if predicted is None else str(predicted)
            row["score"] = float(dabstep.question_scorer(text, str(item["answer"])))
        else:
            row["answer_type"] = item["answer_type"]
            row["domain"] = item.get("domain") or _domain(task_id)
            row["level"] = _level(task_id)
            truths = [item["answer"], *item.get("accepted_answers", [])]
            row |= kramabench.score_task(item["answer_type"], predicted, truths, judge)
        rows.append(row)
    summary = _dabstep_summary(rows) if suite == "dabstep" else _krama_summary(rows)
    return {"tasks": rows, "summary": summary}


def score_files(
    suite: str, answers: str | Path, truth: str | Path, judge: kramabench.Judge | None = None
) -> dict[str, Any]:
    """`score` over an answers file and a truth file."""
    return score(suite, load_records(answers), load_records(truth), judge)


def _domain(task_id: str) -> str:
    for level in ("-easy-", "-hard-"):
        if level in task_id:
            return task_id.split(level)[0]
    return task_id.rsplit("-", 1)[0]


def _level(task_id: str) -> str:
    return "hard" if "-hard-" in task_id else "easy" if "-easy-" in task_id else "unknown"


def _group(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scores = [row["score"] for row in rows]
    return {
        "tasks": len(rows),
        "score": round(100 * sum(scores) / len(scores), 2) if scores else 0.0,
        "answered": sum(not row.get("missing") for row in rows),
    }


def _by(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    groups: dict[str, list] = defaultdict(list)
    for row in rows:
        groups[row[key]].append(row)
    return {name: _group(items) for name, items in sorted(groups.items())}


def _dabstep_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy in percent: easy, hard and all, as DABStep's leaderboard shows it."""
    levels = _by(rows, "level")
    empty = {"tasks": 0, "score": 0.0, "answered": 0}
    return {
        "easy": levels.pop("easy", empty),
        "hard": levels.pop("hard", empty),
        "all": _group(rows),
        **({"other_levels": levels} if levels else {}),
    }


def _krama_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The overall score in percent (mean of task scores, as KramaBench totals them), by
    domain, level and answer type; approximate strings scored by text overlap apart."""
    fallback = [row for row in rows if row.get("judged_by") == "text-overlap"]
    judged = [row for row in rows if row.get("judged_by") != "text-overlap"]
    return {
        "all": _group(rows),
        "by_domain": _by(rows, "domain"),
        "by_level": _by(rows, "level"),
        "by_answer_type": _by(rows, "answer_type"),
        "text_overlap_fallback": {
            "tasks": [row["task_id"] for row in fallback],
            "all_without_them": _group(judged),
        },
    }
