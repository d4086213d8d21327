"""The context the agents see: documentation files whole, a total token budget shared by
relevance, and questions too long for any prompt refused before any call."""

from __future__ import annotations

import shutil

import pytest
from shared_data import DABSTEP

from dsstar.algorithm.agents import FileInfo
from dsstar.algorithm.context import fit_context, retrieve
from dsstar.algorithm.context_budget import check_question, fit, whole_documents
from dsstar.errors import UsageError
from dsstar.model.llm import count_tokens

NULL_RULE = "If a field is set to null it means that it applies to all possible values"


def gpt4o_tokens(text: str) -> int:
    return count_tokens("openai/gpt-4o", text)


@pytest.mark.skipif(not DABSTEP.is_dir(), reason="DABStep's files are not on this machine")
def test_dabsteps_manual_reaches_the_agents_whole(tmp_path) -> None:
    shutil.copy(DABSTEP / "context" / "manual.md", tmp_path / "manual.md")
    summary = "Markdown, 22 KB: sections on fees, fraud and account types."  # an analyzer's
    files = [{"path": "manual.md", "format": "markdown", "description": summary}]
    shown = retrieve(
        "What would GlobalCard charge?",
        whole_documents(files, tmp_path, max_chars=40_000),
        top_k=100,
        max_chars=6000,  # the cut every other description gets
    )
    description = shown[0].description
    assert NULL_RULE in description and len(description) > 22_000
    assert description.endswith((DABSTEP / "context" / "manual.md").read_text().strip()[-200:])


def test_html_prose_and_the_per_file_budget(tmp_path) -> None:
    (tmp_path / "guide.html").write_text(
        "<html><style>p {color: red}</style><body><h1>Refunds</h1><p>Refunds &amp; returns"
        " within 30 days.</p><script>var x = 1;</script></body></html>"
    )
    (tmp_path / "notes.txt").write_text("fee rule " * 10_000)
    (tmp_path / "table.html").write_text("<table><tr><td>1</td></tr></table>")
    table = {"path": "table.html", "format": "html", "description": "HTML table: 1 row"}
    assert whole_documents([table], tmp_path, max_chars=5000) == [table]
    files = [
        {"path": "guide.html", "format": "html", "description": "HTML"},
        {"path": "notes.txt", "format": "text", "description": "text"},
        {"path": "orders.csv", "format": "csv", "description": "CSV: id, amount"},
    ]
    guide, notes, orders = whole_documents(files, tmp_path, max_chars=5000)
    assert "Refunds & returns within 30 days." in guide["description"]
    assert "color" not in guide["description"] and "var x" not in guide["description"]
    assert "its first 5,000 of 89,999 characters" in notes["description"]
    assert "characters left out" in notes["description"]
    assert orders["description"] == "CSV: id, amount"  # data files keep their description


def test_many_descriptions_share_the_budget_by_relevance() -> None:
    filler = "column_{} int64 non-null values between 0 and 99999 with mean 4521.7\n"
    files = [
        FileInfo(f"data/table_{i:03d}.csv", "".join(filler.format(n) for n in range(90)))
        for i in range(100)
    ]
    files[57] = FileInfo("data/fees.json", "fee rules: card_scheme, account_type, aci, rate. " * 90)
    total = sum(gpt4o_tokens(f.description) for f in files)
    assert total > 128_000  # 100 descriptions of ~6,000 characters: more than a 128k window

    fitted = fit_context("What fee does the card scheme charge?", files, 20_000, gpt4o_tokens)
    assert [f.path for f in fitted.files] == [f.path for f in files]  # the order stays
    assert fitted.files[57] == files[57]  # the relevant file is whole
    shown = sum(gpt4o_tokens(f.description) for f in fitted.files)
    assert shown <= 20_000 * 1.02  # within the budget (the token estimate of a cut is close)
    cut = {item["path"] for item in fitted.left_out}
    assert len(cut) >= 90 and "data/fees.json" not in cut  # the rest of the room: next best
    first_cut = next(f for f in fitted.files if f.path in cut)
    assert "cut to fit the prompt" in first_cut.description


def test_descriptions_within_the_budget_are_untouched() -> None:
    files = [FileInfo("data/a.csv", "CSV: a, b"), FileInfo("data/b.json", "JSON: {x}")]
    assert fit(files, 1000, gpt4o_tokens).files == files
    assert fit(files, 1000, gpt4o_tokens).left_out == []


def test_an_oversized_question_is_refused_before_any_call() -> None:
    with pytest.raises(UsageError, match="question is 100,000 characters"):
        check_question("x" * 100_000, "", max_chars=20_000)
    with pytest.raises(UsageError, match="guidelines"):
        check_question("What is the total?", "y" * 30_000, max_chars=20_000)
    check_question("What is the total?", "A number.", max_chars=20_000)
