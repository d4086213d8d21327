"""`dsstar replay`: whole runs answered by recorded replies, through the CLI in a subprocess,
against the session's Prefect server, with real sandboxed scripts. (`dsstar demo`, a run of
recorded replies too, is the README's first command: test_readme runs it and checks it.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import forked_cli
import pytest
from scenarios import ANSWER, always_first_time, two_rounds

from dsstar import ask
from dsstar.views.report import RESULT_KEYS

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"


def dsstar(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=300, env=env or os.environ.copy(),
    )  # fmt: skip


def test_a_replay_asks_no_model_and_reports_what_changed_with_the_data(env, llm, sales, tmp_path):
    # An earlier run analyzes the files: the replayed run takes their descriptions from the
    # catalog, and its replay finds the replies that made them in that run's folder. That
    # run is asked in this process (as `dsstar run` asks it, without the CLI's start-up).
    always_first_time(llm)
    earlier = ask("Who manages the best region?", sales)
    assert earlier.status == "verified", earlier
    two_rounds(llm)
    probes: list[int] = []
    llm.on_models(lambda: probes.append(1))

    def model_traffic(llm) -> int:  # chat completions and model-list probes
        return len(llm.requests) + len(probes)

    done = dsstar("run", "--data", str(sales), "--question", QUESTION, "--json")
    assert done.returncode == 0, done.stderr
    stored = json.loads(done.stdout)
    assert stored["answer"] == ANSWER and stored["rounds"] == 2
    before = model_traffic(llm)

    # Unchanged data: the same outputs, the same answer, not one request to the model.
    done = dsstar("replay", stored["run_id"], "--json")
    assert done.returncode == 0, done.stderr
    assert model_traffic(llm) == before
    report = json.loads(done.stdout)
    assert report["same"] is True
    assert [r["round"] for r in report["rounds"]] == [0, 1]
    assert all(r["same"] and r["change"] is None for r in report["rounds"])
    assert report["answer"]["same"] and report["answer"]["now"] == ANSWER
    replayed = report["replay"]
    assert set(RESULT_KEYS) <= set(replayed) and replayed["run_id"] != stored["run_id"]
    assert replayed["replies"] == "recorded" and replayed["cost_usd"] == 0.0
    record = json.loads(
        (tmp_path / "storage" / "runs" / replayed["run_id"] / "run.json").read_text()
    )
    assert record["replies"] == "recorded"
    assert record["recorded_from"].endswith(f"runs/{stored['run_id']}")
    analyzed = json.loads(
        (tmp_path / "storage" / "runs" / stored["run_id"] / "analysis" / "regions.json"
         / "attempts.json").read_text()
    )  # fmt: skip
    assert analyzed["analyzed_in_run"] != stored["run_id"]  # the case this test is about

    # Southwest's orders are worth more now: both rounds' outputs and the answer change.
    orders = sales / "orders_2024.csv"
    orders.write_text(orders.read_text().replace("SW,Gadget,3,12.00", "SW,Gadget,300,12.00"))
    done = dsstar("replay", stored["run_id"])
    assert done.returncode == 1, done.stderr
    assert model_traffic(llm) == before
    assert "Traceback" not in done.stderr
    out = done.stdout
    assert "round 00: output line" in out and "round 01: output line" in out
    assert "answer: was 'Northeast, Ada Park' (verified), now 'Southwest, Luis Ortega'" in out
    assert "changed" in out.splitlines()[-1]
    assert "replies: recorded" in done.stderr


def test_replaying_an_unknown_run_is_a_usage_error(env):
    done = dsstar("replay", "20990101-000000-abcdef", "--json")
    assert done.returncode == 2
    assert "no run 20990101-000000-abcdef" in json.loads(done.stdout)["error"]
