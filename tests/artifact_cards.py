"""A flow run's artifact cards and its page, read through the API and seen in the UI (headless
Chromium)."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

from conftest import require_binary
from prefect import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]  # fmt: skip


def artifact_keys(flow_run_id) -> Counter:
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return Counter(a.key for a in artifacts)


def artifacts_tab(flow_run_id, path: Path) -> str:
    """The flow run's Artifacts tab in headless Chromium: screenshot to `path`, and its text."""
    from playwright.sync_api import sync_playwright

    chromium = require_binary(shutil.which("chromium"), "chromium")
    ui = os.environ["PREFECT_API_URL"].removesuffix("/api")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{ui}/runs/flow-run/{flow_run_id}")
        page.get_by_text("Artifacts", exact=True).first.click(timeout=30_000)
        page.get_by_text("MARKDOWN").first.wait_for(timeout=30_000)
        page.screenshot(path=str(path), full_page=True)
        text = page.inner_text("body")
        browser.close()
    return text


def cards(text: str, run_id: str) -> Counter:
    """How often each of the run's artifact keys shows on the page."""
    keys = [f"{run_id}-rounds", f"{run_id}-answer"] + [f"{run_id}-round-{n:02d}" for n in range(3)]
    return Counter({key: text.count(key) for key in keys})


def flow_run_page(flow_run_id, path: Path) -> str:
    """The flow run's page in headless Chromium, its Details tab open (state message, run
    count): screenshot to `path`, and its text."""
    from playwright.sync_api import sync_playwright

    chromium = require_binary(shutil.which("chromium"), "chromium")
    ui = os.environ["PREFECT_API_URL"].removesuffix("/api")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{ui}/runs/flow-run/{flow_run_id}")
        page.get_by_text("Details", exact=True).first.click(timeout=30_000)
        page.get_by_text("Run Count").first.wait_for(timeout=30_000)
        page.screenshot(path=str(path), full_page=True)
        text = page.inner_text("body")
        browser.close()
    return text
