"""Scoring a submission offline: answers and truth in, per-task scores and a summary out, by
the rules of the suite (dsstar.bench.registry) that names them.

Answers are records with `task_id` and `agent_answer` (DABStep's submission format; `answer`
is accepted too), plus whatever the suite's scorer reads (DA-Code: the folder of delivered
files). Truth records have `task_id` and what the suite scores against.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsstar.bench import registry
from dsstar.bench.kramabench import Judge
from dsstar.errors import UsageError

__all__ = ["load_records", "score", "score_files"]


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
    judge: Judge | None = None,
) -> dict[str, Any]:
    """`{"tasks": [...], "summary": {...}}` for every task of `truth`, by the suite's rules; a
    task without an answer scores 0 (and is marked `missing`)."""
    rules = registry.get(suite)
    given = {record["task_id"]: record for record in answers}
    rows = []
    for item in truth:
        task_id = item["task_id"]
        record = given.get(task_id)
        predicted = None if record is None else _answer_of(record)
        row: dict[str, Any] = {"task_id": task_id, "answer": predicted,
                               "truth": item.get("answer")}  # fmt: skip
        if record is None:
            row["missing"] = True
        row |= rules.score_task(item, record, judge)
        rows.append(row)
    return {"tasks": rows, "summary": rules.summarize(rows)}


def score_files(
    suite: str, answers: str | Path, truth: str | Path, judge: Judge | None = None
) -> dict[str, Any]:
    """`score` over answers and truth as the suite keeps them on disk (files or folders)."""
    rules = registry.get(suite)
    return score(suite, rules.read_answers(Path(answers).expanduser()),
                 rules.read_truth(Path(truth).expanduser()), judge)  # fmt: skip
