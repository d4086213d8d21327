"""`dsstar runs list|show|prune-cache` and `dsstar history`: reading runs back, and
pruning the cached results a resumed run would read."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.text import Text

from dsstar.algorithm.verdict import verdict_label
from dsstar.cli._app import (
    EXIT_OK,
    JsonOpt,
    StorageOpt,
    app,
    console,
    err,
    fail_usage,
    load_settings,
    plural,
    setting_option,
)
from dsstar.cli._output import heading, json_line, shown
from dsstar.cli._tables import Format, FormatOpt, print_table, resolve_format
from dsstar.errors import DSStarError
from dsstar.execution.deliverables import READING_SOURCE
from dsstar.keys import CACHE, run_folder
from dsstar.text import money

runs_app = typer.Typer(
    help="Inspect stored runs (local folders and S3 alike).", no_args_is_help=True
)
app.add_typer(runs_app, name="runs")


@runs_app.command("list")
def runs_list(
    storage: StorageOpt = None,
    limit: Annotated[int, typer.Option(help="How many runs, newest first.")] = 20,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Recent runs, newest first: question, answer, status, rounds, cost, started, run id.

    Piped (cron, CI, a log) each run is one line; --format csv for spreadsheets.
    """
    from dsstar.storage import Store
    from dsstar.views.listing import list_runs

    fmt = resolve_format(fmt, as_json)
    try:
        store = Store(load_settings(storage=storage).storage)
        runs = list_runs(store, limit)
    except DSStarError as exc:
        fail_usage(str(exc), fmt is Format.json)
    for r in runs:
        if r["status"] == "stale":
            _settle(r, "runs list", store.url)
    if fmt is Format.json:
        sys.stdout.write(json_line({"runs": runs}))
        return
    rows = []
    for r in runs:
        status = _status(r["status"])
        rows.append(
            [_short(r["question"], fmt), _short(r.get("answer"), fmt), status, r["rounds"],
             money(r["cost_usd"]), str(r["started_at"] or "")[:16] or None, r["run_id"]]
        )  # fmt: skip
    columns = ("question", "answer", "status", "rounds", "cost", "started", "run id")
    print_table(columns, rows, fmt, keep=("started", "run id"))


def _status(status: str | None) -> str | None:
    return "stale (process gone)" if status == "stale" else status


def _settle(record: dict[str, Any], command: str, storage: str) -> None:
    """A run whose process is gone never reported its end: its flow run, still Running in
    Prefect (or marked Crashed by the server's automation, its task runs still Running), is
    ended as its run.json (in `storage`) says and given the card of a crashed run, on the
    configured Prefect API (a command's temporary server went with the command)."""
    if not record.get("flow_run_id"):
        return
    import flows

    if flows.api_configured():
        found = {**record, "status": "running"}  # `stale` is how it is shown, not stored
        flows.settle_run(
            found, f"its process is gone (found stale by dsstar {command})", storage=storage
        )


def _short(text: str | None, fmt: Format, most: int = 60) -> str | None:
    """A question or answer cut to `most` characters for the eye in a boxed table; plain and
    CSV keep it whole. Cut text ends in "..." so that it is never mistaken for the whole."""
    if text is None or fmt is not Format.table:
        return text
    text = " ".join(str(text).split())
    return text if len(text) <= most else text[: most - 3] + "..."


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="The run to show.", metavar="RUN_ID")],
    round_number: Annotated[
        int | None, typer.Option("--round", help="Show this round's plan, code and output.")
    ] = None,
    storage: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A run's report: question, answer, plan, the rounds with their verdicts, cost per
    agent, the run's totals, the bounds it ran under (models, rounds, spending ceiling, a
    script's limits) and the figure files (charts) its scripts saved, with their storage
    URIs; with --round N, that round's plan, code, output and figures.

    A report (`dsstar report`) shows its outline, its sub-questions with their runs (each
    one a run of its own: `runs show <its run id>`), its checks and its files instead.
    """
    from dsstar.storage import Store, check_run_id
    from dsstar.views.listing import read_round, run_report

    try:
        check_run_id(run_id)
        settings = load_settings(storage=storage)
        store = Store(settings.storage)
        payload = (
            read_round(store, run_id, round_number)
            if round_number is not None
            else run_report(store, run_id, settings.database_url)
        )
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    if round_number is None and payload.get("status") == "stale":
        _settle(payload, "runs show", store.url)
    if as_json:
        sys.stdout.write(json_line(payload))
    elif round_number is not None:
        _print_round(payload)
    elif payload.get("kind") == "report":
        _print_report(payload, store.uri(run_folder(run_id)))
    else:
        _print_run(payload, store.uri(run_folder(run_id)))


@runs_app.command("prune-cache")
def runs_prune_cache(
    older_than: Annotated[
        float | None,
        setting_option(
            "cache_max_age_days",
            "Delete cached results older than this many days; 0 deletes none for their age.",
            "--older-than",
        ),
    ] = None,
    max_mb: Annotated[
        float | None,
        setting_option(
            "cache_max_mb", "Then delete the oldest while cache/ holds more MB.", "--max-mb"
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would go; delete nothing.")
    ] = False,
    storage: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete old results from the storage's cache/ now: Prefect's persisted model calls,
    script runs and analyses, which only `dsstar resume` (and a retried flow run) reads back.
    A run does this itself when it starts, at most once a day, with the same settings.

    Example: dsstar runs prune-cache --older-than 7 --dry-run
    """
    from dsstar.records.prune import prune_cache
    from dsstar.storage import Store

    try:
        settings = load_settings(
            storage=storage, cache_max_age_days=older_than, cache_max_mb=max_mb
        )
        store = Store(settings.storage)
        pruned = prune_cache(
            store, settings.cache_max_age_days, settings.cache_max_mb, dry_run=dry_run
        )
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    if as_json:
        sys.stdout.write(json_line({"dry_run": dry_run, **pruned.to_dict()}))
        return
    verb = "would delete" if dry_run else "deleted"
    console().print(
        f"{verb} {plural(pruned.removed, 'cached result')} ({pruned.freed / (1 << 20):.1f} MB)"
        f" under {store.uri(CACHE)}; {pruned.kept} kept ({pruned.held / (1 << 20):.1f} MB)",
        markup=False,
        highlight=False,
    )


def _print_run(record: dict[str, Any], uri: str) -> None:

    out = console()
    status = _status(record.get("status"))
    out.print(Text.assemble((shown(record["run_id"]), "bold"),
                            f" · {shown(status)} · {shown(uri)}"))  # fmt: skip
    for key in ("question", "data", "guidelines", "answer"):
        if record.get(key):
            out.print(f"{key}: {shown(record[key])}")
    if record.get("reused_from"):
        out.print(f"reused: the verified solution of run {shown(record['reused_from'])}")
    if record.get("replies") in ("recorded", "mixed"):  # never to pass for a model's answer
        out.print(
            Text(
                f"replies: {record['replies']}, from {shown(record.get('recorded_from'))};"
                " no model was asked"
            )
        )
    if record.get("error"):
        out.print(Text.assemble(("error:", "red"), f" {shown(record['error'])}"))
    plan = record.get("plan") or []
    heading(out, "plan")
    for i, step in enumerate(plan, 1):
        out.print(f"{i}. {shown(step)}")
    if not plan:
        out.print("(no plan yet)")
    heading(out, "rounds")
    replies = record.get("verdict_replies") or {}
    rows = [
        [f"{row['round']:02d}", row["step"], verdict_label(row["verdict"]), row["route"],
         {True: "ok", False: "failed"}.get(row.get("execution_ok")),
         f"{row['input_tokens'] + row['output_tokens']:,}", money(row["cost_usd"]),
         f"{row['seconds']:.1f}"]
        for row in record.get("round_table") or []
    ]  # fmt: skip
    columns = ("round", "step", "verdict", "route", "ran", "tokens", "cost", "seconds")
    print_table(columns, rows, resolve_format(None))  # piped: one line per round
    for number, reply in replies.items():
        if reply:
            first = " ".join(shown(reply).split())
            out.print(f"verdict {int(number):02d}: {first[:200]}")
    _print_agents(out, record.get("agents"), record.get("status"))
    heading(out, "figures")
    for name, value in (record.get("figures") or {}).items():
        out.print(f"{name}: {_figure(name, value)}")
    if record.get("bounds"):  # a run stored before its spec was kept has none
        heading(out, "bounds")
        for name, value in record["bounds"].items():
            out.print(f"{name}: {shown(value)}", markup=False, highlight=False)
    saved = record.get("saved_figures") or []
    heading(out, "saved figures")
    for item in saved:
        where = shown(item["where"])
        out.print(f"{where}: {shown(item['name'])} ({item['bytes']:,} bytes) {shown(item['uri'])}",
                  markup=False, highlight=False)  # fmt: skip
    if not saved:
        out.print("(none: charts a script saves in its working directory are kept here)")
    _print_outputs(out, record)
    _print_files(out, record)


def _print_report(record: dict[str, Any], uri: str) -> None:
    """A report's outline, its sub-questions and their runs, its checks, cost and files."""
    out = console()
    status = f" · report · {shown(record.get('status'))} · {shown(uri)}"
    out.print(Text.assemble((shown(record["run_id"]), "bold"), status))
    for key in ("question", "data", "guidelines"):
        if record.get(key):
            out.print(f"{key}: {shown(record[key])}", markup=False, highlight=False)
    if record.get("replies") in ("recorded", "mixed"):
        out.print(Text(f"replies: {record['replies']}, from {shown(record.get('recorded_from'))};"
                       " no model was asked"))  # fmt: skip
    if record.get("error"):
        out.print(Text.assemble(("error:", "red"), f" {shown(record['error'])}"))
    heading(out, "outline")
    for title in record.get("outline") or []:
        out.print(f"- {shown(title)}", markup=False, highlight=False)
    if not record.get("outline"):
        out.print("(no report written yet)")
    heading(out, "sub-questions")
    cited = set(record.get("cited") or [])
    rows = [
        [f"[{s['number']}]", s["question"], s["status"], s.get("answer") or s.get("error"),
         "yes" if s["number"] in cited else "no", s.get("rounds") or 0, money(s.get("cost_usd")),
         s["run_id"]]
        for s in record.get("sub_runs") or []
    ]  # fmt: skip
    columns = ("n", "sub-question", "status", "answer", "cited", "rounds", "cost", "run id")
    print_table(columns, rows, resolve_format(None), keep=("run id",))
    checks = record.get("checks") or {}
    heading(out, "checks")
    numbers, dropped = checks.get("unsupported_numbers"), checks.get("dropped_citations")
    out.print(f"numbers no cited answer holds: {shown(', '.join(numbers)) if numbers else 'none'}",
              markup=False, highlight=False)  # fmt: skip
    out.print("citations of no answer, taken out: "
              + (", ".join(f"[{n}]" for n in dropped) if dropped else "none"),
              markup=False, highlight=False)  # fmt: skip
    _print_agents(out, record.get("agents"), record.get("status"))
    heading(out, "figures")
    for name, value in (record.get("figures") or {}).items():
        out.print(f"{name}: {_figure(name, value)}")
    out.print("(LLM calls, tokens and cost include the sub-questions' runs)")
    _print_outputs(out, record)


def _print_outputs(out: Any, record: dict[str, Any]) -> None:
    """The files the final script wrote: the run's deliverables, where they are stored."""
    heading(out, "outputs")
    for item in record.get("outputs") or []:
        line = f"{shown(item['name'])} ({item['bytes']:,} bytes, {item['media_type']})"
        out.print(f"{line} {shown(item['uri'])}", markup=False, highlight=False)
        if isinstance(item.get("reading"), str):
            out.print(f"  chart {READING_SOURCE}:", markup=False, highlight=False)
            for line in item["reading"].splitlines():
                out.print(f"    {shown(line)}", markup=False, highlight=False)
        elif item.get("chart"):
            where = shown(item["chart"])
            out.print(f"  chart description (the script's figure hook reported it): {where}",
                      markup=False, highlight=False)  # fmt: skip
    if record.get("outputs_error"):
        out.print(Text.assemble(("outputs error:", "red"), f" {shown(record['outputs_error'])}"))
    if not record.get("outputs"):
        out.print("(none: files the final script writes in its working directory are kept here)")


def _print_files(out: Any, record: dict[str, Any]) -> None:
    """Where to look next: the notebook (every round, then the solution), the solution and
    the answer, with their URIs; last, so that a piped report ends with them."""
    heading(out, "files")
    final = record.get("final") or {}
    for name in ("notebook", "solution", "answer"):
        if final.get(name):
            out.print(f"{name}: {shown(final[name])}", markup=False, highlight=False)
    if not final.get("notebook"):
        out.print("(no notebook yet: a run writes it when it ends)")
    figures = len(record.get("saved_figures") or [])
    if figures:
        out.print(f"figures: {figures} listed above under saved figures")


def _print_agents(out: Any, agents: list[dict[str, Any]] | None, status: str | None) -> None:

    heading(out, "cost per agent")
    if not agents:
        out.print(
            "(none yet: a run's calls reach the ledger when it ends)"
            if status in ("running", "stale")
            else "(none: the ledger holds no calls of this run)"
        )
        return
    rows = [
        [row["agent"], row["calls"], f"{row['input_tokens']:,}", f"{row['output_tokens']:,}",
         money(row["cost_usd"])]
        for row in agents
    ]  # fmt: skip
    print_table(("agent", "calls", "input tokens", "output tokens", "cost"), rows,
                resolve_format(None))  # fmt: skip


def _figure(name: str, value: Any) -> str:
    if name.startswith("cost"):
        return money(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else shown(value)


def _print_round(found: dict[str, Any]) -> None:
    from rich.syntax import Syntax

    out = console()
    heading(out, f"round {found['round']:02d}")
    if "route" in found:
        decision = shown(found["route"].get("decision"))
        out.print(f"opened by route: {decision}", markup=False, highlight=False)
    for i, step in enumerate(found.get("plan") or [], 1):
        out.print(f"{i}. {shown(step)}", markup=False, highlight=False)
    if "code" in found:
        out.print(Syntax(shown(found["code"]), "python", line_numbers=True))
    heading(out, "output")
    out.print(shown(found.get("output", "")), markup=False, highlight=False)
    if "verdict" in found:
        heading(out, f"verdict: {verdict_label(found['verdict'].get('sufficient'))}")
    for uri in found.get("figures") or []:
        out.print(f"figure: {shown(uri)}", markup=False, highlight=False)


@app.command()
def history(
    question: Annotated[
        str, typer.Argument(help="The question, as it was asked.", metavar="QUESTION")
    ],
    guidelines: Annotated[str, typer.Option(help="Its formatting guidelines, if any.")] = "",
    data: Annotated[
        str | None, typer.Option("--data", help="Only runs over this data root.")
    ] = None,
    storage: StorageOpt = None,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The answers a question got over time in one storage, oldest first, with the data each
    run read and a mark where the answer changed from the previous run over the same data.

    Example: dsstar history "Which region had the highest revenue in 2024 H1?"
    """
    from dsstar.locations import normalize_location
    from dsstar.records.ledger import Ledger, question_key
    from dsstar.storage import Store

    fmt = resolve_format(fmt, as_json)
    try:
        settings = load_settings(storage=storage)
        ledger = Ledger(settings.database_url, Store(settings.storage).url)
        runs = ledger.history(question_key(question, guidelines))
        if data is not None:
            root = normalize_location(data)
            runs = [row for row in runs if row.data == root]
    except DSStarError as exc:
        fail_usage(str(exc), fmt is Format.json)
    rows, previous = [], {}  # the last answer per data root: roots are compared apart
    for row in runs:
        before = previous.get(row.data)
        changed = before is not None and row.answer is not None and row.answer != before
        rows.append(
            {
                "run_id": row.run_id,
                "finished_at": row.finished_at.isoformat() if row.finished_at else None,
                "status": row.status,
                "answer": row.answer,
                "changed": changed,
                "reused_solution": row.reused_solution,
                "llm_calls": row.llm_calls,
                "cost_usd": row.cost_usd,
                "data": row.data,
            }
        )
        if row.answer is not None:
            previous[row.data] = row.answer
    if fmt is Format.json:
        sys.stdout.write(json_line({"question": question, "answers": rows}))
        return
    if not rows:
        err.print(f"no runs of this question under {ledger.storage}")
        raise typer.Exit(EXIT_OK)
    table = [
        [str(r["finished_at"] or "")[:16] or None, r["data"], r["status"], r["answer"],
         "changed" if r["changed"] else ("reused" if r["reused_solution"] else None),
         r["llm_calls"], money(r["cost_usd"]), r["run_id"]]
        for r in rows
    ]  # fmt: skip
    columns = ("finished", "data", "status", "answer", "mark", "calls", "cost", "run id")
    print_table(columns, table, fmt, keep=("finished", "run id"))
