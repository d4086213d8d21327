"""The contract life cycle through the real flow: the first run creates suites, refreshed
compatible data validates and reuses the stored solution, a renamed column, a type change
and an out-of-range value each block reuse with the failure named, and `dsstar contracts
accept` lifts the block."""

from __future__ import annotations

import json
import os
import sys

import forked_cli
import pytest
from prefect import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from rendered import shown_text
from scenarios import ANSWER, fence, two_rounds

from dsstar.keys import contract
from flows.ds_star import ds_star

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
NEW_ROWS = "1011,2024-06-25,SW,Gizmo,10,30.00\n1012,2024-06-28,SW,Gizmo,1,30.00\n"
HEADER = "order_id,order_date,region_code,product,units,unit_price"


def full_loop(llm) -> None:
    """One round that the verifier accepts: a script that prints the answer."""
    script = fence(f"print({ANSWER!r})")
    llm.script("planner", "Compute revenue per region and find its manager.")
    llm.script("coder", script)
    llm.script("verifier", "Yes")
    llm.script("finalyzer", script)


def agents_since(llm, since: int) -> list[str]:
    return [c["agent"] for c in llm.requests[since:]]


def warning_markdown(run_id: str) -> str:
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[f"{run_id}-contracts"]))
        )
    return found[0].data if found else ""


def test_contract_life_cycle(env, llm, sales):
    orders = sales / "orders_2024.csv"
    original = orders.read_text()

    two_rounds(llm)
    first = ds_star(question=QUESTION, data=str(sales), run_id="life-1")
    assert first["contracts"] == {"checked": 0, "failed": []}
    stored = os.path.join(env["DSSTAR_STORAGE"], contract(str(sales), "orders_2024.csv"))
    assert json.load(open(stored))["gx_version"]

    orders.write_text(original + NEW_ROWS)  # compatible growth
    llm.script("verifier", "Yes")
    since = len(llm.requests)
    reused = ds_star(question=QUESTION, data=str(sales), run_id="life-2")
    assert reused["reused_solution"] is True and agents_since(llm, since) == ["verifier"]
    assert reused["contracts"] == {"checked": 1, "failed": []}
    record = json.load(open(os.path.join(env["DSSTAR_STORAGE"], "runs/life-2/run.json")))
    (checked,) = record["contracts"]["files"]
    assert checked["status"] == "validated" and checked["statistics"]["evaluated_expectations"]

    blocked = {
        "renamed column": (
            original.replace("units,", "quantity,", 1),
            "expect_table_columns_to_match_ordered_list",
        ),
        "type change": (
            original.replace(",NE,Widget,8,", ",NE,Widget,eight,"),
            "expect_column_values_to_be_of_type(column=units, type_=float64)",
        ),
        "out of range": (
            original.replace(",NE,Widget,8,", ",NE,Widget,8000,"),
            "expect_column_values_to_be_between(column=units",
        ),
    }
    last_plan = "Load the orders and compute revenue per region."  # of the last verified run
    for n, (name, (text, expectation)) in enumerate(blocked.items(), 3):
        orders.write_text(text)
        full_loop(llm)
        since = len(llm.requests)
        result = ds_star(question=QUESTION, data=str(sales), run_id=f"life-{n}")
        assert result["reused_solution"] is False, name
        assert result["status"] == "verified" and result["answer"] == ANSWER
        failures = result["contracts"]["failed"]
        assert any(f["path"] == "orders_2024.csv" and f["expectation"].startswith(expectation)
                   for f in failures), (name, failures)  # fmt: skip
        assert "planner" in agents_since(llm, since)  # the full loop ran
        planner_request = json.dumps(llm.calls("planner")[-1])
        assert last_plan in planner_request  # seeded with the old plan
        last_plan = result["plan"][0]
        markdown = shown_text(warning_markdown(f"life-{n}"))
        assert "orders_2024.csv" in markdown and expectation.split("(")[0] in markdown

    # The out-of-range data is what the user wants from now on.
    accepted = forked_cli.run(
        [sys.executable, "-m", "dsstar", "contracts", "accept", str(sales), "--json"],
        capture_output=True, text=True, env=os.environ.copy(),
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    llm.script("verifier", "Yes")
    since = len(llm.requests)
    after = ds_star(question=QUESTION, data=str(sales), run_id="life-6")
    assert after["reused_solution"] is True and after["contracts"]["failed"] == []
    assert agents_since(llm, since) == ["verifier"]

    # A contract the user tightens so that today's unchanged file fails it: no reuse, and
    # that file is described afresh although its cached description matches its content.
    suite = json.load(open(stored))
    for expectation in suite["tables"][0]["suite"]["expectations"]:
        if expectation["type"] == "expect_table_row_count_to_be_between":
            expectation["kwargs"].update(min_value=1000, max_value=2000)
    json.dump(suite, open(stored, "w"))
    full_loop(llm)
    since = len(llm.requests)
    tightened = ds_star(question=QUESTION, data=str(sales), run_id="life-7")
    assert tightened["reused_solution"] is False and tightened["status"] == "verified"
    (failure,) = tightened["contracts"]["failed"]
    assert failure["expectation"].startswith("expect_table_row_count_to_be_between")
    analyzed = [json.dumps(c["messages"]) for c in llm.requests[since:] if c["agent"] == "analyzer"]
    assert analyzed and all("orders_2024.csv" in text for text in analyzed)
