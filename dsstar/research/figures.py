"""A report's figures (the answers it cites), and the news of a report against the last report
of the same question over the same data: cited figures that changed, sub-questions that
were answered then and fail now. A nightly report's alerts (flows/_alert_events.py) carry
them; sub-questions are matched by their words (`subs.key`), since a report numbers its
sub-questions afresh each time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsstar.algorithm.verdict import ANSWERED, Status
from dsstar.errors import DSStarError
from dsstar.keys import run_record
from dsstar.records.ledger import Ledger, question_key
from dsstar.research.subs import key
from dsstar.storage import Store

__all__ = ["ReportNews", "cited_figures", "previous_report", "report_news"]

_SHOWN = 300  # characters of an answer an alert line carries


def cited_figures(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The answers a stored report cites, by sub-question (its `key`): each {"question",
    "answer", "run_id"}."""
    cited = set(record.get("cited") or [])
    return {
        key(sub["question"]): {
            "question": sub["question"],
            "answer": sub.get("answer"),
            "run_id": sub.get("run_id"),
        }  # fmt: skip
        for sub in record.get("sub_runs") or []
        if sub.get("number") in cited and sub.get("status") in ANSWERED
    }


@dataclass(frozen=True)
class ReportNews:
    """What changed since the last report: `changed` lines ("question: was A, now B") and
    `failing` lines ("question: error"), each about one sub-question."""

    previous_run: str | None = None
    changed: list[str] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)


def report_news(previous: dict[str, Any] | None, record: dict[str, Any]) -> ReportNews:
    """The news of report `record` against the `previous` one (None: there is none)."""
    if not previous:
        return ReportNews()
    was, now = cited_figures(previous), cited_figures(record)
    changed = [
        f"{now[k]['question']}: was {_short(was[k]['answer'])}, now {_short(now[k]['answer'])}"
        for k in now
        if k in was and _flat(was[k]["answer"]) != _flat(now[k]["answer"])
    ]
    answered_before = {
        key(sub["question"])
        for sub in previous.get("sub_runs") or []
        if sub.get("status") in ANSWERED
    }
    failing = [
        f"{sub['question']}: {_short(sub.get('error') or 'failed')} (run {sub.get('run_id')})"
        for sub in record.get("sub_runs") or []
        if sub.get("status") == Status.FAILED and key(sub["question"]) in answered_before
    ]
    return ReportNews(previous.get("run_id"), changed, failing)


def previous_report(ledger: Ledger, store: Store, record: dict[str, Any]) -> dict | None:
    """The run.json of the last earlier report of the same question (and required form) over
    the same data, or None (none, or the ledger or storage cannot say)."""
    try:
        rows = ledger.history(question_key(record["question"], record.get("guidelines") or ""))
    except DSStarError:
        return None
    for row in reversed(rows):
        if row.run_id == record.get("run_id") or row.data != record.get("data"):
            continue
        try:
            earlier = store.read_json(run_record(row.run_id))
        except (FileNotFoundError, DSStarError):
            continue
        if earlier.get("kind") == "report" and earlier.get("status") in ANSWERED:
            return earlier
    return None


def _flat(text: Any) -> str:
    return " ".join(str(text or "").split())


def _short(text: Any) -> str:
    flat = _flat(text)
    return flat if len(flat) <= _SHOWN else flat[: _SHOWN - 3] + "..."
