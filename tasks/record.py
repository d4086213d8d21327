"""Writing a run's objects to storage and publishing Prefect artifacts.

Writes are tasks so that a storage hiccup is retried; artifacts are the UI's view of a round:
one card per round, one rounds table and one answer per flow run, updated in place
(tasks/cards.py), however often a round is published again.
"""

from __future__ import annotations

import base64
from typing import Any
from uuid import UUID

from prefect import Task, task
from prefect.context import FlowRunContext

from dsstar.algorithm.verdict import ANSWERED, verdict_label
from dsstar.execution.deliverables import READING_SOURCE, chart_text, inline_image_type
from dsstar.keys import round_object
from dsstar.records.files import read_output
from dsstar.storage import Store, Stored
from dsstar.text import fenced, md_code, md_text, money
from dsstar.views.cards import ending_card, ending_title, reasoning, short, stored_at
from tasks._common import is_storage_error
from tasks.cache_keys import artifact_key
from tasks.cards import publish_markdown, publish_table

__all__ = [
    "publish_deliverables",
    "publish_ending",
    "publish_report",
    "publish_round",
    "publish_rounds_table",
    "publish_summary",
    "storage_writer",
    "write_objects",
]

# Waits before each retry of a storage write, in units of DSSTAR_STORAGE_RETRY_DELAY.
_BACKOFF = (1, 4, 10)


@task(
    name="store",
    task_run_name="store {label}",
    retries=len(_BACKOFF),
    retry_delay_seconds=list(_BACKOFF),
    retry_condition_fn=is_storage_error,
    cache_policy=None,
)
def write_objects(label: str, storage: str, objects: dict[str, Any]) -> list[str]:
    """Write every `key -> text, bytes, Stored (copied there) or JSON value` pair; returns
    their URIs."""
    store = Store(storage)
    return [
        store.write_text(key, value) if isinstance(value, str)
        else store.write_bytes(key, value) if isinstance(value, bytes)
        else store.copy(value.key, key) if isinstance(value, Stored)
        else store.write_json(key, value)
        for key, value in objects.items()
    ]  # fmt: skip


def storage_writer(first_delay: float) -> Task:
    """`write_objects`, its retries waiting `first_delay` seconds, then 4 and 10 times that."""
    return write_objects.with_options(retry_delay_seconds=[first_delay * k for k in _BACKOFF])


def publish_round(run_id: str, item: dict[str, Any], uri: str) -> None:
    """A markdown artifact for one round: the route that opened it and the router's
    reasoning, the plan, code, head of the output, the verdict and the verifier's reasoning
    (`item`'s `route_reply` and `reply`, each bounded; the whole in the round's folder).
    What a model or a script wrote shows as text (`md_text`) or code, never as markdown."""
    number = f"{item['number']:02d}"
    plan = "\n".join(f"{i}. {md_text(step, line=True)}" for i, step in enumerate(item["plan"], 1))
    output = item["output"][:3000]
    verdict = verdict_label(item.get("verdict"))
    route = item.get("route")
    opened = (
        f"**Opened by the router:** {md_text(route, line=True)}\n\n"
        f"{reasoning(item.get('route_reply'), round_object(item['number'], 'route.json'))}\n\n"
        if route
        else "**Opened by:** the initial plan\n\n"
    )
    markdown = (
        f"### Round {number}\n\n"
        f"**Verdict:** {verdict} · **Tokens:** {item['input_tokens']:,} in /"
        f" {item['output_tokens']:,} out · **Cost:** {money(item.get('cost_usd'))} ·"
        f" **Seconds:** {item['seconds']:.1f}\n\n{opened}"
        f"**Plan**\n\n{plan}\n\n**Code**\n\n{fenced(item['code'], 'python')}\n\n"
        f"**Output (head)**\n\n{fenced(output)}\n\n"
        f"**Verifier: {verdict}**\n\n"
        f"{reasoning(item.get('reply'), round_object(item['number'], 'verdict.json'))}\n\n"
        f"Stored at {stored_at(uri)}\n"
    )
    for figure in item.get("figures") or []:
        markdown += (
            f"\nFigure {md_code(figure['name'])} ({figure['bytes']:,} bytes):"
            f" {md_code(figure['uri'])}"
        )
    publish_markdown(
        artifact_key(f"{run_id}-round-{number}"), markdown, f"DS-STAR {run_id} round {number}"
    )


def publish_rounds_table(run_id: str, rounds: list[dict[str, Any]]) -> None:
    """The run's table of every round so far: one card, rewritten after each round. Narrow
    enough for the page: the step shortened (the whole on the round's card), the verdict
    and route in a word or two (its text cells are escaped by `publish_table`)."""
    table = [
        {
            "round": f"{item['number']:02d}",
            "step": short(item["plan"][-1], 60) if item["plan"] else "",
            "route": item.get("route") or "start",
            "sufficient": {True: "yes", False: "no"}.get(item.get("verdict"), "-"),
            "tokens": f"{item['input_tokens'] + item['output_tokens']:,}",
            "cost": money(item.get("cost_usd")),
            "s": f"{item['seconds']:.0f}",
        }
        for item in rounds
    ]
    publish_table(artifact_key(f"{run_id}-rounds"), table, f"DS-STAR {run_id}: every round")


def publish_summary(run_id: str, record: dict[str, Any], uris: dict[str, str]) -> None:
    """A markdown artifact with the answer, the totals and where every object is stored; for
    a run without an answer, its ending card (`publish_ending`) with the stored objects.
    The question, the answer, file names and URIs show as text (`md_text`) or code."""
    if record.get("status") not in ANSWERED:
        publish_ending(run_id, record, uris.get("run folder") or "", links=uris)
        return
    links = "\n".join(f"- {md_text(name, line=True)}: {md_code(uri)}" for name, uri in uris.items())
    reused = record.get("reused_from")
    origin = f"**Reused the verified solution of run** {md_code(reused)}\n\n" if reused else ""
    if record.get("replies") in ("recorded", "mixed"):  # never to pass for a model's answer
        which = "recorded" if record["replies"] == "recorded" else "some recorded"
        origin += (
            f"**Replies: {which}**, from {md_code(record.get('recorded_from'))}:"
            f" no model was asked{' for them' if which != 'recorded' else ''}\n\n"
        )
    if record.get("sandbox"):
        origin += f"**Scripts ran in:** {md_text(record['sandbox'])}\n\n"
    # The one-line reason (run.json's error), in a block as output is: it may hold markdown.
    # The whole output of a failed script is among the stored objects.
    error = f"**Error**\n\n{fenced(record['error'])}\n\n" if record.get("error") else ""
    cost = money(record.get("cost_usd"))
    answer = "none" if record.get("answer") is None else record["answer"]
    publish_markdown(
        artifact_key(f"{run_id}-answer"),
        (
            f"### {md_text(record['question'], line=True)}\n\n"
            f"**Status:** {md_text(record['status'])}  \n"
            f"**Answer:** {md_text(answer)}\n\n{error}{origin}"
            f"**LLM calls:** {record.get('llm_calls')} · **tokens:** {record.get('input_tokens')}"
            f" in / {record.get('output_tokens')} out · **cost:** {cost}\n\n"
            f"**Stored objects**\n\n{links}\n"
        ),
        f"DS-STAR {run_id}: answer and stored objects",
    )


def publish_ending(
    run_id: str,
    record: dict[str, Any],
    folder_uri: str,
    *,
    links: dict[str, str] | None = None,
    retry: bool | None = None,
    flow_run_id: UUID | None = None,
) -> None:
    """The card of a run that ended without an answer (`dsstar.views.cards.ending_card`):
    failed, over budget, stopped, interrupted or crashed. It takes the answer card's key, so
    a run resumed later in the same flow run replaces it with its answer. `retry`: whether
    the UI's Retry resumes the run (a deployment's flow run); by default, this flow run's
    own. `flow_run_id`: the flow run to publish it on from outside (a crashed run's)."""
    if retry is None:
        context = FlowRunContext.get()
        retry = bool(context and context.flow_run and context.flow_run.deployment_id)
    status = str(record.get("status") or "crashed")
    publish_markdown(
        artifact_key(f"{run_id}-answer"),
        ending_card(record, folder_uri, retry=retry, links=links),
        f"{ending_title(status)}: why, and how to continue",  # the UI shows the key beside
        flow_run_id=flow_run_id,
    )


# Charts embedded in the deliverables artifact as images up to this size (the UI's markdown
# shows a data: URI image; larger charts are linked only).
_INLINE_IMAGE_BYTES = 1 << 20


def publish_deliverables(
    run_id: str, outputs: list[dict[str, Any]], entries: list[dict[str, Any]], store: Store
) -> None:
    """The files the final script wrote, in the UI: a table artifact with the first rows of
    each CSV or Parquet table, and a markdown artifact that shows each PNG or JPEG chart as an
    image (never an SVG or HTML page: untrusted content) and lists every stored file. Names,
    URIs and chart titles show as text (`md_text`) or code; the only image is the one dsstar
    encoded itself as a data: URL.
    `outputs` are ExecResult.outputs (with their previews, the bytes in `store`), `entries`
    as run.json lists them."""
    uris = {entry["name"]: entry["uri"] for entry in entries}
    parts = []
    for item in outputs:
        name, uri = item["name"], uris.get(item["name"], "")
        parts.append(f"**{md_text(name, line=True)}** ({item['bytes']:,} bytes): {md_code(uri)}")
        table = item.get("preview") if isinstance(item.get("preview"), dict) else None
        if table is not None and table.get("skipped"):
            parts.append(f"preview skipped: {md_text(table['skipped'])}")
        elif table is not None and table.get("shape"):
            publish_table(
                artifact_key(f"{run_id}-table-{name}"),
                [dict(zip(table["columns"], row, strict=False)) for row in table["head"]],
                f"{name}: {table['shape'][0]} rows x {table['shape'][1]}"
                f" columns (first rows), stored at {uri}",
            )
        chart = item.get("chart")
        if isinstance(item.get("reading"), str):
            parts.append(fenced(f"chart {READING_SOURCE}:\n{item['reading']}"))
        elif isinstance(chart, dict):
            parts.append(fenced(chart_text(chart)))
        kind = inline_image_type(name)
        if kind and item["bytes"] <= _INLINE_IMAGE_BYTES:
            data = read_output(store, item)  # no more than the bytes the result states
            title = (chart or {}).get("graph_title") or name
            alt = md_text(str(title)[:100], line=True)
            parts.append(f"![{alt}](data:{kind};base64,{base64.b64encode(data).decode()})")
    publish_markdown(
        artifact_key(f"{run_id}-deliverables"),
        "### Deliverables\n\n" + "\n\n".join(parts) + "\n",
        f"DS-STAR {run_id}: the files the answer delivered",
    )


def publish_report(
    run_id: str, record: dict[str, Any], markdown: str, sub_runs: list[dict[str, Any]]
) -> None:
    """A report in the UI: a markdown card with the report itself (`markdown`, which dsstar
    built from escaped text: `dsstar.research.document`; its charts are data: URLs dsstar
    encoded from the sub-runs' files), and a table of its sub-questions: each one's run,
    status, answer and cost (text cells escaped by `publish_table`)."""
    cost = money(record.get("cost_usd"))
    head = (
        f"**Status:** {md_text(record.get('status'))} · **sub-questions:** {len(sub_runs)}"
        f" · **LLM calls:** {record.get('llm_calls')} (with the sub-runs') · **cost:** {cost}"
        f"\n\n**Stored at** {md_code(record.get('artifacts_uri') or '')}\n\n---\n\n"
    )
    publish_markdown(artifact_key(f"{run_id}-report"), head + markdown, f"DS-STAR report {run_id}")
    rows = [
        {
            "sub-question": f"[{s['number']}] {s['question']}",
            "run_id": s["run_id"],
            "status": s["status"],
            "answer": (s.get("answer") or s.get("error") or "")[:300],
            "rounds": s.get("rounds") or 0,
            "cost_usd": s.get("cost_usd"),
        }
        for s in sub_runs
    ]
    publish_table(artifact_key(f"{run_id}-sub-questions"), rows,
                  f"DS-STAR report {run_id}: every sub-question and its run")  # fmt: skip
