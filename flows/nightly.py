"""The nightly batch: every question of a question set, concurrently, with one analysis of
each data root shared by all the questions over it."""

from __future__ import annotations

import logging
from dataclasses import asdict, replace
from pathlib import Path
from typing import Annotated, Any

from prefect import tags, task
from prefect.runtime import flow_run
from prefect.states import Failed, State
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.transactions import CommitMode, transaction
from pydantic import BeforeValidator, Field, ValidationError

from dsstar.algorithm.verdict import Status
from dsstar.errors import DSStarError, OverBudget, UsageError
from dsstar.inputs.fields import VALUE_CHARS
from dsstar.inputs.form import SECRET_FIELDS, RunForm, explain, options_form
from dsstar.inputs.questions import Question, load_questions
from dsstar.inputs.spec import data_source, run_spec, spend_ceiling
from dsstar.inputs.trust import check_data_location, check_form, check_question_set
from dsstar.keys import run_record
from dsstar.locations import normalize_location
from dsstar.model.ceiling import Ceiling, forget
from dsstar.records.ledger import Ledger, question_key
from dsstar.records.record import total_cost
from dsstar.settings import Settings
from dsstar.storage import Store
from dsstar.text import money
from dsstar.views.report import finished_result
from flows import _story as story
from flows._alert_events import announce_night
from flows._analysis import analyze_files
from flows._dispatch import dispatch_questions
from flows._forms import form_flow, given_name
from flows._runners import default_task_runner
from flows.alerts import QUESTION_TAG
from flows.ds_star import completed_result, default_run_id, ds_star
from tasks.cache_keys import artifact_key
from tasks.cards import publish_table

__all__ = ["SKIPPED", "NightlyForm", "ds_star_nightly"]

SKIPPED = "skipped"  # a question of a batch that reached its ceiling: no run was started


class QuestionsFailed(Exception):
    """A batch in which some questions failed, after all of them ended."""


@task(name="answer", task_run_name="answer {run_id}")
def answer(run_id: str, question: dict[str, str], settings: dict[str, Any]) -> dict[str, Any]:
    """One question as its own ds-star flow run (a subflow), so it can be inspected alone."""
    # On a cluster this runs inside a worker: the question's own fan-out (its files were
    # analyzed ahead by share_analyses, so these are cache hits) stays on threads there.
    form = RunForm.for_question(question, run_id, settings | {"task_runner": "thread"})
    finished = finished_result(Store(form.settings().storage), run_id)
    if finished is not None:  # a retried batch: this question was answered before it failed
        return finished
    # The LLM calls and executions of the run are tasks nested in this one. By default their
    # cache records would commit with this task, and a failed question would lose them: its
    # retry would pay for every finished call again. Eager commits keep each one as it ends.
    # The tag marks the question's flow run for the failure alert (flows.alerts); its id
    # lets the other alerts link to it.
    with transaction(commit_mode=CommitMode.EAGER), tags(QUESTION_TAG):
        run = ds_star.with_options(task_runner=ThreadPoolTaskRunner())
        state = run(**form.parameters(), return_state=True)
        # A busy server may hand back a Completed state without the result: then it is read
        # from storage (a Failed state raises its error, which fails this question).
        result = completed_result(state, form.settings().storage, run_id)
        return result | {"flow_run_id": str(state.state_details.flow_run_id)}


NightlyForm = options_form(
    "NightlyForm",
    "A nightly batch: its question set, and the settings every question runs with.",
    questions_file=(
        str,
        Field(
            "deployments/questions.yaml",
            min_length=1,
            max_length=VALUE_CHARS,
            description="YAML list of {question, data, guidelines}; relative data paths are"
            " relative to the file.",
        ),
    ),
    question_deployment=(
        Annotated[str, BeforeValidator(lambda value: value or "")],
        Field(
            "",
            max_length=VALUE_CHARS,
            description="Run each question as its own flow run of this deployment of the"
            " ds-star flow (e.g. ds-star/on-demand), so that every worker of its pool takes a"
            " share. Empty: the questions run as subflows in the batch's own process.",
        ),
    ),
)


def nightly_run_name() -> str:
    """The batch's flow run name: its question set and the day it was scheduled for, e.g.
    `questions 2026-11-23`, instead of Prefect's random one (a name a person gave it stays)."""
    given = given_name()  # a name typed in the UI's form is kept
    if given:
        return given
    name = flow_run.parameters.get("questions_file") or "deployments/questions.yaml"
    return f"{Path(str(name)).stem} {flow_run.scheduled_start_time:%Y-%m-%d}"


@form_flow(
    NightlyForm,
    name="ds-star-nightly",
    flow_run_name=nightly_run_name,
    task_runner=default_task_runner(),
)
def ds_star_nightly(**fields: Any) -> list[dict[str, Any]] | State:
    """Answer every question of a question set (a YAML file) against its data. The batch
    fails when any question failed, after every other question has finished.

    The parameters are the fields of `NightlyForm`: the question set and every run setting
    (the same fields as the ds-star run form), shared by all its questions.
    """
    try:
        form = NightlyForm.model_validate(fields)
        settings = form.settings()
    except ValidationError as exc:
        raise UsageError(explain(exc)) from exc
    # A flow run's parameters are the worker's to judge (see dsstar.inputs.trust): the question set
    # is read by the worker, and each question's data is analyzed ahead of its run.
    worker = Settings()
    check_form(form.chosen(), worker)
    questions_file = check_question_set(form.questions_file, worker)
    questions = [
        replace(q, data=check_data_location(q.data, worker)) for q in load_questions(questions_file)
    ]
    batch = default_run_id()  # stable across retries of this flow run: they resume
    ceiling = spend_ceiling(settings)
    analysis_calls, stop = share_analyses(questions, settings, batch)
    shared = settings.model_dump(mode="json", exclude=SECRET_FIELDS)
    if ceiling:  # one question at a time, here, each bounded by what the batch has left
        budget = BatchBudget(ceiling, analysis_calls, stop)
        results = [budget.answer(batch, n, q, shared) for n, q in enumerate(questions, 1)]
    elif form.question_deployment:  # each question its own flow run, on any worker of the pool
        forms = [
            RunForm.for_question(asdict(q), f"{batch}-q{n}", form.chosen())
            for n, q in enumerate(questions, 1)
        ]
        store = Store(settings.storage)
        results = dispatch_questions(form.question_deployment, forms, [QUESTION_TAG], store)
    else:  # every question a subflow of this batch, concurrently, in this process
        futures = [
            answer.submit(f"{batch}-q{n}", asdict(q), shared) for n, q in enumerate(questions, 1)
        ]
        results = [outcome(q, future) for q, future in zip(questions, futures, strict=True)]
    ledger = Ledger(settings.database_url, Store(settings.storage).url)
    for question, result in zip(questions, results, strict=True):
        result["question"] = question.question  # a run's result names its run, not its question
        result["change"] = change_mark(ledger, question, result)
        story.say("question: %s · %s · answer: %s (%s)", question.question, result["status"],
                  result.get("answer"), result["change"])  # fmt: skip
    publish_summary(batch, results, analysis_calls)
    pairs = zip(questions, results, strict=True)
    previous = [known_previous_answer(ledger, q, r) for q, r in pairs]
    store = Store(settings.storage)
    earlier = [
        earlier_outputs(ledger, store, q, r) for q, r in zip(questions, results, strict=True)
    ]
    announce_night(questions, results, previous, store, batch, earlier)  # alerts
    failed = [r for r in results if r["status"] == "failed"]
    if failed:  # the batch shows as failed (alerts, the UI's Retry): a retry resumes those
        # The state's data is the error (Prefect raises a failed state's data; the results
        # are in the summary artifact and each question's run).
        message = f"{len(failed)} of {len(results)} questions failed"
        return Failed(message=message, data=QuestionsFailed(message))
    return results


def outcome(question: Question, future: Any) -> dict[str, Any]:
    """A question's result, or (one failed question does not sink the batch; its run.json
    says why) a row saying it failed."""
    future.wait()
    if future.state.is_completed():
        return future.result()
    return {"question": question.question, "status": "failed", "error": future.state.message}


class BatchBudget:
    """A batch's ceiling: its questions run one at a time, each with the batch's ceiling
    less what the batch has spent (shared analysis and earlier questions) as its own; once
    a question stops over budget, or nothing is left, the others are skipped."""

    def __init__(self, ceiling: Ceiling, analysis_calls: list[dict], stop: str | None) -> None:
        self.ceiling = ceiling
        self.cost = sum(c.get("cost_usd") or 0.0 for c in analysis_calls)
        self.tokens = sum(c["input_tokens"] + c["output_tokens"] for c in analysis_calls)
        self.stop = stop  # why no further question starts

    def answer(self, batch: str, n: int, question: Question, shared: dict) -> dict[str, Any]:
        """Question `n`'s result, or a row saying it was skipped and why."""
        left = self._left()
        if self.stop is None and left is None:
            self.stop = "the batch's ceiling was reached"
        if self.stop is not None:
            return {"question": question.question, "status": SKIPPED,
                    "error": f"not started: {self.stop}"}  # fmt: skip
        run_id = f"{batch}-q{n}"
        result = outcome(question, answer.submit(run_id, asdict(question), shared | left))
        # From run.json: a question that failed spent too, and its row does not say what.
        spent = _stored_record(shared["storage"], run_id) or result
        self.cost += spent.get("cost_usd") or 0.0
        self.tokens += (spent.get("input_tokens") or 0) + (spent.get("output_tokens") or 0)
        if result["status"] == Status.OVER_BUDGET:
            self.stop = f"question {n} stopped over budget"
        return result

    def _left(self) -> dict[str, Any] | None:
        """The next question's ceiling (settings), None when nothing is left."""
        left: dict[str, Any] = {}
        if self.ceiling.max_cost is not None:
            left["max_cost"] = round(self.ceiling.max_cost - self.cost, 9)
        if self.ceiling.max_tokens is not None:
            left["max_tokens"] = self.ceiling.max_tokens - self.tokens
        return left if all(v > 0 for v in left.values()) else None


def _stored_record(storage: str, run_id: str) -> dict[str, Any] | None:
    try:
        return Store(storage).read_json(run_record(run_id))
    except (FileNotFoundError, DSStarError):  # never stored: the result row is all there is
        return None


def share_analyses(
    questions: list[Question], settings: Settings, batch: str
) -> tuple[list[dict[str, Any]], str | None]:
    """Analyze each data root once, before the questions run: their runs then find every
    description in the content-keyed cache instead of analyzing the same files in parallel.
    Returns the LLM calls this took (the question runs count those analyses as reused), and
    why the batch must stop when it reached its ceiling doing so (else None)."""
    roots = sorted({question.data for question in questions})
    storage = Store(settings.storage).url
    calls: list[dict[str, Any]] = []
    try:
        for root in roots:
            try:
                source = data_source(root, settings)
                spec = run_spec(settings, f"{batch}-analysis", storage, source.mount_dir)
                analyses, stop = analyze_files(spec, source), None
            except OverBudget as exc:  # the finished analyses count; no question can start
                analyses, stop = exc.analyses, f"the shared file analysis: {exc}"
            except DSStarError as exc:  # that root's questions will fail with the same message
                story.say("cannot analyze %s ahead of its questions: %s", root, exc,
                          level=logging.WARNING)  # fmt: skip
                continue
            for analysis in analyses:
                calls += analysis["calls"] if analysis["run_id"] == spec.run_id else []
            calls = _once(calls)
            if stop:
                return calls, stop
    finally:  # one meter for every root; a retried batch counts afresh, from the caches
        forget(f"{batch}-analysis")
    return calls, None


def _once(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each call once: two files that ask the analyzer the same (the same name and content
    under two roots) share one request, sent once and read back from the run's replies."""
    seen: set[tuple[Any, Any]] = set()
    kept = []
    for call in calls:
        key = (call.get("label"), call.get("request"))
        if key[1] is None or key not in seen:
            seen.add(key)
            kept.append(call)
    return kept


def publish_summary(batch: str, results: list[dict[str, Any]], analysis_calls: list) -> None:
    """A table artifact: every question's status, answer and cost, and the shared analysis
    (`publish_table` escapes its text: answers and questions show as text)."""
    rows = [
        {
            "question": r.get("question") or r.get("run_id"),
            "status": r["status"],
            "answer": r.get("answer"),
            "change": r.get("change"),
            "llm_calls": r.get("llm_calls"),
            "cost": money(r.get("cost_usd")),
            "contracts": contracts_cell(r.get("contracts")),
        }
        for r in results
    ]
    rows.append(
        {
            "question": "(shared file analysis)",
            "status": "done",
            "answer": None,
            "change": None,
            "llm_calls": len(analysis_calls),
            # No calls: every analysis came from the catalog, at no cost.
            "cost": money(total_cost([c.get("cost_usd") for c in analysis_calls]))
            if analysis_calls
            else money(0.0),
            "contracts": None,
        }
    )
    publish_table(
        artifact_key(f"{batch}-nightly"),
        rows,
        f"DS-STAR nightly batch {batch}: each question's status, answer, change since the last"
        " night and cost, then the file analysis the questions shared",
    )


def previous_answer(ledger: Ledger, question: Question, result: dict[str, Any]) -> str | None:
    """The last earlier answer to the same question over the same data (None when there is
    none). Raises LedgerError when the ledger cannot be read."""
    rows = ledger.history(question_key(question.question, question.guidelines))
    root = normalize_location(question.data)
    earlier = [
        r.answer
        for r in rows
        if r.run_id != result.get("run_id") and r.data == root and r.answer is not None
    ]
    return earlier[-1] if earlier else None


def earlier_outputs(
    ledger: Ledger, store: Store, question: Question, result: dict[str, Any]
) -> dict[str, Any] | None:
    """The deliverables of the last earlier answered run of the same question over the same
    data, as its run.json lists them ({"run_id", "outputs"}; each night's run keeps its own
    under runs/<run_id>/final/outputs/). None when there is none or it cannot be read."""
    try:
        rows = ledger.history(question_key(question.question, question.guidelines))
    except DSStarError:
        return None
    root = normalize_location(question.data)
    earlier = [
        r.run_id
        for r in rows
        if r.run_id != result.get("run_id") and r.data == root and r.answer is not None
    ]
    if not earlier:
        return None
    try:
        record = store.read_json(run_record(earlier[-1]))
    except (FileNotFoundError, DSStarError):
        return None
    return {"run_id": earlier[-1], "outputs": record.get("outputs") or []}


def known_previous_answer(ledger: Ledger, question: Question, result: dict) -> str | None:
    """`previous_answer`, or None when the ledger cannot say (then no change is announced)."""
    try:
        return previous_answer(ledger, question, result)
    except DSStarError:
        return None


def change_mark(ledger: Ledger, question: Question, result: dict[str, Any]) -> str:
    """How tonight's answer compares with the last earlier answer to the same question over
    the same data: "new", "same" or "changed (was ...)"; "no answer" when there is none."""
    answer = result.get("answer")
    if answer is None:
        return "no answer"
    try:
        was = previous_answer(ledger, question, result)
    except DSStarError:  # the ledger is a convenience here: the table still shows the answer
        return "unknown"
    if was is None:
        return "new"
    return "same" if was == answer else f"changed (was {was[:80]})"


def contracts_cell(contracts: dict[str, Any] | None) -> str | None:
    """The table's view of a run's contract check: how many files passed, or each failure."""
    if not contracts:
        return None
    failed = contracts.get("failed") or []
    if not failed:
        return f"ok ({contracts.get('checked', 0)} checked)"
    shown = [f"{f['path']}: {f['expectation']} observed {f['observed']}" for f in failed[:5]]
    more = f" (+{len(failed) - 5} more)" if len(failed) > 5 else ""
    return f"{len(failed)} failed: " + "; ".join(shown) + more
