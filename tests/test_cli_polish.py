"""The command line as a new user meets it: help with env vars and defaults, --version, JSON
errors, one-line bound errors, storage hints, text never read as markup, progress lines in a
log, `serve`'s question set, and `runs show`'s report. Real `python -m dsstar` subprocesses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest
from conftest import REPO
from scenarios import ANSWER, two_rounds

import dsstar
from dsstar.events import Event, HumanAnswered, HumanAsked, LLMCall, LLMReplied

QUESTION = "Which region had the [bold]highest[/bold] revenue in 2024 H1, and who manages it?"


def dsstar_cli(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=300, cwd=cwd,
        env={**os.environ, "COLUMNS": "400", **env},
    )  # fmt: skip


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The usage error: exit 2, one `error:` line on stderr, no traceback."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.strip()]
    assert line.startswith("error: ")
    return line


def test_help_shows_each_flags_env_var_and_default():
    out = re.sub(r"\s+", " ", dsstar_cli("run", "--help").stdout)
    assert "[env: DSSTAR_MAX_ROUNDS; default: 20]" in out
    assert "[env: DSSTAR_EXEC_TIMEOUT; default: 120.0]" in out
    assert "[env: DSSTAR_MODEL]" in out
    assert "[env: DSSTAR_ASK_HUMAN; default: false]" in out and "--no-ask-human" not in out
    assert "--reuse --no-reuse" in out
    out = re.sub(r"\s+", " ", dsstar_cli("describe", "--help").stdout)
    assert "[env: DSSTAR_LLM_CONCURRENCY; default: 8]" in out


def test_version():
    done = dsstar_cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"dsstar {dsstar.__version__}"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--bogus"], "No such option: --bogus"),
        (["--max-rounds", "many"], "Invalid value for '--max-rounds'"),
        (["--data"], "requires an argument"),
    ],
)
def test_usage_errors_are_json_under_json(sales, args, expected):
    done = dsstar_cli("run", "--json", "--question", "q", "--data", str(sales), *args)
    line = one_error_line(done)
    error = json.loads(done.stdout)["error"]  # exactly one JSON object on stdout
    assert expected in error and expected in line
    assert "dsstar run --help" in error


def test_a_missing_option_is_json_too():
    done = dsstar_cli("run", "--json", "--data", "x")
    one_error_line(done)
    assert "Missing option '--question'" in json.loads(done.stdout)["error"]


def test_bounds_are_one_readable_line(env, sales):
    line = one_error_line(dsstar_cli("run", "--data", str(sales), "-q", "q", "--max-rounds", "0"))
    assert line == (
        "error: --max-rounds (or DSSTAR_MAX_ROUNDS) 0: should be greater than or equal to 1"
    )
    done = dsstar_cli("run", "--data", str(sales), "-q", "q", "--json", DSSTAR_EXEC_TIMEOUT="-1")
    assert "pydantic" not in one_error_line(done)
    assert json.loads(done.stdout)["error"] == (
        "--exec-timeout (or DSSTAR_EXEC_TIMEOUT) '-1': should be greater than 0"
    )


def test_a_bad_storage_scheme_gets_the_right_hint(env, sales):
    line = one_error_line(
        dsstar_cli("run", "--data", str(sales), "-q", "q", "--storage", "s4://b/p")
    )
    assert "unknown storage scheme 's4://'" in line and "s3://bucket/prefix" in line
    assert "AWS" not in line
    line = one_error_line(
        dsstar_cli("run", "--data", str(sales), "-q", "q", "--storage", "ftp://127.0.0.1:9/x")
    )
    assert "cannot write to storage ftp://127.0.0.1:9/x" in line and "AWS" not in line


def test_user_text_is_never_read_as_markup(env, tmp_path):
    missing = str(tmp_path / "x[/bold]")
    line = one_error_line(dsstar_cli("run", "--data", missing, "--question", QUESTION))
    assert "x[/bold]: no such file or folder" in line
    folder = tmp_path / "odd[/red]" / "[bold]data"
    folder.mkdir(parents=True)
    (folder / "a[red].csv").write_text("region,units\nNE,3\n")
    done = dsstar_cli("describe", "--data", str(folder), "--offline")
    assert done.returncode == 0, done.stderr
    assert "a[red].csv (csv)" in done.stdout and "MarkupError" not in done.stderr


def test_serve_finds_its_question_set_in_the_project_and_checks_it(tmp_path):
    from dsstar.cli.serve import questions_path

    os.chdir(tmp_path)  # not the project: the default still resolves
    try:
        found = questions_path("deployments/questions.yaml")
    finally:
        os.chdir(REPO)
    assert found == REPO / "deployments" / "questions.yaml"
    line = one_error_line(dsstar_cli("serve", "--questions-file", "nope.yaml", cwd=tmp_path))
    assert "question set nope.yaml not found in the project" in line
    (tmp_path / "empty.yaml").write_text("[]\n")
    done = dsstar_cli("serve", "--questions-file", "empty.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "must be a non-empty list" in done.stderr


@pytest.mark.slow
def test_progress_lines_in_a_log_and_the_runs_show_report(env, llm, tmp_path, sales):
    data = tmp_path / "sales[/bold]"  # a folder "sales[" holding the data as "bold]"
    data.parent.mkdir()
    sales.rename(data)
    two_rounds(llm)
    done = dsstar_cli("run", "--data", str(data), "--question", QUESTION)  # stderr: a pipe
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ANSWER  # the answer alone on stdout, the rest on stderr
    assert "verified" in done.stderr and "artifacts:" in done.stderr
    lines = done.stderr.splitlines()
    files = sum(1 for path in data.rglob("*") if path.is_file())
    assert any(line.startswith(f"analyzing {files} files") for line in lines), done.stderr
    assert any(line.startswith(f"analyzed {files}/{files} files") for line in lines)
    rounds = [line for line in lines if line.startswith("round ")]
    assert [r.split(" · ")[0] for r in rounds] == ["round 00 not sufficient", "round 01 sufficient"]
    assert all("tokens" in r and "$" in r for r in rounds)
    run_id = lines[0].removeprefix("run ").strip()

    shown = dsstar_cli("runs", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"question: {QUESTION}" in out and f"answer: {ANSWER}" in out
    assert f"data: {data}" in out  # brackets as text
    for section in ("plan", "rounds", "cost per agent", "figures", "bounds"):
        assert f"── {section} ─" in out, section
    assert "1. " in out and "2. " in out  # the plan's two steps
    assert "verdict 00:" in out and "verdict 01:" in out
    for agent in ("planner", "coder", "verifier", "router", "finalyzer", "analyzer"):
        assert agent in out
    assert "LLM calls: " in out and f"files analyzed: {files}" in out and "rounds: 2" in out

    report = json.loads(dsstar_cli("runs", "show", run_id, "--json").stdout)
    assert {a["agent"] for a in report["agents"]} >= {"planner", "coder", "verifier"}
    assert sum(a["calls"] for a in report["agents"]) == report["llm_calls"]
    assert report["figures"]["rounds"] == 2 and set(report["verdict_replies"]) == {"0", "1"}
    # The bounds are the stored spec's: the one object the run's tasks were given.
    assert report["bounds"]["most rounds"] == str(report["spec"]["budget"]["max_rounds"])
    assert report["bounds"]["ceiling"] == "none" and "ceiling: none" in out


def _live_line(*events: Event) -> str:
    from dsstar import progress
    from dsstar.cli._output import LiveProgress

    with LiveProgress(enabled=False) as live:
        for event in events:
            progress.emit(event)
        return live.line()


def _call(cost: float | None) -> Event:
    return LLMReplied("coder", "coder r00", "m", input_tokens=100, output_tokens=20, cost_usd=cost)


def test_one_cost_figure_per_run_unknown_when_any_price_is():
    """The live line, the summary (`money`), run.json and `runs list` (`usage`) agree."""
    from dsstar.records.record import usage
    from dsstar.text import money

    for costs, figure in (
        ([0.001, 0.002], "$0.0030"),
        ([0.001, None], "unknown"),  # a part of the cost never passes for the whole
        ([None, None], "unknown"),
        ([], "unknown"),  # an interrupted run whose calls were not counted yet
    ):
        calls = [{"input_tokens": 100, "output_tokens": 20, "cost_usd": c} for c in costs]
        assert money(usage(calls)["cost_usd"]) == figure, costs
        assert _live_line(*map(_call, costs)).endswith(f"tokens · cost {figure}"), costs


def test_the_live_line_follows_the_rounds_after_a_person_answers():
    waiting = HumanAsked(round=0, timeout_s=60)
    guided = HumanAnswered(round=0, choice="guide")
    planner = LLMCall(agent="planner", label="planner r01")
    assert _live_line(waiting, planner).startswith("round 00 waiting for a person")
    line = _live_line(waiting, guided, planner)
    assert line.startswith("round 00 guided by a person · planner r01"), line


def test_the_summary_counts_in_words_and_run_help_names_its_option(capsys):
    from dsstar.cli._output import report

    result = {"status": "verified", "run_id": "r1", "rounds": 1, "llm_calls": 1,
              "input_tokens": 10, "output_tokens": 2, "cost_usd": None,
              "artifacts_uri": "file:///tmp/r1", "answer": "42"}  # fmt: skip
    report(result, as_json=False)
    said = " ".join(capsys.readouterr().err.split())
    assert "· 1 round · 1 LLM call ·" in said
    report(result | {"rounds": 2, "llm_calls": 3}, as_json=False)
    assert "· 2 rounds · 3 LLM calls ·" in " ".join(capsys.readouterr().err.split())
    helped = forked_cli.run([sys.executable, "-m", "dsstar", "run", "--help"], cwd=REPO,
                            capture_output=True, text=True, timeout=120).stdout  # fmt: skip
    assert "Answer QUESTION" not in helped and "Answer the --question" in helped


@pytest.mark.parametrize(
    ("argv0", "shown"),
    [(".venv/bin/dsstar", ".venv/bin/dsstar"), ("/opt/tools/bin/dsstar", "/opt/tools/bin/dsstar")],
)
def test_hints_name_the_program_as_it_was_run(monkeypatch, tmp_path, argv0, shown):
    from dsstar.cli._app import invoked

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "argv", [argv0, "run"])
    assert invoked() == shown
    monkeypatch.setattr(sys, "argv", [str(REPO / "dsstar" / "__main__.py"), "run"])
    assert invoked() == f"{sys.executable} -m dsstar"
    script = tmp_path / "dsstar"  # found on PATH: its name is what the user typed
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(script), "run"])
    assert invoked() == "dsstar"


def test_example_question_sets_sit_beside_their_data_and_load():
    """A question set inside a data folder is read as one of its files (and ranked first by
    retrieval for its own questions): the examples keep theirs beside the folder."""
    from dsstar.inputs.questions import load_questions

    examples = REPO / "examples"
    # the question set, the recorded replies that `dsstar demo` answers its first with, and
    # the report's question with the replies of `dsstar demo --report`
    assert sorted(p.name for p in examples.glob("*.yaml")) == [
        "report-replies.yaml",
        "sales-questions.yaml",
        "sales-replies.yaml",
        "sales-report.yaml",
    ]
    assert not [p for p in examples.glob("*/**/*") if p.suffix in (".yaml", ".yml")]
    [first] = load_questions(examples / "sales-questions.yaml")
    assert first.data == str(examples / "sales")
    readme = (REPO / "README.md").read_text()
    assert f'--question "{first.question}"' in readme  # the README asks it as a real run
