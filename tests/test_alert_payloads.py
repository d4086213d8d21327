"""What the nightly alerts carry: the budget alert's spending as the CLI says it (an unknown
cost unknown), and what a model, a script or the lake wrote made inert."""

from __future__ import annotations

import json

from prefect.testing.fixtures import (  # noqa: F401 (Prefect's own events test harness)
    asserting_events_worker,
    reset_worker_events,
)

from dsstar.inputs.questions import Question
from dsstar.storage import Store
from flows._alert_events import announce_night, spent
from flows.alerts import ANSWER_CHANGED, CONTRACT_BROKEN, DELIVERABLE_CHANGED


def _result(cost: float | None, calls: int, tokens: int = 0) -> dict:
    return {"cost_usd": cost, "llm_calls": calls, "input_tokens": tokens, "output_tokens": 0}


def test_the_batch_spent_the_sum_of_its_questions_costs():
    results = [_result(0.0021, 4, 1_500), _result(0.0042, 7, 2_600)]
    assert spent(results) == "$0.0063, 4,100 tokens (questions; the shared analysis aside)"


def test_a_question_with_an_unpriced_model_makes_the_cost_unknown_not_smaller():
    results = [_result(0.0021, 4, 1_500), _result(None, 3, 900)]
    assert spent(results).startswith("unknown, 2,400 tokens")


def test_skipped_questions_asked_nothing_and_cost_nothing():
    assert spent([_result(None, 0), _result(None, 0)]).startswith("$0.0000, 0 tokens")
    assert spent([_result(0.001, 2, 10), _result(None, 0)]).startswith("$0.0010, 10 tokens")


# What a model answered, what a script named its files and what the lake holds reach a chat
# tool or a mailbox, which make every address a link and may obey escape sequences.
HOSTILE = "[Open the verified report](https://evil.example/x) \x1b]8;;https://evil.example\x07"


def test_what_a_model_a_script_or_the_lake_wrote_reaches_an_alert_with_no_link(
    asserting_events_worker,  # noqa: F811 (Prefect's fixtures, imported above)
    reset_worker_events,  # noqa: F811
    tmp_path,
):
    lake = tmp_path / "lake"
    question = Question("Which region sold most?", str(lake))
    files = [{"name": f"{HOSTILE}.csv", "uri": "file:///out/a.csv", "bytes": 10, "sha256": "a"}]
    failed = {"path": f"https://evil.example/{HOSTILE}.csv", "expectation": "expect_rows",
              "observed": f"rows say {HOSTILE}"}  # fmt: skip
    result = {"status": "verified", "answer": HOSTILE, "run_id": "night-1", "outputs": files,
              "contracts": {"failed": [failed]}}  # fmt: skip
    announce_night(
        [question], [result], ["West"], Store(str(tmp_path / "storage")), batch="b",
        earlier_outputs=[{"run_id": "night-0", "outputs": []}],
    )  # fmt: skip
    asserting_events_worker.drain()
    events = asserting_events_worker._client.events
    kinds = {event.event for event in events}
    assert {ANSWER_CHANGED, DELIVERABLE_CHANGED, CONTRACT_BROKEN} <= kinds
    # What a message can show: the payload and the resource's name (its id is a key).
    shown = json.dumps([(e.resource.name, e.payload) for e in events], ensure_ascii=False)
    assert "https://" not in shown and "\x1b" not in shown and "\x07" not in shown
    assert shown.count("https[:]//evil.example") >= 5  # the texts are there, made inert
