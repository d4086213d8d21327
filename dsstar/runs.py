"""Reading runs back from storage, for `dsstar runs list` and `dsstar runs show`."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .errors import UsageError
from .storage import Store, round_key

__all__ = ["list_runs", "read_round", "read_run"]

ROUND_FILES = ("plan.json", "code.py", "output.txt", "verdict.json", "route.json")


def read_run(store: Store, run_id: str) -> dict[str, Any]:
    """A run's run.json. Raises UsageError when there is no such run."""
    try:
        return store.read_json(f"runs/{run_id}/run.json")
    except FileNotFoundError:
        raise UsageError(f"no run {run_id} under {store.url}") from None


def list_runs(store: Store, limit: int = 20) -> list[dict[str, Any]]:
    """The most recent runs (newest first): id, question, status, rounds, cost, started."""
    run_ids = sorted(store.listdir("runs"), reverse=True)[:limit]  # ids sort by start time

    def summary(run_id: str) -> dict[str, Any]:
        try:
            record = store.read_json(f"runs/{run_id}/run.json")
        except FileNotFoundError:
            record = {"status": "unknown"}
        return {
            "run_id": run_id,
            "question": record.get("question", ""),
            "status": record.get("status"),
            "rounds": len(record.get("round_table") or []),
            "cost_usd": record.get("cost_usd"),
            "started_at": record.get("started_at"),
        }

    with ThreadPoolExecutor(max_workers=8) as pool:  # one read per run: overlap them on S3
        runs = list(pool.map(summary, run_ids))
    return sorted(runs, key=lambda r: r["started_at"] or "", reverse=True)


def read_round(store: Store, run_id: str, number: int) -> dict[str, Any]:
    """Everything stored for one round: plan, code, output, verdict and route."""
    folder = f"runs/{run_id}/rounds/{round_key(number)}"
    found: dict[str, Any] = {"round": number}
    for name in ROUND_FILES:
        try:
            text = store.read_text(f"{folder}/{name}")
        except FileNotFoundError:
            continue
        key = name.rsplit(".", 1)[0]
        if name.endswith(".json"):
            found[key] = json.loads(text)
        else:
            found[key] = text
    if len(found) == 1:
        raise UsageError(f"run {run_id} has no round {number}")
    return found
