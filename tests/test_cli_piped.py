"""Every command piped, as cron, CI or a log file sees it: `python -m dsstar` subprocesses with
stdout and stderr on pipes and no COLUMNS set, against the fake model server and the session's
Prefect server. Help is whole and true to the flags; tables keep one row per line; nothing
prints `None`; commands say when there is nothing to do; `serve` stops cleanly."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import forked_cli
import pytest
from conftest import EXAMPLE, REPO
from fake_llm import Error
from processes import stop
from scenarios import ANSWER, two_rounds

from dsstar.inputs.preflight import unreadable_warning
from dsstar.settings import Settings
from dsstar.views.report import RESULT_KEYS

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
COMMANDS = [
    ["run"], ["resume"], ["describe"], ["retrieve"], ["runs", "list"], ["runs", "show"],
    ["history"], ["contracts", "show"], ["contracts", "validate"], ["contracts", "accept"],
    ["serve"], ["alerts"], ["bench", "run"], ["bench", "score"],
]  # fmt: skip


def piped(*args: str, cwd: Path | None = None, **env: str | None) -> subprocess.CompletedProcess:
    """`dsstar ARGS` with both streams on pipes and no terminal width given."""
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    environ.update({k: v for k, v in env.items() if v is not None})
    for name in [k for k, v in env.items() if v is None]:
        environ.pop(name, None)
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=300, cwd=cwd, env=environ,
    )  # fmt: skip


def flags_of(command: list[str]) -> set[str]:
    """Every flag the command really has (its click parameters), `--no-x` forms included."""
    import typer.main

    from dsstar.cli import app

    found = typer.main.get_command(app)
    for name in command:
        found = found.commands[name]
    return {f for p in found.params for f in [*p.opts, *p.secondary_opts] if f.startswith("--")}


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_piped_is_whole_and_names_only_real_flags(command):
    done = piped(*command, "--help")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "…" not in out  # nothing cut: piped help is as wide as its longest words
    assert "{" not in out.splitlines()[1]  # the usage line names arguments like RUN_ID
    words = " ".join(out.replace("│", " ").split())
    mentioned = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*[a-z0-9])", words))
    assert mentioned <= flags_of(command) | {"--help"}, mentioned - flags_of(command)
    for name in re.findall(r"DSSTAR_[A-Z_]*[A-Z]", words):  # every variable named is real
        assert name.removeprefix("DSSTAR_").lower() in Settings.model_fields, name


def test_run_help_shows_every_variable_whole():
    out = " ".join(piped("run", "--help").stdout.replace("│", " ").split())
    for name in ("DSSTAR_MAX_DEBUG_ATTEMPTS", "DSSTAR_EXEC_MEMORY_MB", "DSSTAR_HUMAN_TIMEOUT"):
        assert f"env: {name};" in out, name
    assert "--ray-address" not in out
    assert "Usage: dsstar resume [OPTIONS] RUN_ID" in piped("resume", "--help").stdout


def test_serve_help_says_what_happens_without_an_api_and_on_exit():
    out = " ".join(piped("serve", "--help").stdout.replace("│", " ").split())
    # serve itself runs without PREFECT_API_URL; only its alerts need a lasting server.
    assert out.count("Needs PREFECT_API_URL") == 1 and "PREFECT_API_URL: the block and the" in out
    assert "temporary server" in out and "vanish when serve stops" in out
    assert "pauses the nightly schedule" in out and "work pool" in out


@pytest.mark.slow
def test_the_json_result_then_runs_list_history_and_show_piped(env, llm, sales, tmp_path):
    """Two whole runs on two copies of the data. The first checks the result's contract; it
    also shows that a local server (`--api-base`) needs no key and that the model is probed
    once, by the CLI's preflight, not again by the flow."""
    other = tmp_path / "other"
    shutil.copytree(sales, other)
    two_rounds(llm)
    probes: list[int] = []
    llm.on_models(lambda: probes.append(1))
    done = piped("run", "--data", str(sales), "--question", QUESTION, "--json",
                 DSSTAR_API_KEY=None, OPENAI_API_KEY=None)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert probes == [1]
    result = json.loads(done.stdout)  # exactly one JSON object, nothing else on stdout
    assert set(RESULT_KEYS) <= set(result)
    assert result["status"] == "verified" and result["answer"] == ANSWER
    assert result["rounds"] == 2
    assert result["solution_uri"].endswith("final/solution.py")
    assert result["flow_run_id"]
    assert result["llm_calls"] == len(llm.requests)
    assert "Traceback" not in done.stderr
    runs = [result["run_id"]]

    two_rounds(llm)
    done = piped("run", "--data", str(other), "--question", QUESTION, "--json")
    assert done.returncode == 0, done.stderr
    runs.append(json.loads(done.stdout)["run_id"])

    listed = piped("runs", "list")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["question", "answer", "status", "rounds", "cost", "started", "run",
                              "id"]  # fmt: skip
    assert len(rows) == 2  # one line per run, whatever the width
    for row, run_id in zip(rows, reversed(runs), strict=True):
        assert row.startswith(QUESTION[:57]) and ANSWER in row and row.endswith(run_id)
        assert " verified " in row and "None" not in row
    table = list(csv.DictReader(io.StringIO(piped("runs", "list", "--format", "csv").stdout)))
    assert [(r["question"], r["answer"], r["run id"]) for r in table] == [
        (QUESTION, ANSWER, run_id) for run_id in reversed(runs)
    ]

    history = piped("history", QUESTION)
    assert history.returncode == 0, history.stderr
    header, *rows = history.stdout.splitlines()
    assert header.split()[:4] == ["finished", "data", "status", "answer"]
    assert len(rows) == 2 and "None" not in history.stdout
    assert str(sales) in rows[0] and str(other) in rows[1]
    assert "changed" not in history.stdout  # same answer; the roots are compared apart
    only = json.loads(piped("history", QUESTION, "--data", str(other), "--json").stdout)
    assert [a["run_id"] for a in only["answers"]] == [runs[1]]

    shown = piped("runs", "show", runs[0])
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    [notebook] = [line for line in lines if line.startswith("notebook: ")]
    path = notebook.removeprefix("notebook: ").removeprefix("file://")
    assert path.endswith(f"runs/{runs[0]}/final/notebook.ipynb") and Path(path).is_file()
    assert any(line.startswith("solution: ") for line in lines)
    [first, second] = [line for line in lines if line.startswith(("00 ", "01 "))]
    assert "Load the orders and compute revenue per region." in first  # one line per round
    assert "Join the best region with regions.json to find its manager." in second
    assert " Add Step " in second and " sufficient " in second


def test_contracts_validate_says_when_there_is_nothing_to_check(env, sales):
    done = piped("contracts", "validate", str(sales))
    assert done.returncode == 0, done.stderr
    assert "nothing to check: no contracts stored for" in done.stderr
    assert f"dsstar contracts accept {sales}" in done.stderr


@pytest.mark.slow  # a whole run (CLI or flow): not in the quick tier
def test_run_warns_before_the_first_call_when_no_file_can_be_read(env, llm, tmp_path):
    junk = tmp_path / "junk"
    junk.mkdir()
    for name in ("a.csv", "b.json", "c.bin"):
        (junk / name).write_bytes(bytes(range(256)) * 20)  # binary of no known format
    llm.intercept(lambda request: Error(401, "stop here"))  # the first call ends the run
    done = piped("run", "--data", str(junk), "--question", "How many rows?")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    [at] = [i for i, line in enumerate(lines) if line.startswith("warning: --data")]
    assert "no input file could be read (3 checked" in " ".join(lines[at : at + 3])
    assert at < next(i for i, line in enumerate(lines) if line.startswith("run "))
    assert unreadable_warning(str(EXAMPLE)) is None  # readable files: no warning


@pytest.mark.slow
def test_serve_stops_cleanly_on_sigterm_and_says_its_schedule_is_paused(tmp_path):
    home = tmp_path / "prefect-home"  # a temporary server of its own: nothing shared paused
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "COLUMNS")}
    env.update(
        PREFECT_HOME=str(home),
        DSSTAR_MODEL="openai/gpt-4o-mini",
        DSSTAR_API_KEY="sk-test-not-secret",
        DSSTAR_STORAGE=str(tmp_path / "storage"),
    )
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        proc = forked_cli.start([sys.executable, "-m", "dsstar", "serve"], cwd=REPO, env=env,
                     stdout=out, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while "serving ds-star/on-demand" not in log.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.5)
            time.sleep(3)  # the runner has started polling
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
        finally:
            stop(proc)
    text = log.read_text()
    assert "warning: PREFECT_API_URL is not set" in text  # said before serving
    assert code == 128 + signal.SIGTERM, text
    assert "never awaited" not in text and "Traceback" not in text, text
    said = " ".join(text.split())
    assert "stopped serving: the schedule of ds-star-nightly/nightly is paused" in said
    assert "prefect worker start" in said


def test_describe_and_retrieve_piped_keep_every_path_whole(env, sales):
    long_name = "regional_revenue_targets_for_the_first_half_of_2024_as_agreed_by_finance.csv"
    (sales / long_name).write_text("region_code,target\nNE,1000\n")  # wider than 80 columns
    files = sorted(p.name for p in sales.iterdir())
    described = piped("describe", "--data", str(sales), "--offline")
    assert described.returncode == 0, described.stderr
    titles = [line.strip("─ ") for line in described.stdout.splitlines() if line.startswith("─")]
    assert sorted(t.rsplit(" (", 1)[0] for t in titles) == files
    retrieved = piped("retrieve", "--data", str(sales), "--question", QUESTION, "--offline")
    assert retrieved.returncode == 0, retrieved.stderr
    rows = [line.split(None, 1) for line in retrieved.stdout.splitlines()]
    assert sorted(path for _, path in rows) == files  # one line per file: score, path
    assert all(0 <= float(score) <= 1 for score, _ in rows)


def test_runs_list_keeps_the_question_whole_piped_and_readable_at_80_columns(tmp_path):
    question = QUESTION + " Name the region and its manager, in that order, as in the report."
    run_id = "20261124-221400-ab12cd"
    record = {"run_id": run_id, "question": question, "answer": ANSWER, "status": "verified",
              "round_table": [{"round": 0}, {"round": 1}], "cost_usd": None,
              "started_at": "2026-11-24T22:14:00"}  # fmt: skip
    (tmp_path / "runs" / run_id).mkdir(parents=True)
    (tmp_path / "runs" / run_id / "run.json").write_text(json.dumps(record))
    storage = ("--storage", str(tmp_path))
    plain = piped("runs", "list", *storage).stdout.splitlines()[1]
    assert plain.startswith(question + "  ") and "..." not in plain  # nothing cut
    [row] = csv.DictReader(io.StringIO(piped("runs", "list", *storage, "--format", "csv").stdout))
    assert row["question"] == question
    boxed = piped("runs", "list", *storage, "--format", "table", COLUMNS="80").stdout
    assert max(map(len, boxed.splitlines())) <= 80
    assert "Which region had the highest revenue in 2024 H1" in boxed  # not a word a line
    assert run_id in boxed
