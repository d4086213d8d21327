"""The nightly table's change marks (against a real SQLite ledger) and the route line of a
flow run's logs, without a flow: the browser test in test_deployments.py shows them in the UI."""

from __future__ import annotations

import logging

from dsstar.inputs.questions import Question
from dsstar.locations import normalize_location
from dsstar.records.ledger import Ledger
from flows import _story as story
from flows.nightly import change_mark


def _record(ledger: Ledger, run_id: str, data: str, answer: str | None, at: str) -> None:
    ledger.record(
        {"run_id": run_id, "question": "Top region?", "data": normalize_location(data),
         "status": "verified" if answer else "failed", "answer": answer,
         "started_at": at, "finished_at": at},
        [], [],
    )  # fmt: skip


def test_change_marks_compare_with_the_last_answer_over_the_same_data(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}", str(tmp_path / "storage"))
    night = Question("Top region?", str(tmp_path / "sales"))
    elsewhere = str(tmp_path / "other")
    assert change_mark(ledger, night, {"run_id": "r1", "answer": "North"}) == "new"
    _record(ledger, "r1", night.data, "North", "2026-11-20T02:00:00+00:00")
    _record(ledger, "x1", elsewhere, "West", "2026-11-21T02:00:00+00:00")  # another root
    _record(ledger, "r2", night.data, None, "2026-11-21T02:00:00+00:00")  # failed: no answer
    _record(ledger, "r3", night.data, "South", "2026-11-22T02:00:00+00:00")  # tonight
    assert change_mark(ledger, night, {"run_id": "r3", "answer": "South"}) == (
        "changed (was North)"
    )
    assert change_mark(ledger, night, {"run_id": "r4", "answer": "South"}) == "same"
    assert change_mark(ledger, night, {"status": "failed"}) == "no answer"


def test_route_lines_say_which_steps_were_dropped(caplog):
    with caplog.at_level(logging.INFO, logger="dsstar.flows"):
        story.route(3, "Step 2", 3)
        story.route(2, "Add Step", 1)
        story.route(4, "Step 7", 3)
        story.answered("failed", 2, None, "the final script printed nothing")
    assert caplog.messages == [
        "route into round 03: Step 2 (steps 2..3 dropped)",
        "route into round 02: Add Step",
        "route into round 04: Step 7 (outside the plan: read as Add Step)",
        "answer: none (failed after 2 rounds): the final script printed nothing",
    ]
