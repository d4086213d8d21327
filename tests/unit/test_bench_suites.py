"""Reading the suites' task files, picking tasks, and the report files (no model involved)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shared_data import KRAMABENCH, needs_kramabench

from dsstar.bench import (
    dabstep_tasks,
    kramabench_tasks,
    research_tasks,
    score,
    select,
    write_outputs,
)
from dsstar.bench.report import agent_totals
from dsstar.errors import UsageError


def dabstep_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    context = tmp_path / "context"
    context.mkdir()
    (context / "payments.csv").write_text("psp_reference,eur_amount\n1,10.5\n")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        json.dumps({"task_id": "1", "question": "How many transactions are there?",
                    "guidelines": "Answer with a number.", "level": "easy"}) + "\n"
        + json.dumps({"task_id": "2", "question": "Which scheme?", "guidelines": "",
                      "level": "hard"}) + "\n"
    )  # fmt: skip
    truth = tmp_path / "truth.jsonl"
    truth.write_text(json.dumps({"task_id": "1", "answer": "1", "level": "easy"}) + "\n")
    return tasks, context, truth


def test_dabstep_tasks_carry_question_guidelines_level_and_known_truth(tmp_path):
    tasks, context, truth = dabstep_files(tmp_path)
    found = dabstep_tasks(tasks, context, truth)
    assert [t.task_id for t in found] == ["1", "2"]
    assert found[0].params() == {"question": "How many transactions are there?",
                                 "data": str(context.resolve()),
                                 "guidelines": "Answer with a number."}  # fmt: skip
    assert found[0].level == "easy" and found[0].truth["answer"] == "1"
    assert found[1].truth is None  # test tasks without answers are run, not scored
    with pytest.raises(UsageError, match="no such folder"):
        dabstep_tasks(tasks, tmp_path / "missing", None)


def test_the_research_slice_has_every_category_each_task_a_checklist(tmp_path):
    slice_ = Path(__file__).resolve().parents[2] / "benchmarks" / "dabstep_research" / "tasks.jsonl"
    found = research_tasks(slice_, tmp_path)
    assert {t.level for t in found} == {"data_preparation", "analysis", "insight", "report",
                                        "open_research"}  # fmt: skip
    for task in found:
        assert task.truth["checklist"] and task.truth["question"] == task.question
    outlined = next(t for t in found if t.level == "report")
    assert outlined.guidelines and outlined.truth["guidelines"] == outlined.guidelines
    # Without a judge a report scores 0, and says why; without a report too.
    scored = score("dabstep-research", [{"task_id": outlined.task_id, "agent_answer": "# R"}],
                   [outlined.truth])  # fmt: skip
    assert scored["tasks"][0]["score"] == 0 and "no judge" in scored["tasks"][0]["why"]
    assert scored["summary"]["by_category"]["report"]["content"] is None
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"task_id": "x", "category": "poetry", "question": "?",
                               "checklist": ["a"]}) + "\n")  # fmt: skip
    with pytest.raises(UsageError, match="category 'poetry' is not one of"):
        research_tasks(bad, tmp_path)
    bad.write_text(json.dumps({"task_id": "x", "category": "insight", "question": "?"}) + "\n")
    with pytest.raises(UsageError, match="checklist"):
        research_tasks(bad, tmp_path)


@needs_kramabench
def test_kramabench_tasks_read_the_workload_and_the_input_folder():
    found = kramabench_tasks(KRAMABENCH, "legal")
    assert len(found) == 30 and found[0].task_id == "legal-hard-1"
    assert found[0].data == str(KRAMABENCH / "data" / "legal" / "input")
    assert found[0].truth["answer_type"] == "numeric_exact"
    assert "number only" in found[0].guidelines
    assert [t.task_id for t in select(found, None, 5)] == [t.task_id for t in found[:5]]
    picked = select(found, ["legal-easy-4,legal-hard-2"], None)
    assert [t.task_id for t in picked] == ["legal-hard-2", "legal-easy-4"]  # in file order
    with pytest.raises(UsageError, match="unknown task ids: nope"):
        select(found, ["nope"], None)
    with pytest.raises(UsageError, match="no workload"):
        kramabench_tasks(KRAMABENCH, "astronomy")


def test_outputs_hold_the_submission_the_scores_and_the_report(tmp_path):
    outcomes = [
        {"task_id": "1", "run_id": "b-1", "status": "verified", "answer": "1", "rounds": 2,
         "llm_calls": 5, "input_tokens": 900, "output_tokens": 90, "cost_usd": 0.01,
         "seconds": 3.0, "plan": ["count rows"], "solution": "print(1)",
         "agents": {"planner": {"calls": 2, "input_tokens": 600, "output_tokens": 40,
                                "cost_usd": 0.006}}},
        {"task_id": "2", "run_id": "b-2", "status": "failed", "answer": None,
         "error": "LLMFatalError: bad key", "agents": {}},
    ]  # fmt: skip
    truths = [{"task_id": "1", "answer": "1", "level": "easy"},
              {"task_id": "2", "answer": "NexPay", "level": "hard"}]  # fmt: skip
    answers = [{"task_id": o["task_id"], "agent_answer": o["answer"]} for o in outcomes]
    scores = score("dabstep", answers, truths)
    agents = agent_totals(outcomes, [{"agent": "analyzer", "input_tokens": 300,
                                      "output_tokens": 30, "cost_usd": 0.001}])  # fmt: skip
    assert agents["planner"]["input_tokens_per_call"] == 300 and agents["analyzer"]["calls"] == 1
    paths = write_outputs(tmp_path, "dabstep benchmark", outcomes, scores, agents)
    lines = [json.loads(line) for line in Path(paths["submission"]).read_text().splitlines()]
    trace = "Plan:\n1. count rows\n\nSolution:\nprint(1)"
    assert lines[0] == {"task_id": "1", "agent_answer": "1", "reasoning_trace": trace}
    assert lines[1]["agent_answer"] == ""
    assert json.loads(Path(paths["scores"]).read_text())["summary"]["all"]["score"] == 50.0
    report = Path(paths["report"]).read_text()
    assert "- `2` (run `b-2`): LLMFatalError\\: bad key" in report  # markdown, escaped
    assert "| planner | 2 | 600 | 40 | 0.006 | 300 |" in report
    # a score of 0 says why; the calls count the shared analysis (passed as `extra` above)
    assert "| b\\-2 | LLMFatalError\\: bad key | no answer |" in report
    assert "LLM calls: 5 (shared file analysis: 0)" in report
