"""Reading runs back from storage, for `dsstar runs list` and `dsstar runs show` (a run whose
process is gone is listed as "stale": `dsstar.records.state`), and marking this process's run
interrupted."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from dsstar import keys
from dsstar.errors import DSStarError, UsageError
from dsstar.records.state import liveness
from dsstar.storage import Store
from dsstar.views.report import agent_usage, run_bounds, run_figures

__all__ = [
    "list_runs",
    "mark_interrupted",
    "read_round",
    "read_run",
    "run_report",
]

ROUND_FILES = ("plan.json", "code.py", "output.txt", "verdict.json", "route.json")


def read_run(store: Store, run_id: str) -> dict[str, Any]:
    """A run's run.json. Raises UsageError when there is no such run."""
    try:
        return store.read_json(keys.run_record(run_id))
    except FileNotFoundError:
        raise UsageError(f"no run {run_id} under {store.url}") from None


def run_report(store: Store, run_id: str, database_url: str | None = None) -> dict[str, Any]:
    """Everything `dsstar runs show` reports: run.json, each round's verifier reply, the
    URIs of its final notebook, solution and answer (those it wrote), cost per agent (from
    the ledger, when it holds the run), the figure files (charts) its scripts saved, as
    run.json lists them, and the bounds it ran under (its stored spec)."""
    record = read_run(store, run_id)
    rounds = [row["round"] for row in record.get("round_table") or []]

    def reply(number: int) -> str | None:
        try:
            found = store.read_json(keys.in_run(run_id, keys.round_object(number, "verdict.json")))
        except (FileNotFoundError, DSStarError):
            return None
        return found.get("reply") if isinstance(found, dict) else None

    with ThreadPoolExecutor(max_workers=8) as pool:  # one read per round: overlap them on S3
        replies = dict(zip(rounds, pool.map(reply, rounds), strict=True))
    agents: list[dict[str, Any]] | None = None
    if database_url:
        try:
            from dsstar.records.ledger import Ledger

            agents = agent_usage(Ledger(database_url, store.url).calls(run_id)) or None
        except DSStarError:
            agents = None  # the ledger is optional for a report: storage has the rest
    final = {
        name.split(".")[0]: store.uri(keys.in_run(run_id, keys.final_object(name)))
        for name in ("notebook.ipynb", "solution.py", "answer.json")
        if store.exists(keys.in_run(run_id, keys.final_object(name)))
    }
    return record | {
        "status": _shown_status(record),  # as `runs list` shows it: stale when gone
        "final": final,  # the notebook, solution and answer files, where the run wrote them
        "verdict_replies": {str(n): r for n, r in replies.items()},
        "figures": run_figures(record),
        "bounds": run_bounds(record),  # from the spec the run ran under
        "agents": agents,
        "saved_figures": record.get("saved_figures") or [],
    }


def list_runs(store: Store, limit: int = 20) -> list[dict[str, Any]]:
    """The most recent runs (newest first): id, question, answer, status, rounds, cost,
    started."""
    run_ids = sorted(store.listdir(keys.RUNS), reverse=True)[:limit]  # ids sort by start time

    def summary(run_id: str) -> dict[str, Any]:
        try:
            record = store.read_json(keys.run_record(run_id))
        except FileNotFoundError:
            record = {"status": "unknown"}
        return {
            "run_id": run_id,
            "question": record.get("question", ""),
            "answer": record.get("answer"),
            "status": _shown_status(record),
            "rounds": len(record.get("round_table") or []),
            "cost_usd": record.get("cost_usd"),
            "started_at": record.get("started_at"),
            "flow_run_id": record.get("flow_run_id"),
        }

    with ThreadPoolExecutor(max_workers=8) as pool:  # one read per run: overlap them on S3
        runs = list(pool.map(summary, run_ids))
    return sorted(runs, key=lambda r: r["started_at"] or "", reverse=True)


def _shown_status(record: dict[str, Any]) -> str | None:
    """A run's status as `runs list` and `runs show` tell it: "stale" for a run stored as
    running whose process is gone."""
    return "stale" if liveness(record) == "stale" else record.get("status")


def read_round(store: Store, run_id: str, number: int) -> dict[str, Any]:
    """Everything stored for one round: plan, code, output, verdict, route and the URIs of
    the figure files its script saved (top level of figures/)."""
    folder = keys.in_run(run_id, keys.round_folder(number))
    found: dict[str, Any] = {"round": number}
    for name in ROUND_FILES:
        try:
            text = store.read_text(keys.in_run(run_id, keys.round_object(number, name)))
        except FileNotFoundError:
            continue
        key = name.rsplit(".", 1)[0]
        if name.endswith(".json"):
            found[key] = json.loads(text)
        else:
            found[key] = text
    if len(found) == 1:
        raise UsageError(f"run {run_id} has no round {number}")
    names = store.listdir(keys.figures_folder(folder))
    found["figures"] = [store.uri(keys.figure(folder, name)) for name in names]
    return found


def mark_interrupted(
    store: Store,
    run_id: str,
    reason: str,
    database_url: str | None = None,
    calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """Mark this process's run `interrupted` in run.json (and the ledger), unless the flow did
    already. `calls`: every reply the run received in this process (its meter's), counted
    when they are more than run.json's totals say (a stop during the file analysis). Returns
    the stored record, or None when the run stored nothing yet."""
    try:
        record = store.read_json(keys.run_record(run_id))
    except (FileNotFoundError, DSStarError):
        return None
    if record.get("status") != "running" or record.get("pid") not in (None, os.getpid()):
        return record  # finished, already marked, or another process's attempt
    now = datetime.now(UTC).isoformat(timespec="seconds")
    record.update(status="interrupted", error=reason, finished_at=now)
    calls = calls or []
    if len(calls) > (record.get("llm_calls") or 0):
        from dsstar.records.record import usage

        record.update(llm_calls=len(calls), **usage(calls))
    store.write_json(keys.run_record(run_id), record)
    if database_url:
        from dsstar.records.ledger import Ledger

        Ledger(database_url, store.url).record(record, record.get("round_table") or [], calls)
    return record
