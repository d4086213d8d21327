"""The `dsstar` application object and what its commands share."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console

from ..errors import UsageError
from ..settings import Settings

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


def prefect_quietly(verbose: bool) -> None:
    """Prefect reads its settings at import. Without --verbose its console handler stays
    silent (the CLI reports errors itself); logs still reach the Prefect API and UI."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if not verbose:
        os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")


def load_settings(**flags: Any) -> Settings:
    try:
        return Settings(**{k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:
        raise UsageError(f"invalid setting: {exc}") from exc


def fail_usage(message: str, as_json: bool = False) -> NoReturn:
    """Report a usage error (on stdout too, as {"error": ...}, under --json) and exit 2."""
    err.print(f"[red]error:[/red] {message}", highlight=False)
    if as_json:
        sys.stdout.write(json.dumps({"error": message}) + "\n")
    raise typer.Exit(EXIT_USAGE)


StorageOpt = Annotated[
    str | None, typer.Option(help="Where runs are stored [env: DSSTAR_STORAGE; ~/.dsstar].")
]


ModelOpt = Annotated[str | None, typer.Option(help="litellm model [env: DSSTAR_MODEL].")]
ApiBaseOpt = Annotated[str | None, typer.Option(help="Model server URL [env: DSSTAR_API_BASE].")]
TaskRunnerOpt = Annotated[
    str | None,
    typer.Option(help="Run the analysis on 'thread', 'dask' or 'ray' [env: DSSTAR_TASK_RUNNER]."),
]
DaskAddressOpt = Annotated[
    str | None,
    typer.Option(help="Use an existing Dask cluster, e.g. tcp://host:8786 [DSSTAR_DASK_ADDRESS]."),
]
OfflineOpt = Annotated[
    bool, typer.Option("--offline", help="Use the built-in profiler instead of the LLM analyzer.")
]


def check_data(data: str) -> None:
    if "://" in data and not data.startswith("file://"):
        return  # remote: checked when the run opens it
    path = Path(data.removeprefix("file://")).expanduser()
    if not path.exists():
        raise UsageError(f"--data {data}: no such file or folder")


def money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"
