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
from typing import Any

from prefect import Flow
from prefect.client.schemas.objects import State
from prefect.runtime import flow_run
from pydantic import ValidationError

from dsstar.algorithm.context_budget import check_question
from dsstar.algorithm.verdict import Status
from dsstar.data.sources import DataRoot
from dsstar.errors import OverBudget, UsageError
from dsstar.execution import scratch
from dsstar.execution.failure import exception_line
from dsstar.inputs.form import PreparedRun, explain
from dsstar.inputs.preflight import preflight
from dsstar.inputs.report import REPORT_FIELDS, ReportForm, report_parameters
from dsstar.inputs.spec import data_source, run_spec
from dsstar.inputs.trust import check_form, hold_data_location
from dsstar.keys import final_object, report_object
from dsstar.locations import normalize_location
from dsstar.model.ceiling import forget, spent_line
from dsstar.records.record import media_type
from dsstar.research.assemble import build_report, inline_src, load_figures, relative_src
from dsstar.research.estimate import lowered, writer_reserve
from dsstar.research.loop import Bounds, Research, report_files, research
from dsstar.settings import Settings
from flows import _story as story
from flows._alert_events import announce_report
from flows._forms import form_flow
from flows._report import ReportRun, ReportRuntime
from flows._runners import build_task_runner, default_task_runner
from flows._states import final_state
from flows.ds_star import default_run_id
from flows.workers import check_crash_loop
from tasks.record import publish_report

__all__ = ["ds_star_report", "run_report"]


def _flow_run_name() -> str:
    return flow_run.parameters.get("run_id") or default_run_id()


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
    return _report(fields, prepared=None)


def run_report(prepared: PreparedRun) -> tuple[dict[str, Any] | None, BaseException | None]:
    """Run (or resume) the ds-star-report flow in this process; returns its result, or None
    and the error it ended with. The prepared form and settings are taken as they are."""
    from flows.ds_star import completed_result

    def answer_prepared(**fields: Any) -> dict[str, Any] | State:
        return _report(fields, prepared)

    answer_prepared.__doc__ = ds_star_report.description.partition("\n\nArgs:\n")[0]
    runner = build_task_runner(prepared.settings)
    made: Flow = form_flow(ReportForm, **_FLOW, task_runner=runner)(answer_prepared)
    state = made(**report_parameters(prepared.form), return_state=True)
    try:
        return completed_result(state, prepared.settings.storage, prepared.form.run_id), None
    except BaseException as exc:  # the flow run's own error: handed back, not raised
        return None, exc


def _report(fields: dict[str, Any], prepared: PreparedRun | None) -> dict[str, Any] | State:
    given = {k: v for k, v in fields.items() if v is not None}
    checked = prepared is not None and report_parameters(prepared.form) == given
    if checked:
        form, settings = prepared.form, prepared.settings
    else:
        try:
            form = ReportForm.model_validate(fields)
            settings = form.settings()
        except ValidationError as exc:
            raise UsageError(explain(exc)) from exc
    worker = Settings()  # parameters from the API are the worker's to judge (trust.py)
    check_form(form.chosen(), worker)
    data = hold_data_location(form.data, worker)
    try:
        return final_state(_checked_report(form, settings, data, checked))
    finally:
        if isinstance(data, DataRoot):
            data.close()


def _checked_report(
    form: Any, settings: Settings, data: str | DataRoot, checked: bool
) -> dict[str, Any]:
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
        if flow_run.id:
            check_crash_loop(flow_run.id, settings.max_crash_retries)
        return compose(run, form.question, form.guidelines, data, where, settings, bounds)
    except Exception as exc:
        run.fail(exc)
        story.failed(exception_line(exc))
        raise
    except BaseException as exc:  # SIGINT, SIGTERM: resumable
        run.interrupt(exc)
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
) -> dict[str, Any]:
    """The report (see the module): analysis, the method, then the report stored and shown."""
    from dataclasses import replace

    from flows._analysis import analyze_files

    source = data_source(data, settings, tag=run.run_id)
    spec = run_spec(settings, run.run_id, run.store.url, source.mount_dir)
    subs = bounds.sub_questions + bounds.refinements * bounds.follow_ups
    lower = lowered(spec.ceiling, writer_reserve(spec, question, guidelines, subs))
    run.note(spec=spec.to_dict())
    runtime = ReportRuntime(run, spec, lower, settings, where)
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
