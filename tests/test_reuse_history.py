"""Solution reuse and the ledger's answer history, through the real flow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest
from fake_llm import text_of
from scenarios import ANSWER, FINAL_ONLY_ANSWER, describe_script, fence, two_rounds

from dsstar.records.ledger import Ledger, question_key
from flows.ds_star import ds_star

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
NEW_ROWS = "1011,2024-06-25,SW,Gizmo,10,30.00\n1012,2024-06-28,SW,Gizmo,1,30.00\n"


def new_calls(llm, since: int) -> list[dict]:
    return llm.requests[since:]


def test_reuse_answers_refreshed_data_with_one_call(env, llm, sales):
    two_rounds(llm)
    first = ds_star(question=QUESTION, data=str(sales), run_id="reuse-1")
    assert first["status"] == "verified" and not first["reused_solution"]

    with (sales / "orders_2024.csv").open("a") as csv:
        csv.write(NEW_ROWS)  # Southwest overtakes Northeast: 130 + 330 = 460 > 207
    llm.script("verifier", "Yes")
    since = len(llm.requests)
    second = ds_star(question=QUESTION, data=str(sales), run_id="reuse-2")

    assert second["status"] == "verified"
    assert second["reused_solution"] is True
    assert second["answer"] == "Southwest, Luis Ortega"
    calls = new_calls(llm, since)
    assert len(calls) <= 2 and second["llm_calls"] == len(calls)
    assert [c["agent"] for c in calls] == ["verifier"]
    assert "Southwest, Luis Ortega" in text_of(calls[0])  # judged on today's output

    ledger = Ledger(env["DSSTAR_DATABASE_URL"], env["DSSTAR_STORAGE"])
    history = ledger.history(question_key(QUESTION))
    assert [(r.run_id, r.answer, r.reused_solution) for r in history] == [
        ("reuse-1", ANSWER, False),
        ("reuse-2", "Southwest, Luis Ortega", True),
    ]
    assert [c.agent for c in ledger.calls("reuse-2")] == ["verifier"]
    assert len(ledger.rounds("reuse-1")) == 2

    shown = forked_cli.run(
        [sys.executable, "-m", "dsstar", "history", QUESTION, "--json"],
        capture_output=True, text=True, env=os.environ.copy(), check=True,
    )  # fmt: skip
    answers = json.loads(shown.stdout)["answers"]
    assert [(a["answer"], a["changed"]) for a in answers] == [
        (ANSWER, False),
        ("Southwest, Luis Ortega", True),
    ]


TABLE_AND_ANSWER = FINAL_ONLY_ANSWER + (
    'orders.groupby("region_code")["revenue"].sum().to_csv("revenue.csv")\n'
)


def test_a_reused_solution_delivers_the_files_it_writes_from_todays_data(env, llm, sales):
    """The verified solution writes a table beside its answer. Run again on refreshed data
    and accepted, it is the new run's final script: its table is the new run's deliverable,
    made from today's data. (Its round states its answer on a single line, no `FINAL
    ANSWER:`, so the first run kept that round's figures only and ran the final script.)"""
    llm.default("analyzer", describe_script)
    llm.script("planner", "Keep revenue per region as revenue.csv; name the best region's manager.")
    llm.script("coder", fence(TABLE_AND_ANSWER))
    llm.script("verifier", "Yes", "The output names the region and its manager.\n\nYes")
    llm.script("finalyzer", fence(TABLE_AND_ANSWER))
    first = ds_star(question=QUESTION, data=str(sales), run_id="table-1")
    assert first["status"] == "verified"
    assert [o["name"] for o in first["outputs"]] == ["revenue.csv"]
    runs = Path(env["DSSTAR_STORAGE"]) / "runs"
    assert "final_reused_run" not in json.loads((runs / "table-1" / "run.json").read_text())

    with (sales / "orders_2024.csv").open("a") as csv:
        csv.write(NEW_ROWS)
    second = ds_star(question=QUESTION, data=str(sales), run_id="table-2")
    assert second["reused_solution"] is True and second["answer"] == "Southwest, Luis Ortega"
    assert [o["name"] for o in second["outputs"]] == ["revenue.csv"]
    before, today = (runs / r / "final" / "outputs" / "revenue.csv" for r in ("table-1", "table-2"))
    assert "SW,130.0" in before.read_text() and "SW,460.0" in today.read_text()
    assert not (runs / "table-2" / "files").exists()  # copied where it belongs, then gone


def test_no_reuse_forces_the_full_loop_and_a_renamed_column_runs_it_seeded_with_the_old_plan(
    env, llm, sales
):
    two_rounds(llm)
    ds_star(question=QUESTION, data=str(sales), run_id="rename-1")

    # The same data again, with reuse turned off: the whole loop, though a solution would fit.
    two_rounds(llm)
    since = len(llm.requests)
    result = ds_star(question=QUESTION, data=str(sales), run_id="noreuse", reuse=False)
    assert result["reused_solution"] is False and result["rounds"] == 2
    assert "planner" in [c["agent"] for c in new_calls(llm, since)]

    orders = sales / "orders_2024.csv"
    orders.write_text(orders.read_text().replace("units,", "quantity,", 1))
    renamed = FINAL_ONLY_ANSWER.replace('"units"', '"quantity"')
    llm.script("planner", "Compute revenue per region from quantity and unit_price.")
    llm.script("coder", fence(renamed))
    llm.script("verifier", "Yes")
    llm.script("finalyzer", fence(renamed))
    since = len(llm.requests)
    result = ds_star(question=QUESTION, data=str(sales), run_id="rename-2")

    assert result["status"] == "verified" and result["answer"] == ANSWER
    assert result["reused_solution"] is False
    agents = [c["agent"] for c in new_calls(llm, since)]
    assert "verifier" in agents and "planner" in agents and "analyzer" in agents
    planner_request = text_of(llm.calls("planner")[-1])
    assert "Load the orders and compute revenue per region." in planner_request  # old plan


def _dsstar(*argv: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *argv],
        capture_output=True, text=True, env=os.environ.copy(), check=True,
    )  # fmt: skip


def test_two_storages_never_see_each_others_runs_history_or_solutions(
    env, llm, sales, tmp_path, monkeypatch
):
    """Two storages on one machine share the default ledger (one per user): each sees only
    its own runs and history, and a run reuses only a solution of its own storage, which
    run.json, the result and `runs show` name."""
    store_a, store_b = tmp_path / "store-a", tmp_path / "store-b"
    monkeypatch.setenv("DSSTAR_STORAGE", str(store_a))
    two_rounds(llm)
    assert ds_star(question=QUESTION, data=str(sales), run_id="a-1")["status"] == "verified"

    monkeypatch.setenv("DSSTAR_STORAGE", str(store_b))
    two_rounds(llm)
    since = len(llm.requests)
    fresh = ds_star(question=QUESTION, data=str(sales), run_id="b-1")
    assert fresh["reused_solution"] is False and fresh["reused_from"] is None
    agents = [c["agent"] for c in new_calls(llm, since)]
    assert "planner" in agents and "analyzer" in agents  # the whole loop: nothing of store-a

    def history(storage: Path | None) -> list[str]:
        flags = ["--storage", str(storage)] if storage else []
        shown = _dsstar("history", QUESTION, *flags, "--json")
        return [a["run_id"] for a in json.loads(shown.stdout)["answers"]]

    assert history(store_a) == ["a-1"]
    assert history(store_b) == ["b-1"]
    assert history(None) == ["b-1"]  # DSSTAR_STORAGE: store-b
    listed = json.loads(_dsstar("runs", "list", "--json").stdout)
    assert [r["run_id"] for r in listed["runs"]] == ["b-1"]

    monkeypatch.setenv("DSSTAR_STORAGE", str(store_a))
    llm.script("verifier", "Yes")
    again = ds_star(question=QUESTION, data=str(sales), run_id="a-2")
    assert again["reused_solution"] is True and again["reused_from"] == "a-1"
    record = json.loads((store_a / "runs" / "a-2" / "run.json").read_text())
    assert record["reused_from"] == "a-1"
    report = _dsstar("runs", "show", "a-2").stdout
    assert "reused: the verified solution of run a-1" in report
    assert history(store_a) == ["a-1", "a-2"] and history(store_b) == ["b-1"]
