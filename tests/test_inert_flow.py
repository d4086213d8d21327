"""A final script that names its files and states its answer as markdown (links to elsewhere,
an image that would load from elsewhere, a `javascript:` link), end to end with the scripted
model and the real sandbox: every card of the run, read through the Prefect API and rendered,
and the deliverables and answer cards in the Prefect UI itself (headless Chromium), show that
text as text, and so does the reader's description of the chart, which repeats its title; the
only image is the chart dsstar encoded. The Logs tab links none of it."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time

import pytest
from artifact_cards import CHROMIUM_FLAGS
from conftest import require_binary
from prefect import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    LogFilter,
    LogFilterFlowRunId,
)
from rendered import render, shown_as
from scenarios import describe_script, fence

from flows.ds_star import ds_star

pytestmark = pytest.mark.slow

NAMES = [
    "[Open the verified report](https:evil.example).csv",
    "![x](https:evil.example).png",
    "sub/[evil](javascript:alert(document.cookie)).csv",
]
ANSWER = "[Click here…](https:evil.example/r) ![t](https:evil.example/beacon.png)"
TITLE = "[Chart](https://evil.example/c) ![c](https://evil.example/c.png)"
FINAL = f"""
import os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

orders = pd.read_csv("data/orders_2024.csv").dropna(subset=["units"])
table = orders.groupby("region_code", as_index=False)["units"].sum()
table["[note](https://evil.example/h)"] = "see https://evil.example/v ![p](https://evil.example/p.png)"
table.to_csv({NAMES[0]!r}, index=False)
os.makedirs("sub", exist_ok=True)
table.to_csv({NAMES[2]!r}, index=False)
ax = table.plot(kind="bar", x="region_code", y="units", figsize=(4, 3))
ax.set_title({TITLE!r})
plt.savefig({NAMES[1]!r}, dpi=40)
print("FINAL ANSWER: {ANSWER}")
"""


def _script(llm) -> None:
    llm.default("analyzer", describe_script)
    llm.script("planner", "Sum the units of each region from data/orders_2024.csv.")
    llm.script("coder", fence(FINAL.split("table.to_csv")[0] + "print(table)\n"))
    llm.script("verifier", "The table of units per region is printed.\n\n**Yes**")
    llm.script("finalyzer", "The final script writes the report and the chart.\n\n" + fence(FINAL))
    # A vision model reads the title off the image and repeats it, markdown and all.
    llm.default("reader", lambda request: f"**Chart type:** bar\n**Title:** {TITLE}\n**Bars:** 3")


def test_a_scripts_markdown_is_shown_as_text_in_every_card_and_in_the_ui(
    env, llm, sales, tmp_path, caplog
):
    _script(llm)
    for logger in ("prefect.flow_runs", "prefect.task_runs"):  # the suite's level: WARNING
        caplog.set_level(logging.INFO, logger=logger)
    result = ds_star(question="Write the units per region as a report.", data=str(sales),
                     run_id="t-inert")  # fmt: skip
    assert result["status"] == "verified" and result["answer"] == ANSWER, result
    assert sorted(o["name"] for o in result["outputs"]) == sorted(NAMES)

    flow_run_id = result["flow_run_id"]
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
        this_run = LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
        deadline = time.monotonic() + 30  # the server stores logs in batches, a little later
        while not any("answer (verified" in log.message for log in client.read_logs(this_run)):
            assert time.monotonic() < deadline, "no answer line in the run's logs"
            time.sleep(0.5)
        logs = [log.message for log in client.read_logs(this_run)]
    by_key = {a.key: a for a in artifacts}
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
            assert page.foreign("data:image/png;base64,") == [], (artifact.key, page.live)
            shown.append(shown_as(page.text))
    everything = "\n".join(shown)
    for text in [*NAMES, ANSWER, TITLE]:  # each there, as the text it is
        assert shown_as(text) in everything, text
    deliverables = render(by_key["t-inert-deliverables"].data)
    assert [tag for tag, _ in deliverables.live] == ["img", "img"]  # the chart, by each parser
    # The Logs tab (plain text, but it links every https:// address) carries no such address.
    assert not [line for line in logs if re.search(r"(https?|ftp)://", line)], logs

    tables = [a for a in artifacts if a.type == "table" and "-table-" in (a.key or "")]
    pages = [by_key["t-inert-deliverables"], by_key["t-inert-answer"], *tables[:1]]
    _the_ui_shows_them_as_text([str(a.id) for a in pages], tmp_path)


def _the_ui_shows_them_as_text(artifact_ids: list[str], tmp_path) -> None:
    """Each artifact's page in headless Chromium: the names, the answer and the chart title
    read as text; no link or image goes elsewhere; the chart dsstar encoded is shown."""
    from playwright.sync_api import sync_playwright

    chromium = require_binary(shutil.which("chromium"), "chromium")
    ui = os.environ["PREFECT_API_URL"].removesuffix("/api")
    deliverables, answer, table = artifact_ids
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for artifact_id, shows in (
            (deliverables, ["Deliverables", NAMES[0], NAMES[1], NAMES[2], TITLE]),
            (answer, ["Stored objects", ANSWER, f"output {NAMES[2]}"]),
            (table, ["[note](https://evil.example/h)", "see https://evil.example/v"]),
        ):
            page.goto(f"{ui}/artifacts/artifact/{artifact_id}")
            # Rendered (the UI parses markdown in a worker, each table cell on its own): every
            # text shows, as that text.
            page.wait_for_function(
                "shows => shows.every(t => document.body.innerText.includes(t))",
                arg=shows,
                timeout=60_000,
            )
            if artifact_id == deliverables:  # the chart: a data: URL image, loaded
                page.wait_for_function(
                    "() => [...document.images].some(i => i.src.startsWith('data:image/png')"
                    " && i.naturalWidth > 10)",
                    timeout=30_000,
                )
            page.screenshot(path=str(tmp_path / f"{artifact_id}.png"), full_page=True)
            targets = page.eval_on_selector_all(
                "[href], [src]",
                "els => els.map(e => e.getAttribute('href') || e.getAttribute('src'))",
            )
            # The UI's own pages and files, and the chart: nothing the run's text names.
            own = ("/", "#", ui, "data:image/png;base64,")
            assert not [t for t in targets if not (t or "/").startswith(own)], targets
        browser.close()
