"""What a run's cards in the Prefect UI say, as markdown built from what the run recorded:
pure functions, free of Prefect (tasks/record.py publishes them, flows decide when).

A run that ends without an answer (failed, over budget, stopped by a person, interrupted, or
crashed: its process died) gets one card, `ending_card`: why in one line, the round and step
where it stopped, what it spent, where it is stored and how to continue it. A crashed run
reports nothing itself; whoever next sees it dead writes its card from its run.json and the
replies its store kept (`crashed_record`). A round's card carries the verifier's and the
router's reasoning as written, bounded (`reasoning`).

Text a run, a script, a file or a model wrote is shown through `md_text` or `fenced`, never
read as markdown. Stored objects are links only where a browser can open them (an http(s)
URL); a local file (`file://`, which a page served over http may not open) or an object in
a bucket (`s3://`, whose console URL is not known here) is shown as a code span instead.
"""

from __future__ import annotations

import re
from typing import Any

from dsstar.algorithm.verdict import Status
from dsstar.records.record import usage
from dsstar.text import clean, fenced, md_code, md_text, money

__all__ = [
    "REASONING_CHARS",
    "crashed_record",
    "ending_card",
    "ending_title",
    "reasoning",
    "short",
    "spent_line",
    "stored_at",
    "where_stopped",
]

CRASHED = "crashed"  # the status a card gives a run whose process died (run.json: running)
REASONING_CHARS = 2000  # a verifier's or router's reasoning shown on a round's card, at most

# The state of an ending as a person reads it (the card's title).
_TITLES = {
    Status.FAILED: "Failed",
    Status.OVER_BUDGET: "Over budget",
    Status.STOPPED: "Stopped by a person",
    Status.INTERRUPTED: "Interrupted",
    CRASHED: "Crashed",
}


def ending_title(status: str) -> str:
    """The title of the card of a run that ended `status` without an answer."""
    return _TITLES.get(status, str(status).replace("_", " ").capitalize())


def ending_card(
    record: dict[str, Any],
    folder_uri: str,
    *,
    retry: bool = False,
    links: dict[str, str] | None = None,
) -> str:
    """The card of a run that ended without an answer, from its run.json (`record`; for a
    crashed run, `crashed_record`'s): the reason, where it stopped, what it spent, what is
    stored (`folder_uri`, and `links`, named URIs of its stored objects) and how to go on.
    `retry`: the flow run belongs to a deployment, whose Retry in the UI resumes it."""
    status = str(record.get("status") or CRASHED)
    run_id = str(record.get("run_id") or "")
    error = record.get("error") or f"the run ended {status}"
    question = md_text(short(record.get("question") or "", 200), line=True)
    sandbox = record.get("sandbox")
    ran_in = f"**Scripts ran in:** {md_text(sandbox, line=True)}  \n" if sandbox else ""
    parts = [
        f"### {ending_title(status)}: {question}",
        f"**Error**\n\n{fenced(clean(str(error)))}",
        f"**Where it stopped:** {where_stopped(record)}  \n"
        f"{spent_line(record)}  \n"
        + ran_in
        + (
            f"**Stored:** {stored_at(folder_uri)} (run.json, the rounds, every model reply"
            " received)"
            if folder_uri
            else "**Stored:** nothing"
        ),
        f"**Continue:** {_next_step(status, run_id, record, retry)}",
    ]
    if links:
        listed = (f"- {md_text(name, line=True)}: {md_code(uri)}" for name, uri in links.items())
        parts.append("**Stored objects**\n\n" + "\n".join(listed))
    return "\n\n".join(parts) + "\n"


def where_stopped(record: dict[str, Any]) -> str:
    """The round and step a run stopped at, as its run.json tells it (markdown: the step's
    text is the planner's)."""
    rows = record.get("round_table") or []
    if not record.get("started_at"):
        return "before it started: its checks refused it, and nothing was stored or spent"
    if not rows:
        if record.get("files") is None:
            return "in the file analysis, before round 00"
        return f"after the file analysis ({record['files']} files), in round 00"
    last = rows[-1]
    number = int(last.get("round") or 0)
    judged = {True: "sufficient", False: "not sufficient"}.get(last.get("verdict"), "not judged")
    text = md_text(short(last.get("step") or "", 160), line=True)
    step = f"step {last.get('plan_length') or 0}: {text}"
    done = f"round {number:02d} ({judged}; {step})"
    if record.get("status") == Status.STOPPED:
        return f"after {done}, where a person chose to stop"
    if "solution_uri" in record:  # the loop ended and the final script was made
        return f"in the final script, after {done}"
    return f"after {done}, in what came next (round {number + 1:02d} or the final script)"


def spent_line(record: dict[str, Any]) -> str:
    """What the run spent on models: calls, tokens in and out, cost (markdown)."""
    calls = record.get("llm_calls") or 0
    cost = money(record.get("cost_usd")) if calls else money(0.0)  # no call: nothing spent
    return (
        f"**LLM calls:** {calls} · **tokens:** {record.get('input_tokens') or 0:,} in /"
        f" {record.get('output_tokens') or 0:,} out · **cost:** {cost}"
    )


def _next_step(status: str, run_id: str, record: dict[str, Any], retry: bool) -> str:
    if status == Status.STOPPED:
        return (
            f"a stopped run is final. {md_code(f'dsstar runs show {run_id}')} shows what it had;"
            " ask again with a new run."
        )
    if not record.get("started_at"):  # refused by its checks: nothing to resume
        again = "Retry this flow run in the Prefect UI" if retry else "run it again"
        return f"fix what the error names, then {again}."
    retried = " Or Retry this flow run in the Prefect UI: it resumes the same run." if retry else ""
    command = f"dsstar resume {run_id}"
    if status == Status.OVER_BUDGET:
        settings = record.get("settings") or {}
        flag = "--max-cost" if settings.get("max_cost") is not None else "--max-tokens"
        command += f" {flag} N"
        why = "with a ceiling N above what it spent"
        if retry:  # the retry runs under the ceiling of the worker that picks it up
            retried = " Or Retry it in the Prefect UI for a worker with a higher ceiling."
    else:
        why = "finished analyses, model calls and scripts are read back, not paid again"
    return f"{md_code(command)} ({why}).{retried}"


def crashed_record(
    record: dict[str, Any], reason: str, calls: list[dict[str, Any]]
) -> dict[str, Any]:
    """The run.json of a run whose process died (it still says running), as its card shows
    it: status crashed, `reason` as its error, and what it spent counted from the replies its
    store kept (`calls`: every reply received, the analysis included), when they say more
    than its last saved totals."""
    crashed = {**record, "status": CRASHED, "error": reason}
    if len(calls) > (record.get("llm_calls") or 0):
        crashed |= {"llm_calls": len(calls), **usage(calls)}
    return crashed


def reasoning(text: str | None, where: str, most: int = REASONING_CHARS) -> str:
    """A model's reasoning as written, shown as text (markdown escaped, its line breaks
    kept), cut at `most` characters with a note of `where` the whole of it is stored."""
    text = clean(text or "").strip()
    if not text:
        return "(none given)"
    cut = len(text) > most
    shown = text[:most].rstrip()
    lines = md_text(shown).split("\n")  # each line broken where the model broke it
    body = "  \n".join(lines)
    if cut:
        body += f" …\n\n({len(text) - len(shown):,} more characters in {md_text(where)})"
    return body


def stored_at(uri: str | None) -> str:
    """Where an object is stored, as markdown: a link when a browser can open it (http or
    https), else the URI in a code span."""
    uri = clean(str(uri or ""))
    if re.fullmatch(r"https?://[^\s<>()\[\]`\\]+", uri):
        return f"[{md_text(uri)}](<{uri}>)"
    return md_code(uri)


def short(text: str, most: int) -> str:
    """`text` on one line, cut to `most` characters with an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= most else text[: most - 1].rstrip() + "…"
