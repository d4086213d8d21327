"""What a script, a model, a file or a form wrote is shown as text, wherever dsstar shows it:
`md_text`, `md_code` and `log_text` (dsstar.text), and the cards that use them, published
through the Prefect API by a flow run and rendered by two markdown parsers (tests/rendered.py).
A card holds no link and no image from such text; it reads as the text itself.

The whole path (a run whose final script names its files and states its answer as markdown,
and the Prefect UI in headless Chromium) is in test_inert_flow.py."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prefect import flow, get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
from rendered import render, shown_as

from dsstar.algorithm.guidance import Checkpoint, Choice, Guidance
from dsstar.bench.report import render_report
from dsstar.data.contracts import failures_markdown
from dsstar.text import for_terminal, log_text, md_code, md_text
from dsstar.views.notebook import build_notebook
from flows import _story as story
from flows._guidance import describe, publish_guidance
from flows._states import one_line
from flows.nightly import publish_summary as publish_nightly
from tasks.record import publish_round, publish_rounds_table, publish_summary

# The case: file names and an answer written as markdown, with an image that would
# load from elsewhere and a link that would run script.
NAMES = [
    "[Open the verified report](https:evil.example).csv",
    "![x](https:evil.example).png",
    "sub/[evil](javascript:alert(document.cookie)).csv",
]
ANSWER = "[Click here…](https:evil.example/r) ![t](https:evil.example/beacon.png)"
# What else markdown, GFM and HTML would make live or shape, and a number as it must read.
HOSTILE = [
    *NAMES,
    ANSWER,
    "see https://evil.example/r, www.evil.example or mail@evil.example <https://evil.example>",
    "<img src=x onerror=alert(1)><script>alert(1)</script><a href='https://evil.example'>a</a>",
    "[ref]\n\n[ref]: https://evil.example/ref",
    "# heading\n- item\n1. one\n> quote\n---\n| a | b |\n|---|---|\n| c | d |\n***",
    "    indented https://evil.example/code\n\n\tand tabbed",
    "**bold** _em_ ~~gone~~ `code` &amp; &lt;b&gt; \\[x\\](y) \\",
    "colour\x1b[31m red \u202e reversed \x00 nul",
    "1,234.5",
]


def test_md_text_renders_as_the_text_and_makes_nothing_live():
    for text in HOSTILE:
        for line in (False, True):
            page = render(md_text(text, line=line))
            assert page.live == [], (text, page.live)
            assert shown_as(page.text) == shown_as(for_terminal(text)), text


# Markdown's characters, letters, digits and line breaks, and now and then any character.
CHARACTERS = st.sampled_from(list("[]()!<>`*_~#-+=.:/@&;|\\\"' \n\tahjs1é…")) | st.characters()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=CHARACTERS, max_size=60))
def test_any_text_renders_as_itself_through_md_text(text):
    page = render(md_text(text))
    assert page.live == []
    assert shown_as(page.text) == shown_as(for_terminal(text))


def test_md_text_leaves_no_bare_address_for_a_gfm_renderer_to_link():
    # GFM links `https://`, `www.` and `a@b.c` by itself (the Prefect UI's marked does, and
    # mistune checks only the first): each needs a `:`, `.` or `@` that md_text escapes.
    for text in HOSTILE:
        assert not re.search(r"(?<!\\)[.:@]", md_text(text))


def test_numbers_and_plain_words_read_unchanged():
    for text in ("1,234.5", "-0.25", "North: 12,345.67 USD (2024)", "revenue.png"):
        assert shown_as(render(md_text(text)).text) == text
    assert md_text("North region") == "North region"  # letters need no escape


@pytest.mark.parametrize(
    "value", ["file:///s/runs/r/final/outputs/[a](b).csv", "a`b``c", "`x`", "two\nlines", ""]
)
def test_md_code_is_one_code_span_that_nothing_inside_closes(value):
    page = render(f"at {md_code(value)} end")
    assert page.live == []
    assert shown_as(page.text) == shown_as(f"at {value} end")


def test_log_text_makes_no_address_a_link_and_drops_escape_sequences():
    said = log_text("answer: https://evil.example/r or FTP://x \x1b[31mred\x1b[0m")
    assert said == "answer: https[:]//evil.example/r or FTP[:]//x \ufffdred\ufffd"
    assert not re.search(r"(https?|ftp)://", log_text(ANSWER + " https://a.b"), re.I)


def test_story_lines_and_state_messages_are_plain_text(caplog):
    with caplog.at_level("INFO", logger="dsstar.flows"):
        story.answered("verified", 2, "https://evil.example/r \x1b[8mhidden")
    assert caplog.messages == ["answer (verified, 2 rounds): https[:]//evil.example/r \ufffdhidden"]
    assert (
        one_line("failed: see http://evil.example\nmore", "x")
        == "failed: see http[:]//evil.example"
    )


# -- the cards, published by a flow run through the Prefect API ------------------------------


ROUND = {
    "number": 1,
    "plan": ["Load [it](https://evil.example/p) <img src=x>", "Sum ![t](https:evil.example/b.png)"],
    "code": 'print("```")\n',
    "output": "```\n[out](https://evil.example/o)\n",
    "verdict": False,
    "route": "Step 2 [why](https:evil.example/w)",
    "input_tokens": 10,
    "output_tokens": 5,
    "cost_usd": 0.001,
    "seconds": 1.5,
    "figures": [{"name": NAMES[1], "bytes": 12, "uri": f"file:///s/final/figures/{NAMES[1]}"}],
}
RECORD = {
    "question": "Which region? [see](https://evil.example/q) www.evil.example",
    "status": "verified",
    "answer": ANSWER,
    "error": "ValueError: [x](https://evil.example/e)",
    "reused_from": "www.evil.example",
    "replies": "recorded",
    "recorded_from": "[r](https://evil.example/r)",
    "llm_calls": 4,
    "input_tokens": 1234,
    "output_tokens": 56,
    "cost_usd": 0.0123,
}
NIGHT = [
    {"question": RECORD["question"], "status": "verified", "answer": ANSWER,
     "change": f"changed (was {NAMES[0]})", "llm_calls": 3, "cost_usd": 0.01,
     "contracts": {"checked": 1, "failed": [{"path": NAMES[2], "expectation": "expect_x",
                                             "observed": "<img src=x>"}]}},
]  # fmt: skip


@flow(name="inert-cards")
def publish_every_card(run_id: str) -> None:
    """Every card dsstar publishes for a run and a nightly batch, with hostile text."""
    publish_round(run_id, ROUND, f"file:///s/runs/{run_id}/rounds/01/code.py")
    publish_rounds_table(run_id, [ROUND])
    uris = {f"output {name}": f"file:///s/runs/{run_id}/final/outputs/{name}" for name in NAMES}
    publish_summary(run_id, RECORD, {"run folder": f"file:///s/runs/{run_id}"} | uris)
    publish_nightly(f"{run_id}-night", [dict(row) for row in NIGHT], [])
    publish_guidance(run_id, 1, Guidance(choice=Choice.GUIDE, text=ANSWER))


def test_every_card_shows_script_model_and_file_text_as_text():
    run_id = f"www.evil.example-{uuid.uuid4().hex[:6]}"  # a valid run id GFM would link
    state = publish_every_card(run_id, return_state=True)
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id])
            )
        )
    kinds = sorted(a.type for a in artifacts)
    assert kinds == ["markdown", "markdown", "markdown", "table", "table"], kinds
    shown = []
    for artifact in artifacts:
        texts = [artifact.description or ""]
        if artifact.type == "markdown":
            texts.append(artifact.data)
        else:  # the UI renders each text cell of a table as markdown
            rows = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
            texts += [cell for row in rows for cell in row.values() if isinstance(cell, str)]
        for text in texts:
            page = render(text)
            assert page.live == [], (artifact.key, text, page.live)
            shown.append(shown_as(page.text))
    everything = "\n".join(shown)
    # Each hostile text is there, as the text it is.
    for text in [*NAMES, ANSWER, RECORD["question"], *ROUND["plan"], ROUND["route"]]:
        assert shown_as(text) in everything, text
    assert f"DS-STAR {run_id}" in everything  # the description, its run id not a link


def test_reports_notebooks_forms_and_contract_warnings_show_text_as_text():
    outcome = {"task_id": "t1 [x](https://evil.example)", "run_id": "www.evil.example",
               "status": "failed", "answer": ANSWER, "error": "ValueError: <img src=x>",
               "rounds": 1, "llm_calls": 1, "cost_usd": 0.0, "seconds": 1.0}  # fmt: skip
    report = render_report("bench www.evil.example", [outcome], None, {})
    checkpoint = Checkpoint("run-1", 2, ROUND["plan"], ROUND["output"], ANSWER)
    notebook = json.loads(
        build_notebook(question=RECORD["question"], rounds=[ROUND], solution="print(1)",
                       answer=ANSWER, status="verified")
    )  # fmt: skip
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"]
    failure = {"path": NAMES[0], "expectation": "expect_x", "observed": "[o](https://e.x)"}
    contract = failures_markdown("https://evil.example/lake", {"failed": [failure], "checked": 1},
                                 "The stored solution was not reused.")  # fmt: skip
    for markdown in [report, describe(checkpoint, 60), contract, *cells]:
        page = render(markdown)
        assert page.live == [], (markdown, page.live)
    assert shown_as(ANSWER) in shown_as(render(report).text)
    assert "| 1 | 1 |" in report  # numbers as they are
    assert shown_as(NAMES[0]) in shown_as(render(contract).text)
    assert shown_as(ROUND["plan"][0]) in shown_as(render(cells[1]).text)
