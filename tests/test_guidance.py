"""Human guidance between rounds: the paused run's form answered through the Prefect API
(accept, stop), the timeout, the terminal prompt of `dsstar run` (guide), and the form in
the Prefect UI (headless Chromium; guide, sent through the API)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import forked_cli
import pytest
from conftest import REPO, require_binary
from fake_llm import text_of
from prefect import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.flow_runs import resume_flow_run
from rich.console import Console
from scenarios import ANSWER, two_rounds

from dsstar.algorithm.guidance import Checkpoint, Choice
from dsstar.cli._prompt import TerminalAsker
from flows._guidance import HumanAnswer, describe

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
HINT = "Use regions.json to find the manager of the best region."
HEADING = "Guidance from the user"


# -- the form and the prompt, without a run -------------------------------------------------


def test_the_form_shows_plan_verdict_and_output_as_inert_bounded_text():
    plan = ["Load [it](http://evil.example/x.png) <img src=x onerror=alert(1)>", "b" * 5000]
    output = "```\n# not a heading\n" + "x" * 100_000
    text = describe(Checkpoint("run-1", 3, plan, output, "No, the manager is missing"), 3600)
    assert "Round 03" in text and "60 min" in text and "No, the manager is missing" in text
    assert not re.search(r"(?<!\\)(\]\(|<img)", text)  # no link, image or HTML comes out
    assert "\\[it\\]" in text and "\\<img" in text  # the step is still there, escaped
    assert "````text\n```\n# not a heading" in text  # the fence outlasts any backticks inside
    assert len(text) < 6000


def test_the_form_offers_four_choices_and_guidance_text():
    schema = HumanAnswer.model_json_schema()
    assert schema["$defs"]["Choice"]["enum"] == ["continue", "guide", "accept", "stop"]
    assert set(schema["properties"]) == {"choice", "guidance"}
    guided = HumanAnswer(choice="guide", guidance="  use 2024 only ").to_guidance()
    assert (guided.choice, guided.text, guided.text_for_prompts) == (
        Choice.GUIDE,
        "use 2024 only",
        "use 2024 only",
    )
    assert HumanAnswer(choice="guide", guidance=" ").to_guidance().choice is Choice.CONTINUE


def test_the_nightly_deployment_has_an_ask_human_parameter():
    from prefect.utilities.callables import parameter_schema

    from flows.nightly import ds_star_nightly

    schema = parameter_schema(ds_star_nightly).model_dump()
    ask_human = schema["definitions"]["Advanced"]["properties"]["ask_human"]
    # Unset by default: the worker's DSSTAR_ASK_HUMAN decides, a choice in the form overrides it.
    assert "default" not in ask_human and ask_human["enum"] == [True, False]
    assert "person" in ask_human["description"]


def _terminal(lines: bytes, timeout_s: float = 5.0):
    read, write = os.pipe()
    os.write(write, lines)
    out = Console(file=open(os.devnull, "w"), force_terminal=False)
    with os.fdopen(read) as stdin:
        asker = TerminalAsker(out, stdin)
        checkpoint = Checkpoint("run-1", 0, ["Load the orders."], "revenue by region", "No")
        try:
            return asker(checkpoint, timeout_s)
        finally:
            os.close(write)


def test_the_terminal_prompt_reads_each_choice():
    guided = _terminal(b"g\n" + HINT.encode() + b"\n")
    assert (guided.choice, guided.text, guided.timed_out) == (Choice.GUIDE, HINT, False)
    assert _terminal(b"accept\n").choice is Choice.ACCEPT
    assert _terminal(b"s\n").choice is Choice.STOP
    assert _terminal(b"\n").choice is Choice.CONTINUE  # Enter: go on as planned
    assert _terminal(b"what?\nc\n").choice is Choice.CONTINUE  # asked again


def test_the_terminal_prompt_continues_after_the_timeout():
    answer = _terminal(b"", timeout_s=0.3)
    assert (answer.choice, answer.timed_out) == (Choice.CONTINUE, True)


# -- a paused run answered through the Prefect API ------------------------------------------


def stored(env: dict, run_id: str) -> Path:
    return Path(env["DSSTAR_STORAGE"]) / "runs" / run_id


def paused_flow_run(env: dict, run_id: str, proc=None, timeout: float = 180):
    """The id of the run's flow run once it is paused for an answer."""
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            assert time.monotonic() < deadline, f"run {run_id} never paused"
            assert proc is None or proc.poll() is None, proc.stderr.read()
            try:
                record = json.loads((stored(env, run_id) / "run.json").read_text())
                state = client.read_flow_run(record["flow_run_id"]).state
                if state and state.is_paused():
                    return record["flow_run_id"]
            except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError):
                pass
            time.sleep(0.5)


def answer(flow_run_id: str, choice: str, guidance: str = "") -> None:
    """What the UI's Resume form sends. The form's schema is saved just after the run
    pauses, so the first try may come too early."""
    deadline = time.monotonic() + 60
    while True:
        try:
            resume_flow_run(flow_run_id, run_input={"choice": choice, "guidance": guidance})
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def in_thread(run_id: str, data: Path, **options):
    """The ds-star flow in a thread of this process; returns (thread, result holder)."""
    from flows.ds_star import ds_star

    result: dict = {}

    def target() -> None:
        result["value"] = ds_star(
            question=QUESTION, data=str(data), run_id=run_id, ask_human=True, **options
        )

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, result


def guidance_json(env: dict, run_id: str, number: str = "00") -> dict:
    return json.loads((stored(env, run_id) / "rounds" / number / "guidance.json").read_text())


@pytest.mark.slow
def test_no_answer_in_time_continues_unguided(env, llm, sales):
    two_rounds(llm)
    thread, result = in_thread("t-timeout", sales, human_timeout=3)
    paused_flow_run(env, "t-timeout")
    thread.join(300)

    assert result["value"]["status"] == "verified" and result["value"]["answer"] == ANSWER
    assert all(HEADING not in text_of(r) for r in llm.calls("planner") + llm.calls("router"))
    recorded = guidance_json(env, "t-timeout")
    assert (recorded["choice"], recorded["timed_out"]) == ("continue", True)
    with get_client(sync_client=True) as client:  # the flow run itself ended well
        record = json.loads((stored(env, "t-timeout") / "run.json").read_text())
        assert client.read_flow_run(record["flow_run_id"]).state.is_completed()


def dsstar_run(run_id: str, data: Path) -> subprocess.Popen | forked_cli.Forked:
    """`dsstar run --ask-human --json` with no terminal: the run's form waits in the UI."""
    return forked_cli.popen(
        [sys.executable, "-m", "dsstar", "run", "--data", str(data), "--question", QUESTION,
         "--run-id", run_id, "--ask-human", "--json"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=REPO, env=os.environ.copy(),
    )  # fmt: skip


@pytest.mark.slow
def test_the_form_shows_the_plan_and_accept_finalizes_it_at_once(env, llm, sales):
    two_rounds(llm)
    proc = dsstar_run("t-accept", sales)
    flow_run_id = paused_flow_run(env, "t-accept", proc)
    with get_client(sync_client=True) as client:  # the form: its description shows the plan
        key = "paused-guidance-00-try1-description"
        description = client.read_flow_run_input(flow_run_id, key)
    assert "Load the orders and compute revenue per region" in description
    assert not llm.calls("router")  # the run waits before routing
    answer(flow_run_id, "accept")
    out, err = proc.communicate(timeout=300)

    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == "accepted" and result["rounds"] == 1
    assert result["answer"] == ANSWER  # the finalyzer's script
    assert not llm.calls("router") and len(llm.calls("planner")) == 1
    assert (stored(env, "t-accept") / "final" / "solution.py").exists()
    assert guidance_json(env, "t-accept")["choice"] == "accept"


@pytest.mark.slow
def test_stop_ends_the_run_without_an_answer_and_keeps_everything(env, llm, sales):
    two_rounds(llm)
    proc = dsstar_run("t-stop", sales)
    answer(paused_flow_run(env, "t-stop", proc), "stop")
    out, err = proc.communicate(timeout=300)

    assert proc.returncode == 0, err
    assert "stopped by request after round 00" in err and "dsstar runs show t-stop" in err
    result = json.loads(out)
    assert (result["status"], result["answer"], result["rounds"]) == ("stopped", None, 1)
    assert not llm.calls("router") and not llm.calls("finalyzer")
    root = stored(env, "t-stop")
    assert not (root / "final/solution.py").exists()  # nothing was finalized
    assert json.loads((root / "final/answer.json").read_text())["answer"] is None
    assert (root / "rounds/00/code.py").exists() and (root / "rounds/00/verdict.json").exists()
    assert guidance_json(env, "t-stop")["choice"] == "stop"
    assert json.loads((root / "run.json").read_text())["status"] == "stopped"
    with get_client(sync_client=True) as client:  # a person's stop: Cancelled, not Completed
        state = client.read_flow_run(result["flow_run_id"]).state
    assert state.is_cancelled() and state.message == "stopped by a person after round 00", state


@pytest.mark.slow
def test_dsstar_run_on_a_terminal_asks_there_and_guidance_reaches_the_planner_and_the_router(
    env, llm, sales
):
    import pty

    two_rounds(llm)
    master, slave = pty.openpty()
    os.write(master, b"g\n" + HINT.encode() + b"\n")  # typed ahead: the tty keeps the lines
    proc = subprocess.Popen(
        [sys.executable, "-m", "dsstar", "run", "--data", str(sales), "--question", QUESTION,
         "--run-id", "t-tty", "--ask-human", "--json"],
        stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    os.close(slave)
    out, err = proc.communicate(timeout=300)
    os.close(master)

    assert proc.returncode == 0, err
    assert "[c]ontinue, [g]uide, [a]ccept, [s]top?" in err and "Load the orders" in err
    result = json.loads(out)
    assert result["status"] == "verified" and result["answer"] == ANSWER
    [router] = llm.calls("router")
    planner = llm.calls("planner")[1]
    assert HEADING in text_of(router) and HINT in text_of(router)
    assert HEADING in text_of(planner) and HINT in text_of(planner)
    assert HEADING not in text_of(llm.calls("planner")[0])
    recorded = guidance_json(env, "t-tty")
    assert (recorded["choice"], recorded["text"], recorded["timed_out"]) == ("guide", HINT, False)
    assert recorded["meta"]["via"] == "terminal"
    with get_client(sync_client=True) as client:
        # Filtered by key: the session's server holds more artifacts than one page returns.
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["t-tty-guidance-00"]))
        )
    assert found


# -- the form in the Prefect UI ----------------------------------------------------------


@pytest.mark.slow
def test_the_prefect_ui_shows_the_form_and_its_answer_guides_the_run(env, llm, sales, tmp_path):
    """SCREENSHOT_DIR=DIR keeps the screenshot of the form (scripts/screenshots: the docs'
    guidance-form.png); otherwise it goes to the test's own folder."""
    from playwright.sync_api import sync_playwright

    chromium = require_binary(shutil.which("chromium"), "chromium")
    two_rounds(llm)
    thread, result = in_thread("t-ui", sales)
    flow_run_id = paused_flow_run(env, "t-ui")
    ui = os.environ["PREFECT_API_URL"].removesuffix("/api")
    screenshot = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path) / "guidance-form.png"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
            )
            page = browser.new_page(viewport={"width": 1280, "height": 1100})
            page.goto(f"{ui}/runs/flow-run/{flow_run_id}")
            page.get_by_role("button", name="Resume").first.click(timeout=60_000)
            plan = page.get_by_text("Load the orders and compute revenue per region").first
            plan.wait_for(timeout=30_000)
            assert page.get_by_text(re.compile(r"^Choice")).first.is_visible()
            assert page.get_by_text(re.compile(r"^Guidance")).first.is_visible()
            text = page.inner_text("body")
            # A person picks "guide", writes the guidance and submits the form.
            control = page.locator(".p-select-button__control", has_text="continue").first
            control.focus()
            page.keyboard.press("ArrowDown")  # opens the select's options (a click does not)
            page.locator(".p-select-option", has_text="guide").first.click()
            page.locator("textarea").first.fill(HINT)
            page.screenshot(path=str(screenshot))
            page.get_by_role("button", name="Submit").click()
            thread.join(300)
            browser.close()
    finally:
        if thread.is_alive():  # the form failed: let the run end
            answer(flow_run_id, "continue")
            thread.join(300)
    assert "not sufficient yet" in text and "revenue by region" in text
    assert screenshot.stat().st_size > 10_000
    assert result["value"]["status"] == "verified"
    assert HINT in text_of(llm.calls("planner")[1]) and HINT in text_of(llm.calls("router")[0])
    recorded = guidance_json(env, "t-ui")  # the form's answer, sent through the Prefect API
    assert (recorded["choice"], recorded["text"], recorded["timed_out"]) == ("guide", HINT, False)
    assert recorded["meta"]["via"] == "prefect"
