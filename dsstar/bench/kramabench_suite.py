"""The KramaBench suite: a domain's workload over its input folder, each answer scored by the
metric of its answer type (dsstar.bench.kramabench), approximate strings judged by the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsstar.bench import kramabench, registry
from dsstar.bench.score import load_records
from dsstar.bench.suites import BenchTask
from dsstar.errors import UsageError

__all__ = ["kramabench_tasks"]

# KramaBench's workload gives no formatting guidelines; these say how each type is read back.
KRAMA_GUIDELINES = {
    "numeric_exact": "Answer with the number only, no units or words.",
    "numeric_approximate": "Answer with the number only, no units or words.",
    "string_exact": "Answer with the exact text only, no quotes or explanation.",
    "string_approximate": "Answer with a short text only, no explanation.",
    "list_exact": 'Answer with a JSON list only, e.g. ["a", "b"] or [1, 2].',
    "list_approximate": 'Answer with a JSON list only, e.g. ["a", "b"] or [1, 2].',
}


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


def _tasks(source: registry.TaskSource) -> list[BenchTask]:
    if not source.root or not source.domain:
        raise UsageError("--suite kramabench needs --root and --domain")
    return kramabench_tasks(source.root, source.domain)


def _domain(task_id: str) -> str:
    for level in ("-easy-", "-hard-"):
        if level in task_id:
            return task_id.split(level)[0]
    return task_id.rsplit("-", 1)[0]


def _level(task_id: str) -> str:
    return "hard" if "-hard-" in task_id else "easy" if "-easy-" in task_id else "unknown"


def _score_task(
    item: dict[str, Any], record: dict[str, Any] | None, judge: kramabench.Judge | None
) -> dict[str, Any]:
    predicted = None if record is None else record.get("agent_answer", record.get("answer"))
    task_id = item["task_id"]
    row = {"answer_type": item["answer_type"], "domain": item.get("domain") or _domain(task_id),
           "level": _level(task_id)}  # fmt: skip
    truths = [item["answer"], *item.get("accepted_answers", [])]
    return row | kramabench.score_task(item["answer_type"], predicted, truths, judge)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The overall score in percent (mean of task scores, as KramaBench totals them), by
    domain, level and answer type; approximate strings scored by text overlap apart."""
    fallback = [row for row in rows if row.get("judged_by") == "text-overlap"]
    judged = [row for row in rows if row.get("judged_by") != "text-overlap"]
    return {
        "all": registry.group(rows),
        "by_domain": registry.by(rows, "domain"),
        "by_level": registry.by(rows, "level"),
        "by_answer_type": registry.by(rows, "answer_type"),
        "text_overlap_fallback": {
            "tasks": [row["task_id"] for row in fallback],
            "all_without_them": registry.group(judged),
        },
    }


registry.register(
    registry.Suite(
        name="kramabench",
        tasks=_tasks,
        score_task=_score_task,
        summarize=_summary,
        read_answers=load_records,
        read_truth=load_records,
        uses_judge=True,
    )
)
