"""What a run's cards say (dsstar.views.cards, published by tasks.record): the card of a run
that ended without an answer (why, where it stopped, what it spent, where it is, how to go
on), and a round's card with the verifier's and the router's reasoning. What a model, a
script or a file wrote is shown as text: a markdown renderer finds no link, image, HTML or
heading in it."""

from __future__ import annotations

import uuid

import pytest
from markdown_it import MarkdownIt
from prefect.artifacts import Artifact

from dsstar.views.cards import crashed_record, ending_card, reasoning, stored_at
from tasks.cache_keys import artifact_key
from tasks.record import publish_round

HOSTILE = "**No.** [click](http://attacker.example) <img src=x onerror=alert(1)>\n# Heading"
FOLDER = "file:///srv/dsstar/runs/r1"


def record(**fields) -> dict:
    """run.json of a run that got through round 01 and failed in what came next."""
    return {
        "run_id": "r1", "question": "Which region sold most?", "status": "failed",
        "started_at": "2026-11-21T19:30:00+00:00",
        "error": "LLMFatalError: the model refused the request", "files": 3,
        "round_table": [
            {"round": 0, "step": "Load the orders.", "plan_length": 1, "verdict": False},
            {"round": 1, "step": HOSTILE, "plan_length": 2, "verdict": False},
        ],
        "llm_calls": 9, "input_tokens": 12345, "output_tokens": 678, "cost_usd": 0.0123,
        "sandbox": "bwrap", "settings": {"max_cost": None, "max_tokens": None},
    } | fields  # fmt: skip


def rendered(markdown: str) -> str:
    return MarkdownIt().render(markdown)


def test_a_failed_runs_card_says_why_where_what_it_spent_where_it_is_and_how_to_go_on():
    card = ending_card(record(), FOLDER)
    assert card.startswith("### Failed: Which region sold most\\?\n")
    assert "**Error**\n\n```\nLLMFatalError: the model refused the request\n```" in card
    assert "**Where it stopped:** after round 01 (not sufficient; step 2: " in card
    assert "in what came next (round 02 or the final script)" in card
    assert "**LLM calls:** 9 · **tokens:** 12,345 in / 678 out · **cost:** $0.0123" in card
    assert "**Scripts ran in:** bwrap" in card
    assert f"**Stored:** `{FOLDER}`" in card
    assert "**Continue:** `dsstar resume r1` (finished analyses" in card
    assert "Retry" not in card  # a run started by the command line has no Retry
    html = rendered(card)
    assert "<a " not in html and "<img" not in html and html.count("<h3>") == 1
    assert "[click](http://attacker.example)" in html  # the step, as the planner wrote it


@pytest.mark.parametrize(
    ("fields", "retry", "said"),
    [
        ({"status": "over_budget", "settings": {"max_cost": 0.5}}, False,
         "`dsstar resume r1 --max-cost N` (with a ceiling N above what it spent)."),
        ({"status": "over_budget", "settings": {"max_tokens": 9000}}, False,
         "`dsstar resume r1 --max-tokens N`"),
        ({"status": "over_budget", "settings": {"max_cost": 0.5}}, True,
         "Or Retry it in the Prefect UI for a worker with a higher ceiling."),
        ({"status": "interrupted", "round_table": [], "files": None}, False,
         "`dsstar resume r1` (finished analyses, model calls and scripts are read back"),
        ({"status": "failed"}, True,
         "Or Retry this flow run in the Prefect UI: it resumes the same run."),
        ({"status": "stopped"}, False,
         "a stopped run is final. `dsstar runs show r1` shows what it had"),
    ],
)  # fmt: skip
def test_every_ending_says_how_to_continue(fields, retry, said):
    card = ending_card(record(**fields), FOLDER, retry=retry)
    assert said in card.split("**Continue:** ")[1], card


def test_where_a_run_stopped_is_said_from_its_record():
    def where(**fields) -> str:
        return ending_card(record(**fields), FOLDER).split("**Where it stopped:** ")[1]

    assert where(round_table=[], files=None).startswith("in the file analysis, before round 00")
    assert where(round_table=[]).startswith("after the file analysis (3 files), in round 00")
    assert where(status="stopped").startswith("after round 01 (not sufficient; step 2:")
    assert "where a person chose to stop" in where(status="stopped")
    assert where(solution_uri=None).startswith("in the final script, after round 01")


def test_a_run_refused_by_its_checks_says_nothing_was_spent_or_stored():
    refused = {"run_id": "r2", "question": "Which region?", "status": "failed",
               "error": "ConfigError: no API key for openai/gpt-4o"}  # fmt: skip
    card = ending_card(refused, "", retry=True)
    assert "**Where it stopped:** before it started: its checks refused it" in card
    assert "**LLM calls:** 0 · **tokens:** 0 in / 0 out · **cost:** $0.0000" in card
    assert "**Stored:** nothing" in card
    assert "**Continue:** fix what the error names, then Retry this flow run" in card
    assert "resume" not in card


def test_a_crashed_run_counts_what_its_store_kept():
    """Its run.json was last saved after the analysis (no totals yet); the replies kept
    under replies/ are what it received and paid for."""
    kept = [{"label": f"analyzer f{n}", "model": "m", "request": str(n), "input_tokens": 100,
             "output_tokens": 10, "cost_usd": 0.001} for n in range(4)]  # fmt: skip
    stored = record(status="running", llm_calls=None, input_tokens=None, cost_usd=None,
                    round_table=[], error=None)  # fmt: skip
    card = ending_card(crashed_record(stored, "its process is gone", kept), FOLDER)
    assert card.startswith("### Crashed: ")
    assert "**Error**\n\n```\nits process is gone\n```" in card
    assert "**LLM calls:** 4 · **tokens:** 400 in / 40 out · **cost:** $0.0040" in card
    # A run.json that says more than the kept replies (they may live elsewhere) is kept.
    assert crashed_record(record(), "gone", kept)["llm_calls"] == 9


def test_only_what_a_browser_can_open_is_a_link():
    assert stored_at("file:///srv/runs/r1") == "`file:///srv/runs/r1`"
    assert stored_at("s3://bucket/runs/r1") == "`s3://bucket/runs/r1`"
    html = rendered(stored_at("file:///odd/``x`` [a](http://b)"))
    assert "<a " not in html and "<code>" in html
    link = stored_at("https://storage.example/runs/r1/run.json")
    assert rendered(link).count('<a href="https://storage.example/runs/r1/run.json"') == 1
    assert "<a " not in rendered(stored_at("javascript:alert(1)"))


def test_reasoning_is_shown_as_written_bounded_with_where_the_rest_is():
    shown = reasoning(HOSTILE + "\n" + "because " * 400, "rounds/01/verdict.json")
    html = rendered(shown)
    for tag in ("<a ", "<img", "<h1", "<strong"):
        assert tag not in html, html
    assert "**No.** [click](http://attacker.example) &lt;img" in html  # as the model wrote it
    assert "<br />" in html  # its line breaks kept
    assert "more characters in rounds/01/verdict.json)" in html
    assert len(shown) < 2600
    assert reasoning("", "x") == "(none given)"


@pytest.mark.slow  # published to the session's Prefect server
def test_a_round_card_carries_the_verifiers_and_the_routers_reasoning():
    run_id = f"reasons-{uuid.uuid4().hex[:8]}"
    item = {"number": 1, "plan": ["Load the orders.", HOSTILE], "code": "print(1)",
            "output": "1", "verdict": False, "route": "Add Step", "input_tokens": 10,
            "output_tokens": 5, "cost_usd": None, "seconds": 1.5,
            "reply": "The output lacks the manager's name. No",
            "route_reply": "One more step joins regions.json.\nAdd Step"}  # fmt: skip
    publish_round(run_id, item, "file:///tmp/run/rounds/01/code.py")
    card = Artifact.get(artifact_key(f"{run_id}-round-01")).data
    html = rendered(card)
    assert "**Opened by the router:** Add Step\n\nOne more step joins regions\\.json\\." in card
    assert "**Verifier: not sufficient**\n\nThe output lacks the manager\\'s name\\. No" in card
    assert "<a " not in html and "<img" not in html and html.count("<h3>") == 1
    assert "Stored at `file:///tmp/run/rounds/01/code.py`" in card
