"""The result of a run as promised to scripts (`--json`), built from its stored run.json."""

from __future__ import annotations

from typing import Any

__all__ = ["RESULT_KEYS", "run_result"]

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
    "contracts",
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
    contracts = record.get("contracts") or {}
    result["contracts"] = {
        "checked": contracts.get("checked", 0),
        "failed": contracts.get("failed", []),
    }
    if record.get("error"):
        result["error"] = record["error"]
    return result
