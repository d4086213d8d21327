"""What a benchmark run leaves behind: submission.jsonl, scores.json and report.md.

`outcomes` are one dict per task, as flows/bench.py gathers them: task_id, run_id, status,
answer, error, rounds, llm_calls, input_tokens, output_tokens, cost_usd, seconds, plan,
solution and `agents` (agent -> calls, input_tokens, output_tokens, cost_usd).

report.md is markdown (the Prefect UI shows it as the benchmark's report card): answers, errors,
task ids and category names are shown as text (`md_text`, `md_code`), never as markdown.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from dsstar.bench.registry import why_zero
from dsstar.text import fenced, md_code, md_text

__all__ = [
    "agent_totals",
    "group_rows",
    "reasoning_trace",
    "table_rows",
    "usage_of",
    "write_outputs",
]


def reasoning_trace(plan: list[str], solution: str | None) -> str:
    """The plan the verifier accepted, then the script that printed the answer."""
    steps = "\n".join(f"{n}. {step}" for n, step in enumerate(plan or [], 1))
    return f"Plan:\n{steps}\n\nSolution:\n{solution or ''}".strip()


def agent_totals(outcomes: list[dict[str, Any]], extra: list[dict] = ()) -> dict[str, Any]:
    """Calls, tokens and cost per agent over all tasks (plus `extra` calls, e.g. the shared
    analysis), with the mean input tokens per call."""
    totals: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    )
    for outcome in outcomes:
        for agent, usage in (outcome.get("agents") or {}).items():
            for key in ("calls", "input_tokens", "output_tokens", "cost_usd"):
                totals[agent][key] += usage.get(key) or 0
    for call in extra:
        row = totals[call["agent"]]
        row["calls"] += 1
        row["input_tokens"] += call.get("input_tokens") or 0
        row["output_tokens"] += call.get("output_tokens") or 0
        row["cost_usd"] += call.get("cost_usd") or 0.0
    for row in totals.values():
        row["input_tokens_per_call"] = (
            round(row["input_tokens"] / row["calls"]) if row["calls"] else 0
        )
        row["cost_usd"] = round(row["cost_usd"], 6)
    return dict(sorted(totals.items()))


def usage_of(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Calls, tokens and cost of a list of calls (the shared file analysis')."""
    return {
        "calls": len(calls),
        "input_tokens": sum(c.get("input_tokens") or 0 for c in calls),
        "output_tokens": sum(c.get("output_tokens") or 0 for c in calls),
        "cost_usd": round(sum(c.get("cost_usd") or 0.0 for c in calls), 6),
    }


def table_rows(outcomes: list[dict[str, Any]], scores: dict[str, Any] | None) -> list[dict]:
    """One row per task for the Prefect table artifact and report.md."""
    by_task = {row["task_id"]: row for row in (scores or {}).get("tasks", [])}
    rows = []
    for o in outcomes:
        score = by_task.get(o["task_id"], {}).get("score")
        rows.append(
            {
                "task_id": o["task_id"],
                "status": o["status"],
                "score": None if score is None else round(score, 4),
                "answer": (o.get("answer") or "")[:80],
                "rounds": o.get("rounds") or 0,
                "llm_calls": o.get("llm_calls") or 0,
                "input_tokens": o.get("input_tokens") or 0,
                "output_tokens": o.get("output_tokens") or 0,
                "cost_usd": o.get("cost_usd"),
                "seconds": round(o.get("seconds") or 0.0, 1),
                "run_id": o["run_id"],
                "failure": (o.get("error") or "")[:200] if o["status"] == "failed" else "",
                "why_0": why_zero(by_task[o["task_id"]])[:200] if score == 0 else "",
            }
        )
    return rows


def _markdown_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(none)\n"
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        cells = [_cell(row[k]) for k in keys]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    """A cell of a markdown table: a number as it is, text escaped on one line (`|` too)."""
    if value is None:
        return ""
    return md_text(value, line=True) if isinstance(value, str) else str(value)


GROUPED_BY = {"category": "Per category", "task": "Per task group", "domain": "Per domain",
              "level": "Per level (difficulty)", "answer_type": "Per answer type"}  # fmt: skip


def group_rows(outcomes: list[dict[str, Any]], scores: dict[str, Any] | None) -> dict[str, list]:
    """For each field the scored rows carry (category, level...), one row per value: tasks,
    score in percent (and the mean grades of graded reports), LLM calls, tokens, cost and
    seconds of those tasks' runs."""
    by_task = {o["task_id"]: o for o in outcomes}
    rows = (scores or {}).get("tasks", [])
    tables: dict[str, list] = {}
    for key, title in GROUPED_BY.items():
        values = sorted({str(row[key]) for row in rows if key in row})
        if not values:
            continue
        table = []
        for value in values:
            chosen = [row for row in rows if str(row.get(key)) == value]
            runs = [by_task.get(row["task_id"], {}) for row in chosen]
            table.append({
                key: value, "tasks": len(chosen),
                "score": round(100 * sum(r["score"] for r in chosen) / len(chosen), 2),
                **_mean_grades(chosen),
                **{name: sum(run.get(name) or 0 for run in runs)
                   for name in ("llm_calls", "input_tokens", "output_tokens")},
                "cost_usd": round(sum(run.get("cost_usd") or 0.0 for run in runs), 6),
                "seconds": round(sum(run.get("seconds") or 0.0 for run in runs), 1),
            })  # fmt: skip
        tables[title] = table
    return tables


def _mean_grades(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean content and format grades of graded rows (a report benchmark's), else none."""
    means = {}
    for name in ("content", "format"):
        grades = [row[name] for row in rows if row.get(name) is not None]
        if any(name in row for row in rows):
            means[name] = round(sum(grades) / len(grades), 2) if grades else None
    return means


def render_report(
    title: str,
    outcomes: list[dict[str, Any]],
    scores: dict[str, Any] | None,
    agents: dict[str, Any],
    shared: dict[str, Any] | None = None,
) -> str:
    """report.md: the summary, per-agent usage (the shared file analysis included, and on
    its own line), every task, and the failures with reasons."""
    rows = table_rows(outcomes, scores)
    shared = shared or usage_of([])
    cost = sum(o.get("cost_usd") or 0.0 for o in outcomes) + shared["cost_usd"]
    calls = sum(o.get("llm_calls") or 0 for o in outcomes) + shared["calls"]
    failed = [o for o in outcomes if o["status"] == "failed"]
    parts = [
        f"# {md_text(title, line=True)}\n",
        f"Tasks: {len(outcomes)} · answered: {len(outcomes) - len(failed)} · failed: "
        f"{len(failed)} · LLM calls: {calls} (shared file analysis: {shared['calls']}) · "
        f"cost: ${cost:.4f} · wall time (sum of tasks): "
        f"{sum(o.get('seconds') or 0 for o in outcomes):.0f} s\n",
        "## Accuracy\n",
        fenced(json.dumps((scores or {}).get("summary", "no truth given"), indent=2), "json")
        + "\n",
        *[
            part
            for title, table in group_rows(outcomes, scores).items()
            for part in (f"## {title}\n", _markdown_table(table))
        ],  # fmt: skip
        "## Per agent (input tokens per call is the mean prompt size)\n",
        "Every call the model server received: the tasks' runs, the shared file analysis and "
        "the judge's.\n",
        _markdown_table([{"agent": name, **usage} for name, usage in agents.items()]),
        f"Shared file analysis (done once for all tasks, counted above): {shared['calls']} "
        f"calls · {shared['input_tokens']} input tokens · {shared['output_tokens']} output "
        f"tokens · ${shared['cost_usd']:.4f}\n",
        "## Per task\n",
        _markdown_table(rows),
        "## Failures\n",
        "".join(
            f"- {md_code(o['task_id'])} (run {md_code(o['run_id'])}):"
            f" {md_text(o.get('error'), line=True)}\n"
            for o in failed
        )
        or "(none)\n",
    ]
    return "\n".join(parts)


def write_outputs(
    out: Path,
    title: str,
    outcomes: list[dict[str, Any]],
    scores: dict[str, Any] | None,
    agents: dict[str, Any],
    shared: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Write the three files into `out`; returns their paths by name."""
    out.mkdir(parents=True, exist_ok=True)
    submission = out / "submission.jsonl"
    with submission.open("w", encoding="utf-8") as handle:
        for o in outcomes:
            line = {
                "task_id": o["task_id"],
                "agent_answer": o.get("answer") or "",
                "reasoning_trace": reasoning_trace(o.get("plan") or [], o.get("solution")),
            }
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
    scores_path = out / "scores.json"
    scores_path.write_text(json.dumps(scores or {"tasks": [], "summary": None}, indent=2,
                                      ensure_ascii=False, default=str) + "\n")  # fmt: skip
    report = out / "report.md"
    report.write_text(render_report(title, outcomes, scores, agents, shared), encoding="utf-8")
    return {"submission": str(submission), "scores": str(scores_path), "report": str(report)}
