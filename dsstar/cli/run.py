"""`dsstar run` and `dsstar resume`."""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack
from typing import Annotated, Any

import typer
from rich.text import Text

from dsstar.algorithm.verdict import ANSWERED, Status
from dsstar.api import PreparedRun, prepare_run, run_prepared
from dsstar.cli._app import (
    EXIT_FAILED,
    EXIT_OK,
    DataOpt,
    JsonOpt,
    StorageOpt,
    app,
    err,
    fail_usage,
    flag_name,
    invoked,
    load_settings,
    prefect_quietly,
    settings_flags,
)
from dsstar.cli._output import LiveProgress, report
from dsstar.errors import DSStarError, RunIdInUse, UsageError
from dsstar.execution import stopping
from dsstar.inputs.fields import is_cap
from dsstar.inputs.preflight import unreadable_warning
from dsstar.keys import run_folder, run_record
from dsstar.settings import Settings
from dsstar.storage import check_run_id

# The settings `dsstar run` has a flag for; every other one is a DSSTAR_ variable (and a
# field of the run form in the Prefect UI). Type, help and bounds come from Settings.
RUN_FLAGS = (
    "model",
    "api_base",
    "max_rounds",
    "max_debug_attempts",
    "max_cost",
    "max_tokens",
    "exec_timeout",
    "exec_memory_mb",
    "sandbox",
    "storage",
    "max_parallel",
    "llm_concurrency",
    "reuse",
    "ask_human",
    "human_timeout",
    "ask_ahead",
    "read_charts",
    "task_runner",
    "dask_address",
)


@app.command()
@settings_flags(*RUN_FLAGS)
def run(
    data: DataOpt,
    question: Annotated[str, typer.Option("--question", "-q", help="The question to answer.")],
    guidelines: Annotated[
        str, typer.Option(help="How the answer must be formatted, e.g. 'a number, 2 decimals'.")
    ] = "",
    agent_model: Annotated[
        list[str] | None,
        typer.Option(
            help="Per-agent model, AGENT=MODEL; repeatable, e.g. verifier=openai/gpt-4o-mini"
            " \\[env: DSSTAR_AGENT_MODELS as JSON]."
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            help="Use this run id instead of a generated one. A stored run's id continues that"
            " run, given its own question, data and settings; anything else is refused."
        ),
    ] = None,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
    flags: dict[str, Any] | None = None,
) -> None:
    """Answer the --question from the files under --data with the DS-STAR loop.

    Example: dsstar run --data examples/sales --question "Which region had the highest revenue?"
    """
    prefect_quietly(verbose)
    chosen = {k: v for k, v in (flags or {}).items() if v is not None}
    try:
        models = _agent_models(agent_model)
        prepared = prepare_run(
            question=question, data=data, guidelines=guidelines, run_id=run_id, name=flag_name,
            **chosen, **({"agent_models": models} if models else {}),
        )  # fmt: skip
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    warning = unreadable_warning(data)
    if warning:  # a warning, not a refusal: a format we do not know may still be readable
        err.print(Text.assemble(("warning:", "yellow"), " ", warning), highlight=False)
    _run_report_exit(prepared, as_json)


def _run_report_exit(prepared: PreparedRun, as_json: bool) -> None:
    """Run (or resume) the ds-star flow in this process, report its result and exit."""
    result = run_with_progress(prepared, as_json)
    report(result, as_json)
    if result["status"] == Status.STOPPED:  # a person chose to stop: not a failure
        err.print(
            f"stopped by request after round {result['rounds'] - 1:02d}; everything so far is"
            f" stored: {invoked()} runs show {prepared.form.run_id}",
            highlight=False,
        )
    raise typer.Exit(EXIT_OK if result["status"] in ANSWERED | {Status.STOPPED} else EXIT_FAILED)


def run_with_progress(prepared: PreparedRun, as_json: bool) -> dict[str, Any]:
    """Run (or resume) the ds-star flow in this process with the live progress line; returns
    its result. Exits 2 when the run could not start for want of good input (the message
    says why)."""
    settings, run_id = prepared.settings, prepared.form.run_id
    err.print(f"run {run_id}")  # on stderr at once: the id to resume it by

    def around() -> ExitStack:
        shown = ExitStack()
        live = shown.enter_context(
            LiveProgress(enabled=not as_json, interval=settings.progress_interval)
        )
        shown.enter_context(_terminal_prompt(settings, live))
        return shown

    with stopping.on_stop(_stop_hook(settings, run_id, prepared.form.data, as_json)):
        result, error = run_prepared(prepared, around)
    if stopping.requested():  # the run unwound after SIGINT/SIGTERM: `stop` reports it
        stopping.finish()
    if isinstance(error, RunIdInUse):  # run.json is another run's: not this one's result
        fail_usage(str(error), as_json)
    # Bad input. A model or key refused at a call is a run that failed (exit 1): the
    # preflight passed, the run is stored, and `dsstar resume --model ...` continues it.
    if isinstance(error, UsageError):
        fail_usage(str(error).splitlines()[0], as_json, result)
    return result


def _terminal_prompt(settings: Settings, live: LiveProgress) -> Any:
    """With --ask-human on a terminal, the run asks here instead of in the Prefect UI."""
    from contextlib import nullcontext

    if not (settings.ask_human and sys.stdin.isatty()):
        return nullcontext()
    from dsstar.cli._prompt import TerminalAsker
    from flows import answer_in_terminal

    return answer_in_terminal(TerminalAsker(err, sys.stdin, live.pause, live.resume))


def _stop_hook(settings: Settings, run_id: str, data: str, as_json: bool) -> stopping.Hook:
    """What a stopped run leaves: run.json and the ledger say `interrupted`, the user learns
    how to resume it (naming its `data` when a resume would not take it from storage)."""

    def stop(signum: int) -> None:
        import signal

        from dsstar.model.ceiling import meter
        from dsstar.storage import Store
        from dsstar.views.listing import mark_interrupted
        from dsstar.views.report import run_result

        store = Store(settings.storage)
        reason = f"interrupted by {signal.Signals(signum).name}"
        received = meter(run_id).calls()  # what the run was paid for, if it could not say
        record = mark_interrupted(store, run_id, reason, settings.database_url, received)
        if record is None:
            err.print(f"{reason} before run {run_id} stored anything", highlight=False)
            return
        if as_json:
            sys.stdout.write(json.dumps(run_result(record, store.uri(run_folder(run_id)))) + "\n")
        from dsstar.inputs.stored import resume_arguments

        resume = f"{invoked()} resume {resume_arguments(run_id, data)}"
        err.print(f"{reason}; continue with: {resume}", highlight=False)

    return stop


# The data location a run taken from storage reads, when the user names it (resume, replay).
StoredDataOpt = Annotated[
    str | None,
    typer.Option(
        "--data",
        help="The run's data (folder, file or URL), named by you: a location its stored record"
        " names is taken only under DSSTAR_DATA_ROOTS.",
    ),
]


# The caps `dsstar run` has a flag for: a new cap in RUN_FLAGS is a flag of run, resume and
# bench run. `dsstar resume` has them with the model and its server: a run continues with its
# stored settings, and these are the user's own choices over them, judged as their own.
CAP_FLAGS = tuple(name for name in RUN_FLAGS if is_cap(name))
RESUME_FLAGS = ("model", "api_base", *CAP_FLAGS)


@app.command()
@settings_flags(*RESUME_FLAGS)
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to continue.", metavar="RUN_ID")],
    flags: dict[str, Any],
    storage: StorageOpt = None,
    data: StoredDataOpt = None,
    force: Annotated[
        bool,
        typer.Option(help="Resume even if the run may still be running on another host."),
    ] = False,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
) -> None:
    """Continue a failed, interrupted, over-budget or stale run (its process gone).

    Finished file analyses, LLM calls and executions are read back from the run's cache, not
    redone: the model is asked only what the earlier attempts never got an answer to. On the
    Prefect server it ran on, it goes on in its own flow run, one attempt more. A run
    that stopped over_budget goes on with a higher --max-cost or --max-tokens: the ceiling
    bounds the whole run, what it spent before included. --model uses another model from
    here on; --max-rounds and the other caps bound the rest of the run. A flag left out keeps
    the run's own value.

    The stored run is data, not settings for this process: it continues under this
    process's policy (DSSTAR_* variables and the flags here), and takes from its record
    only what a run form could choose; its data must lie under DSSTAR_DATA_ROOTS unless
    --data names it (docs/sandbox.md).

    Example: dsstar resume 20261121-193000-3fa2c1 --json
    """
    prefect_quietly(verbose)
    from dsstar.inputs.stored import StoredRun, judged
    from dsstar.storage import Store
    from dsstar.views.report import run_result

    try:
        check_run_id(run_id)
        store = Store(load_settings(storage=storage).storage)
        record = store.read_json(run_record(run_id))
    except FileNotFoundError:
        fail_usage(f"no run {run_id} under {store.url}", as_json)
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    if record.get("status") in ANSWERED:
        err.print(f"run {run_id} already finished ({record['status']}); nothing to resume.")
        _settle_answered(record)
        report(run_result(record, store.uri(run_folder(run_id))), as_json)
        raise typer.Exit(EXIT_OK)
    _refuse_if_running(record, force, as_json)

    # The run continues with the settings it started with (so its cache keys match), as far
    # as this process would let a form choose them; the flags here are this user's own.
    own = {name: value for name, value in flags.items() if value not in (None, "")}
    own["storage"] = store.url
    is_report = record.get("kind") == "report"  # a report: its bounds too, as it was started
    try:
        stored = StoredRun.of(run_id, record)
        options, policy, location = judged(stored, own, data, _RESUME_FLAGS.get)
        texts = {"question": stored.question, "data": location, "guidelines": stored.guidelines}
        if is_report:
            from dsstar.api import prepare_report
            from dsstar.inputs.report import stored_bounds

            prepared = prepare_report(**texts, run_id=run_id, name=flag_name, policy=policy,
                                      **stored_bounds(record), **options)  # fmt: skip
        else:
            prepared = prepare_run(**texts, run_id=run_id, name=flag_name, policy=policy,
                                   **options)  # fmt: skip
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    if is_report:
        from dsstar.cli.report import run_report_flow

        run_report_flow(prepared, as_json)
    _run_report_exit(prepared, as_json)


# The settings `dsstar resume` has a flag for (named in its refusals).
_RESUME_FLAGS = {name: "--" + name.replace("_", "-") for name in RESUME_FLAGS}


def _settle_answered(record: dict[str, Any]) -> None:
    """A run killed after it stored its answer, before Prefect heard of it, may have been
    marked Crashed (by the server's automation): its flow run is Completed, as the run is."""
    from dsstar.execution.scratch import owner_alive

    if not record.get("flow_run_id") or owner_alive(
        record.get("host"), record.get("pid"), record.get("pid_started")
    ):
        return  # its process may still be reporting its end itself
    import flows

    if flows.api_configured():
        flows.settle_run(record, "its process ended before it said so")


def _refuse_if_running(record: dict[str, Any], force: bool, as_json: bool) -> None:
    """A run whose process still works must not be resumed beside it."""
    from dsstar.records.state import STALE_AFTER_S, liveness

    state = liveness(record)
    where = f"pid {record.get('pid')} on {record.get('host')}"
    if state == "alive":
        fail_usage(
            f"run {record['run_id']} is still running ({where}); stop it first"
            f" (kill -INT {record.get('pid')}) or wait for it.",
            as_json,
        )
    if state == "unknown" and not force:
        fail_usage(
            f"run {record['run_id']} may still be running ({where}, last heartbeat"
            f" {record.get('heartbeat_at')}); it counts as stale {STALE_AFTER_S // 3600} h after"
            " its last heartbeat, or pass --force.",
            as_json,
        )


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
