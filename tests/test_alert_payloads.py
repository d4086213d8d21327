"""What the nightly budget alert says was spent: the CLI's figures, an unknown cost unknown."""

from __future__ import annotations

from flows._alert_events import spent


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
