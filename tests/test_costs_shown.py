"""A cost that is not known reads `unknown` in the Prefect UI as on the command line (the answer
card, the nightly table), and the nightly table says what it is."""

from __future__ import annotations

import json
import uuid

import pytest
from prefect.artifacts import Artifact
from rendered import cells_shown

from flows.nightly import publish_summary as publish_nightly
from tasks.cache_keys import artifact_key
from tasks.record import publish_summary

pytestmark = pytest.mark.slow  # they publish to the session's Prefect server


def test_the_answer_card_says_cost_unknown_and_the_error_in_a_block():
    run_id = f"card-{uuid.uuid4().hex[:8]}"
    record = {"question": "Which region?", "status": "failed", "answer": None,
              "error": "the final script failed: KeyError: '**x**' (solution.py line 3)",
              "llm_calls": 4, "input_tokens": 10, "output_tokens": 5, "cost_usd": None}  # fmt: skip
    publish_summary(run_id, record, {"run folder": "file:///tmp/r"})
    card = Artifact.get(artifact_key(f"{run_id}-answer"))
    assert "**cost:** unknown" in card.data and "None" not in card.data
    assert "```\nthe final script failed: KeyError: '**x**' (solution.py line 3)\n```" in card.data


def test_the_nightly_table_has_a_description_and_shows_costs_as_the_cli_does():
    batch = f"night-{uuid.uuid4().hex[:8]}"
    results = [
        {"question": "priced", "status": "verified", "answer": "1", "llm_calls": 3,
         "cost_usd": 0.0012},
        {"question": "unpriced", "status": "verified", "answer": "2", "llm_calls": 3,
         "cost_usd": None},
    ]  # fmt: skip
    publish_nightly(batch, results, analysis_calls=[])
    table = Artifact.get(artifact_key(f"{batch}-nightly"))
    assert table.description and "nightly batch" in table.description
    rows = cells_shown(json.loads(table.data) if isinstance(table.data, str) else table.data)
    assert [row["cost"] for row in rows] == ["$0.0012", "unknown", "$0.0000"]
