"""`dsstar run` and `dsstar resume`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..errors import DSStarError, UsageError
from ..sandbox import resolve_mode
from ..settings import Settings
from ..storage import check_run_id, new_run_id
from ._app import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    DaskAddressOpt,
    DataOpt,
    JsonOpt,
    StorageOpt,
    TaskRunnerOpt,
    app,
    check_data,
    err,
    fail_usage,
    load_settings,
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
            "storage": storage,
            "reuse": reuse,
            "task_runner": task_runner,
            "dask_address": dask_address,
        }
        settings = load_settings(**overrides)
        from ..llm import require_model

        require_model(settings)
        resolve_mode(settings.sandbox)
        check_data(data)
        if run_id:
            check_run_id(run_id)
        if not question.strip():
            raise UsageError("--question is empty")
    except DSStarError as exc:
        fail_usage(str(exc), as_json)

    named = {"model", "storage", "max_rounds", "reuse"}  # flow parameters of their own
    options = {k: v for k, v in overrides.items() if v is not None and k not in named}
    params = {"question": question, "data": data, "guidelines": guidelines}
    _run_flow(run_id or new_run_id(), params, settings, options, as_json)


def _run_flow(
    run_id: str, params: dict[str, str], settings: Settings, options: dict, as_json: bool
) -> None:
    """Run (or resume) the ds-star flow in this process, report its result and exit."""
    from flows._runners import build_task_runner
    from flows.ds_star import ds_star

    error: BaseException | None = None
    try:
        with LiveProgress(enabled=not as_json):
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
            result = state.result()
        else:
            error = state.result(raise_on_failure=False)
            result = _failed_result(settings.storage, run_id, error)
    except Exception as exc:  # e.g. the Prefect API is unreachable: a report, not a traceback
        error = exc
        result = _failed_result(settings.storage, run_id, exc)
    report(result, as_json)
    if isinstance(error, UsageError):  # bad input found inside the run (e.g. an empty folder)
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(EXIT_OK if result["status"] in {"verified", "max_rounds"} else EXIT_FAILED)


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
    # The run continues with the settings it started with (so its cache keys match), except
    # where this command says otherwise. Keys were never stored; they come from the env.
    stored = dict(record.get("settings") or {})
    stored.update({k: v for k, v in {"model": model, "api_base": api_base}.items() if v})
    stored["storage"] = store.url
    try:
        settings = load_settings(**stored)
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
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
