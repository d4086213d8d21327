"""The `dsstar` application object and what its commands share."""

from __future__ import annotations

import atexit
import functools
import inspect
import json
import os
import sys
import typing
from collections.abc import Callable
from typing import Annotated, Any, NoReturn

import typer
import typer.core
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from dsstar.cli._help import fit_help_when_loaded
from dsstar.collector import set_pace
from dsstar.errors import Interrupted, UsageError
from dsstar.execution import scratch, stopping
from dsstar.inputs.form import default_text, explain
from dsstar.settings import Settings
from dsstar.text import clean, for_terminal


class _App(typer.Typer):
    """The typer app, plus the exit of a command stopped by SIGINT or SIGTERM, and usage
    errors (a bad flag, a missing option) as JSON on stdout under --json."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        argv = kwargs.get("args") or sys.argv[1:]
        _wide_help_when_piped()
        try:
            if "--json" in argv:
                return self._as_json(*args, **kwargs)
            return super().__call__(*args, **kwargs)
        except Interrupted:
            stopping.finish()
        except SystemExit:
            if stopping.requested():
                stopping.finish()  # the command unwound into an ordinary exit: still a stop
            raise

    def _as_json(self, *args: Any, **kwargs: Any) -> NoReturn:
        try:
            code = super().__call__(*args, standalone_mode=False, **kwargs)
        except typer.TyperException as exc:  # click's usage errors: one line, JSON on stdout
            message = exc.format_message()
            ctx = getattr(exc, "ctx", None)
            words = [kwargs.get("prog_name") or "dsstar"]
            words += [a for a in (kwargs.get("args") or sys.argv[1:])[:2] if a in _COMMANDS]
            where = ctx.command_path if ctx is not None else " ".join(words)
            message = f"{message} (see: {where} --help)"
            err.print(error_line(message))
            sys.stdout.write(json.dumps({"error": clean(message)}, ensure_ascii=False) + "\n")
            sys.exit(getattr(exc, "exit_code", EXIT_USAGE))
        except typer.Abort:
            sys.exit(EXIT_FAILED)
        sys.exit(code if isinstance(code, int) else EXIT_OK)


def invoked() -> str:
    """The program as the user ran it, for hints meant to be pasted back: `dsstar` when
    that is what PATH finds, else the path typed (`.venv/bin/dsstar`), or `PYTHON -m dsstar`."""
    import shutil
    from pathlib import Path

    program = sys.argv[0] if sys.argv and sys.argv[0] else "dsstar"
    if Path(program).name == "__main__.py":
        return f"{sys.executable} -m dsstar"
    found = shutil.which(Path(program).name)
    if found and Path(found).resolve() == Path(program).resolve():
        return Path(program).name
    return program


def main() -> None:
    """The `dsstar` program: the app, then an exit that skips the interpreter's teardown.

    Tearing down the modules of Prefect, litellm and pandas after the command is done took
    2 to 8 s on 2 loaded cores (benchmarks/overhead.py). What the interpreter does before it
    still happens, in its order: other threads are joined (executors finish their work), the
    exit handlers run (Prefect flushes its logs and events, a temporary server is stopped),
    and the output is flushed."""
    set_pace()
    try:
        app(prog_name="dsstar")
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    if code is not None and not isinstance(code, int):  # as SystemExit("message") exits
        print(code, file=sys.stderr)
        code = 1
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's first step
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code or 0)


def _wide_help_when_piped() -> None:
    """Piped, rich would draw --help at 80 columns. At 120 typer's table fits every variable
    name and value whole; a width the user set (TERMINAL_WIDTH, COLUMNS) or a terminal's own
    is left alone, and drawn to fit it (_help)."""
    piped = not ("COLUMNS" in os.environ or os.environ.get("TERMINAL_WIDTH") or sys.stdout.isatty())
    fit_help_when_loaded(widen=piped)


# Options drawn to fit the width wherever typer draws help, in tests' runners too.
fit_help_when_loaded(widen=False)


def _usage_name(self: Any) -> str:
    """An argument in the usage line, as POSIX usage writes it: RUN_ID when required, [NAME]
    when optional. typer writes a required one in braces (`{run_id}`), which reads as a
    template placeholder; this is typer's own method, less the braces."""
    name = self.display_name_raw.upper()
    name = name if self.required else f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


typer.core.TyperArgument._usage_display_name = _usage_name  # type: ignore[method-assign]

_COMMANDS = {"run", "resume", "runs", "list", "show", "history", "describe", "retrieve",
             "contracts", "validate", "accept", "serve", "bench", "score"}  # fmt: skip


def console(stderr: bool = False) -> Console:
    """A console that never reads text as rich markup: what is printed comes from users,
    data and models (file names, answers, errors); styles are set with Text, not tags."""
    return Console(stderr=stderr, soft_wrap=True, markup=False, highlight=False)


app = _App(
    name="dsstar",
    help="DS-STAR: answer questions about a folder or bucket of data files with an LLM agent "
    "that analyzes every file, then plans, codes, executes, verifies and routes in rounds.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = console(stderr=True)


def _version(shown: bool) -> None:
    if shown:
        from importlib.metadata import PackageNotFoundError, version

        from dsstar import __version__

        try:
            number = version("dsstar")
        except PackageNotFoundError:  # run from a checkout that was never installed
            number = __version__
        sys.stdout.write(f"dsstar {number}\n")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
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
    """Settings from these flags (None: unset), then DSSTAR_* variables, then defaults. A
    value out of bounds is a UsageError of one line naming the flag and its variable."""
    try:
        return Settings(**{k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:
        raise UsageError(explain(exc, flag_name)) from exc


def flag_name(field: str) -> str:
    """How a user sets `field`: its flag, and its DSSTAR_ variable where it is a setting."""
    flag = "--" + field.replace("_", "-")
    return f"{flag} (or DSSTAR_{field.upper()})" if field in Settings.model_fields else flag


def error_line(message: str) -> Text:
    """`error: MESSAGE` in red, the message shown as text (never as markup)."""
    return Text.assemble(("error:", "red"), " ", for_terminal(message))


def setting_help(name: str, text: str | None = None) -> str:
    """The help of a flag that sets `name`: `text` (else the setting's description), then its
    variable and default, escaped so that rich shows the brackets."""
    default = default_text(name)
    where = f"env: DSSTAR_{name.upper()}" + (f"; default: {default}" if default else "")
    return escape(f"{text or Settings.model_fields[name].description} [{where}]")


def setting_option(name: str, text: str | None = None, *decls: str) -> Any:
    """A typer option for setting `name`, its help from `setting_help`."""
    return typer.Option(*decls, help=setting_help(name, text), show_default=False)


def settings_flags(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add one flag per setting in `names` to a command (type and help from Settings); the
    command gets the values given (None when a flag is absent) as its `flags` argument."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
        extra = {name: Annotated[_flag_type(name), _flag(name)] for name in names}

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            flags = {name: kwargs.pop(name) for name in names}
            return fn(**kwargs, flags=flags)

        keyword = inspect.Parameter.KEYWORD_ONLY  # typer passes every value by name
        own = [
            p.replace(kind=keyword, annotation=hints[p.name])  # resolved: typer reads them
            for p in signature.parameters.values()
            if p.name != "flags"
        ]
        added = [
            inspect.Parameter(n, keyword, default=None, annotation=t) for n, t in extra.items()
        ]
        at = next((i for i, p in enumerate(own) if p.name == "as_json"), len(own))  # --json last
        params = own[:at] + added + own[at:]
        command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {k: v for k, v in hints.items() if k != "flags"} | extra
        return command

    return decorate


def _flag(name: str) -> Any:
    """A setting's flag: `--name VALUE`; a switch that is off by default is `--name` alone
    (`--no-name` would only repeat the default), one that is on is `--name/--no-name`."""
    flag = "--" + name.replace("_", "-")
    if _flag_type(name) == bool | None and default_text(name) != "true":
        return setting_option(name, None, flag)
    return setting_option(name)


def _flag_type(name: str) -> Any:
    """The flag's type: the setting's scalar type, optional (None: the flag was not given)."""
    kind = Settings.model_fields[name].annotation
    scalar = [t for t in typing.get_args(kind) if t is not type(None)] or [kind]
    return scalar[0] | None


def fail_usage(
    message: str, as_json: bool = False, payload: dict[str, Any] | None = None
) -> NoReturn:
    """Report a usage error in one line (on stdout too under --json, as `payload` or
    {"error": ...}) and exit 2."""
    from dsstar.text import clean_deep

    err.print(error_line(message))
    if as_json:
        body = clean_deep(payload) if payload else {"error": clean(message)}
        sys.stdout.write(json.dumps(body, ensure_ascii=False) + "\n")
    raise typer.Exit(EXIT_USAGE)


StorageOpt = Annotated[str | None, setting_option("storage")]
ModelOpt = Annotated[str | None, setting_option("model", "litellm model for every agent.")]
ApiBaseOpt = Annotated[str | None, setting_option("api_base")]
MaxParallelOpt = Annotated[int | None, setting_option("max_parallel")]
LLMConcurrencyOpt = Annotated[int | None, setting_option("llm_concurrency")]
TaskRunnerOpt = Annotated[str | None, setting_option("task_runner")]
DaskAddressOpt = Annotated[str | None, setting_option("dask_address")]
OfflineOpt = Annotated[
    bool, typer.Option("--offline", help="Use the built-in profiler instead of the LLM analyzer.")
]


def check_data(data: str) -> None:
    """The data root exists, is readable and is not empty (local roots; remote ones are
    checked when opened)."""
    from dsstar.inputs.preflight import check_data as check

    check(data)


def plural(count: int, noun: str) -> str:
    """`1 round`, `2 rounds`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
