"""`dsstar bench run --suite dabstep-research` end to end: the slice of
benchmarks/dabstep_research/tasks.jsonl (one task per category) over DABStep's real context
files, each task answered with a report (its sub-question a DS-STAR run whose scripts run in
the sandbox), each report graded by the scripted judge against its checklist, and the
grades, cost and time printed per category.

The replies are written as models write them: the decomposer's JSON in a fence after a
sentence, a writer citing [1], a critic's empty review after its reasoning, the judge's grades
as JSON after a sentence (one judge answers in "Content: 4/5" lines instead).
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

import forked_cli
import pytest
from conftest import REPO
from fake_llm import text_of
from scenarios import describe_script, fence
from shared_data import DABSTEP

from dsstar.storage import Store

pytestmark = pytest.mark.slow

TASKS = REPO / "benchmarks" / "dabstep_research" / "tasks.jsonl"
_RULES = 'import json\nrules = json.load(open("data/fees.json"))\n'

# task id -> (its one sub-question, the final script answering it, the writer's report)
SLICE: dict[str, tuple[str, str, str]] = {
    "dr-prep-1": (
        "How many fee rules does fees.json hold, per card scheme?",
        _RULES + "from collections import Counter\nc = Counter(r['card_scheme'] for r in rules)\n"
        "print('FINAL ANSWER:', len(rules), '; '.join(f'{k} {v}' for k, v in c.most_common()))",
        "# Preparing the fee rules\n\nfees.json holds 1000 rules; TransactPlus has the most, 282,"
        " and NexPay the fewest, 191 [1].\n\n## Steps\n\n- Keep empty fields as wildcards [1].\n",
    ),
    "dr-analysis-1": (
        "What are the mean rate and the mean fixed amount of each card scheme's fee rules?",
        _RULES + "from collections import defaultdict\nby = defaultdict(list)\nfor r in rules:\n"
        "    by[r['card_scheme']].append(r['rate'])\nprint('FINAL ANSWER:', '; '.join(\n"
        "    f'{k}: rate {sum(v) / len(v):.2f}' for k, v in sorted(by.items())))",
        "# Fees by card scheme\n\nNexPay has the highest mean rate, 55.41, and GlobalCard the"
        " lowest, 51.82 [1].\n",
    ),
    "dr-insight-1": (
        "Which card scheme's rules give a 100 EUR payment the highest mean fee?",
        _RULES + "from collections import defaultdict\nby = defaultdict(list)\nfor r in rules:\n"
        "    by[r['card_scheme']].append(r['fixed_amount'] + r['rate'] * 100 / 10000)\n"
        "mean = {k: sum(v) / len(v) for k, v in by.items()}\nhi = max(mean, key=mean.get)\n"
        "print('FINAL ANSWER:', f'{hi} {mean[hi]:.2f} EUR')",
        "# Who pays the most\n\nMerchants paid through NexPay pay the most: 0.62 EUR for a 100"
        " EUR payment [1].\n",
    ),
    "dr-report-1": (
        "How many fee rules leave each field empty (null or an empty list)?",
        _RULES + "from collections import Counter\nempty = Counter(k for r in rules\n"
        "    for k, v in r.items() if v is None or v == [])\n"
        "print('FINAL ANSWER:', '; '.join(f'{k} {v}' for k, v in empty.most_common()))",
        "# Fee data quality\n\n## 1. Summary\n\nMost rules leave fields empty [1].\n\n"
        "## 2. Coverage of the fee rules\n\nmonthly_fraud_level is empty in 900 rules [1].\n\n"
        "## 3. Gaps and ambiguities\n\nAn empty field applies to every value [1].\n\n"
        "## 4. Recommendations\n\nDocument the wildcard rule beside the data [1].\n",
    ),
    "dr-open-1": (
        "Which card scheme's rules give a 100 EUR payment the lowest mean fee?",
        _RULES + "from collections import defaultdict\nby = defaultdict(list)\nfor r in rules:\n"
        "    by[r['card_scheme']].append(r['fixed_amount'] + r['rate'] * 100 / 10000)\n"
        "mean = {k: sum(v) / len(v) for k, v in by.items()}\nlo = min(mean, key=mean.get)\n"
        "print('FINAL ANSWER:', f'{lo} {mean[lo]:.2f} EUR')",
        "# Lowering fees\n\nRoute payments through GlobalCard: 0.59 EUR for a 100 EUR payment"
        " [1].\n",
    ),
}
QUESTIONS = {json.loads(line)["task_id"]: json.loads(line)["question"]
             for line in TASKS.read_text().splitlines()}  # fmt: skip
GRADES = {"dr-prep-1": (4, 4), "dr-analysis-1": (3, 4), "dr-insight-1": (3, 3),
          "dr-report-1": (4, 5), "dr-open-1": (2, 3)}  # fmt: skip


def _task(request: dict[str, Any]) -> str:
    """The task whose report (or sub-question) a request is about."""
    text = text_of(request)
    for task_id, (sub, _, _) in SLICE.items():
        if QUESTIONS[task_id] in text or sub in text:
            return task_id
    raise AssertionError(f"no task in {text[:300]!r}")


def script(llm) -> None:
    def decomposer(request):
        sub = SLICE[_task(request)][0]
        return ("One factoid question is enough to start from:\n\n```json\n"
                + json.dumps([{"question": sub}]) + "\n```")  # fmt: skip

    def judge(request):
        task_id = _task(request)
        content, form = GRADES[task_id]
        if task_id == "dr-open-1":  # a judge that answers in lines, not JSON
            return f"The advice is generic.\n\nContent: {content}/5\nFormat: {form}/5"
        return (f"The report covers part of the checklist.\n\n```json\n"
                f'{{"content": {content}, "format": {form}}}\n```')  # fmt: skip

    llm.default("analyzer", describe_script)
    llm.default("decomposer", decomposer)
    llm.default("planner", lambda r: "Load fees.json and compute what the question asks.")
    llm.default("coder", lambda r: fence(SLICE[_task(r)][1].replace("FINAL ANSWER:", "->")))
    llm.default("verifier", lambda r: "The script answers the question and ran.\n\n**Yes**")
    llm.default("router", lambda r: "Add Step")
    llm.default("finalyzer", lambda r: "Final script:\n\n" + fence(SLICE[_task(r)][1]))
    llm.default("writer", lambda r: SLICE[_task(r)][2])
    llm.default("critic", lambda r: "Every claim is cited and the form is kept.\n\n```json\n"
                                    '{"issues": [], "sub_questions": []}\n```')  # fmt: skip
    llm.default("judge", judge)


@pytest.mark.timeout(1500)
def test_bench_run_grades_each_report_and_prints_grades_cost_and_time_per_category(
    env, llm, tmp_path
):
    script(llm)
    out = tmp_path / "bench"
    argv = ["bench", "run", "--suite", "dabstep-research", "--tasks", str(TASKS),
            "--data", str(DABSTEP / "context"), "--out", str(out), "--parallel", "5"]  # fmt: skip
    done = forked_cli.run([sys.executable, "-m", "dsstar", *argv], capture_output=True,
                          text=True, timeout=1400, env=os.environ.copy())  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]

    scores = json.loads((out / "scores.json").read_text())
    rows = {row["task_id"]: row for row in scores["tasks"]}
    assert set(rows) == set(SLICE)
    for task_id, (content, form) in GRADES.items():  # each report graded against its task
        assert (rows[task_id]["content"], rows[task_id]["format"]) == (content, form)
        assert rows[task_id]["score"] == pytest.approx((content + form) / 10)
    judged = llm.calls("judge")
    assert len(judged) == 5
    for request in judged:  # the judge read the task's checklist and its report
        task_id = _task(request)
        assert SLICE[task_id][2].splitlines()[0].lstrip("# ") in text_of(request)
    report_task = next(r for r in judged if _task(r) == "dr-report-1")
    assert "Coverage of the fee rules" in text_of(report_task)  # the outline, from guidelines
    categories = scores["summary"]["by_category"]
    assert set(categories) == {"data_preparation", "analysis", "insight", "report",
                               "open_research"}  # fmt: skip
    assert categories["report"]["content"] == 4 and categories["report"]["format"] == 5
    assert all(group["cost_usd"] > 0 and group["seconds"] > 0 for group in categories.values())
    assert scores["summary"]["all"]["score"] == pytest.approx(100 * 35 / 50)

    # Each task was a report: its one sub-question a DS-STAR run of its own, whose scripts
    # ran on the real files; the files were analyzed once, for all of them.
    answers = [json.loads(line) for line in (out / "submission.jsonl").read_text().splitlines()]
    by_task = {a["task_id"]: re.sub(r"\\(.)", r"\1", a["agent_answer"]) for a in answers}
    assert "TransactPlus 282" in by_task["dr-prep-1"] and "[1]" in by_task["dr-prep-1"]
    assert "GlobalCard 0.59 EUR" in by_task["dr-open-1"]  # the sub-run's answer, referenced
    assert {r["run"].rsplit("-", 1)[-1] for r in llm.calls("analyzer")} == {"analysis"}
    store = Store(env["DSSTAR_STORAGE"])
    files = len(list((DABSTEP / "context").iterdir()))
    bench_id = json.loads((out / "bench.json").read_text())["bench_id"]
    for task_id in SLICE:  # the reports and their sub-runs found every description
        report = store.read_json(f"runs/{bench_id}-{task_id}/run.json")
        assert report["reused_analyses"] == files and len(report["sub_runs"]) == 1
        sub = store.read_json(f"runs/{report['sub_runs'][0]['run_id']}/run.json")
        assert sub["reused_analyses"] == files and sub["status"] == "verified"

    # Printed: per category, the grades, cost and seconds.
    printed = done.stderr
    for name in categories:
        line = re.search(rf"^\s*{name}: 1 task\(s\) · score [\d.]+ % · content [\d.]+/5 · format"
                         rf" [\d.]+/5 · cost \$[\d.]+ · \d+ s$", printed, re.M)  # fmt: skip
        assert line, printed[-3000:]
    assert "content 3.2/5 · format 3.8/5" in printed  # all: the mean grades
    report = (out / "report.md").read_text()
    assert "## Per category" in report and "| report | 1 | 90.0 | 4.0 | 5.0 |" in report
