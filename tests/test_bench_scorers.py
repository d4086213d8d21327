"""The benchmark scorers, rule by rule, with cases taken from the official rules; and
`dsstar bench score` as users run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest

from dsstar.bench import score, score_files
from dsstar.bench.dabstep import question_scorer
from dsstar.bench.kramabench import score_task, text_overlap

WORKLOAD = Path(__file__).resolve().parent / "data" / "kramabench_legal_sample.json"


# -- DABStep ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        # case and whitespace
        ("  NexPay ", "nexpay", True),
        ("Not Applicable", "not applicable", True),
        # numbers with thousands separators
        ("1,234", "1234", True),
        ("$1,234.56", "1234.56", True),
        ("12,345.67", "12345.7", True),
        # the first number in a string
        ("The fee is 42.5 EUR", "42.5", True),
        ("42 apples and 7 pears", "42", True),
        ("7 apples and 42 pears", "42", False),
        # relative tolerance for small numbers (both below 1)
        ("0.12345", "0.1234", True),
        ("0.1", "0.2", False),
        # ... and for large ones
        ("123456.7", "123456.8", True),
        ("100", "101", False),
        # rounding to the fewer decimals
        ("3.14159", "3.14", True),
        ("3.15", "3.14", False),
        ("75.0", "75", True),
        # order-free lists split on , or ;
        ("A, B, C", "c; b; a", True),
        ("[1, 2]", "2, 1", True),
        ("1.0, 2", "2, 1", True),
        ("A, B", "A, B, C", False),
        ("A, B", "A, D", False),
        # single-word subset matching
        ("NexPay", "the answer is nexpay", True),
        ("the card scheme is GlobalCard", "GlobalCard", True),
        ("SwiftCharge", "TransactPlus", False),
        # fuzzy string similarity above 0.95
        ("GlobalCard Network", "GlobalCard Networks", True),
        ("merchant category code", "merchant category cod", True),
        ("Crossfit Hanna", "Golfclub Baron", False),
        # missing answers
        (None, "42", False),
        # the official scorer reads numbers without their sign
        ("-5", "5", True),
    ],
)
def test_dabstep_rules(answer, truth, expected):
    assert question_scorer(answer, truth) is expected


DABSTEP_TRUTH = [
    {"task_id": "1", "answer": "138236", "level": "easy"},
    {"task_id": "2", "answer": "91.852", "level": "easy"},
    {"task_id": "3", "answer": "NexPay", "level": "easy"},
    {"task_id": "5", "answer": "NL", "level": "easy"},
    {"task_id": "1273", "answer": "0.120132", "level": "hard"},
    {"task_id": "1305", "answer": "GlobalCard, NexPay", "level": "hard"},
    {"task_id": "1712", "answer": "Not Applicable", "level": "hard"},
    {"task_id": "2057", "answer": "A, B, C, D, E, F, G", "level": "hard"},
    {"task_id": "2121", "answer": "1,234,567.89", "level": "hard"},
]


def test_dabstep_truth_scored_against_itself_is_100_percent():
    answers = [{"task_id": t["task_id"], "agent_answer": t["answer"]} for t in DABSTEP_TRUTH]
    summary = score("dabstep", answers, DABSTEP_TRUTH)["summary"]
    assert summary["easy"]["score"] == summary["hard"]["score"] == summary["all"]["score"] == 100


def test_dabstep_summary_has_easy_hard_all_and_missing_answers_score_zero():
    answers = [
        {"task_id": "1", "agent_answer": "138,236"},
        {"task_id": "3", "agent_answer": "SwiftCharge"},
        {"task_id": "1273", "agent_answer": "0.12013"},
    ]
    result = score("dabstep", answers, DABSTEP_TRUTH)
    by_id = {row["task_id"]: row for row in result["tasks"]}
    assert by_id["1"]["score"] == 1 and by_id["3"]["score"] == 0 and by_id["1273"]["score"] == 1
    assert by_id["5"]["missing"] and by_id["5"]["score"] == 0
    assert result["summary"]["easy"] == {"tasks": 4, "score": 25.0, "answered": 2}
    assert result["summary"]["hard"]["score"] == 20.0
    assert result["summary"]["all"]["score"] == round(200 / 9, 2)


# -- KramaBench ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "predicted", "truth", "expected"),
    [
        # numeric_exact / string_exact: success
        ("numeric_exact", "2111635", 2111635, 1.0),
        ("numeric_exact", 2111636, 2111635, 0.0),  # two integers must be equal
        ("numeric_exact", "13427.57", 13427.5676, 1.0),  # floats: within 1e-4 of the larger
        ("numeric_exact", "13500", 13427.5676, 0.0),
        ("numeric_exact", "0.0555", 0.0555, 1.0),
        ("numeric_exact", "0.0", 0, 1.0),
        ("numeric_exact", "about 40", 40, 0.0),
        ("string_exact", " bank account ", "Bank Account", 1.0),
        ("string_exact", "Bank", "Bank Account", 0.0),
        ("string_exact", "true", "True", 1.0),
        ("string_exact", None, "No", 0.0),
        # numeric_approximate: 1 / (1 + relative error)
        ("numeric_approximate", "13.1628", 13.1628, 1.0),
        ("numeric_approximate", "26.3256", 13.1628, 0.5),
        ("numeric_approximate", "n/a", 13.1628, 0.0),
        # list_exact: F1
        (
            "list_exact",
            "[2010, 2011, 2012, 2013, 2014, 2019]",
            [2010, 2011, 2012, 2013, 2014, 2019],
            1.0,
        ),
        (
            "list_exact",
            '["Arizona", "California"]',
            ["Arizona", "California", "Ohio", "Utah"],
            2 / 3,
        ),
        ("list_exact", "Ohio, arizona", ["Arizona", "Ohio"], 1.0),  # comma-separated text
        ("list_exact", "['Ohio', 'Texas']", ["Arizona", "Ohio"], 0.5),  # a Python literal
        ("list_exact", "[]", [], 1.0),
        # list_approximate: numbers within 1 %
        ("list_approximate", "[100.5, 200]", [100, 200], 1.0),
        ("list_approximate", "[102, 200]", [100, 200], 0.5),
    ],
)
def test_kramabench_metrics(kind, predicted, truth, expected):
    assert score_task(kind, predicted, [truth])["score"] == pytest.approx(expected)


def test_accepted_answers_count_the_best_one():
    assert score_task("string_exact", "Yes", ["No", "Yes"])["score"] == 1.0


def test_approximate_strings_use_the_judge_when_there_is_one():
    judged = score_task("string_approximate", "Space Force", ["U.S. Space Force"],
                        judge=lambda answer, truth: "space force" in answer.lower())  # fmt: skip
    assert judged == {"score": 1.0, "metric": "llm_paraphrase", "judged_by": "llm"}
    no_verdict = score_task("string_approximate", "Space Force", ["U.S. Space Force"],
                            judge=lambda answer, truth: None)  # fmt: skip
    assert no_verdict["judged_by"] == "text-overlap"


def test_without_a_judge_approximate_strings_are_scored_by_text_overlap_and_flagged():
    result = score_task("string_approximate", "Space Force", ["U.S. Space Force"])
    assert result["judged_by"] == "text-overlap"
    assert result["score"] == pytest.approx(text_overlap("Space Force", "U.S. Space Force"))
    assert text_overlap("District of Columbia", "district of columbia.") == 1.0
    assert text_overlap("Texas", "District of Columbia") == 0.0
    approx_list = score_task(
        "list_approximate", '["space force", "army"]', [["U.S. Space Force", "Army"]]
    )
    assert approx_list["score"] == 1.0 and approx_list["judged_by"] == "text-overlap"


def test_kramabench_workload_scored_against_itself_is_100_percent():
    workload = json.loads(WORKLOAD.read_text())
    # The answers as a run writes them: text printed by the final script.
    answers = [{"task_id": t["id"], "agent_answer": t["answer"] if isinstance(t["answer"], str)
                else json.dumps(t["answer"])} for t in workload]  # fmt: skip
    summary = score("kramabench", answers, [dict(t, task_id=t["id"]) for t in workload])["summary"]
    assert summary["all"]["score"] == 100
    assert set(summary["by_answer_type"]) == {"numeric_exact", "numeric_approximate",
        "string_exact", "string_approximate", "list_exact", "list_approximate"}  # fmt: skip
    assert summary["text_overlap_fallback"]["all_without_them"]["score"] == 100


# -- the command --------------------------------------------------------------------------


def dsstar(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return forked_cli.run([sys.executable, "-m", "dsstar", *args], capture_output=True,
                          text=True, timeout=120, env=env or os.environ.copy())  # fmt: skip


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_bench_score_dabstep_json(tmp_path):
    truth = write_jsonl(tmp_path / "truth.jsonl", DABSTEP_TRUTH)
    answers = write_jsonl(tmp_path / "answers.jsonl", [
        {"task_id": "1", "agent_answer": "138,236", "reasoning_trace": "counted rows"},
        {"task_id": "1305", "agent_answer": "NexPay; GlobalCard", "reasoning_trace": ""},
    ])  # fmt: skip
    done = dsstar("bench", "score", "--suite", "dabstep", "--answers", str(answers),
                  "--truth", str(truth), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {"task_id", "score"} <= set(result["tasks"][0])
    assert set(result["summary"]) >= {"easy", "hard", "all"}
    assert result["summary"]["easy"]["score"] == 25.0 and result["summary"]["hard"]["score"] == 20.0


def test_bench_score_kramabench_workload_against_itself(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSSTAR_")}
    done = dsstar("bench", "score", "--suite", "kramabench", "--answers", str(WORKLOAD),
                  "--truth", str(WORKLOAD), "--json", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["all"]["score"] == 100


@pytest.mark.slow  # a whole run (CLI or flow): not in the quick tier
def test_bench_score_asks_the_configured_model_to_judge(env, llm, tmp_path):
    llm.default("judge", lambda req: "Yes" if "Space Force" in str(req["messages"]) else "No")
    truth = write_jsonl(tmp_path / "truth.jsonl", [
        {"task_id": "legal-easy-25", "answer": "U.S. Space Force",
         "answer_type": "string_approximate"}])  # fmt: skip
    answers = write_jsonl(
        tmp_path / "a.jsonl", [{"task_id": "legal-easy-25", "agent_answer": "the Space Force"}]
    )
    done = dsstar("bench", "score", "--suite", "kramabench", "--answers", str(answers),
                  "--truth", str(truth), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)["tasks"][0]
    assert row["score"] == 1.0 and row["judged_by"] == "llm"
    assert [r["agent"] for r in llm.requests] == ["judge"]


def test_bench_score_rejects_an_unknown_suite_and_a_missing_file(tmp_path):
    done = dsstar("bench", "score", "--suite", "gaia", "--answers", str(WORKLOAD),
                  "--truth", str(WORKLOAD))  # fmt: skip
    assert done.returncode == 2 and "unknown suite" in done.stderr
    done = dsstar("bench", "score", "--suite", "dabstep", "--answers", str(tmp_path / "no"),
                  "--truth", str(WORKLOAD))  # fmt: skip
    assert done.returncode == 2 and "cannot read" in done.stderr


def test_score_files_reads_a_submission(tmp_path):
    truth = write_jsonl(tmp_path / "t.jsonl", DABSTEP_TRUTH[:1])
    answers = write_jsonl(tmp_path / "a.jsonl", [{"task_id": 1, "agent_answer": "138236"}])
    assert score_files("dabstep", answers, truth)["summary"]["all"]["score"] == 100


def test_the_judge_reads_yes_or_no():
    from dsstar.bench.judge import parse

    assert parse("Yes.") is True and parse("no, they differ") is False
    assert parse("I cannot tell") is None
