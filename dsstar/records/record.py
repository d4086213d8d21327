"""What a run records, as plain data: the stored objects of each stage under runs/<run_id>/
(the storage layout is dsstar.storage.LAYOUT), a round's row in the round table, token
totals."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from dsstar.algorithm.agents.router import Route
from dsstar.algorithm.guidance import Choice, Guidance
from dsstar.algorithm.runtime import Round, Script
from dsstar.algorithm.verdict import Verdict
from dsstar.execution.sandbox import ExecResult
from dsstar.storage import analysis_key, round_key

__all__ = [
    "analysis_objects",
    "figure_entries",
    "figure_objects",
    "final_objects",
    "guidance_key",
    "guidance_objects",
    "read_guidance",
    "reuse_objects",
    "round_item",
    "round_objects",
    "round_row",
    "total_cost",
    "route_objects",
    "usage",
]


def analysis_objects(analyses: list[dict[str, Any]]) -> dict[str, Any]:
    """analysis/<file>/script.py, output.txt and attempts.json of every analyzed file."""
    objects: dict[str, Any] = {}
    for item in analyses:
        folder = f"analysis/{analysis_key(item['path'])}"
        objects[f"{folder}/script.py"] = item["script"]
        objects[f"{folder}/output.txt"] = item["description"]
        objects[f"{folder}/attempts.json"] = {
            k: item[k] for k in ("path", "format", "sha256", "source", "error", "attempts")
        } | {"analyzed_in_run": item["run_id"]}
    return objects


def round_objects(round: Round) -> dict[str, Any]:
    """rounds/NN/plan.json, code.py, output.txt, verdict.json (in this order), figures/."""
    folder = f"rounds/{round_key(round.number)}"
    return {
        f"{folder}/plan.json": list(round.plan),
        f"{folder}/code.py": round.script.code,
        f"{folder}/output.txt": round.script.result.output,
        f"{folder}/verdict.json": {
            "sufficient": round.verdict.sufficient,
            "reply": round.reply,
            "execution_ok": round.script.result.ok,
            "attempts": round.script.attempts,
            # Replies asked with the verifier's and then discarded (loop.together): paid for
            # and counted, never followed.
            "unused": [asdict(asked) for asked in round.unused],
        },
    } | figure_objects(folder, round.script.result)


def figure_objects(folder: str, result: ExecResult) -> dict[str, bytes]:
    """<folder>/figures/<name>: the figure files the script saved in its working directory."""
    return {f"{folder}/figures/{f['name']}": base64.b64decode(f["data"]) for f in result.figures}


def figure_entries(folder: str, result: ExecResult, uri: Callable[[str], str]) -> list[dict]:
    """How run.json lists those figures: where (rounds/NN or final), name, bytes, URI."""
    return [
        {"where": folder, "name": f["name"], "bytes": f["bytes"],
         "uri": uri(f"{folder}/figures/{f['name']}")}
        for f in result.figures
    ]  # fmt: skip


def route_objects(number: int, route: Route) -> dict[str, Any]:
    """rounds/NN/route.json: the decision that opened round NN."""
    return {
        f"rounds/{round_key(number)}/route.json": {"decision": route.label, "reply": route.reply}
    }


def guidance_objects(number: int, guidance: Guidance) -> dict[str, Any]:
    """rounds/NN/guidance.json: what a person answered after round NN."""
    return {
        guidance_key(number): {
            "choice": guidance.choice.value,
            "text": guidance.text,
            "timed_out": guidance.timed_out,
            **({"meta": dict(guidance.meta)} if guidance.meta else {}),
        }
    }


def guidance_key(number: int) -> str:
    return f"rounds/{round_key(number)}/guidance.json"


def read_guidance(stored: dict[str, Any]) -> Guidance:
    """A Guidance from its stored guidance.json."""
    return Guidance(
        choice=Choice(stored["choice"]),
        text=stored.get("text") or "",
        timed_out=bool(stored.get("timed_out")),
        meta=dict(stored.get("meta") or {}),
    )


def reuse_objects(script: Script, verdict: Verdict, reply: str) -> dict[str, Any]:
    """reuse/: a stored solution tried first and rejected (round 00 belongs to the new plan)."""
    return {
        "reuse/code.py": script.code,
        "reuse/output.txt": script.result.output,
        "reuse/verdict.json": {
            "sufficient": verdict.sufficient,
            "reply": reply,
            "ok": script.result.ok,
        },
    }


def final_objects(
    final: Script | None, answer: str | None, status: str, plan: list[str], notebook: str
) -> dict[str, Any]:
    """final/solution.py (when there is one), answer.json, notebook.ipynb and figures/."""
    solution = {"final/solution.py": final.code} if final is not None else {}
    figures = figure_objects("final", final.result) if final is not None else {}
    return (
        solution
        | {
            "final/answer.json": {"answer": answer, "status": status, "plan": plan},
            "final/notebook.ipynb": notebook,
        }
        | figures
    )


def round_item(round: Round, calls: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """A round as the run keeps it in memory (artifacts, notebook): `calls` are the LLM
    replies the round paid for."""
    return {
        "number": round.number,
        "plan": list(round.plan),
        "code": round.script.code,
        "output": round.script.result.output,
        "ok": round.script.result.ok,
        "verdict": round.verdict.sufficient,
        "route": round.route,
        "debug_attempts": max(0, len(round.script.attempts) - 1),
        "unused": [asked.label for asked in round.unused],
        **usage(calls),
        "seconds": seconds,
    }


def round_row(item: dict[str, Any]) -> dict[str, Any]:
    """One row of the round table in run.json."""
    return {
        "round": item["number"],
        "step": item["plan"][-1] if item["plan"] else "",
        "plan_length": len(item["plan"]),
        "route": item["route"],
        "verdict": item["verdict"],
        "execution_ok": item["ok"],
        "input_tokens": item["input_tokens"],
        "output_tokens": item["output_tokens"],
        "cost_usd": item["cost_usd"],
        "seconds": round(item["seconds"], 2),
    }


def usage(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Tokens in and out and the cost (see `total_cost`) of LLM replies."""
    return {
        "input_tokens": sum(c["input_tokens"] for c in calls),
        "output_tokens": sum(c["output_tokens"] for c in calls),
        "cost_usd": total_cost([c.get("cost_usd") for c in calls]),
    }


def total_cost(costs: list[float | None]) -> float | None:
    """The cost of calls in USD: None (unknown) unless there were calls and every one had a
    known price, so that a part never passes for the whole. Every figure of a run's cost
    (the live line, the summary, run.json, `runs list`) is this one."""
    if not costs or any(cost is None for cost in costs):
        return None
    return round(sum(costs), 6)
