"""What the `dsstar` command loads before it needs it: help and usage errors import neither
Prefect nor litellm (seconds of import, paid by every call), and a run starts the contract
check's table reader beside its preflight instead of after the flow has started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("prefect", "litellm")
SALES = str(Path(__file__).resolve().parents[1] / "examples" / "sales")


def imported(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `python -X importtime -m dsstar ARGS`; the top-level packages it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=120, env=os.environ.copy(),
    )  # fmt: skip
    names = {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return done, names


@pytest.mark.parametrize(
    "args, code",
    [
        (["--help"], 0),
        (["run", "--help"], 0),
        (["--version"], 0),
        (["run", "--data", SALES], 2),  # no --question: a usage error
        (["run", "--data", SALES, "-q", "?", "--max-rounds", "-1"], 2),  # a value out of bounds
    ],
)
def test_help_and_usage_errors_import_neither_prefect_nor_litellm(args, code):
    done, names = imported(*args)
    assert done.returncode == code, done.stderr[-2000:]
    assert "dsstar" in names  # the import log was read
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


_READER_RUNNING = """
import json, sys, psutil
from dsstar.api import prepare_run

prepare_run(question="Which region had the highest revenue?", data=sys.argv[1])
commands = [" ".join(c.cmdline()) for c in psutil.Process().children()]
print(json.dumps(commands))
"""


@pytest.mark.slow
def test_a_prepared_run_has_its_contract_reader_started(env, llm, sales):
    """Once the preflight has passed, the reader that the contract check reads tables with is
    already running: its imports overlapped the preflight's."""
    done = subprocess.run(
        [sys.executable, "-c", _READER_RUNNING, str(sales)],
        capture_output=True, text=True, timeout=300, env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    commands = json.loads(done.stdout.splitlines()[-1])
    assert any("dsstar.data.contracts._bounded" in c for c in commands), commands
