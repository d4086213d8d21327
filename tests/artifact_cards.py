"""A flow run's artifact cards and its page, read through the API and seen in the UI (headless
Chromium)."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import require_binary
from prefect import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
)

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]  # fmt: skip


def run_id_of(flow_run) -> str:
    """The dsstar run id of a ds-star flow run: its `run_id` parameter, else (derived from
    the flow run) what its name starts with, before the question."""
    return flow_run.parameters.get("run_id") or flow_run.name.split(" · ")[0]


def artifact_keys(flow_run_id) -> Counter:
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return Counter(a.key for a in artifacts)


def card(flow_run_id, key: str) -> str:
    """The markdown of the flow run's one card under `key` (e.g. `<run_id>-answer`: its
    answer, or how it ended without one)."""
    return _card(flow_run_id, key).data


def _card(flow_run_id, key: str):
    with get_client(sync_client=True) as client:
        [found] = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
                key=ArtifactFilterKey(any_=[key]),
            )
        )
    return found


def clicked_card(flow_run_id, key: str, path: Path, wait_for: str) -> tuple[str, str]:
    """The flow run's card under `key` as a person finds it in headless Chromium: in the
    Artifacts tab (its text), then clicked open, rendered (its text, once `wait_for` shows;
    a screenshot to `path`)."""
    with _flow_run_page(flow_run_id) as page:
        page.get_by_text("Artifacts", exact=True).first.click(timeout=60_000)
        page.get_by_text(key, exact=True).first.wait_for(timeout=60_000)
        tab = page.inner_text("body")
        page.get_by_text(key, exact=True).first.click()
        page.get_by_text(wait_for).first.wait_for(timeout=60_000)
        page.screenshot(path=str(path), full_page=True)
        return tab, page.inner_text("body")


def artifacts_tab(flow_run_id, path: Path) -> str:
    """The flow run's Artifacts tab in headless Chromium: screenshot to `path`, and its text."""
    return _flow_run_tab(flow_run_id, "Artifacts", "MARKDOWN", path)


def cards(text: str, run_id: str) -> Counter:
    """How often each of the run's artifact keys shows on the page."""
    keys = [f"{run_id}-rounds", f"{run_id}-answer"] + [f"{run_id}-round-{n:02d}" for n in range(3)]
    return Counter({key: text.count(key) for key in keys})


def flow_run_page(flow_run_id, path: Path) -> str:
    """The flow run's page in headless Chromium, its Details tab open (state message, run
    count): screenshot to `path`, and its text."""
    return _flow_run_tab(flow_run_id, "Details", "Run Count", path)


def table_width(artifact_id, path: Path) -> tuple[float, float]:
    """A table artifact's own page in headless Chromium at 1400 px (a laptop's window):
    screenshot to `path`, and the table's right edge beside the page's width, in pixels."""
    with _page(f"artifacts/artifact/{artifact_id}") as page:
        table = page.locator("table").first
        table.wait_for(timeout=30_000)
        page.screenshot(path=str(path), full_page=True)
        box = table.bounding_box()
        width = page.evaluate("document.documentElement.clientWidth")
    assert box is not None
    return box["x"] + box["width"], width


def _flow_run_tab(flow_run_id, tab: str, shown: str, path: Path) -> str:
    """The flow run's page with `tab` open, once it shows `shown`: screenshot and text."""
    with _flow_run_page(flow_run_id) as page:
        page.get_by_text(tab, exact=True).first.click(timeout=30_000)
        page.get_by_text(shown).first.wait_for(timeout=30_000)
        page.screenshot(path=str(path), full_page=True)
        return page.inner_text("body")


def _flow_run_page(flow_run_id) -> Any:
    """The flow run's page in the Prefect UI, in headless Chromium (closed after the block)."""
    return _page(f"runs/flow-run/{flow_run_id}")


@contextmanager
def _page(route: str) -> Iterator[Any]:
    """A page of the Prefect UI, in headless Chromium (closed after the block)."""
    from playwright.sync_api import sync_playwright

    chromium = require_binary(shutil.which("chromium"), "chromium")
    ui = os.environ["PREFECT_API_URL"].removesuffix("/api")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{ui}/{route}")
            yield page
        finally:
            browser.close()
