"""The `dsstar` command line.

Exit codes: 0 an answer was produced (verified or max_rounds), 1 the run failed,
2 bad usage or input. With --json, stdout carries exactly one JSON object; everything else
(logs, progress) goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from .errors import DSStarError, UsageError
from .settings import Settings

__all__ = ["app"]

app = typer.Typer(
    name="dsstar",
    help="DS-STAR: answer questions about a folder or bucket of data files with an LLM agent "
    "that analyzes every file, then plans, codes, executes, verifies and routes in rounds.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, soft_wrap=True)


@app.callback()
def _main() -> None:
    """Settings come from flags, then DSSTAR_* environment variables, then defaults."""


EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

DataOpt = Annotated[
    str, typer.Option("--data", help="Folder, single file or URL (s3://bucket/prefix) of the data.")
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on stdout; logs go to stderr.")
]


def _prefect_quietly(verbose: bool) -> None:
    """Prefect reads its settings at import. Without --verbose its console handler stays
    silent (the CLI reports errors itself); logs still reach the Prefect API and UI."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")


def _settings(**flags: Any) -> Settings:
    try:
        return Settings(**{k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:
        raise UsageError(f"invalid setting: {exc}") from exc


def _fail_usage(message: str) -> None:
    err.print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(EXIT_USAGE)


@app.command()
def run(
    data: DataOpt,
    question: Annotated[str, typer.Option("--question", "-q", help="The question to answer.")],
    guidelines: Annotated[
        str, typer.Option(help="How the answer must be formatted, e.g. 'a number, 2 decimals'.")
    ] = "",
    model: Annotated[
        str | None, typer.Option(help="litellm model for every agent [env: DSSTAR_MODEL].")
    ] = None,
    api_base: Annotated[
        str | None, typer.Option(help="Model server URL, e.g. Ollama or vLLM [DSSTAR_API_BASE].")
    ] = None,
    agent_model: Annotated[
        list[str] | None,
        typer.Option(
            help="Per-agent model, AGENT=MODEL; repeatable, e.g. verifier=openai/gpt-4o-mini."
        ),
    ] = None,
    max_rounds: Annotated[
        int | None, typer.Option(help="Most rounds before finalizing [default 20].")
    ] = None,
    max_debug_attempts: Annotated[
        int | None, typer.Option(help="Most debugger repairs per failing script [default 3].")
    ] = None,
    exec_timeout: Annotated[
        float | None, typer.Option(help="Seconds one generated script may run [default 120].")
    ] = None,
    exec_memory_mb: Annotated[
        int | None, typer.Option(help="Memory limit of one generated script in MB [default 4096].")
    ] = None,
    storage: Annotated[
        str | None,
        typer.Option(
            help="Where runs are stored: folder or s3://bucket/prefix [default ~/.dsstar]."
        ),
    ] = None,
    run_id: Annotated[
        str | None, typer.Option(help="Use this run id instead of a generated one.")
    ] = None,
    reuse: Annotated[
        bool,
        typer.Option(help="Try the last verified solution of this question over this data first."),
    ] = True,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
) -> None:
    """Answer QUESTION from the files under --data with the DS-STAR loop.

    Example: dsstar run --data examples/sales --question "Which region had the highest revenue?"
    """
    _prefect_quietly(verbose)
    try:
        overrides = {
            "model": model,
            "api_base": api_base,
            "agent_models": _agent_models(agent_model),
            "max_rounds": max_rounds,
            "max_debug_attempts": max_debug_attempts,
            "exec_timeout": exec_timeout,
            "exec_memory_mb": exec_memory_mb,
            "storage": storage,
            "reuse": reuse,
        }
        settings = _settings(**overrides)
        from .llm import require_model

        require_model(settings)
        _check_data(data)
        if not question.strip():
            raise UsageError("--question is empty")
    except DSStarError as exc:
        _fail_usage(str(exc))

    from .storage import new_run_id

    named = {"model", "storage", "max_rounds", "reuse"}  # flow parameters of their own
    options = {k: v for k, v in overrides.items() if v is not None and k not in named}
    params = {"question": question, "data": data, "guidelines": guidelines}
    _run_flow(run_id or new_run_id(), params, settings, options, as_json)


def _run_flow(
    run_id: str, params: dict[str, str], settings: Settings, options: dict, as_json: bool
) -> None:
    """Run (or resume) the ds-star flow in this process, report its result and exit."""
    from flows.ds_star import ds_star

    with _live_progress(enabled=not as_json):
        state = ds_star(
            **params,
            model=settings.model,
            max_rounds=settings.max_rounds,
            storage=settings.storage,
            reuse=settings.reuse,
            run_id=run_id,
            options=options,
            return_state=True,
        )
    result = _result_of(state, settings.storage, run_id)
    _report(result, as_json)
    raise typer.Exit(EXIT_OK if result["status"] in {"verified", "max_rounds"} else EXIT_FAILED)


StorageOpt = Annotated[
    str | None, typer.Option(help="Where runs are stored [env: DSSTAR_STORAGE; ~/.dsstar].")
]


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    storage: StorageOpt = None,
    model: Annotated[
        str | None, typer.Option(help="Use another model from here on [env: DSSTAR_MODEL].")
    ] = None,
    api_base: Annotated[str | None, typer.Option(help="Model server URL.")] = None,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
) -> None:
    """Continue a failed or interrupted run from its storage.

    Finished file analyses, LLM calls and executions are read back from the run's cache, not
    redone: the model is asked only what the earlier attempts never got an answer to.

    Example: dsstar resume 20261121-193000-3fa2c1 --json
    """
    _prefect_quietly(verbose)
    from .report import run_result
    from .storage import Store

    try:
        store = Store(_settings(storage=storage).storage)
        record = store.read_json(f"runs/{run_id}/run.json")
    except FileNotFoundError:
        _fail_usage(f"no run {run_id} under {store.url}")
    except DSStarError as exc:
        _fail_usage(str(exc))
    if record.get("status") in {"verified", "max_rounds"}:
        err.print(f"run {run_id} already finished ({record['status']}); nothing to resume.")
        _report(run_result(record, store.uri(f"runs/{run_id}")), as_json)
        raise typer.Exit(EXIT_OK)
    # The run continues with the settings it started with (so its cache keys match), except
    # where this command says otherwise. Keys were never stored; they come from the env.
    stored = dict(record.get("settings") or {})
    stored.update({k: v for k, v in {"model": model, "api_base": api_base}.items() if v})
    stored["storage"] = store.url
    try:
        settings = _settings(**stored)
    except DSStarError as exc:
        _fail_usage(str(exc))
    named = {"model", "storage", "max_rounds", "reuse"}
    options = {k: v for k, v in stored.items() if k not in named and v is not None}
    params = {k: record[k] for k in ("question", "data", "guidelines")}
    _run_flow(run_id, params, settings, options, as_json)


def _agent_models(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    models = {}
    for pair in pairs:
        agent, sep, name = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--agent-model expects AGENT=MODEL, got {pair!r}")
        models[agent.strip()] = name.strip()
    return models


def _check_data(data: str) -> None:
    if "://" in data and not data.startswith("file://"):
        return  # remote: checked when the run opens it
    path = Path(data.removeprefix("file://")).expanduser()
    if not path.exists():
        raise UsageError(f"--data {data}: no such file or folder")


def _result_of(state: Any, storage: str, run_id: str) -> dict[str, Any]:
    """The run's JSON result; for a failed flow, rebuilt from its stored run.json."""
    if not state.is_failed() and not state.is_crashed():
        return state.result()
    exc = state.result(raise_on_failure=False)
    from .report import run_result
    from .storage import Store

    store = Store(storage)
    record: dict[str, Any] = {"run_id": run_id}
    try:
        record = store.read_json(f"runs/{run_id}/run.json")
    except (OSError, DSStarError):
        pass  # the run failed before it could store anything
    record["status"] = "failed"
    record.setdefault("error", f"{type(exc).__name__}: {exc}")
    return run_result(record, store.uri(f"runs/{run_id}"))


def _report(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
        return
    out = Console(soft_wrap=True)
    colour = {"verified": "green", "max_rounds": "yellow"}.get(result["status"], "red")
    err.print(
        f"[{colour}]{result['status']}[/{colour}] · run {result['run_id']} · {result['rounds']}"
        f" rounds · {result['llm_calls']} LLM calls · {result['input_tokens']}+"
        f"{result['output_tokens']} tokens · cost {_money(result['cost_usd'])}",
        highlight=False,
    )
    if result.get("error"):
        err.print(f"[red]error:[/red] {result['error']}", highlight=False)
    err.print(f"artifacts: {result['artifacts_uri']}", highlight=False)
    if result.get("answer") is not None:
        out.print(result["answer"], highlight=False, markup=False)


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


class _live_progress:
    """A one-line live display on stderr: stage or round, agent, elapsed, tokens, cost."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.started = time.monotonic()
        self.state: dict[str, Any] = {"where": "starting", "agent": "", "tokens": 0, "cost": 0.0}

    def __enter__(self) -> _live_progress:
        if self.enabled:
            from . import progress

            self.status = err.status(self._line())
            self.status.__enter__()
            self.stop = progress.listen(self._on_event)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.stop()
            self.status.__exit__(None, None, None)

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "stage":
            self.state["where"] = f"analyzing {event['total']} files"
        elif kind == "llm":
            self.state["agent"] = event["label"]
        elif kind == "llm_done":
            self.state["tokens"] += event["input_tokens"] + event["output_tokens"]
            self.state["cost"] += event.get("cost_usd") or 0.0
        elif kind == "round":
            verdict = "sufficient" if event["sufficient"] else "not sufficient"
            self.state["where"] = f"round {event['number']:02d} {verdict}"
        self.status.update(self._line())

    def _line(self) -> str:
        elapsed = int(time.monotonic() - self.started)
        s = self.state
        return (
            f"{s['where']} · {s['agent'] or '-'} · {elapsed // 60:02d}:{elapsed % 60:02d}"
            f" · {s['tokens']:,} tokens · ${s['cost']:.4f}"
        )


ModelOpt = Annotated[str | None, typer.Option(help="litellm model [env: DSSTAR_MODEL].")]
ApiBaseOpt = Annotated[str | None, typer.Option(help="Model server URL [env: DSSTAR_API_BASE].")]
OfflineOpt = Annotated[
    bool, typer.Option("--offline", help="Use the built-in profiler instead of the LLM analyzer.")
]


def _descriptions(data: str, offline: bool, **flags: Any) -> list[dict[str, Any]]:
    """Every file's description: the built-in profiler offline, else the analyzer agent."""
    settings = _settings(**flags)
    _check_data(data)
    if offline:
        import tempfile

        from .data import DataSource
        from .profiler import profile_file

        source = DataSource(data, Path(tempfile.gettempdir()) / "dsstar-cache")
        return [
            {
                "path": f.path,
                "format": f.format,
                "description": profile_file(source.mount_dir / f.path, f.path),
                "error": None,
            }
            for f in source.files()
        ]
    from .llm import require_model

    require_model(settings)
    from flows.describe import describe as describe_flow

    options = {k: v for k, v in flags.items() if v is not None}
    with _live_progress(enabled=True):
        return describe_flow(data=data, options=options)


@app.command()
def describe(
    data: DataOpt,
    offline: OfflineOpt = False,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
) -> None:
    """Describe every file under --data (the analysis stage alone).

    Example: dsstar describe --data examples/sales --offline
    """
    _prefect_quietly(verbose)
    try:
        files = _descriptions(data, offline, model=model, api_base=api_base)
    except DSStarError as exc:
        _fail_usage(str(exc))
    if as_json:
        keys = ("path", "format", "description", "error")
        payload = {"files": [{k: f.get(k) for k in keys} for f in files]}
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
        return
    out = Console(soft_wrap=True)
    for f in files:
        out.rule(f"{f['path']} ({f['format']})")
        out.print(f["description"], markup=False, highlight=False)


@app.command()
def retrieve(
    data: DataOpt,
    question: Annotated[str, typer.Option("--question", "-q", help="The question to rank for.")],
    top_k: Annotated[int, typer.Option(help="How many files to list.")] = 10,
    offline: OfflineOpt = False,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the files most relevant to --question, best first, with their similarity scores.

    Example: dsstar retrieve --data examples/sales -q "revenue by region" --offline
    """
    _prefect_quietly(False)
    try:
        files = _descriptions(data, offline, model=model, api_base=api_base)
    except DSStarError as exc:
        _fail_usage(str(exc))
    from .retrieval import rank

    ranking = rank(question, {f["path"]: f["description"] for f in files})[:top_k]
    if as_json:
        payload = {"files": [{"path": path, "score": score} for path, score in ranking]}
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    for path, score in ranking:
        Console(soft_wrap=True).print(f"{score:.3f}  {path}", highlight=False)


runs_app = typer.Typer(
    help="Inspect stored runs (local folders and S3 alike).", no_args_is_help=True
)
app.add_typer(runs_app, name="runs")


@runs_app.command("list")
def runs_list(
    storage: StorageOpt = None,
    limit: Annotated[int, typer.Option(help="How many runs, newest first.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """Recent runs: id, question, status, rounds, cost, started."""
    from rich.table import Table

    from .runs import list_runs
    from .storage import Store

    try:
        runs = list_runs(Store(_settings(storage=storage).storage), limit)
    except DSStarError as exc:
        _fail_usage(str(exc))
    if as_json:
        sys.stdout.write(json.dumps({"runs": runs}, ensure_ascii=False) + "\n")
        return
    table = Table("run id", "question", "status", "rounds", "cost", "started")
    for r in runs:
        question = r["question"] if len(r["question"]) <= 60 else r["question"][:57] + "..."
        table.add_row(
            r["run_id"], question, str(r["status"]), str(r["rounds"]),
            _money(r["cost_usd"]), str(r["started_at"] or ""),
        )  # fmt: skip
    Console(soft_wrap=True).print(table)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="The run to show.")],
    round_number: Annotated[
        int | None, typer.Option("--round", help="Show this round's plan, code and output.")
    ] = None,
    storage: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A run's round table (step, verdict, route, tokens, cost, seconds), or one round."""
    from .runs import read_round, read_run
    from .storage import Store

    try:
        store = Store(_settings(storage=storage).storage)
        payload = (
            read_round(store, run_id, round_number)
            if round_number is not None
            else read_run(store, run_id)
        )
    except DSStarError as exc:
        _fail_usage(str(exc))
    if as_json:
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
    elif round_number is not None:
        _print_round(payload)
    else:
        _print_run(payload, store.uri(f"runs/{run_id}"))


def _print_run(record: dict[str, Any], uri: str) -> None:
    from rich.table import Table

    out = Console(soft_wrap=True)
    out.print(f"[bold]{record['run_id']}[/bold] · {record.get('status')} · {uri}")
    out.print(f"question: {record.get('question')}", markup=False, highlight=False)
    if record.get("answer") is not None:
        out.print(f"answer: {record['answer']}", markup=False, highlight=False)
    if record.get("error"):
        out.print(f"[red]error:[/red] {record['error']}", highlight=False)
    table = Table("round", "step", "verdict", "route", "tokens", "cost", "seconds")
    for row in record.get("round_table") or []:
        verdict = {True: "Yes", False: "No"}.get(row["verdict"], "-")
        table.add_row(
            f"{row['round']:02d}", row["step"], verdict, row["route"] or "-",
            f"{row['input_tokens'] + row['output_tokens']:,}", _money(row["cost_usd"]),
            f"{row['seconds']:.1f}",
        )  # fmt: skip
    out.print(table)
    out.print(
        f"{record.get('llm_calls', 0)} LLM calls · {record.get('input_tokens', 0):,} in /"
        f" {record.get('output_tokens', 0):,} out · cost {_money(record.get('cost_usd'))}"
    )


def _print_round(found: dict[str, Any]) -> None:
    from rich.syntax import Syntax

    out = Console(soft_wrap=True)
    out.rule(f"round {found['round']:02d}")
    if "route" in found:
        out.print(f"opened by route: {found['route'].get('decision')}", highlight=False)
    for i, step in enumerate(found.get("plan") or [], 1):
        out.print(f"{i}. {step}", markup=False, highlight=False)
    if "code" in found:
        out.print(Syntax(found["code"], "python", line_numbers=True))
    out.rule("output")
    out.print(found.get("output", ""), markup=False, highlight=False)
    if "verdict" in found:
        sufficient = found["verdict"].get("sufficient")
        out.rule(f"verdict: {'sufficient' if sufficient else 'not sufficient'}")


@app.command()
def serve(
    questions_file: Annotated[
        str, typer.Option(help="Question set (YAML) the nightly deployment answers.")
    ] = "deployments/questions.yaml",
    cron: Annotated[str, typer.Option(help="When the nightly batch runs (cron).")] = "0 2 * * *",
    timezone: Annotated[str, typer.Option(help="Time zone of --cron, e.g. Europe/Paris.")] = "UTC",
    limit: Annotated[int, typer.Option(help="Most flow runs executed at once.")] = 4,
) -> None:
    """Serve the deployments ds-star/on-demand and ds-star-nightly/nightly from this process.

    Runs triggered from the Prefect UI (a form with question, data, model, rounds...) and the
    nightly schedule execute here. Needs PREFECT_API_URL (e.g. `prefect server start`).

    Example: dsstar serve --cron "0 2 * * *" --timezone Europe/Paris
    """
    from prefect import serve as prefect_serve
    from prefect.schedules import Cron

    from flows.ds_star import ds_star
    from flows.nightly import ds_star_nightly

    on_demand = ds_star.to_deployment(
        name="on-demand",
        description="Answer one question about a folder or bucket of data files.",
        tags=["dsstar"],
    )
    nightly = ds_star_nightly.to_deployment(
        name="nightly",
        description="Answer every question of the nightly question set.",
        schedules=[Cron(cron, timezone=timezone, slug="nightly")],
        parameters={"questions_file": str(Path(questions_file).resolve())},
        tags=["dsstar"],
    )
    err.print(f"serving ds-star/on-demand and ds-star-nightly/nightly ({cron}, {timezone})")
    prefect_serve(on_demand, nightly, limit=limit)


@app.command()
def history(
    question: Annotated[str, typer.Argument(help="The question, as it was asked.")],
    guidelines: Annotated[str, typer.Option(help="Its formatting guidelines, if any.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """The answers a question got over time, oldest first, marking where the answer changed.

    Example: dsstar history "Which region had the highest revenue in 2024 H1?"
    """
    from rich.table import Table

    from .ledger import Ledger, question_key

    try:
        ledger = Ledger(_settings().database_url)
        runs = ledger.history(question_key(question, guidelines))
    except DSStarError as exc:
        _fail_usage(str(exc))
    rows, previous = [], None
    for row in runs:
        changed = previous is not None and row.answer is not None and row.answer != previous
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
        previous = row.answer if row.answer is not None else previous
    if as_json:
        sys.stdout.write(json.dumps({"question": question, "answers": rows}) + "\n")
        return
    if not rows:
        err.print("no runs of this question in the ledger")
        raise typer.Exit(EXIT_OK)
    table = Table("finished", "run id", "status", "answer", "", "calls", "cost")
    for r in rows:
        mark = "[yellow]changed[/yellow]" if r["changed"] else ""
        mark = mark or ("reused" if r["reused_solution"] else "")
        table.add_row(
            str(r["finished_at"] or ""), r["run_id"], r["status"], str(r["answer"]), mark,
            str(r["llm_calls"]), _money(r["cost_usd"]),
        )  # fmt: skip
    Console(soft_wrap=True).print(table)
