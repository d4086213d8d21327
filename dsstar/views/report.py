"""The result of a run as promised to scripts (`--json`), built from its stored run.json, and
the figures `dsstar runs show` reports: per agent, the totals a run saved, and the bounds it
ran under (its stored spec)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dsstar.algorithm.spec import RunSpec
from dsstar.keys import run_folder, run_record
from dsstar.model.recorded import recorded_location
from dsstar.records.state import FINISHED
from dsstar.storage import Store
from dsstar.text import money

__all__ = [
    "RESULT_KEYS",
    "agent_usage",
    "finished_result",
    "run_bounds",
    "run_figures",
    "run_result",
    "shown_model",
]

RESULT_KEYS = (
    "run_id",
    "status",
    "answer",
    "rounds",
    "plan",
    "artifacts_uri",
    "solution_uri",
    "llm_calls",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "flow_run_id",
    "reused_solution",
    "reused_from",
    "contracts",
    "outputs",
    "replies",
    "recorded_from",
)


def run_result(record: dict[str, Any], artifacts_uri: str) -> dict[str, Any]:
    """The contract's keys (always all present), plus `error` when the run failed."""
    result = {key: record.get(key) for key in RESULT_KEYS}
    result["artifacts_uri"] = artifacts_uri
    result["rounds"] = record.get("rounds") or 0
    result["plan"] = record.get("plan") or []
    for key in ("llm_calls", "input_tokens", "output_tokens"):
        result[key] = record.get(key) or 0
    result["reused_solution"] = bool(record.get("reused_solution"))
    result["replies"] = record.get("replies") or "model"  # runs stored before it was kept
    contracts = record.get("contracts") or {}
    result["contracts"] = {
        "checked": contracts.get("checked", 0),
        "failed": contracts.get("failed", []),
    }
    result["outputs"] = record.get("outputs") or []
    if record.get("outputs_error"):
        result["outputs_error"] = record["outputs_error"]
    if record.get("error"):
        result["error"] = record["error"]
    return result


def finished_result(store: Store, run_id: str) -> dict[str, Any] | None:
    """The result of a run that has finished (answered, or stopped by a person), read back
    from its run.json; None for a run that has not (failed, interrupted, never started)."""
    key = run_record(run_id)
    record = store.read_json(key) if store.exists(key) else None
    if not record or record.get("status") not in FINISHED:
        return None
    return run_result(record, store.uri(run_folder(run_id)))


def agent_usage(calls: list[Any]) -> list[dict[str, Any]]:
    """Calls, tokens and cost per agent (ledger rows or call dicts), costliest first. The
    cost is None for an agent whose model has no known price."""
    totals: dict[str, dict[str, Any]] = {}
    for call in calls:
        row = call if isinstance(call, dict) else call.model_dump()
        agent = totals.setdefault(
            row["agent"],
            {"agent": row["agent"], "calls": 0, "input_tokens": 0, "output_tokens": 0,
             "cost_usd": 0.0, "priced": True},
        )  # fmt: skip
        agent["calls"] += 1
        agent["input_tokens"] += row.get("input_tokens") or 0
        agent["output_tokens"] += row.get("output_tokens") or 0
        if row.get("cost_usd") is None:
            agent["priced"] = False
        else:
            agent["cost_usd"] += row["cost_usd"]
    rows = []
    for agent in totals.values():
        priced = agent.pop("priced")
        agent["cost_usd"] = round(agent["cost_usd"], 6) if priced else None
        rows.append(agent)
    return sorted(rows, key=lambda r: (-(r["cost_usd"] or 0), -r["input_tokens"]))


def run_figures(record: dict[str, Any]) -> dict[str, Any]:
    """The figures a run's run.json holds, by name: files, rounds, calls, tokens, cost, time,
    contracts. Missing ones (a run that stopped early) are left out."""
    contracts = record.get("contracts") or {}
    figures = {
        "files analyzed": record.get("files"),
        "analyses reused": record.get("reused_analyses"),
        "files shown to the agents": len(record.get("files_considered") or []) or None,
        "rounds": record.get("rounds") or len(record.get("round_table") or []),
        "LLM calls": record.get("llm_calls"),
        "input tokens": record.get("input_tokens"),
        "output tokens": record.get("output_tokens"),
        "cost (USD)": record.get("cost_usd"),
        "seconds": _seconds(record.get("started_at"), record.get("finished_at")),
        "contracts checked": contracts.get("checked"),
        "contracts failed": len(contracts.get("failed") or []) if contracts else None,
        "reused a solution": record.get("reused_solution"),
        "reused the solution of run": record.get("reused_from"),
    }
    return {name: value for name, value in figures.items() if value is not None}


def run_bounds(record: dict[str, Any]) -> dict[str, str]:
    """The bounds the run ran under, read from the spec its run.json keeps (the one object
    its tasks were given; a resumed run's own): the loop's budget, the spending ceiling and
    one script's limits. Empty for a run stored before the spec was kept."""
    try:
        spec = RunSpec.from_dict(record["spec"])
    except (KeyError, TypeError):  # no spec, or one this version cannot read
        return {}
    budget, ceiling, limits = spec.budget, spec.ceiling, spec.limits
    spend = [money(ceiling.max_cost)] if ceiling.max_cost is not None else []
    spend += [f"{ceiling.max_tokens:,} tokens"] if ceiling.max_tokens is not None else []
    models = dict.fromkeys(shown_model(config["model"]) for config in spec.llm.values())
    return {
        "models": ", ".join(models),
        "most rounds": f"{budget.max_rounds}",
        "debug attempts per script": f"{budget.max_debug_attempts}",
        "ceiling": " and ".join(spend) or "none",
        "a script": f"{limits.timeout_s:g} s, {limits.memory_mb:,} MB,"
        f" {limits.outputs} output files",
        "asks a person": "yes" if spec.ask_human else "no",
        # The one its scripts ran in (bwrap, unshare, ...) as run.json says; else the setting.
        "sandbox": record.get("sandbox") or spec.sandbox,
    }


def shown_model(model: str) -> str:
    """A model's name as a person reads it: `recorded/<location>` (a location that is a path
    makes it `recorded//path`) as the recording it is."""
    location = recorded_location(model)
    return f"replies recorded at {location}" if location else model


def _seconds(started: str | None, finished: str | None) -> float | None:
    try:
        span = datetime.fromisoformat(finished) - datetime.fromisoformat(started)
    except (TypeError, ValueError):
        return None
    return span.total_seconds()
