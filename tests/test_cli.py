"""The `dsstar` command as users and schedulers run it: a real subprocess, its stdout, stderr
and exit code. (The result's JSON contract of a whole run: test_cli_piped's first run.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import forked_cli
import pytest
from scenarios import describe_script, fence

from dsstar.views.report import RESULT_KEYS

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"


def dsstar(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=300, env=env or os.environ.copy(),
    )  # fmt: skip


def test_help_teaches_every_flag():
    out = dsstar("run", "--help").stdout
    for flag in (
        "--data",
        "--question",
        "--guidelines",
        "--model",
        "--api-base",
        "--max-rounds",
        "--max-debug-attempts",
        "--exec-timeout",
        "--exec-memory-mb",
        "--storage",
        "--json",
    ):
        assert flag in out


def test_without_a_model_it_exits_2_and_says_how_to_configure_one(sales):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSSTAR_")}
    done = dsstar("run", "--data", str(sales), "--question", QUESTION, env=env)
    assert done.returncode == 2
    assert "No model is configured" in done.stderr
    assert "OPENAI_API_KEY" in done.stderr and "--api-base" in done.stderr
    assert done.stdout == ""


def _garbled(llm):
    """Every agent answers badly: empty, no code, two blocks, Maybe, Step 99, Step 0."""
    llm.script("analyzer", "", "I would read the file with pandas.")
    llm.default("analyzer", describe_script)
    llm.default("debugger", lambda req: "```\npip install pandas\n```\n" + fence("print('fixed')"))
    llm.script("planner", "", "Step 1: Load the orders.", "- Compute the revenue.")
    llm.default("planner", lambda req: "Compute the revenue per region.")
    llm.script("coder", "Sure! I will write that.")
    llm.default("coder", lambda req: fence("print('one')") + fence("print('two'); print(2)"))
    llm.default("summarizer", lambda req: "")
    llm.script("verifier", "Maybe", "", "Possibly yes")
    llm.default("verifier", lambda req: "No.")
    llm.script("router", "Step 99", "Step 0", "I am not sure")
    llm.default("router", lambda req: "Step 1 is wrong!")
    llm.default("finalyzer", lambda req: "")


def _silent_planner(llm):
    llm.default("analyzer", describe_script)
    llm.default("planner", lambda req: "   ")


@pytest.mark.parametrize("scenario", [_garbled, _silent_planner])
def test_malformed_replies_end_in_a_defined_result(env, llm, sales, scenario):
    scenario(llm)
    done = dsstar(
        "run", "--data", str(sales), "--question", QUESTION, "--json", "--max-rounds", "5"
    )
    result = json.loads(done.stdout)
    assert result["status"] in {"verified", "max_rounds", "failed"}
    assert done.returncode == (0 if result["status"] != "failed" else 1)
    assert "Traceback" not in done.stderr
    assert set(RESULT_KEYS) <= set(result)


def test_bad_run_id_is_a_usage_error_with_a_json_error(env, sales):
    done = dsstar(
        "run", "--data", str(sales), "--question", QUESTION, "--json", "--run-id", "../escape"
    )
    assert done.returncode == 2
    assert "invalid run id" in json.loads(done.stdout)["error"]


def test_unreachable_ledger_is_reported_without_its_password(env, monkeypatch):
    monkeypatch.setenv("DSSTAR_DATABASE_URL", "postgresql+psycopg://u:s3cr3t@127.0.0.1:9/x")
    done = dsstar("history", "any question", "--json")
    assert done.returncode == 2
    assert "cannot open the ledger" in json.loads(done.stdout)["error"]
    assert "s3cr3t" not in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
