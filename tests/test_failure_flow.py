"""A run over a corrupt CSV, end to end: the failure reads as one line wherever a person sees
it (the command's output, `--json`, run.json, `dsstar runs show`, the answer card), and the
whole traceback stays stored with the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import forked_cli
import pytest
from prefect.artifacts import Artifact
from scenarios import always_first_time

from tasks.cache_keys import artifact_key

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
# pandas' reason, and the line of the final script (scenarios.FINAL_ONLY_ANSWER) that read it.
CAUSE = (
    "pandas.errors.ParserError: Error tokenizing data. C error: Expected 6 fields in line 4,"
    " saw 8 (solution.py line 3)"
)


def dsstar(*args: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=300, env=os.environ.copy(),
    )  # fmt: skip


def test_a_corrupt_csv_fails_the_run_with_one_line(env, llm, sales, tmp_path):
    orders = sales / "orders_2024.csv"
    lines = orders.read_text().splitlines()
    lines.insert(3, "1099,2024-01-20,NE,Widget,10,2.50,oops,again")  # two fields too many
    orders.write_text("\n".join(lines) + "\n")
    always_first_time(llm)
    done = dsstar(
        "run", "--data", str(sales), "--question", QUESTION, "--run-id", "corrupt",
        "--max-debug-attempts", "0",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    error = f"error: the final script failed: {CAUSE}"
    assert error in done.stderr.splitlines()  # one whole line, nothing cut
    assert "Traceback" not in done.stderr and 'File "' not in done.stderr

    record = json.loads((tmp_path / "storage/runs/corrupt/run.json").read_text())
    assert record["status"] == "failed"
    assert record["error"] == f"the final script failed: {CAUSE}"
    stored = (tmp_path / "storage/runs/corrupt/final/output.txt").read_text()
    assert stored.startswith("Traceback (most recent call last):")  # the whole of it
    assert 'File "/sandbox/script.py", line 3' in stored and CAUSE.split(" (")[0] in stored

    shown = dsstar("runs", "show", "corrupt")
    assert shown.returncode == 0, shown.stderr
    assert error in shown.stdout.splitlines()

    card = Artifact.get(artifact_key("corrupt-answer"))
    assert card is not None
    assert f"**Error**\n\n```\nthe final script failed: {CAUSE}\n```" in card.data
    assert "**cost:** $" in card.data  # a priced model: the cost, in dollars
