"""The Python API: what `dsstar run`, `dsstar describe` and `dsstar runs list` do, for a
notebook or a script.

    ask(question, data, **settings)   one run of the ds-star flow in this process -> Answer
                                      (on_event=: a handler given each `dsstar.events` event)
    report(question, data, **settings)  an open question answered with a report: the
                                      ds-star-report flow in this process -> Answer (its
                                      answer the report's markdown; outputs report.md/.html)
    describe(data, **settings)        every file's description  -> list[FileDescription]
    runs(limit=20, storage=...)       recent runs, newest first  -> list[RunSummary]

Settings are keyword arguments named as the fields of `dsstar.settings.Settings` (model=,
max_rounds=, storage=, ...), then `DSSTAR_*` variables, then defaults: as the CLI's flags.
What the CLI has no flag for is refused by every function here, with the variable that sets
it: secrets (api_key, database_url, a URL with a password in it) come from the environment
only, and the worker's policy (form_allow, data_roots) from the worker's; a run's
parameters are recorded in Prefect and run.json, so nothing secret may be one. A run
started here is stored, recorded in the ledger and shown in the Prefect UI like any other;
it talks to the configured Prefect API, else to a temporary server that lives as long as
this process.

Errors: bad input, settings the preflight refuses (a missing or rejected key among them) and
a run id held by another run raise the `UsageError` family of `dsstar.errors` (what exits 2
at the CLI). A run that starts and then fails does not raise, also when a model refuses a
request (a model name its server does not know): its Answer has status "failed" and the
reason in `error`, and `dsstar resume RUN_ID` continues it (exit 1 at the CLI).

The CLI shares `prepare_run` and `run_prepared` with `ask` (`prepare_report` with `report`),
and keeps its printing.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TypeVar

from pydantic import ValidationError

from dsstar.errors import DSStarError, UsageError
from dsstar.events import Event
from dsstar.inputs.form import PreparedRun
from dsstar.results import Answer, FileDescription, RunSummary
from dsstar.settings import Settings
from dsstar.text import clean

__all__ = [
    "Answer",
    "FileDescription",
    "PreparedRun",
    "RunSummary",
    "ask",
    "describe",
    "file_descriptions",
    "prepare_report",
    "prepare_run",
    "report",
    "run_prepared",
    "runs",
]

Namer = Callable[[str], str]  # a field's name as the user wrote it: a flag, a keyword
F = TypeVar("F", bound=Callable[..., Any])


def _refusing_kept(fn: F) -> F:
    """Every public function here: what it is given is refused, with the reason and the
    variable that sets it, when it is a secret or the worker's policy (the run form's
    check, `dsstar.inputs.form.kept_out`), before anything starts or is recorded."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        from dsstar.inputs.form import refuse_kept

        refuse_kept(kwargs)  # by name first: runs(api_key=...) is told why, not a TypeError
        given = signature.bind_partial(*args, **kwargs).arguments
        values: dict[str, Any] = {}
        for name, value in given.items():
            if signature.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                values.update(value)
            else:
                values[name] = os.fspath(value) if isinstance(value, os.PathLike) else value
        refuse_kept(values)
        return fn(*args, **kwargs)

    return checked  # type: ignore[return-value]


@_refusing_kept
def ask(
    question: str,
    data: str | os.PathLike[str],
    *,
    guidelines: str = "",
    run_id: str | None = None,
    verbose: bool | int = False,
    on_event: Callable[[Event], object] | None = None,
    **settings: Any,
) -> Answer:
    """Answer `question` from the files under `data` (a folder, a file or an s3:// URL) with
    the DS-STAR loop, as `dsstar run` does. Raises UsageError before anything is stored
    when the input or settings cannot work; a run that fails returns status "failed".

    It prints and logs nothing: the run's log lines go to the Prefect API (the UI's Logs tab)
    only. `verbose=True` shows them on the console too, as `dsstar run --verbose` does; a
    logging level (`verbose=logging.WARNING`) shows those of that level and above.

    `on_event` is called with each event of the run as it happens, a typed record of
    `dsstar.events` (`Analyzed`, `LLMCall`, `LLMReplied`, `RoundDone`, ...), in order and
    one at a time, from the thread that emits it: keep it quick, and match the kinds it
    wants by class. An exception it raises is logged and does not stop the run.

    Example: dsstar.ask("Which region had the highest revenue?", "examples/sales")
    """
    prepared = prepare_run(
        question=question, data=os.fspath(data), guidelines=guidelines, run_id=run_id, **settings
    )
    from dsstar.inputs.preflight import unreadable_warning

    warning = unreadable_warning(prepared.form.data)
    if warning:  # a warning, not a refusal: a format we do not know may still be readable
        warnings.warn(warning, stacklevel=2)
    from flows import run_console

    level = (logging.INFO if verbose else None) if isinstance(verbose, bool) else int(verbose)
    result, error = run_prepared(prepared, lambda: _following(run_console(level), on_event))
    if isinstance(error, UsageError):  # bad input: the run could not start
        raise error
    return Answer.from_result(result)


@_refusing_kept
def report(
    question: str,
    data: str | os.PathLike[str],
    *,
    guidelines: str = "",
    run_id: str | None = None,
    sub_questions: int | None = None,
    follow_ups: int | None = None,
    refinements: int | None = None,
    verbose: bool | int = False,
    on_event: Callable[[Event], object] | None = None,
    **settings: Any,
) -> Answer:
    """Answer the open `question` about the files under `data` with a report, as `dsstar
    report` does: at most `sub_questions` factoid sub-questions, each answered by a DS-STAR
    run (in parallel, each a child flow run of the report's), a report written from their
    answers that cites each by number, then `refinements` passes in which a reviewer reads
    it, at most `follow_ups` more sub-questions are answered where it is thin, and it is
    rewritten. `guidelines` say what the report must look like (an outline, say).

    The Answer's `answer` is the report (markdown) and its `outputs` list final/report.md
    and final/report.html (one page, its charts inline). The settings' max_cost and
    max_tokens bound the report with all its sub-runs; one that reaches them is written from
    what was answered (status "over_budget"). Raises and prints as `ask` does.

    Example: dsstar.report("How did sales go in 2024 H1, by region?", "examples/sales")
    """
    bounds = {"sub_questions": sub_questions, "follow_ups": follow_ups,
              "refinements": refinements}  # fmt: skip
    prepared = prepare_report(
        question=question, data=os.fspath(data), guidelines=guidelines, run_id=run_id,
        **{k: v for k, v in bounds.items() if v is not None}, **settings,
    )  # fmt: skip
    from flows import run_console

    level = (logging.INFO if verbose else None) if isinstance(verbose, bool) else int(verbose)
    result, error = run_prepared(prepared, lambda: _following(run_console(level), on_event))
    if isinstance(error, UsageError):  # bad input: the report could not start
        raise error
    return Answer.from_result(result)


@_refusing_kept
def describe(
    data: str | os.PathLike[str], *, offline: bool = False, **settings: Any
) -> list[FileDescription]:
    """Every file's description under `data`, as `dsstar describe` gives them: the analyzer
    agent's, or with `offline=True` the built-in profiler's (no model). Descriptions are kept
    in the catalog under the storage: unchanged files are never described twice."""
    found = file_descriptions(os.fspath(data), offline, **settings)
    return [FileDescription.from_dict(f) for f in found]


@_refusing_kept
def runs(limit: int = 20, storage: str | None = None) -> list[RunSummary]:
    """The most recent runs under `storage` (default: DSSTAR_STORAGE), newest first, as
    `dsstar runs list` shows them."""
    from dsstar.storage import Store
    from dsstar.views.listing import list_runs as listed

    store = Store(_settings(str, storage=storage).storage)
    return [RunSummary.from_dict(row) for row in listed(store, limit)]


@_refusing_kept
def prepare_run(
    *,
    question: str,
    data: str,
    guidelines: str = "",
    run_id: str | None = None,
    name: Namer = str,
    policy: Settings | None = None,
    **settings: Any,
) -> PreparedRun:
    """The form, settings and checks of one run, each done once: a bad value, a question too
    long for any prompt, or a failed preflight (model, keys, isolation, data, storage) is a
    UsageError of one line that names the setting as `name` writes it (a flag at the CLI).
    Without a run id, a new one is chosen. Starts the temporary Prefect server early, when
    one will be needed, and the contract check's table reader, so that their start-up
    overlaps the preflight.

    The form is the caller's own unless a `policy` judges it (a run taken from storage:
    `dsstar.inputs.stored`), which the run's flow then applies (PreparedRun.policy)."""
    from dsstar.inputs.form import RunForm

    fields = {"question": question, "data": data, "guidelines": guidelines, "run_id": run_id}
    return _prepared(RunForm, fields, name, policy, settings)


@_refusing_kept
def prepare_report(
    *,
    question: str,
    data: str,
    guidelines: str = "",
    run_id: str | None = None,
    name: Namer = str,
    policy: Settings | None = None,
    **values: Any,
) -> PreparedRun:
    """`prepare_run` for a report (`dsstar report`): `values` are the report's bounds
    (sub_questions, follow_ups, refinements) and its settings."""
    from dsstar.inputs.report import ReportForm

    fields = {"question": question, "data": data, "guidelines": guidelines, "run_id": run_id}
    return _prepared(ReportForm, fields, name, policy, values)


def _prepared(
    form_type: Any, fields: dict[str, Any], name: Namer, policy: Settings | None, settings: dict
) -> PreparedRun:
    """The checks of `prepare_run`, for a form of `form_type` (RunForm, ReportForm)."""
    data = fields["data"]
    if clean(data) != data:  # Prefect sends parameters as UTF-8 JSON
        raise UsageError(f"{name('data')} {clean(data)}: the path is not valid UTF-8; rename it")
    from dsstar.inputs.form import explain

    chosen = {k: v for k, v in settings.items() if v is not None}
    try:
        # Arguments that are not valid UTF-8 arrive with lone surrogates; the run sees U+FFFD.
        form = form_type(
            **fields | {"question": clean(fields["question"]),
                        "guidelines": clean(fields["guidelines"])},
            **chosen,
        )  # fmt: skip
        built = form.settings()
    except ValidationError as exc:
        raise UsageError(explain(exc, name)) from exc
    # The agents' imports: only for a run.
    from dsstar.algorithm.context_budget import check_question

    check_question(form.question, form.guidelines, built.max_question_chars)
    _quiet_prefect()
    from flows import start_prefect_api

    start_prefect_api()  # its start overlaps the preflight and the imports from here on
    from dsstar.data.contracts import warm_reader

    warm_reader()  # the contract check's reader: its imports overlap ours, on another core
    from dsstar.inputs.preflight import preflight
    from dsstar.storage import new_run_id

    preflight(built, data)
    return PreparedRun(form.with_run_id(form.run_id or new_run_id()), built, policy)


@_refusing_kept
def run_prepared(
    prepared: PreparedRun, around: Callable[[], AbstractContextManager[Any]] = nullcontext
) -> tuple[dict[str, Any], BaseException | None]:
    """Run (or resume) a prepared run's ds-star flow (a prepared report's ds-star-report
    flow) in this process, inside `around` (the
    CLI's progress display, say) and under a Prefect API; returns its result (the keys of
    `dsstar run --json`) and the error it ended with, if any. A run that could not even start
    (the Prefect API unreachable, say) has a failed result rebuilt from storage."""
    from dsstar.model.llm import preload
    from flows import prefect_api, run_question, run_report

    # After the flow's own imports: litellm's then fills the waits that follow (a temporary
    # server getting ready, the Prefect API, the profiler's sandbox) instead of slowing them.
    preload()
    storage, run_id = prepared.settings.storage, prepared.form.run_id
    from dsstar.inputs.report import ReportForm

    runner = run_report if isinstance(prepared.form, ReportForm) else run_question
    try:
        with prefect_api(), around():
            result, error = runner(prepared)
    except Exception as exc:  # e.g. the Prefect API is unreachable: a result, not a traceback
        return failed_result(storage, run_id, exc), exc
    return result or failed_result(storage, run_id, error), error


def failed_result(storage: str, run_id: str, exc: BaseException | None) -> dict[str, Any]:
    """The result of a run that did not finish, rebuilt from its stored run.json."""
    from dsstar.execution.failure import exception_line
    from dsstar.keys import run_folder, run_record
    from dsstar.storage import Store
    from dsstar.views.report import run_result

    store = Store(storage)
    record: dict[str, Any] = {"run_id": run_id}
    try:
        record = store.read_json(run_record(run_id))
    except (OSError, DSStarError):
        pass  # the run failed before it could store anything
    record["status"] = "failed"
    record.setdefault("error", exception_line(exc) if exc is not None else "the run did not finish")
    return run_result(record, store.uri(run_folder(run_id)))


@_refusing_kept
def file_descriptions(
    data: str,
    offline: bool = False,
    around: Callable[[], AbstractContextManager[Any]] = nullcontext,
    name: Namer = str,
    **settings: Any,
) -> list[dict[str, Any]]:
    """Every file's description (path, format, description, error): the built-in profiler
    offline, else the analyzer agent in the ds-star-describe flow (inside `around`). Both
    come from the catalog in storage when the file's content was described before."""
    from dsstar.inputs.preflight import check_data

    built = _settings(name, **settings)
    check_data(data)
    if offline:
        return _offline_descriptions(data, built)
    from dsstar.inputs.spec import opened, require_model

    require_model(built)
    from dsstar.algorithm.analysis import cached_descriptions

    # Every file described before: the catalog answers, without a Prefect server to start
    # and a flow run to record (seconds, for a few reads from storage).
    with opened(data, built, "describe") as (source, spec):
        known = cached_descriptions(spec, source)
    if known is not None:
        return known
    _quiet_prefect()
    from flows import describe_files, prefect_api, start_prefect_api

    start_prefect_api()  # its start overlaps the flows' imports
    options = {k: v for k, v in settings.items() if v is not None}
    with prefect_api(), around():
        return describe_files(data, options, built)


def _offline_descriptions(data: str, settings: Settings) -> list[dict[str, Any]]:
    """The built-in profiler's text for every file, read inside the sandbox and profiling
    only what the catalog does not know yet; entries left out of the view (links out of the
    root, FIFOs, bombs) are listed with their reason."""
    from dsstar.data.catalog import Catalog
    from dsstar.data.profiler import profile_files
    from dsstar.data.sources import DataSource
    from dsstar.execution import scratch
    from dsstar.inputs.spec import archive_limits, profile_limits
    from dsstar.storage import Store

    source = DataSource(
        data,
        scratch.new_dir(settings.work_dir),
        archive_limits(settings),
        archive_cache=scratch.archive_cache(settings.work_dir),
    )
    try:
        catalog = Catalog(Store(settings.storage), source.location)
        files = catalog.files(source)
        texts = catalog.profiles(
            files,
            lambda missing: profile_files(
                source.mount_dir,
                [f.path for f in missing],
                limits=profile_limits(settings),
                mode=settings.sandbox,
                work_root=settings.work_dir,
            ),
        )
        described = [
            {"path": f.path, "format": f.format, "description": texts[f.path], "error": None}
            for f in files
        ]
        return described + source.skipped_records()
    finally:
        source.close()


def _settings(name: Namer, **values: Any) -> Settings:
    """Settings from `values` (None: unset), then DSSTAR_* variables, then defaults; a name
    that is no run setting is refused, as `ask` refuses it."""
    from dsstar.inputs.form import RunOptions, explain

    try:
        return RunOptions(**{k: v for k, v in values.items() if v is not None}).settings()
    except ValidationError as exc:
        raise UsageError(explain(exc, name)) from exc


@contextmanager
def _following(
    around: AbstractContextManager[Any], on_event: Callable[[Event], object] | None
) -> Iterator[None]:
    """Inside `around`, `on_event` hears every progress event of this process (see `ask`)."""
    with around:
        if on_event is None:
            yield
            return
        from dsstar import progress

        lock = threading.Lock()  # the run's threads emit at once: the handler hears one at a time

        def heard(event: Event) -> None:
            with lock:
                try:
                    on_event(event)
                except Exception:  # a watcher's mistake is no reason to fail the run
                    logging.getLogger("dsstar.api").exception("on_event failed on %r", event)

        stop = progress.listen(heard)
        try:
            yield
        finally:
            stop()


def _quiet_prefect() -> None:
    """Prefect reads its settings at import: there is no network to send analytics to."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
