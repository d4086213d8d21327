"""`dsstar run` and `dsstar resume`."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from .. import stopping
from ..errors import DSStarError, LLMFatalError, UsageError
from ..preflight import preflight
from ..settings import Settings
from ..storage import check_run_id, new_run_id
from ..text import clean
from ._app import (
    EXIT_FAILED,
    EXIT_OK,
    DaskAddressOpt,
    DataOpt,
    JsonOpt,
    LLMConcurrencyOpt,
    MaxParallelOpt,
    StorageOpt,
    TaskRunnerOpt,
    app,
    err,
    fail_usage,
    load_settings,
    prefect_api,
    prefect_quietly,
)
from ._output import LiveProgress, report


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
        int | None,
        typer.Option(help="Memory limit of one generated script and its children in MB [4096]."),
    ] = None,
    sandbox: Annotated[
        str | None,
        typer.Option(
            help="Isolation of generated scripts: auto, bwrap, unshare or none (no isolation,"
            " explicit only) [default auto]."
        ),
    ] = None,
    storage: Annotated[
        str | None,
        typer.Option(
            help="Where runs are stored: folder or s3://bucket/prefix [default ~/.dsstar]."
        ),
    ] = None,
    max_parallel: MaxParallelOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
    run_id: Annotated[
        str | None, typer.Option(help="Use this run id instead of a generated one.")
    ] = None,
    reuse: Annotated[
        bool,
        typer.Option(help="Try the last verified solution of this question over this data first."),
    ] = True,
    task_runner: TaskRunnerOpt = None,
    dask_address: DaskAddressOpt = None,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
) -> None:
    """Answer QUESTION from the files under --data with the DS-STAR loop.

    Example: dsstar run --data examples/sales --question "Which region had the highest revenue?"
    """
    prefect_quietly(verbose)
    try:
        overrides = {
            "model": model,
            "api_base": api_base,
            "agent_models": _agent_models(agent_model),
            "max_rounds": max_rounds,
            "max_debug_attempts": max_debug_attempts,
            "exec_timeout": exec_timeout,
            "exec_memory_mb": exec_memory_mb,
            "sandbox": sandbox,
            "storage": storage,
            "reuse": reuse,
            "max_parallel": max_parallel,
            "llm_concurrency": llm_concurrency,
            "task_runner": task_runner,
            "dask_address": dask_address,
        }
        settings = load_settings(**overrides)
        if run_id:
            check_run_id(run_id)
        if not question.strip():
            raise UsageError("--question is empty")
        if clean(data) != data:  # Prefect sends parameters as UTF-8 JSON
            raise UsageError(f"--data {clean(data)}: the path is not valid UTF-8; rename it")
        preflight(settings, data)
    except DSStarError as exc:
        fail_usage(str(exc), as_json)

    named = {"model", "storage", "max_rounds", "reuse"}  # flow parameters of their own
    options = {k: v for k, v in overrides.items() if v is not None and k not in named}
    # Arguments that are not valid UTF-8 arrive with lone surrogates; the run sees U+FFFD.
    params = {"question": clean(question), "data": data, "guidelines": clean(guidelines)}
    _run_flow(run_id or new_run_id(), params, settings, options, as_json)


def _run_flow(
    run_id: str, params: dict[str, str], settings: Settings, options: dict, as_json: bool
) -> None:
    """Run (or resume) the ds-star flow in this process, report its result and exit."""
    err.print(f"run {run_id}", highlight=False)  # on stderr at once: the id to resume it by
    from flows._runners import build_task_runner
    from flows.ds_star import completed_result, ds_star

    from ..llm import preload

    preload()  # litellm's import overlaps the flow run's start
    error: BaseException | None = None
    stop = _stop_hook(settings, run_id, as_json)
    try:
        with stopping.on_stop(stop), prefect_api(), LiveProgress(enabled=not as_json):
            state = ds_star.with_options(task_runner=build_task_runner(settings))(
                **params,
                model=settings.model,
                max_rounds=settings.max_rounds,
                storage=settings.storage,
                reuse=settings.reuse,
                run_id=run_id,
                options=options,
                return_state=True,
            )
        if state.is_completed():
            result = completed_result(state, settings.storage, run_id)
        else:
            error = state.result(raise_on_failure=False)
            result = _failed_result(settings.storage, run_id, error)
    except Exception as exc:  # e.g. the Prefect API is unreachable: a report, not a traceback
        error = exc
        result = _failed_result(settings.storage, run_id, exc)
    if stopping.requested():  # the run unwound after SIGINT/SIGTERM: `stop` reports it
        stopping.finish()
    if isinstance(error, UsageError | LLMFatalError):  # bad input, a rejected key or model
        fail_usage(str(error).splitlines()[0], as_json, result)
    report(result, as_json)
    raise typer.Exit(EXIT_OK if result["status"] in {"verified", "max_rounds"} else EXIT_FAILED)


def _stop_hook(settings: Settings, run_id: str, as_json: bool) -> stopping.Hook:
    """What a stopped run leaves: run.json and the ledger say `interrupted`, the user learns
    how to resume it."""

    def stop(signum: int) -> None:
        import signal

        from ..report import run_result
        from ..runs import mark_interrupted
        from ..storage import Store

        store = Store(settings.storage)
        reason = f"interrupted by {signal.Signals(signum).name}"
        record = mark_interrupted(store, run_id, reason, settings.database_url)
        if record is None:
            err.print(f"{reason} before run {run_id} stored anything", highlight=False)
            return
        if as_json:
            sys.stdout.write(json.dumps(run_result(record, store.uri(f"runs/{run_id}"))) + "\n")
        err.print(f"{reason}; continue with: dsstar resume {run_id}", highlight=False)

    return stop


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to continue.")],
    storage: StorageOpt = None,
    model: Annotated[
        str | None, typer.Option(help="Use another model from here on [env: DSSTAR_MODEL].")
    ] = None,
    api_base: Annotated[str | None, typer.Option(help="Model server URL.")] = None,
    force: Annotated[
        bool,
        typer.Option(help="Resume even if the run may still be running on another host."),
    ] = False,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
) -> None:
    """Continue a failed, interrupted or stale run (its process gone) from its storage.

    Finished file analyses, LLM calls and executions are read back from the run's cache, not
    redone: the model is asked only what the earlier attempts never got an answer to.

    Example: dsstar resume 20261121-193000-3fa2c1 --json
    """
    prefect_quietly(verbose)
    from ..report import run_result
    from ..storage import Store

    try:
        check_run_id(run_id)
        store = Store(load_settings(storage=storage).storage)
        record = store.read_json(f"runs/{run_id}/run.json")
    except FileNotFoundError:
        fail_usage(f"no run {run_id} under {store.url}", as_json)
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    if record.get("status") in {"verified", "max_rounds"}:
        err.print(f"run {run_id} already finished ({record['status']}); nothing to resume.")
        report(run_result(record, store.uri(f"runs/{run_id}")), as_json)
        raise typer.Exit(EXIT_OK)
    _refuse_if_running(record, force, as_json)
    # The run continues with the settings it started with (so its cache keys match), except
    # where this command says otherwise. Keys were never stored; they come from the env.
    stored = dict(record.get("settings") or {})
    stored.update({k: v for k, v in {"model": model, "api_base": api_base}.items() if v})
    stored["storage"] = store.url
    try:
        settings = load_settings(**stored)
        preflight(settings, record["data"])
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    named = {"model", "storage", "max_rounds", "reuse"}
    options = {k: v for k, v in stored.items() if k not in named and v is not None}
    params = {k: record[k] for k in ("question", "data", "guidelines")}
    _run_flow(run_id, params, settings, options, as_json)


def _refuse_if_running(record: dict[str, Any], force: bool, as_json: bool) -> None:
    """A run whose process still works must not be resumed beside it."""
    from ..runs import STALE_AFTER_S, liveness

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


def _failed_result(storage: str, run_id: str, exc: BaseException | None) -> dict[str, Any]:
    """The JSON result of a run that did not finish, rebuilt from its stored run.json."""
    from ..report import run_result
    from ..storage import Store

    store = Store(storage)
    record: dict[str, Any] = {"run_id": run_id}
    try:
        record = store.read_json(f"runs/{run_id}/run.json")
    except (OSError, DSStarError):
        pass  # the run failed before it could store anything
    record["status"] = "failed"
    record.setdefault("error", f"{type(exc).__name__}: {exc}")
    return run_result(record, store.uri(f"runs/{run_id}"))
