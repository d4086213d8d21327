"""benchmarks/dacode_parity.py refuses, with exit 2 and a message that says what is wrong, a
DA-Code checkout, an interpreter or an answer folder that is not what it should be. (The
comparison itself needs DA-Code's checkout and an environment with its requirements; the
DA-Code section of docs/benchmarks.md says how to run it.)"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from conftest import REPO


def _load():
    spec = importlib.util.spec_from_file_location(
        "dacode_parity", REPO / "benchmarks" / "dacode_parity.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


parity = _load()


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A folder laid out as DA-Code's repository is (evaluate.py, da_code/configs/eval/,
    da_code/gold/), without its evaluator's package."""
    root = tmp_path / "da-code"
    evals = root / "da_code" / "configs" / "eval"
    evals.mkdir(parents=True)
    config = {"id": "di-text-001", "result": {"number": [{"country": ["Monaco"]}]}}
    (evals / "eval_all.jsonl").write_text(json.dumps(config) + "\n")
    (root / "da_code" / "gold" / "di-text-001").mkdir(parents=True)
    (root / "evaluate.py").write_text("")
    return root


def refused(monkeypatch, capsys, *argv: object) -> str:
    """What the script says on stderr when it refuses `argv` (exit 2)."""
    monkeypatch.setattr(sys, "argv", ["dacode_parity.py", *map(str, argv)])
    assert parity.main() == 2
    return capsys.readouterr().err


def test_a_folder_that_is_no_dacode_checkout_is_refused(tmp_path, monkeypatch, capsys):
    said = refused(monkeypatch, capsys, "--dacode", tmp_path / "absent", "--python", sys.executable)
    assert "no evaluate.py" in said and "github.com/yiyihum/da-code" in said
    (tmp_path / "evaluate.py").write_text("")
    said = refused(monkeypatch, capsys, "--dacode", tmp_path, "--python", sys.executable)
    assert "not a DA-Code folder" in said


def test_an_interpreter_that_is_absent_or_lacks_dacodes_requirements_is_refused(
    checkout, tmp_path, monkeypatch, capsys
):
    said = refused(monkeypatch, capsys, "--dacode", checkout, "--python", tmp_path / "python")
    assert "no such interpreter" in said
    # this project's interpreter runs, but cannot import DA-Code's evaluator (da_agent)
    said = refused(monkeypatch, capsys, "--dacode", checkout, "--python", sys.executable)
    assert "cannot import DA-Code's evaluator" in said and "da_agent" in said


def test_an_answer_folder_without_task_folders_is_refused(checkout, tmp_path, monkeypatch, capsys):
    python = sys.executable
    said = refused(monkeypatch, capsys, "--dacode", checkout, "--python", python,
                   "--answers", tmp_path / "absent")  # fmt: skip
    assert "no such folder" in said
    (tmp_path / "empty" / "di-text-001").mkdir(parents=True)  # a task folder, no result.json
    said = refused(monkeypatch, capsys, "--dacode", checkout, "--python", python,
                   "--answers", tmp_path / "empty")  # fmt: skip
    assert "no task folder with dabench/result.json" in said


def test_a_bench_runs_out_folder_gives_its_answers(tmp_path):
    task = tmp_path / "out" / "answers" / "di-text-001" / "dabench"
    task.mkdir(parents=True)
    (task / "result.json").write_text(json.dumps({"finished": True, "result": "{}"}))
    assert parity.answer_folder(tmp_path / "out") == tmp_path / "out" / "answers"
    assert parity.answer_folder(tmp_path / "out" / "answers") == tmp_path / "out" / "answers"
