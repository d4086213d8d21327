"""`dsstar serve`: the deployments from one process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from dsstar.cli._app import (
    LLMConcurrencyOpt,
    MaxParallelOpt,
    app,
    err,
    fail_usage,
    load_settings,
    setting_option,
)
from dsstar.cli.alerts import NotifyOpt, check_notify_server, set_up_alerts
from dsstar.errors import DSStarError, UsageError
from dsstar.execution import stopping
from dsstar.inputs.preflight import check_model, check_priced
from dsstar.inputs.questions import PROJECT_DIR, load_questions
from dsstar.settings import Settings


@app.command()
def serve(
    questions_file: Annotated[
        str,
        typer.Option(
            help="Question set (YAML) the nightly deployment answers; a relative path is"
            " looked up in the project folder (where deployments/ is), then in the current one."
        ),
    ] = "deployments/questions.yaml",
    report_file: Annotated[
        str | None,
        typer.Option(
            help="A report's question (YAML, as examples/sales-report.yaml: question, data,"
            " guidelines) that the deployment ds-star-report/report-nightly answers every night"
            " on the --cron schedule. Unset: reports on demand only."
        ),
    ] = None,
    cron: Annotated[str, typer.Option(help="When the nightly batch runs (cron).")] = "0 2 * * *",
    timezone: Annotated[str, typer.Option(help="Time zone of --cron, e.g. Europe/Paris.")] = "UTC",
    limit: Annotated[int, typer.Option(help="Most flow runs executed at once.")] = 4,
    max_parallel: MaxParallelOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
    notify: NotifyOpt = None,
    max_cost: Annotated[
        float | None,
        setting_option(
            "max_cost",
            "Most USD each nightly batch (all its questions and their shared analysis) and"
            " each on-demand run may spend; run forms may lower it, never raise it.",
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        setting_option("max_tokens", "The same ceiling in tokens, for models without a price."),
    ] = None,
) -> None:
    """Serve the deployments ds-star/on-demand, ds-star-nightly/nightly and
    ds-star-report/report-on-demand (with --report-file, ds-star-report/report-nightly too)
    from this process.

    Runs triggered from the Prefect UI (a form with question, data, model, rounds...) and the
    nightly schedules execute here, while this process runs. With PREFECT_API_URL set (e.g. to
    a `prefect server start`) the deployments live on that server. Without it, serve starts a
    temporary server that dies with this process: its deployments, schedules and runs vanish
    when serve stops, and its runs keep to their own bounds (no shared limits).

    This process decides what a run form may choose: data only under DSSTAR_DATA_ROOTS, and
    settings that weaken isolation or send credentials elsewhere (sandbox=none, api_base,
    storage...) only when DSSTAR_FORM_ALLOW names them. A warning says when the API accepts
    requests without credentials (see PREFECT_SERVER_API_AUTH_STRING).

    On SIGTERM or Ctrl-C, serve stops taking runs and pauses the nightly schedule (Prefect
    does so for served deployments); it resumes when serve starts again. Schedules that must
    run without this process belong on a work pool (prefect deploy, prefect worker start).

    All runs of the server share two global concurrency limits, created (or reset) here:
    dsstar-exec (--max-parallel scripts at once) and dsstar-llm (--llm-concurrency requests),
    and with DSSTAR_LLM_RPM set, the rate limit dsstar-llm-rpm (LLM requests per minute).

    With --notify BLOCK (repeatable), the nightly questions send alerts through those
    Prefect notification blocks: an answer that changed, a question that failed, a file that
    broke its data contract (see docs/alerts.md). The three automations are created on the
    server, or updated by name, so starting serve again does not duplicate them; they stay
    on the server after serve stops.

    Example: dsstar serve --cron "0 2 * * *" --timezone Europe/Paris --notify slack-webhook/team
    """
    try:
        settings = load_settings(
            max_parallel=max_parallel,
            llm_concurrency=llm_concurrency,
            max_cost=max_cost,
            max_tokens=max_tokens,
        )
        if settings.model or settings.agent_models:  # a typo'd agent, a model without a
            check_model(settings)  # price: they fail now, not at the first run
            check_priced(settings)
        questions = questions_path(questions_file)
        load_questions(questions)  # a missing or malformed set fails now, not at 2 a.m.
        report = _report_question(report_file) if report_file else None
        check_notify_server(notify)
    except DSStarError as exc:
        fail_usage(str(exc))
    # The served runs start in processes of their own: they read the ceiling from here.
    for name, value in (("DSSTAR_MAX_COST", max_cost), ("DSSTAR_MAX_TOKENS", max_tokens)):
        if value is not None:
            os.environ[name] = str(value)
    from flows import prefect_api

    with prefect_api():  # a temporary server, when none is configured, dies with this process
        if notify:
            set_up_alerts(notify)
        _serve(settings, questions, cron, timezone, limit, report)


def _report_question(name: str) -> dict[str, str]:
    """The first question of the YAML file `name` (found as a question set is), as the
    nightly report's parameters, its data made absolute."""
    from dataclasses import asdict

    found = load_questions(questions_path(name))
    if not found:
        raise UsageError(f"--report-file {name}: no question in it")
    return asdict(found[0])


def _serve(
    settings: Settings,
    questions: Path,
    cron: str,
    timezone: str,
    limit: int,
    report: dict[str, str] | None = None,
) -> None:
    from flows import open_api_warning, serve_deployments, share_limits

    shared = share_limits(settings)
    if shared is None:
        err.print(
            "warning: PREFECT_API_URL is not set: serving on a temporary Prefect server that"
            " ends with this process, taking its deployments, schedules and runs with it. For"
            " schedules that last: prefect server start, then export"
            " PREFECT_API_URL=http://127.0.0.1:4200/api",
            highlight=False,
        )
    warning = open_api_warning(settings)
    if warning:
        err.print(Text.assemble(("warning:", "yellow"), f" {warning}"))  # Text: never markup
    for line in shared or []:
        err.print(line)
    nightly = " and ds-star-report/report-nightly" if report else ""
    err.print(f"serving ds-star/on-demand, ds-star-report/report-on-demand, ds-star-nightly/"
              f"nightly{nightly} ({cron}, {timezone})")  # fmt: skip
    stopping.at_stop(_say_paused)  # also when the stop outlasts its grace period
    serve_deployments(questions, cron, timezone, limit, report)
    _say_paused()


_said: list[bool] = []


def _say_paused(*_: object) -> None:
    """Tell the user, once, what stopping serve did to the schedule and how to keep it."""
    if _said:
        return
    _said.append(True)
    err.print(
        "stopped serving: the schedule of ds-star-nightly/nightly is paused until dsstar serve"
        " runs again (or resume it in the UI: Deployments > nightly). To keep schedules"
        " running without this process, deploy to a work pool: prefect deploy --prefect-file"
        " deployments/prefect.yaml, then prefect worker start (see docs/operations.md).",
        highlight=False,
    )


def questions_path(name: str) -> Path:
    """The question set `name`: absolute as given; relative, in the project folder (where
    the default deployments/questions.yaml lives), else in the current folder."""
    path = Path(name).expanduser()
    if path.is_absolute():
        return path
    for root in (PROJECT_DIR, Path.cwd()):
        if (root / path).is_file():
            return (root / path).resolve()
    raise UsageError(
        f"question set {name} not found in the project ({PROJECT_DIR}) nor in the current folder"
        f" ({Path.cwd()}); pass --questions-file with an existing YAML file"
    )
