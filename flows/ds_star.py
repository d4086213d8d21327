"""The DS-STAR flow: analyze every file, then plan, code, execute, verify and route in rounds
until the verifier accepts the plan, the rounds run out or a person accepts or stops; finally
format the answer. The algorithm is the core's (`dsstar.algorithm.steps`); this flow supplies
its runtime (`_runtime.py`) and the run's record (`_run.py`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prefect import Flow, get_client
from prefect.client.schemas.objects import State
from prefect.flow_engine import run_flow
from prefect.runtime import flow_run
from prefect.task_runners import TaskRunner
from prefect.utilities.callables import get_call_parameters
from pydantic import ValidationError

from dsstar.algorithm import steps
from dsstar.algorithm.context_budget import check_question
from dsstar.algorithm.verdict import Status
from dsstar.data.sources import DataRoot
from dsstar.errors import Interrupted, OverBudget, RunEnded, StorageError, UsageError
from dsstar.execution import scratch, stopping
from dsstar.execution.failure import exception_line
from dsstar.execution.sandbox import resolve_mode
from dsstar.inputs.form import PreparedRun, RunForm, explain, run_id_in
from dsstar.inputs.preflight import preflight, unreadable_warning
from dsstar.inputs.spec import data_source, run_spec
from dsstar.inputs.trust import check_form, hold_data_location
from dsstar.keys import run_folder, run_record
from dsstar.locations import normalize_location
from dsstar.model.ceiling import forget
from dsstar.records.prune import prune_when_due
from dsstar.settings import Settings
from dsstar.storage import Store
from dsstar.text import clean
from dsstar.views.cards import short
from flows import _story as story
from flows._alive import kept_alive
from flows._finish import finish
from flows._forms import form_flow, given_name
from flows._resume import derived_run_id, earlier_flow_run, take_up
from flows._run import Run
from flows._runners import build_task_runner, default_task_runner
from flows._runtime import FlowRuntime
from flows._settle import crash_earlier_attempts
from flows._states import failed_state, final_state, interrupted_state
from flows.workers import check_crash_loop
from tasks.record import publish_ending

__all__ = [
    "completed_result",
    "default_run_id",
    "derived_run_id",
    "ds_star",
    "own_flow",
    "run_name",
    "run_question",
]


def default_run_id() -> str:
    """For runs started from the UI or a schedule: derived from the Prefect flow run, so a
    retry of that flow run continues the same DS-STAR run (and finds its cached work)."""
    with get_client(sync_client=True) as client:
        return derived_run_id(client.read_flow_run(flow_run.id))


def _flow_run_name() -> str:
    """The flow run's name: the name a person gave it when creating it (the Run Name of the
    UI's form), kept; else its run id (the form's, else derived from the flow run) and the
    question, shortened (`run_name`)."""
    parameters = flow_run.parameters
    run_id = run_id_in(parameters) or default_run_id()
    return given_name() or run_name(run_id, parameters.get("question"))


def run_name(run_id: str, question: Any) -> str:
    """A ds-star flow run's name: the run id, then the question, shortened, so that the UI's
    list of runs tells them apart (a flow run has no description to show it in)."""
    asked = short(clean(str(question or "")), _QUESTION_CHARS)
    return f"{run_id} · {asked}" if asked else run_id


_QUESTION_CHARS = 60  # of the question, in a flow run's name


# What every ds-star flow is, whoever starts it: one name, one run name, one form.
_FLOW = {"name": "ds-star", "flow_run_name": _flow_run_name, "log_prints": False}


@form_flow(RunForm, **_FLOW, task_runner=default_task_runner())
def ds_star(**fields: Any) -> dict[str, Any] | State:
    """Answer a question about a folder or bucket of data files with the DS-STAR agent.

    The parameters are the fields of `dsstar.inputs.form.RunForm` (the run form of the Prefect UI):
    the question, its data, the answer's guidelines, the run id, and every run setting.
    The flow run ends Completed with an answer (its state named Verified, MaxRounds, Accepted
    or NotApplicable), Failed when the run failed or went over budget (state OverBudget),
    Cancelled when a person stopped it (flows/_states.py).
    """
    # Parameters come from whoever reaches the Prefect API: the Settings of this worker's own
    # environment judge what they may choose, and where their data may lie.
    return _answer(fields, None, Settings())


def own_flow(policy: Settings | None) -> Flow:
    """The ds-star flow for runs whose forms this process builds itself (the tasks of
    `dsstar bench run`, a benchmark script): `ds_star`, its forms judged by `policy` (None:
    they are its user's own, and nothing limits them) rather than by the worker's
    environment. Only a caller in this process makes one: no parameter says "trusted"."""
    return _flow_of(lambda fields: _answer(fields, None, policy), default_task_runner())


def _prepared_flow(prepared: PreparedRun) -> Flow:
    """The ds-star flow of one run prepared in this process: `ds_star` given the prepared
    run itself, which its function closes over, judged by the prepared run's own policy."""
    runner = build_task_runner(prepared.settings)
    return _flow_of(lambda fields: _answer(fields, prepared, prepared.policy), runner)


def _flow_of(
    answer: Callable[[dict[str, Any]], dict[str, Any] | State], runner: TaskRunner
) -> Flow:
    """A ds-star flow (its name, parameters, schema and description) whose body is `answer`,
    given the parameters as a dict."""

    def answer_here(**fields: Any) -> dict[str, Any] | State:
        return answer(fields)

    # ds_star's docstring without the Args that `form_flow` writes again from the form
    # (Prefect reads the parameters' descriptions there).
    answer_here.__doc__ = ds_star.description.partition("\n\nArgs:\n")[0]
    return form_flow(RunForm, **_FLOW, task_runner=runner)(answer_here)


def _answer(
    fields: dict[str, Any], prepared: PreparedRun | None, policy: Settings | None
) -> dict[str, Any] | State:
    """The ds-star flow's body: the run of `fields`, or of `prepared` (its form and settings
    taken as they are, the question check and the preflight not repeated) when it is the
    run these parameters were made from. `policy` judges the form (trust.check_form; None:
    the local user's own); parameters that are not the prepared run's are always judged by
    this worker's environment."""
    checked = prepared is not None and prepared.form.parameters() == _given(fields)
    if checked:
        form, settings = prepared.form, prepared.settings
    else:
        form, settings = _validated(fields)
        policy = Settings() if prepared is not None else policy
    check_form(form.chosen(), policy)
    # The check opens a local root and the run reads only through that opening (a folder
    # swapped for a link after the check is never followed); closed when the run ends.
    data = hold_data_location(form.data, policy)
    try:
        outcome = _checked_run(form, settings, data, checked=checked)
        return outcome if isinstance(outcome, State) else final_state(outcome)
    finally:
        if isinstance(data, DataRoot):
            data.close()


def _validated(fields: dict[str, Any]) -> tuple[RunForm, Settings]:
    """The form and settings of parameters that come from outside this process."""
    try:
        form = RunForm.model_validate(fields)
        return form, form.settings()
    except ValidationError as exc:  # e.g. a sandbox Settings refuses: one readable line
        raise UsageError(explain(exc)) from exc


def _given(fields: dict[str, Any]) -> dict[str, Any] | None:
    """The parameters as `RunForm.parameters` writes them: unset fields left out, grouped in
    their sections, values as JSON has them (a folder setting arrives as a Path: a resumed
    run's form sets them all). None when they make no form."""
    try:
        return RunForm.model_validate(fields).parameters()
    except ValidationError:
        return None


def _checked_run(
    form: Any, settings: Settings, data: str | DataRoot, checked: bool = False
) -> dict[str, Any] | State:
    """The run of `form` over its checked data (a URL, or the local root held open): its
    result, or the Failed state of an error after it was stored (whose message says how to
    continue it). `checked`: the question check and the preflight passed already, in this
    process."""
    # The recorded location (the ledger's key for reuse) is what was opened, not looked up
    # again: the path could lead elsewhere by now.
    where = normalize_location(data) if isinstance(data, str) else data.path
    question, guidelines, run_id = form.question, form.guidelines, form.run_id
    if not checked:
        try:
            check_question(question, guidelines, settings.max_question_chars)
            preflight(settings, where)  # model, keys, isolation, data, storage: before any run
        except Exception as exc:  # refused before it started: its card says why, all the same
            _refused(run_id or default_run_id(), question, exc)
            raise
    scratch.sweep(settings.work_dir)  # temporary folders of processes that died
    run = Run.start(
        run_id=run_id or default_run_id(),
        settings=settings,
        params={"question": question, "data": where, "guidelines": guidelines},
        given=set(form.chosen()),
    )
    story.say("run %s: %s (data: %s)", run.run_id, question, run.record["data"])
    _prune_cache(run.store, settings)
    if run.record["replies"] != "model":  # the runs list and Logs tab say so at once
        _tag(_RECORDED_TAG)
        story.say("replies: %s, from %s: no model is asked", run.record["replies"],
                  run.record["recorded_from"])  # fmt: skip
    try:
        with kept_alive(run.run_id, run.store.url, settings.heartbeat_timeout):
            if flow_run.id and flow_run.run_count > 1:  # what a dead attempt left running
                crash_earlier_attempts(flow_run.id, flow_run.run_count)
            if flow_run.id and not checked:  # a worker's retry of a run that kills workers
                check_crash_loop(flow_run.id, settings.max_crash_retries, run.run_id)
            return solve(run, question, data, guidelines, settings)
    except Exception as exc:  # record why in run.json (when storage allows), then fail the run
        run.fail(exc)
        story.failed(exception_line(exc), exc)
        return failed_state(run.run_id, exc)
    except BaseException as exc:  # SIGINT, SIGTERM (Prefect's TerminationSignal): resumable
        run.interrupt(exc)
        if stopping.requested() or isinstance(exc, KeyboardInterrupt | Interrupted):
            # This command's own stop, or a person's Ctrl-C (in a notebook): the flow run
            # says which signal; a worker's cancel (Prefect's TerminationSignal) stays Prefect's.
            return interrupted_state(run.run_id, run.record.get("error"), exc)
        raise
    finally:
        scratch.release(run.run_id)  # this run's data snapshot or staged file
        forget(run.run_id)  # a resume counts what it spent afresh, from its caches
        run.release()  # after run.json holds the outcome: the id may be resumed now


def _refused(run_id: str, question: str, exc: Exception) -> None:
    """The card of a run refused by its checks, before it stored anything: why, and that
    nothing was spent. A card is a view: a server that cannot take it changes nothing."""
    record = {"run_id": run_id, "question": question, "status": Status.FAILED.value,
              "error": exception_line(exc)}  # fmt: skip
    try:
        publish_ending(run_id, record, "")
    except Exception as failed:
        story.say("the card of run %s was not published: %s", run_id, failed,
                  level=logging.WARNING)  # fmt: skip


def _prune_cache(store: Store, settings: Settings) -> None:
    """The storage's old cached results go (at most once a day, see dsstar.records.prune);
    housekeeping that fails leaves the run to go on."""
    try:
        pruned = prune_when_due(store, settings.cache_max_age_days, settings.cache_max_mb)
    except StorageError as exc:
        story.say("could not prune the storage's cache/: %s", exc, level=logging.WARNING)
        return
    if pruned is not None and pruned.removed:
        story.say("pruned %d cached results (%.1f MB) from cache/ (DSSTAR_CACHE_MAX_AGE_DAYS,"
                  " DSSTAR_CACHE_MAX_MB)", pruned.removed, pruned.freed / (1 << 20))  # fmt: skip


# The tag of a flow run answered by recorded replies (dsstar.model.recorded), shown beside
# its name in the Prefect UI's lists.
_RECORDED_TAG = "recorded-replies"


def _tag(tag: str) -> None:
    """Add `tag` to this flow run (a run started by the CLI or a form has no say in its tags)."""
    if not flow_run.id:
        return
    try:
        with get_client(sync_client=True) as client:
            tags = client.read_flow_run(flow_run.id).tags
            if tag not in tags:
                client.update_flow_run(flow_run.id, tags=[*tags, tag])
    except Exception as exc:  # a label, not the run: the run goes on without it
        story.say("could not tag the flow run %s: %s", tag, exc, level=logging.WARNING)


def solve(
    run: Run, question: str, data: str | DataRoot, guidelines: str, settings: Settings
) -> dict:
    """Algorithm 1 (`dsstar.algorithm.steps.solve`) over this flow's runtime: the work done
    by Prefect tasks, the run recorded as it goes and closed at the end."""
    source = data_source(data, settings, tag=run.run_id)
    # Judged on the view: the files the run will read, not the path looked up again.
    warning = unreadable_warning(str(source.mount_dir), shown=source.location)
    if warning:
        story.say(warning, level=logging.WARNING)
    spec = run_spec(settings, run.run_id, run.store.url, source.mount_dir)
    # run.json keeps the spec the run runs under (saved with its next write), which the
    # report reads. A resumed run builds its own from the resuming worker's settings (a
    # higher ceiling goes on past an over_budget stop) and writes it over the earlier one.
    # And the sandbox its scripts run in, as this worker resolves the setting ('auto').
    run.note(spec=spec.to_dict(), sandbox=resolve_mode(spec.sandbox))
    runtime = FlowRuntime(run, spec)
    try:
        solution = steps.solve(runtime, question, guidelines, source, spec)
    except OverBudget as exc:  # a stop, not a failure: resumable with a higher ceiling
        result = run.over_budget(exc, spec.ceiling)
        story.say("%s", run.record["error"], level=logging.WARNING)
        return result
    return finish(
        run, solution.status, solution.plan, solution.final, reused_from=solution.reused_from
    )


def completed_result(state: Any, storage: str, run_id: str) -> dict[str, Any]:
    """The result of a ds-star flow run that ended with one: Completed with an answer, or
    Failed or Cancelled by the run's outcome (`failed`, `over_budget`, `stopped`), whose
    states carry it too. When Prefect lost it (a final state read back from a busy server
    without its data: seen for Completed and for Failed states), the same result rebuilt
    from the stored run.json. Raises the error of a flow run that ended without a result
    (an exception)."""
    from prefect.exceptions import MissingResult

    from dsstar.views.report import run_result

    try:
        value = state.result(raise_on_failure=False)
        lost = state.data is None  # Failed or Cancelled: its value is then Prefect's error
    except MissingResult:
        value, lost = None, True
    if isinstance(value, dict):
        return value
    if isinstance(value, RunEnded):  # failed, over budget or stopped: the run's own result
        return value.result
    if lost:  # what the run stored says how it ended
        store = Store(storage or Settings().storage)
        record = store.read_json(run_record(run_id))
        if state.is_completed() or record.get("status") in _ENDED_WITH_A_RESULT:
            return run_result(record, store.uri(run_folder(run_id)))
    return state.result()  # raises the run's error


# The outcomes whose flow run ends Failed or Cancelled with the run's result as its data.
_ENDED_WITH_A_RESULT = frozenset({Status.FAILED, Status.OVER_BUDGET, Status.STOPPED})


def run_question(prepared: PreparedRun) -> tuple[dict[str, Any] | None, BaseException | None]:
    """Run (or resume) the ds-star flow in this process, with the task runner its settings
    choose; returns its result, or None and the error it ended with. The flow takes the
    prepared form and settings as they are, and checks neither the question nor the
    preflight again. A stored run is continued in its own flow run where it can be
    (flows/_resume.py)."""
    form, settings = prepared.form, prepared.settings
    flow = _prepared_flow(prepared)
    earlier = earlier_flow_run(settings, form.run_id)
    if earlier is None:
        state = flow(**form.parameters(), return_state=True)
    else:  # the stored run's own flow run, run again: one flow run per run
        parameters = get_call_parameters(flow.fn, (), form.parameters())
        take_up(earlier, flow.serialize_parameters(parameters))  # as a flow run records them
        state = run_flow(flow, flow_run=earlier, parameters=parameters, return_type="state")
    try:
        return completed_result(state, settings.storage, form.run_id), None
    except BaseException as exc:  # the flow run's own error: handed back, not raised
        return None, exc
