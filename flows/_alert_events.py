"""The events a nightly batch emits for its alerts (see `flows.alerts`): one
`dsstar.answer.changed` per question whose answer changed, one `dsstar.deliverable.changed`
per question whose delivered files changed, one `dsstar.contract.broken` per
file that broke its contract, however many questions read it, and one `dsstar.budget.reached`
when the batch reached its ceiling (a question stopped over budget, or questions skipped).
A report emits `dsstar.report.changed` when figures it cites differ from the last report of
the same question over the same data, and `dsstar.report.failing` when sub-questions that
last report answered fail now (`announce_report`).

Event ids are derived from the dsstar run (and file), so that the same news of the same run
is one event: the Prefect server drops an event whose id it has seen (for 30 minutes), should
a batch announce a question's result twice (a retry that returns the finished result).

A notification block sends the payload to a chat tool or a mailbox, which makes every address
a link: the texts a model, a script or the lake wrote (answers, file names, observed values)
are carried as `log_text` shows them (`https[:]//x`, no control sequence), bounded.

Each event names the question's own ds-star flow run as a related resource, listed before
the batch's (which Prefect adds from the run context): the automation's `flow_run` is then
that question's run, and the message links to the page that shows its rounds.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from prefect.events import emit_event

from dsstar.inputs.questions import Question
from dsstar.keys import contract
from dsstar.locations import normalize_location
from dsstar.records.ledger import Ledger, question_key
from dsstar.records.record import changed_outputs, total_cost
from dsstar.research.figures import previous_report, report_news
from dsstar.storage import Store
from dsstar.text import log_text, money
from flows.alerts import (
    ANSWER_CHANGED,
    BUDGET_REACHED,
    CONTRACT_BROKEN,
    DELIVERABLE_CHANGED,
    REPORT_CHANGED,
    REPORT_FAILING,
)

__all__ = ["announce_night", "announce_report", "spent"]

_MOST = 2000  # characters of an answer or an observed value carried by an event
_MOST_FAILURES = 20  # expectations listed per file; the run's artifact has them all
_IDS = uuid.UUID("5b0e7a52-6f0c-4d5e-9a4e-1f3c2d7b8a90")  # namespace of dsstar's event ids


def _event_id(run_id: str | None, *parts: Any) -> uuid.UUID | None:
    """The same id for the same news of the same run; without a run id, a new one."""
    if not run_id:
        return None
    return uuid.uuid5(_IDS, "\n".join(str(part) for part in (run_id, *parts)))


def announce_night(
    questions: Sequence[Question],
    results: Sequence[dict[str, Any]],
    previous: Sequence[str | None],
    store: Store,
    batch: str = "",
    earlier_outputs: Sequence[dict[str, Any] | None] | None = None,
) -> None:
    """Emit the night's events. `previous[i]` is question i's last earlier answer over the
    same data (None when it has none), `earlier_outputs[i]` that run's id and deliverables
    ({"run_id", "outputs"}, None when unknown); failed questions emit nothing here, since
    their flow run's Failed state is what the failure alert reacts to."""
    earlier_outputs = earlier_outputs or [None] * len(results)
    for question, result, was, before in zip(
        questions, results, previous, earlier_outputs, strict=True
    ):
        now = result.get("answer")
        if result.get("status") != "failed" and None not in (was, now) and was != now:
            _emit_changed(question, result, was or "", now)
        if result.get("status") != "failed" and now is not None and before is not None:
            changed = changed_outputs(before["outputs"], result.get("outputs") or [])
            if changed:
                _emit_delivered(question, result, before["run_id"], changed)
    for (root, path), broken in _broken_files(questions, results).items():
        _emit_broken(root, path, broken, store)
    _emit_budget(batch, results)


def _emit_budget(batch: str, results: Sequence[dict[str, Any]]) -> None:
    """One event when the batch reached its ceiling (see `flows.nightly.BatchBudget`)."""
    stopped = [r for r in results if r.get("status") == "over_budget"]
    skipped = [r for r in results if r.get("status") == "skipped"]
    if not stopped and not skipped:
        return
    emit_event(
        BUDGET_REACHED,
        id=_event_id(batch, BUDGET_REACHED),
        resource={
            "prefect.resource.id": f"dsstar.batch.{batch}",
            "prefect.resource.name": batch,
        },  # fmt: skip
        related=_question_run(stopped[0]) if stopped else [],
        payload={
            "batch": batch,
            "spent": spent(results),
            "over_budget": _shown("; ".join(str(r.get("question")) for r in stopped) or "none"),
            "skipped": _shown("; ".join(str(r.get("question")) for r in skipped) or "none"),
            "error": _shown((stopped or skipped)[0].get("error") or ""),
        },
    )


def spent(results: Sequence[dict[str, Any]]) -> str:
    """What the batch's questions spent, as the CLI says it: `unknown` cost when a question
    that asked a model has none (a model without a price), never a part passed for the whole."""
    costs = [r.get("cost_usd") for r in results if r.get("llm_calls")]
    cost = total_cost(costs) if costs else 0.0
    tokens = sum((r.get("input_tokens") or 0) + (r.get("output_tokens") or 0) for r in results)
    return f"{money(cost)}, {tokens:,} tokens (questions; the shared analysis aside)"


def _emit_changed(question: Question, result: dict[str, Any], was: str, now: str) -> None:
    emit_event(
        ANSWER_CHANGED,
        id=_event_id(result.get("run_id"), ANSWER_CHANGED, now),
        resource=_question(question),
        related=_question_run(result),
        payload={
            "question": _shown(question.question),
            "guidelines": _shown(question.guidelines),
            "data": _shown(normalize_location(question.data)),
            "previous_answer": _shown(was),
            "answer": _shown(now),
            "status": result.get("status"),
            "run_id": result.get("run_id"),
        },
    )


def _emit_delivered(
    question: Question, result: dict[str, Any], previous_run: str, changed: list[str]
) -> None:
    outputs = result.get("outputs") or []
    emit_event(
        DELIVERABLE_CHANGED,
        id=_event_id(result.get("run_id"), DELIVERABLE_CHANGED, *changed),
        resource=_question(question),
        related=_question_run(result),
        payload={
            "question": _shown(question.question),
            "data": _shown(normalize_location(question.data)),
            "changed": _shown("; ".join(changed)),
            "previous_run": previous_run,
            "outputs": _shown("; ".join(f"{o['name']}: {o['uri']}" for o in outputs)),
            "run_id": result.get("run_id"),
        },
    )


def _broken_files(
    questions: Sequence[Question], results: Sequence[dict[str, Any]]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Failed expectations grouped by file: {(data root, path): {"failures", "questions",
    "result"}}, `result` being the first question's that found them."""
    files: dict[tuple[str, str], dict[str, Any]] = {}
    for question, result in zip(questions, results, strict=True):
        root = normalize_location(question.data)
        for failure in (result.get("contracts") or {}).get("failed") or []:
            entry = files.setdefault(
                (root, str(failure.get("path"))),
                {"failures": [], "questions": [], "result": result},
            )
            if question.question not in entry["questions"]:
                entry["questions"].append(question.question)
            if failure not in entry["failures"]:  # two questions over one file find the same
                entry["failures"].append(failure)
    return files


def _emit_broken(root: str, path: str, broken: dict[str, Any], store: Store) -> None:
    failures = [
        {"expectation": f.get("expectation"), "observed": _compact(f.get("observed"))}
        for f in broken["failures"][:_MOST_FAILURES]
    ]
    lines = [f"- {f['expectation']} observed {f['observed']}" for f in failures]
    if len(broken["failures"]) > _MOST_FAILURES:
        lines.append(f"(+{len(broken['failures']) - _MOST_FAILURES} more in the run's artifact)")
    emit_event(
        CONTRACT_BROKEN,
        id=_event_id(broken["result"].get("run_id"), CONTRACT_BROKEN, root, path),
        resource={
            "prefect.resource.id": f"dsstar.contract.{root}/{path}",
            "prefect.resource.name": _shown(path, 200),
        },
        related=_question_run(broken["result"]),
        payload={
            "file": _shown(path),
            "data": _shown(root),
            "contract": store.uri(contract(root, path)),
            "failures": failures,
            "expectations": _shown("\n".join(lines), _MOST * 4),  # templates need no loop
            "questions": _shown("; ".join(broken["questions"])),
            "run_id": broken["result"].get("run_id"),
        },
    )


def _question(question: Question) -> dict[str, str]:
    """The resource a question's events are about: the same question over every night."""
    key = question_key(question.question, question.guidelines)
    return {"prefect.resource.id": f"dsstar.question.{key}",
            "prefect.resource.name": question.question[:200]}  # fmt: skip


def _question_run(result: dict[str, Any]) -> list[dict[str, str]]:
    flow_run_id = result.get("flow_run_id")
    if not flow_run_id:
        return []
    return [{"prefect.resource.id": f"prefect.flow-run.{flow_run_id}",
             "prefect.resource.role": "flow-run"}]  # fmt: skip


def _compact(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return _shown(text)


def _shown(text: str | None, most: int = _MOST) -> str:
    """Text for a message a person reads: no address made a link, no control sequence."""
    return log_text((text or "")[:most])


def announce_report(store: Store, record: dict[str, Any], database_url: str | None) -> None:
    """Emit a report's news against the last report of its question over its data (see
    `dsstar.research.figures`): its cited figures that changed, its sub-questions that fail
    now. Nothing when there is no earlier report, or nothing changed."""
    previous = previous_report(Ledger(database_url, store.url), store, record)
    news = report_news(previous, record)
    resource = _question(Question(record["question"], record["data"],
                                  record.get("guidelines") or ""))  # fmt: skip
    payload = {
        "question": _shown(record["question"]),
        "data": _shown(record["data"]),
        "run_id": record.get("run_id"),
        "previous_run": news.previous_run,
    }
    related = _question_run(record)
    if news.changed:
        emit_event(
            REPORT_CHANGED,
            id=_event_id(record.get("run_id"), REPORT_CHANGED),
            resource=resource,
            related=related,
            payload=payload | {"changes": _shown("\n".join(news.changed))},
        )
    if news.failing:
        emit_event(
            REPORT_FAILING,
            id=_event_id(record.get("run_id"), REPORT_FAILING),
            resource=resource,
            related=related,
            payload=payload | {"failing": _shown("\n".join(news.failing))},
        )
