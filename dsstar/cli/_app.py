"""The `dsstar` application object and what its commands share."""

from __future__ import annotations

import atexit
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console

from .. import scratch, stopping
from ..errors import Interrupted, UsageError
from ..settings import Settings


class _App(typer.Typer):
    """The typer app, plus the exit of a command stopped by SIGINT or SIGTERM."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except Interrupted:
            stopping.finish()
        except SystemExit:
            if stopping.requested():
                stopping.finish()  # the command unwound into an ordinary exit: still a stop
            raise


app = _App(
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
    stopping.install()  # SIGINT/SIGTERM: stop within seconds, exit 130/143
    stopping.at_stop(scratch.release_all)


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


def fail_usage(
    message: str, as_json: bool = False, payload: dict[str, Any] | None = None
) -> NoReturn:
    """Report a usage error in one line (on stdout too under --json, as `payload` or
    {"error": ...}) and exit 2."""
    from rich.markup import escape

    from ..text import clean, clean_deep, for_terminal

    err.print(f"[red]error:[/red] {escape(for_terminal(message))}", highlight=False)
    if as_json:
        body = clean_deep(payload) if payload else {"error": clean(message)}
        sys.stdout.write(json.dumps(body, ensure_ascii=False) + "\n")
    raise typer.Exit(EXIT_USAGE)


StorageOpt = Annotated[
    str | None, typer.Option(help="Where runs are stored [env: DSSTAR_STORAGE; ~/.dsstar].")
]


ModelOpt = Annotated[str | None, typer.Option(help="litellm model [env: DSSTAR_MODEL].")]
ApiBaseOpt = Annotated[str | None, typer.Option(help="Model server URL [env: DSSTAR_API_BASE].")]
MaxParallelOpt = Annotated[
    int | None,
    typer.Option(help="Most scripts running at once [env: DSSTAR_MAX_PARALLEL; CPU count]."),
]
LLMConcurrencyOpt = Annotated[
    int | None,
    typer.Option(help="Most LLM requests in flight at once [env: DSSTAR_LLM_CONCURRENCY; 8]."),
]
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
    """The data root exists, is readable and is not empty (local roots; remote ones are
    checked when opened)."""
    from ..preflight import check_data as check

    check(data)


@contextmanager
def prefect_api() -> Iterator[None]:
    """A Prefect API for the flows of this command: the configured one, else a temporary
    server that dies with this process (even on SIGKILL)."""
    from ._server import ensure_api

    server = ensure_api()
    if server is None:
        yield
        return
    atexit.register(server.stop)  # after Prefect's own exit handlers have flushed to it
    with stopping.on_stop(server.stop):
        server.wait_ready()
        yield


def money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"
