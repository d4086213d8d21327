"""A report end to end (the ds-star-report flow in this process, the scripted model, the real
sandbox and the session's Prefect server): five sub-questions and one refinement pass of up to
three more, each sub-question a child flow run; the files analyzed once; report.md citing
every answered sub-question with every [N] resolved and the sub-runs' charts and tables
embedded; a failed sub-question cited as such; report.html and the report's card shown in
headless Chromium with their chart; `dsstar runs show` printing the outline and sub-runs;
then `dsstar replay` of the report re-deriving every sub-answer with no model call."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import forked_cli
import pytest
import report_scenario as scenario
from conftest import require_binary
from prefect import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterParentFlowRunId,
)

from dsstar.research.citations import cited
from dsstar.storage import Store
from flows.report import ds_star_report

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium")


@pytest.mark.timeout(900)
def test_a_report_of_sub_questions_answered_in_parallel(env, llm, sales, tmp_path, monkeypatch):
    monkeypatch.setenv("DSSTAR_MAX_DEBUG_ATTEMPTS", "0")  # the failing sub-question fails at once
    scenario.script(llm)
    run_id = "t-report"
    result = ds_star_report(
        question=scenario.QUESTION, data=str(sales), run_id=run_id, sub_questions=5,
        refinements=1, follow_ups=3,
    )  # fmt: skip
    assert result["status"] == "reported", result
    store = Store(env["DSSTAR_STORAGE"])
    record = store.read_json(f"runs/{run_id}/run.json")
    subs = {s["question"]: s for s in record["sub_runs"]}

    # Five sub-questions (the sixth repeated the first), then two of the critic's three (one
    # repeated sub-question 2): each answered once, by its own run, a child flow run.
    assert list(subs) == scenario.FIRST + scenario.FOLLOW_UPS
    assert [s["run_id"] for s in record["sub_runs"]] == [f"{run_id}-q{n:02d}" for n in range(1, 8)]
    planned = [scenario.sub_question(r) for r in llm.calls("planner")]
    assert sorted(planned) == sorted(subs)  # one run each, none asked twice
    with get_client(sync_client=True) as client:
        children = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[result["flow_run_id"]])
            )
        )
    named = sorted(c.name.split(" · ")[0] for c in children)  # run id · question
    assert named == sorted(s["run_id"] for s in record["sub_runs"])
    # The files were analyzed once, by the report: the sub-runs found every description.
    analyzed = [r for r in llm.calls("analyzer")]
    assert len(analyzed) == 3 and {r["run"] for r in analyzed} == {run_id}
    for sub in record["sub_runs"]:
        assert store.read_json(f"runs/{sub['run_id']}/run.json")["reused_analyses"] == 3
    # The failing sub-question failed, is cited as such, and the report went on.
    failed = subs[scenario.FOLLOW_UPS[1]]
    assert failed["status"] == "failed" and "final script failed" in failed["error"]
    assert subs[scenario.FIRST[1]]["answer"] == "Northeast, Ada Park"

    # report.md: the writer's text with its citations checked, the sub-runs' files embedded.
    report = store.read_text(f"runs/{run_id}/final/report.md")
    assert result["answer"] == report
    text, about = plain(report).split("## About this report")  # as it reads
    numbers = {s["number"] for s in record["sub_runs"]}
    assert set(cited(text)) == numbers  # every [N] resolves ([9] was taken out, and said)
    body = text.split("## Not answered")[0]
    answered = {s["number"] for s in record["sub_runs"] if s["status"] != "failed"}
    assert set(cited(body)) == answered | {7}  # every answered one is cited, [7] as failed
    assert "citations of no answer, taken out: [9]" in about
    assert "numbers that no cited answer holds: 99" in about
    for n in numbers:  # each reference: the sub-question, its run, its code in storage
        sub = record["sub_runs"][n - 1]
        assert f"**[{n}]** {sub['question']}" in text
        assert f"`{sub['run_id']}`" in text and f"`{sub['solution_uri']}`" in text
    assert "(failed: the final script failed: KeyError" in text  # cited as failed
    # The writer's link and script: its link's text alone, its script as text.
    assert "evil.example" not in report and "dashboard" in text
    assert "<script>" not in report and "<script>alert('x')</script>" in text
    images = re.findall(r"\]\(([^)]+)\)", report)  # the only link syntax: dsstar's image
    assert report.count("![") == 1
    assert images == [f"../../{run_id}-q03/final/outputs/monthly_revenue.png"]
    assert (Path(store._path(f"runs/{run_id}/final")) / images[0]).resolve().is_file()
    assert "| NE | 207.0 |" in text  # the table sub-question 6 delivered, its first rows
    assert record["outline"] == ["Sales in 2024 H1", "By region", "Over time",
                                 "Orders and products"]  # fmt: skip

    # report.md and report.html are the run's outputs, in run.json and the result.
    names = [o["name"] for o in result["outputs"]]
    assert names == ["report.md", "report.html"] and record["outputs"] == result["outputs"]
    page = store.read_text(f"runs/{run_id}/final/report.html")
    assert "<script" not in page and 'href="http' not in page and "evil.example" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert page.count("<img ") == 1 and 'src="data:image/png;base64,' in page
    _report_html_shows_its_chart(Path(store._path(f"runs/{run_id}/final/report.html")), tmp_path)

    # One bill: the report's totals hold its sub-runs'.
    own = sum(1 for r in llm.requests if r["run"] == run_id)
    assert record["llm_calls"] == len(llm.requests) > own

    # The Prefect UI: the report as a markdown card whose chart displays.
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[result["flow_run_id"]])
            )
        )
    card = {a.key: a for a in artifacts}[f"{run_id}-report"]
    assert "](data:image/png;base64," in card.data and "<script>" not in card.data
    _card_shows_its_chart(str(card.id), tmp_path)

    # `dsstar runs show`: the outline and the sub-runs.
    shown = _dsstar("runs", "show", run_id)
    assert "── outline ─" in shown and "By region" in shown
    assert "── sub-questions ─" in shown
    assert f"{run_id}-q07" in shown and "failed" in shown

    # `dsstar replay`: every sub-answer again, with no model call.
    before = len(llm.requests)
    replayed = forked_cli.run([sys.executable, "-m", "dsstar", "replay", run_id, "--json"],
                              capture_output=True, text=True, timeout=600)  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    compared = json.loads(replayed.stdout)
    assert compared["same"] and len(llm.requests) == before
    assert [s["same"] for s in compared["sub_questions"]] == [True] * 7


def plain(markdown: str) -> str:
    """Markdown as it reads: its backslash escapes undone."""
    return re.sub(r"\\(.)", r"\1", markdown)


def _dsstar(*argv: str) -> str:
    done = forked_cli.run([sys.executable, "-m", "dsstar", *argv], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _browser():
    from artifact_cards import CHROMIUM_FLAGS
    from playwright.sync_api import sync_playwright

    chromium = require_binary(CHROMIUM, "chromium")
    playwright = sync_playwright().start()
    return playwright, playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)


_CHART_SHOWN = (
    "() => [...document.images].some(i => i.src.startsWith('data:image/png')"
    " && i.naturalWidth > 100)"
)


def _report_html_shows_its_chart(path, tmp_path) -> None:
    playwright, browser = _browser()
    try:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(path.as_uri())
        page.wait_for_function(_CHART_SHOWN, timeout=30_000)
        assert page.evaluate("() => document.scripts.length") == 0
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    finally:
        browser.close()
        playwright.stop()


def _card_shows_its_chart(artifact_id: str, tmp_path) -> None:
    playwright, browser = _browser()
    ui = os.environ["PREFECT_API_URL"].removesuffix("/api")
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{ui}/artifacts/artifact/{artifact_id}")
        page.get_by_text("Sales in 2024 H1").first.wait_for(timeout=60_000)
        page.wait_for_function(_CHART_SHOWN, timeout=30_000)
        page.screenshot(path=str(tmp_path / "card.png"), full_page=True)
    finally:
        browser.close()
        playwright.stop()
