"""What a run records, as plain data: the stored objects of each stage under runs/<run_id>/
(named by dsstar.keys), a round's row in the round table, token totals."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from dsstar import keys
from dsstar.algorithm.agents.router import Route
from dsstar.algorithm.guidance import Choice, Guidance
from dsstar.algorithm.runtime import Round, Script
from dsstar.algorithm.verdict import Verdict
from dsstar.execution.deliverables import media_type
from dsstar.execution.sandbox import ExecResult
from dsstar.records.files import source
from dsstar.storage import Stored

__all__ = [
    "analysis_objects",
    "changed_outputs",
    "figure_entries",
    "figure_objects",
    "final_objects",
    "guidance_key",
    "guidance_objects",
    "output_entries",
    "output_objects",
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
        path = item["path"]
        objects[keys.analysis_object(path, "script.py")] = item["script"]
        objects[keys.analysis_object(path, "output.txt")] = item["description"]
        objects[keys.analysis_object(path, "attempts.json")] = {
            k: item[k] for k in ("path", "format", "sha256", "source", "error", "attempts")
        } | {"analyzed_in_run": item["run_id"]}
    return objects


def round_objects(round: Round) -> dict[str, Any]:
    """rounds/NN/plan.json, code.py, output.txt, verdict.json (in this order), figures/."""
    number = round.number
    return {
        keys.round_object(number, "plan.json"): list(round.plan),
        keys.round_object(number, "code.py"): round.script.code,
        keys.round_object(number, "output.txt"): round.script.result.output,
        keys.round_object(number, "verdict.json"): {
            "sufficient": round.verdict.sufficient,
            "reply": round.reply,
            "execution_ok": round.script.result.ok,
            "attempts": round.script.attempts,
            # Replies asked with the verifier's and then discarded (loop.together): paid for
            # and counted, never followed.
            "unused": [asdict(asked) for asked in round.unused],
        },
    } | figure_objects(keys.round_folder(number), round.script.result)


def figure_objects(folder: str, result: ExecResult) -> dict[str, Stored | bytes]:
    """<folder>/figures/<name>: the figure files a round's script saved in its working
    directory (the final script's are among its outputs, final/outputs/), copied from where
    they were stored when it ran (records/files.py)."""
    return {keys.figure(folder, f["name"]): source(f) for f in result.figures}


def figure_entries(folder: str, result: ExecResult, uri: Callable[[str], str]) -> list[dict]:
    """How run.json lists those figures: where (rounds/NN or final), name, bytes, URI."""
    key = keys.output if folder == keys.FINAL else lambda name: keys.figure(folder, name)
    return [
        {"where": folder, "name": f["name"], "bytes": f["bytes"], "uri": uri(key(f["name"]))}
        for f in result.figures
    ]  # fmt: skip


def output_objects(result: ExecResult) -> dict[str, Any]:
    """final/outputs/<name>: every file the final script wrote (the run's deliverables, copied
    from where they were stored when it ran), and final/charts/<name>.json: the description of
    each matplotlib figure among them."""
    objects: dict[str, Any] = {}
    for item in result.outputs:
        objects[keys.output(item["name"])] = source(item)
        if isinstance(item.get("chart"), dict):
            objects[keys.chart(item["name"])] = item["chart"]
    return objects


def output_entries(result: ExecResult, uri: Callable[[str], str]) -> list[dict[str, Any]]:
    """How run.json, the `--json` result and `dsstar.ask` list the deliverables: name (relative
    to the working directory), bytes, uri, media_type, sha256 and, for a chart, the URI of its
    figure hook's description (chart) and the reader's description of the image (reading)."""
    entries = []
    for item in result.outputs:
        digest = item.get("sha256") or hashlib.sha256(base64.b64decode(item["data"])).hexdigest()
        entry = {
            "name": item["name"],
            "bytes": item["bytes"],
            "uri": uri(keys.output(item["name"])),
            "media_type": media_type(item["name"]),
            "sha256": digest,  # tells a changed deliverable
        }
        if isinstance(item.get("chart"), dict):
            entry["chart"] = uri(keys.chart(item["name"]))
        if isinstance(item.get("reading"), str):
            entry["reading"] = item["reading"]
        entries.append(entry)
    return entries


def changed_outputs(was: list[dict[str, Any]], now: list[dict[str, Any]]) -> list[str]:
    """How the deliverables `now` differ from those of an earlier run (`was`), one line per
    file that is new, gone or changed (by content); empty when they are the same."""
    before = {e["name"]: e for e in was}
    after = {e["name"]: e for e in now}
    lines = [f"{name}: new ({after[name]['bytes']:,} bytes)" for name in after
             if name not in before]  # fmt: skip
    lines += [f"{name}: gone" for name in before if name not in after]
    for name in after.keys() & before.keys():
        old, new = before[name], after[name]
        if old.get("sha256") != new.get("sha256") or old["bytes"] != new["bytes"]:
            lines.append(f"{name}: changed ({old['bytes']:,} -> {new['bytes']:,} bytes)")
    return sorted(lines)


def route_objects(number: int, route: Route) -> dict[str, Any]:
    """rounds/NN/route.json: the decision that opened round NN."""
    return {
        keys.round_object(number, "route.json"): {"decision": route.label, "reply": route.reply}
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
    return keys.round_object(number, "guidance.json")


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
        keys.reuse_object("code.py"): script.code,
        keys.reuse_object("output.txt"): script.result.output,
        keys.reuse_object("verdict.json"): {
            "sufficient": verdict.sufficient,
            "reply": reply,
            "ok": script.result.ok,
        },
    }


def final_objects(
    final: Script | None, answer: str | None, status: str, plan: list[str], notebook: str
) -> dict[str, Any]:
    """final/solution.py and output.txt (when there is one), answer.json, notebook.ipynb,
    outputs/ and charts/."""
    solution = (
        {
            keys.final_object("solution.py"): final.code,
            keys.final_object("output.txt"): final.result.output,
        }
        if final is not None
        else {}
    )
    figures = output_objects(final.result) if final is not None else {}
    return (
        solution
        | {
            keys.final_object("answer.json"): {"answer": answer, "status": status, "plan": plan},
            keys.final_object("notebook.ipynb"): notebook,
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
