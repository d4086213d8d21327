"""A question that asks for a chart, end to end with the scripted model and the real sandbox:
the run stores the chart and its description (local folder and S3), lists it in the JSON
result, `dsstar.ask` and `dsstar runs show`; the reader was shown the saved image and the
verifier judged by its reading (or, with `read_charts` off, by the title, labels and series
the figure hook reported, marked as the script's word); the Prefect UI shows the chart
(headless Chromium) and the table."""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
from pathlib import Path

import forked_cli
import pytest
from conftest import require_binary
from prefect import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
from rendered import cells_shown
from scenarios import describe_script

from dsstar.model.recorded import call_label
from dsstar.storage import Store
from flows.ds_star import ds_star

pytestmark = pytest.mark.slow

QUESTION = "Plot monthly revenue per region as revenue.png with a title."
CHROMIUM = shutil.which("chromium")

PLOT = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

orders = pd.read_csv("data/orders_2024.csv").dropna(subset=["units"])
orders["revenue"] = orders["units"] * orders["unit_price"]
orders["month"] = orders["order_date"].str[:7]
monthly = orders.pivot_table(index="month", columns="region_code", values="revenue",
                             aggfunc="sum").fillna(0)
print(monthly.to_string())

ax = monthly.plot(kind="bar", figsize=(10, 6))
ax.set_title("Monthly revenue per region, 2024 H1")
ax.set_xlabel("Month")
ax.set_ylabel("Revenue (USD)")
ax.legend(title="Region")
plt.tight_layout()
plt.savefig("revenue.png", dpi=80)
"""

CODER_REPLY = (
    "I'll compute revenue per order, aggregate it by month and region, and draw a grouped bar"
    f" chart with a title and labelled axes.\n\n```python{PLOT}```\n\nThe script prints the"
    " monthly table and saves the chart as `revenue.png` in the working directory."
)
VERIFIER_REPLY = (
    "The script computes revenue as units times unit price, aggregates it per month and"
    " region, and saves a bar chart titled 'Monthly revenue per region, 2024 H1' with"
    " labelled axes and a legend of the three regions, as the file revenue.png.\n\n**Yes**"
)
FINAL = PLOT + (
    'monthly.reset_index().to_csv("monthly_revenue.csv", index=False)\n'
    'print("FINAL ANSWER:", "revenue.png")\n'
)
FINAL_REPLY = (
    "Here is the final script. It writes the chart under the requested name and states it as"
    f" the answer.\n\n```python{FINAL}```\n"
)
# How Gemini answers the reader's prompt: markdown labels, values read off the bars.
READER_REPLY = (
    "**Chart type:** grouped bar chart\n"
    "**Title:** Monthly revenue per region, 2024 H1\n"
    "**Axes:** x: Month (2024-01 to 2024-06); y: Revenue (USD), 0 to about 160\n"
    "**Legend (Region):** MW, NE, SW\n"
    "**Values:** NE peaks at about 150 in 2024-04; SW reaches about 84 in 2024-05; MW shows"
    " about 62 and 60 in 2024-02 and 2024-03. Several months have no bar for a region."
)
# Revenue per month (2024-01 .. 2024-06) of each region, as the data has it.
SERIES = [
    [0.0, 62.5, 60.0, 0.0, 0.0, 0.0],  # MW
    [25.0, 12.0, 0.0, 150.0, 0.0, 20.0],  # NE
    [36.0, 0.0, 10.0, 0.0, 84.0, 0.0],  # SW
]


def _script(llm) -> None:
    llm.default("analyzer", describe_script)
    llm.script(
        "planner",
        "Load data/orders_2024.csv, compute revenue per month and region, and save a bar chart"
        " of it with a title as revenue.png.",
    )
    llm.script("coder", CODER_REPLY)
    llm.script("verifier", VERIFIER_REPLY)
    llm.script("finalyzer", FINAL_REPLY)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_chart_the_question_asks_for_is_stored_listed_and_verified_from_its_figure(
    env, llm, sales, where, request, tmp_path, monkeypatch
):
    storage = request.getfixturevalue("s3") if where == "s3" else env["DSSTAR_STORAGE"]
    _script(llm)
    read = where == "local"  # on S3 the reader is off: the hook's description stands in
    if read:
        llm.script("reader", READER_REPLY)
    else:
        monkeypatch.setenv("DSSTAR_READ_CHARTS", "false")
    run_id = f"t-deliver-{where}"
    result = ds_star(question=QUESTION, data=str(sales), run_id=run_id)
    assert result["status"] == "verified" and result["answer"] == "revenue.png", result

    # The JSON result lists every file the final script wrote: the chart and the table.
    store = Store(storage)
    root = store.uri(f"runs/{run_id}")
    outputs = {o["name"]: o for o in result["outputs"]}
    assert sorted(outputs) == ["monthly_revenue.csv", "revenue.png"]
    chart_entry = outputs["revenue.png"]
    assert chart_entry["uri"] == f"{root}/final/outputs/revenue.png"
    assert chart_entry["media_type"] == "image/png" and chart_entry["bytes"] > 1000
    assert chart_entry["chart"] == f"{root}/final/charts/revenue.png.json"
    assert outputs["monthly_revenue.csv"]["media_type"] == "text/csv"
    png = store.fs.cat_file(store._path(f"runs/{run_id}/final/outputs/revenue.png"))
    assert png.startswith(b"\x89PNG") and len(png) == chart_entry["bytes"]
    chart = store.read_json(f"runs/{run_id}/final/charts/revenue.png.json")
    assert chart["type"] == "bar" and chart["graph_title"] == "Monthly revenue per region, 2024 H1"
    assert (chart["x_label"], chart["y_label"], chart["legend_title"]) == (
        "Month", "Revenue (USD)", "Region"
    )  # fmt: skip
    assert chart["labels"] == ["MW", "NE", "SW"] and chart["series"] == SERIES
    assert store.read_json(f"runs/{run_id}/run.json")["outputs"] == result["outputs"]

    [verifier] = llm.calls("verifier")
    prompt = "\n".join(str(m["content"]) for m in verifier["messages"])
    assert "## Files the code wrote" in prompt
    if read:
        # The reader saw the image the round's script saved, and the verifier judged by its
        # reading, not by the script's report. The final script saved the same bytes again:
        # they kept that reading, not paid for twice.
        [reading] = llm.calls("reader")
        assert call_label(reading["headers"]["x-dsstar-call"]) == "reader r00 revenue.png"
        text, image = reading["messages"][0]["content"]
        assert "saved the image attached below as `revenue.png`" in text["text"]
        url = image["image_url"]["url"]
        assert url.startswith("data:image/png;base64,")
        assert base64.b64decode(url.split(",", 1)[1]) == png
        assert "chart as the reader agent described it from the saved image:" in prompt
        assert "NE peaks at about 150 in 2024-04" in prompt
        assert "figure hook reported it (" not in prompt and "series 'NE'" not in prompt
        assert chart_entry["reading"] == READER_REPLY
        _the_reading_is_shown(run_id, root, chart_entry, result, tmp_path)
        return
    assert not llm.calls("reader")
    # The verifier judged a chart it cannot see by what the figure holds, as the script's word.
    assert "chart description as the script's figure hook reported it (" in prompt
    assert "title: 'Monthly revenue per region, 2024 H1'" in prompt
    assert "x axis label: 'Month'; y axis label: 'Revenue (USD)'" in prompt
    assert "legend 'Region': ['MW', 'NE', 'SW']" in prompt
    assert "series 'NE' #ff7f0e: [25.0, 12.0, 0.0, 150.0, 0.0, 20.0]" in prompt
    assert "reading" not in chart_entry


def _the_reading_is_shown(
    run_id: str, root: str, chart_entry: dict, result: dict, tmp_path: Path
) -> None:
    """`dsstar runs show`, the deliverables card (Prefect API, headless Chromium) give the
    reader's description of the chart."""
    shown = forked_cli.run([sys.executable, "-m", "dsstar", "runs", "show", run_id],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "COLUMNS": "400"})  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "── outputs ─" in shown.stdout
    assert (
        f"revenue.png ({chart_entry['bytes']:,} bytes, image/png) {root}/final/outputs/revenue.png"
        in (shown.stdout)
    )
    assert "  chart as the reader agent described it from the saved image:\n" in shown.stdout
    assert "    **Title:** Monthly revenue per region, 2024 H1\n" in shown.stdout

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[result["flow_run_id"]])
            )
        )
    by_key = {a.key: a for a in artifacts if a.key}
    table = cells_shown(json.loads(by_key[f"{run_id}-table-monthly-revenue-csv"].data))
    assert table[0] == {"month": "2024-01", "MW": 0.0, "NE": 25.0, "SW": 36.0}
    markdown = by_key[f"{run_id}-deliverables"].data
    assert "![Monthly revenue per region\\, 2024 H1](data:image/png;base64," in markdown
    assert f"`{root}/final/outputs/revenue.png`" in markdown
    assert "```\nchart as the reader agent described it from the saved image:\n**Chart" in markdown
    _the_ui_shows_the_chart(str(by_key[f"{run_id}-deliverables"].id), tmp_path)


def _the_ui_shows_the_chart(artifact_id: str, tmp_path) -> None:
    """The deliverables artifact's page in headless Chromium: the chart is a loaded image."""
    from playwright.sync_api import sync_playwright

    chromium = require_binary(CHROMIUM, "chromium")
    ui = os.environ["PREFECT_API_URL"].removesuffix("/api")
    flags = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=flags)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{ui}/artifacts/artifact/{artifact_id}")
        page.get_by_text("Deliverables").first.wait_for(timeout=60_000)
        page.wait_for_function(
            "() => [...document.images].some(i => i.src.startsWith('data:image/png')"
            " && i.naturalWidth > 100)",
            timeout=30_000,
        )
        page.screenshot(path=str(tmp_path / "deliverables.png"), full_page=True)
        browser.close()


TABLE = """
import pandas as pd
orders = pd.read_csv("data/orders_2024.csv").dropna(subset=["units"])
orders["revenue"] = orders["units"] * orders["unit_price"]
table = orders.groupby("region_code", as_index=False)["revenue"].sum()
table.to_csv("revenue.csv", index=False)
print(table.to_string())
"""


def test_a_nightly_question_whose_deliverable_changed_raises_its_alert(
    env, llm, sales, tmp_path, monkeypatch
):
    from flows import _alert_events
    from flows.nightly import ds_star_nightly

    events: list[tuple[str, dict]] = []
    monkeypatch.setattr(
        _alert_events, "emit_event", lambda event, **kw: events.append((event, kw["payload"]))
    )
    llm.default("analyzer", describe_script)
    llm.default("planner", lambda _: "Write the revenue per region to revenue.csv.")
    llm.default("coder", lambda _: f"Sure.\n\n```python{TABLE}```\n")
    llm.default("verifier", lambda _: "The table is written as asked.\n\nYes")
    final = TABLE + 'print("FINAL ANSWER:", "revenue.csv")\n'
    llm.default("finalyzer", lambda _: f"The final script:\n\n```python{final}```\n")
    question_set = tmp_path / "questions.yaml"
    question = "Write the revenue per region to revenue.csv."
    question_set.write_text(f"- question: {question}\n  data: {sales}\n")

    [first] = ds_star_nightly(questions_file=str(question_set))
    assert [o["name"] for o in first["outputs"]] == ["revenue.csv"] and not events
    with (sales / "orders_2024.csv").open("a") as orders:
        orders.write("1099,2024-06-30,NE,Widget,100,2.50\n")  # tonight's data has one more order
    [second] = ds_star_nightly(questions_file=str(question_set))
    assert second["answer"] == first["answer"] == "revenue.csv"  # the answer is the same...
    # ...the file it delivers is not (the new order also breaks the data's contract).
    kinds = [event for event, _ in events]
    assert kinds.count("dsstar.deliverable.changed") == 1, events
    assert "dsstar.answer.changed" not in kinds
    [payload] = [p for event, p in events if event == "dsstar.deliverable.changed"]
    assert payload["question"] == question and payload["previous_run"] == first["run_id"]
    assert payload["changed"].startswith("revenue.csv: changed (")
    assert second["outputs"][0]["uri"] in payload["outputs"]
    # Each night keeps its own files.
    assert first["outputs"][0]["uri"] != second["outputs"][0]["uri"]
    assert first["outputs"][0]["sha256"] != second["outputs"][0]["sha256"]
