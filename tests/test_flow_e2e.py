"""The DS-STAR flow end to end: real Prefect server, real sandbox, litellm over HTTP to a
scripted model server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scenarios import ANSWER, two_rounds

from flows.ds_star import ds_star

pytestmark = pytest.mark.slow


def layout(storage: Path, run_id: str) -> set[str]:
    root = storage / "runs" / run_id
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_two_round_success(env, llm, sales):
    two_rounds(llm)
    result = ds_star(
        question="Which region had the highest revenue?", data=str(sales), run_id="t-two-rounds"
    )
    assert result["status"] == "verified"
    assert result["answer"] == ANSWER
    assert result["rounds"] == 2
    files = layout(Path(env["DSSTAR_STORAGE"]), "t-two-rounds")
    for name in ("run.json", "final/solution.py", "final/answer.json", "final/notebook.ipynb"):
        assert name in files
    for nn in ("00", "01"):
        for name in ("plan.json", "code.py", "output.txt", "verdict.json"):
            assert f"rounds/{nn}/{name}" in files
    assert "rounds/01/route.json" in files and "rounds/00/route.json" not in files
    assert any(f.startswith("analysis/orders_2024.csv/") for f in files)
    plan = json.loads(
        (Path(env["DSSTAR_STORAGE"]) / "runs/t-two-rounds/rounds/01/plan.json").read_text()
    )
    assert len(plan) == 2
