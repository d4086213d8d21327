"""A report operated like every run, through the command line (scripted model, real sandbox,
the session's Prefect server): killed after three answered sub-questions and resumed, it
asks the model nothing it was answered before; with --max-cost below its estimate it stops
new sub-questions, is written from what was answered, and says what is missing."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

import forked_cli
import pytest
import report_scenario as scenario
from fake_llm import Error
from scenarios import answered, asked

from dsstar.storage import Store

pytestmark = pytest.mark.slow


def _report(*args: str) -> list[str]:
    return [sys.executable, "-m", "dsstar", "report", "--question", scenario.QUESTION, *args]


def _status(store: Store, run_id: str) -> str | None:
    try:
        return store.read_json(f"runs/{run_id}/run.json").get("status")
    except FileNotFoundError:
        return None


@pytest.mark.timeout(900)
def test_a_killed_report_resumes_and_repeats_no_model_call(env, llm, sales, tmp_path):
    scenario.script(llm)
    # Sub-questions 4 and 5 wait at their planner: the report is killed while 1 to 3 are
    # answered and these two are still asking.
    held, release = [], threading.Event()

    def hold(request):
        if request["agent"] == "planner" and scenario.sub_question(request) in scenario.FIRST[3:]:
            held.append(request)
            release.wait(600)
            return Error(503, "the model went away")
        return None

    llm.intercept(hold)
    run_id = "t-report-kill"
    store = Store(env["DSSTAR_STORAGE"])
    args = ["--data", str(sales), "--sub-questions", "5", "--refinements", "0", "--json"]
    with open(tmp_path / "first.err", "w") as err:
        proc = forked_cli.popen(_report(*args, "--run-id", run_id), stdout=err, stderr=err)
        try:
            deadline = time.monotonic() + 600
            done = [f"{run_id}-q0{n}" for n in (1, 2, 3)]
            while not (len(held) == 2 and all(_status(store, r) == "verified" for r in done)):
                assert proc.poll() is None, (tmp_path / "first.err").read_text()[-3000:]
                assert time.monotonic() < deadline, "three sub-questions were never answered"
                time.sleep(0.5)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        finally:
            release.set()
    llm.intercept(None)
    before = list(llm.requests)
    assert _status(store, run_id) == "running"  # killed: nothing was recorded of its end

    resumed = forked_cli.run([sys.executable, "-m", "dsstar", "resume", run_id, "--json"],
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout)
    assert result["status"] == "reported" and result["run_id"] == run_id
    again = llm.requests[len(before) :]
    assert not answered(before) & asked(again)  # nothing answered before was asked again
    assert {scenario.sub_question(r) for r in again if r["agent"] == "planner"} == set(
        scenario.FIRST[3:]
    )  # the two that were still asking, and only those
    record = store.read_json(f"runs/{run_id}/run.json")
    assert [s["status"] for s in record["sub_runs"]] == ["verified"] * 5
    assert len(record["sub_runs"]) == 5 and "writer" in {r["agent"] for r in again}


@pytest.mark.timeout(900)
def test_a_report_over_its_ceiling_stops_new_sub_questions_and_says_what_is_missing(
    env, llm, sales, tmp_path
):
    scenario.script(llm)
    args = ["--data", str(sales), "--sub-questions", "5", "--refinements", "0", "--json"]
    estimated = forked_cli.run(_report(*args, "--estimate"), capture_output=True, text=True,
                               timeout=300)  # fmt: skip
    assert estimated.returncode == 0, estimated.stderr[-3000:]
    estimate = json.loads(estimated.stdout)
    assert not llm.requests  # an estimate asks no model
    assert estimate["sub_questions"] == 5 and estimate["calls"] > 40
    # Room for the writer's last draft, one call's bound and about ten scripted calls' worth
    # of spending, well below the estimate: the decomposer and some sub-questions, not all.
    ceiling = round(estimate["writer_room_usd"] + estimate["call_bound_usd"] + 0.0012, 4)
    assert ceiling < estimate["needed_usd"]
    done = forked_cli.run(_report(*args, "--max-cost", str(ceiling), "--run-id", "t-budget"),
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]  # over budget: a report, not whole
    result = json.loads(done.stdout)
    assert result["status"] == "over_budget" and result["cost_usd"] <= ceiling
    assert "over budget" in result["error"] and "--max-cost" in result["error"]
    record = Store(env["DSSTAR_STORAGE"]).read_json("runs/t-budget/run.json")
    missing = [s for s in record["sub_runs"] if s["status"] in ("over_budget", "skipped")]
    answered_ = [s for s in record["sub_runs"] if s["status"] == "verified"]
    assert missing and len(record["sub_runs"]) == 5
    report = result["answer"]
    assert report.startswith("# Sales in 2024 H1")  # the writer kept its room
    unanswered = report.split("## Not answered")[1].split("## References")[0]
    for sub in missing:  # the report says what is missing, and why
        assert f"\\[{sub['number']}\\]" in unanswered
    assert "spending ceiling" in unanswered and "The report stopped early" in report
    assert all(f"`{s['run_id']}`" in report for s in answered_)
