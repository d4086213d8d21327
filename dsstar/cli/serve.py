"""`dsstar serve`: both deployments from one process."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path
from typing import Annotated, Any

import typer

from .._layout import SOURCE_ROOT
from ..errors import DSStarError, UsageError
from ..questions import load_questions
from ..settings import Settings
from ._app import (
    LLMConcurrencyOpt,
    MaxParallelOpt,
    app,
    err,
    fail_usage,
    load_settings,
    prefect_api,
)


@app.command()
def serve(
    questions_file: Annotated[
        str,
        typer.Option(
            help="Question set (YAML) the nightly deployment answers; a relative path is"
            " looked up in the project folder (where deployments/ is), then in the current one."
        ),
    ] = "deployments/questions.yaml",
    cron: Annotated[str, typer.Option(help="When the nightly batch runs (cron).")] = "0 2 * * *",
    timezone: Annotated[str, typer.Option(help="Time zone of --cron, e.g. Europe/Paris.")] = "UTC",
    limit: Annotated[int, typer.Option(help="Most flow runs executed at once.")] = 4,
    max_parallel: MaxParallelOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
) -> None:
    """Serve the deployments ds-star/on-demand and ds-star-nightly/nightly from this process.

    Runs triggered from the Prefect UI (a form with question, data, model, rounds...) and the
    nightly schedule execute here, against PREFECT_API_URL (e.g. `prefect server start`), or
    without it a temporary server that dies with this process.

    This process decides what a run form may choose: data only under DSSTAR_DATA_ROOTS, and
    settings that weaken isolation or send credentials elsewhere (sandbox=none, api_base,
    storage...) only when DSSTAR_FORM_ALLOW names them. A warning says when the API accepts
    requests without credentials (see PREFECT_SERVER_API_AUTH_STRING).

    All runs of the server share two global concurrency limits, created (or reset) here:
    dsstar-exec (--max-parallel scripts at once) and dsstar-llm (--llm-concurrency requests),
    and with DSSTAR_LLM_RPM set, the rate limit dsstar-llm-rpm (LLM requests per minute).

    Example: dsstar serve --cron "0 2 * * *" --timezone Europe/Paris
    """
    try:
        settings = load_settings(max_parallel=max_parallel, llm_concurrency=llm_concurrency)
        questions = questions_path(questions_file)
        load_questions(questions)  # a missing or malformed set fails now, not at 2 a.m.
    except DSStarError as exc:
        fail_usage(str(exc))
    with prefect_api():  # a temporary server, when none is configured, dies with this process
        on_demand, nightly = _deployments(questions, cron, timezone)
        _serve(settings, on_demand, nightly, limit, f"{cron}, {timezone}")


def _deployments(questions: Path, cron: str, timezone: str) -> tuple[Any, Any]:
    from prefect.schedules import Cron

    from dsstar.flows.ds_star import ds_star
    from dsstar.flows.nightly import ds_star_nightly

    on_demand = ds_star.to_deployment(
        name="on-demand",
        description="Answer one question about a folder or bucket of data files.",
        tags=["dsstar"],
    )
    nightly = ds_star_nightly.to_deployment(
        name="nightly",
        description="Answer every question of the nightly question set.",
        schedules=[Cron(cron, timezone=timezone, slug="nightly")],
        parameters={"questions_file": str(questions)},
        tags=["dsstar"],
    )
    return on_demand, nightly


def _serve(settings: Settings, on_demand: Any, nightly: Any, limit: int, when: str) -> None:
    from prefect import serve as prefect_serve

    from dsstar.tasks.limits import ensure_limit, ensure_rate

    warning = open_api_warning(settings)
    if warning:
        err.print(f"[yellow]warning:[/yellow] {warning}")
    for kind, size in (("exec", settings.max_parallel), ("llm", settings.llm_concurrency)):
        err.print(f"global concurrency limit {ensure_limit(kind, size, reset=True)}: {size}")
    if settings.llm_rpm:
        rate = ensure_rate(settings.llm_rpm, reset=True)
        err.print(f"global rate limit {rate}: {settings.llm_rpm} LLM requests per minute")
    err.print(f"serving ds-star/on-demand and ds-star-nightly/nightly ({when})")
    prefect_serve(on_demand, nightly, limit=limit)


def open_api_warning(settings: Settings) -> str | None:
    """What to tell the operator when the Prefect API answers a request that carries no
    credentials: then anyone who can reach it can start runs here (None when it refuses)."""
    from prefect.settings import get_current_settings

    url = str(get_current_settings().api.url or "").rstrip("/")
    try:  # asked without credentials on purpose: what an intruder would see
        with urllib.request.urlopen(f"{url}/admin/version", timeout=5):
            pass
    except urllib.error.HTTPError:
        return None  # 401: the server wants credentials
    except (OSError, ValueError):
        return None  # unreachable: Prefect itself reports that
    allowed = ", ".join(settings.form_allow) or "none"
    roots = ", ".join(settings.data_roots) or "none (forms cannot name data)"
    return (
        f"the Prefect API at {url} accepts requests without credentials: anyone who can reach"
        " it can start runs on this process and read their artifacts. Start the server with"
        " PREFECT_SERVER_API_AUTH_STRING=user:secret and give this process the same value in"
        " PREFECT_API_AUTH_STRING. Run forms may choose guarded settings: "
        f"{allowed} (DSSTAR_FORM_ALLOW); data roots: {roots} (DSSTAR_DATA_ROOTS)."
    )


PROJECT = SOURCE_ROOT  # in a checkout, the folder holding deployments/ and flows/


def questions_path(name: str) -> Path:
    """The question set `name`: absolute as given; relative, in the project folder (where
    the default deployments/questions.yaml lives), else in the current folder."""
    path = Path(name).expanduser()
    if path.is_absolute():
        return path
    for root in (PROJECT, Path.cwd()):
        if (root / path).is_file():
            return (root / path).resolve()
    raise UsageError(
        f"question set {name} not found in the project ({PROJECT}) nor in the current folder"
        f" ({Path.cwd()}); pass --questions-file with an existing YAML file"
    )
