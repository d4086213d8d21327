"""The ds-star-report flow: an open question answered with a report (DS-STAR+).

Every file is analyzed once; the decomposer breaks the question into factoid sub-questions;
each is answered by a DS-STAR run, a child flow run of this one, all of a pass at once and
sharing this analysis; the writer drafts a report citing each answer; the critic reviews it
and proposes complementary sub-questions, which are answered, and the report is rewritten
(`dsstar.research.loop`). The report lands in storage (final/report.md and report.html) and
in the Prefect UI (a markdown card with its charts), and run.json lists its sub-runs.

One ceiling (max_cost, max_tokens) bounds the report with its sub-runs; the writer keeps the
room of its last draft, so that a report that reaches its ceiling is still written from what
was answered, and says what is missing (status over_budget; `dsstar resume` with a higher
ceiling answers the rest). A resumed or retried report asks nothing it was answered before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from prefect import Flow
from prefect.client.schemas.objects import State
from prefect.flow_engine import run_flow
from prefect.runtime import flow_run
from prefect.utilities.callables import get_call_parameters
from pydantic import ValidationError

from dsstar.algorithm.context_budget import check_question
from dsstar.algorithm.verdict import Status
from dsstar.data.sources import DataRoot
from dsstar.errors import Interrupted, OverBudget, UsageError
from dsstar.execution import scratch, stopping
from dsstar.execution.deliverables import media_type
from dsstar.execution.failure import exception_line
from dsstar.inputs.form import PreparedRun, explain
from dsstar.inputs.preflight import preflight
from dsstar.inputs.report import REPORT_FIELDS, ReportForm, report_parameters
from dsstar.inputs.spec import data_source, run_spec
from dsstar.inputs.trust import check_form, hold_data_location
from dsstar.keys import final_object, report_object
from dsstar.locations import normalize_location
from dsstar.model.ceiling import forget, spent_line
from dsstar.research.assemble import build_report, inline_src, load_figures, relative_src
from dsstar.research.estimate import lowered, writer_reserve
from dsstar.research.loop import Bounds, Research, report_files, research
from dsstar.settings import Settings
from flows import _story as story
from flows._alert_events import announce_report
from flows._alive import kept_alive
from flows._forms import form_flow, given_name
from flows._report import ReportRun, ReportRuntime
from flows._resume import earlier_flow_run, take_up
from flows._runners import build_task_runner, default_task_runner
from flows._settle import crash_earlier_attempts
from flows._states import failed_state, final_state, interrupted_state
from flows.ds_star import default_run_id, run_name
from flows.workers import check_crash_loop
from tasks.record import publish_report

__all__ = ["ds_star_report", "own_report_flow", "run_report"]


def _flow_run_name() -> str:
    """As a ds-star flow run's (`flows.ds_star.run_name`): the name a person gave it, else
    its run id and the question, shortened."""
    parameters = flow_run.parameters
    run_id = parameters.get("run_id") or default_run_id()
    return given_name() or run_name(run_id, parameters.get("question"))


_FLOW = {"name": "ds-star-report", "flow_run_name": _flow_run_name, "log_prints": False}


@form_flow(ReportForm, **_FLOW, task_runner=default_task_runner())
def ds_star_report(**fields: Any) -> dict[str, Any] | State:
    """Answer an open question about a folder or bucket of data files with a report: factoid
    sub-questions answered in parallel by DS-STAR runs (child flow runs), a report citing
    each answer, reviewed and refined.

    The parameters are the fields of `dsstar.inputs.report.ReportForm`: the question, its data,
    the report's required form, how many sub-questions and refinement passes, and every run
    setting. The flow run ends Completed with the report, Failed when it failed or reached its
    ceiling (state OverBudget; the report is written all the same from what was answered).
    """
    # Parameters come from whoever reaches the Prefect API: the Settings of this worker's own
    # environment judge what they may choose, and where their data may lie.
    return _report(fields, None, Settings())


def own_report_flow(policy: Settings | None) -> Flow:
    """The ds-star-report flow for reports whose forms this process builds itself (the tasks
    of `dsstar bench run`): `ds_star_report`, its forms judged by `policy` (None: they are
    its user's own) rather than by the worker's environment."""
    return _flow_of(lambda fields: _report(fields, None, policy), default_task_runner())


def _flow_of(answer: Callable[[dict[str, Any]], Any], runner: Any) -> Flow:
    """A ds-star-report flow (its name, parameters, schema and description) whose body is
    `answer`, given the parameters as a dict."""

    def answer_here(**fields: Any) -> dict[str, Any] | State:
        return answer(fields)

    answer_here.__doc__ = ds_star_report.description.partition("\n\nArgs:\n")[0]
    return form_flow(ReportForm, **_FLOW, task_runner=runner)(answer_here)


def run_report(prepared: PreparedRun) -> tuple[dict[str, Any] | None, BaseException | None]:
    """Run (or resume) the ds-star-report flow in this process; returns its result, or None
    and the error it ended with. The prepared form and settings are taken as they are, judged
    by the prepared run's policy. A stored report is continued in its own flow run where it
    can be (flows/_resume.py), as a run is."""
    from flows.ds_star import completed_result

    form, settings = prepared.form, prepared.settings
    flow = _flow_of(lambda fields: _report(fields, prepared, prepared.policy),
                    build_task_runner(settings))  # fmt: skip
    earlier = earlier_flow_run(settings, form.run_id)
    if earlier is None:
        state = flow(**report_parameters(form), return_state=True)
    else:  # the stored report's own flow run, run again: one flow run per report
        parameters = get_call_parameters(flow.fn, (), report_parameters(form))
        take_up(earlier, parameters)
        state = run_flow(flow, flow_run=earlier, parameters=parameters, return_type="state")
    try:
        return completed_result(state, settings.storage, form.run_id), None
    except BaseException as exc:  # the flow run's own error: handed back, not raised
        return None, exc


def _report(
    fields: dict[str, Any], prepared: PreparedRun | None, policy: Settings | None
) -> dict[str, Any] | State:
    """The flow's body (see `flows.ds_star._answer`, which this mirrors): `policy` judges the
    form (None: the local user's own); parameters that are not the prepared report's are
    judged by this worker's environment."""
    checked = prepared is not None and report_parameters(prepared.form) == _given(fields)
    if checked:
        form, settings = prepared.form, prepared.settings
    else:
        try:
            form = ReportForm.model_validate(fields)
            settings = form.settings()
        except ValidationError as exc:
            raise UsageError(explain(exc)) from exc
        policy = Settings() if prepared is not None else policy
    check_form(form.chosen(), policy)
    data = hold_data_location(form.data, policy)
    try:
        outcome = _checked_report(form, settings, data, checked, policy)
        return outcome if isinstance(outcome, State) else final_state(outcome)
    finally:
        if isinstance(data, DataRoot):
            data.close()


def _given(fields: dict[str, Any]) -> dict[str, Any] | None:
    """The parameters as `report_parameters` writes them (see `flows.ds_star._given`); None
    when they make no form."""
    try:
        return report_parameters(ReportForm.model_validate(fields))
    except ValidationError:
        return None


def _checked_report(
    form: Any, settings: Settings, data: str | DataRoot, checked: bool, policy: Settings | None
) -> dict[str, Any] | State:
    where = normalize_location(data) if isinstance(data, str) else data.path
    if not checked:
        check_question(form.question, form.guidelines, settings.max_question_chars)
        preflight(settings, where)
    scratch.sweep(settings.work_dir)
    run = ReportRun.start(
        run_id=form.run_id or default_run_id(),
        settings=settings,
        params={"question": form.question, "data": where, "guidelines": form.guidelines},
        given=set(form.chosen()),
    )
    bounds = Bounds(**{name: getattr(form, name) for name in REPORT_FIELDS})
    run.note(kind="report", report=vars(bounds))
    story.say("report %s: %s (data: %s)", run.run_id, form.question, where)
    try:
        with kept_alive(run.run_id, run.store.url, settings.heartbeat_timeout):
            if flow_run.id and flow_run.run_count > 1:  # what a dead attempt left running
                crash_earlier_attempts(flow_run.id, flow_run.run_count)
            if flow_run.id and not checked:  # a worker's retry of a report that kills workers
                check_crash_loop(flow_run.id, settings.max_crash_retries, run.run_id)
            return compose(run, form.question, form.guidelines, data, where, settings, bounds,
                           policy)  # fmt: skip
    except Exception as exc:  # record why in run.json, then fail the report
        run.fail(exc)
        story.failed(exception_line(exc), exc)
        return failed_state(run.run_id, exc)
    except BaseException as exc:  # SIGINT, SIGTERM: resumable
        run.interrupt(exc)
        if stopping.requested() or isinstance(exc, KeyboardInterrupt | Interrupted):
            return interrupted_state(run.run_id, run.record.get("error"), exc)
        raise
    finally:
        scratch.release(run.run_id)
        forget(run.run_id)
        run.release()


def compose(
    run: ReportRun,
    question: str,
    guidelines: str,
    data: str | DataRoot,
    where: str,
    settings: Settings,
    bounds: Bounds,
    policy: Settings | None = None,
) -> dict[str, Any]:
    """The report (see the module): analysis, the method, then the report stored and shown.
    `policy` judges the sub-runs' forms as it judged the report's."""
    from dataclasses import replace

    from flows._analysis import analyze_files

    source = data_source(data, settings, tag=run.run_id)
    spec = run_spec(settings, run.run_id, run.store.url, source.mount_dir)
    subs = bounds.sub_questions + bounds.refinements * bounds.follow_ups
    lower = lowered(spec.ceiling, writer_reserve(spec, question, guidelines, subs))
    run.note(spec=spec.to_dict())
    runtime = ReportRuntime(run, spec, lower, settings, where, policy)
    try:  # the files once, for every sub-question: their runs find the descriptions cached
        analyses = analyze_files(replace(spec, ceiling=lower), source)
    except OverBudget as exc:
        run.record_analyses(exc.analyses)
        return _finish(run, Research(stopped=str(exc)), question, guidelines, spec, settings)
    run.record_analyses(analyses)
    story.analyzed(analyses, run.run_id)
    files = report_files(question, analyses, source.mount_dir, spec)
    done = research(runtime, question, guidelines, files, bounds)
    return _finish(run, done, question, guidelines, spec, settings)


def _finish(
    run: ReportRun,
    done: Research,
    question: str,
    guidelines: str,
    spec: Any,
    settings: Settings,
) -> dict[str, Any]:
    """Store the report and close the run; returns its result (`--json`)."""
    notes = []
    if done.stopped:
        missing = sum(not a.answered for a in done.answers)
        notes.append(
            f"The report stopped early: {done.stopped}. {missing} sub-question(s) have no"
            " answer; resuming the report with a higher ceiling answers them."
        )
    figures = load_figures(run.store, done.answers)
    report = build_report(question, done.body, done.answers, figures, notes,
                          context=f"{question}\n{guidelines}")  # fmt: skip
    markdown = report.markdown(relative_src(run.run_id))
    page = report.html(question)
    sub_runs = [a.to_dict() for a in done.answers]
    objects: dict[str, Any] = {
        final_object("report.md"): markdown,
        final_object("report.html"): page,
        report_object("sub_questions.json"): sub_runs,
    }
    uris = dict(zip(objects, run.save(objects, "report"), strict=True))
    outputs = [_entry(name, objects[final_object(name)], uris[final_object(name)])
               for name in ("report.md", "report.html")]  # fmt: skip
    status = Status.OVER_BUDGET if done.stopped else Status.REPORTED
    run.note(
        status=status.value,
        answer=markdown,
        plan=[a.sub.question for a in done.answers],
        outputs=outputs,
        sub_runs=sub_runs,
        outline=report.outline,
        checks={"unsupported_numbers": report.unsupported, "dropped_citations": report.dropped},
        cited=report.cited,
        figures_embedded=[
            {"number": f.number, "name": f.name, "run_id": f.run_id} for f in figures
        ],  # fmt: skip
        **run.totals(),
    )
    if done.stopped:
        run.note(error=spent_line(run.record, spec.ceiling, done.stopped)
                 if spec.ceiling else f"stopped early: {done.stopped}")  # fmt: skip
    result = run.close()
    story.say("report: %d sub-questions, %d answered, %d cited; %s", len(done.answers),
              sum(a.answered for a in done.answers), len(report.cited), status.value,
              level=logging.WARNING if done.stopped else logging.INFO)  # fmt: skip
    publish_report(run.run_id, result, report.markdown(inline_src()), sub_runs)
    announce_report(run.store, run.record, settings.database_url)
    return result


def _entry(name: str, text: str, uri: str) -> dict[str, Any]:
    import hashlib

    data = text.encode("utf-8")
    return {"name": name, "bytes": len(data), "uri": uri, "media_type": media_type(name),
            "sha256": hashlib.sha256(data).hexdigest()}  # fmt: skip
