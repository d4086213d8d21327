"""`dsstar bench run --suite dacode` end to end with a scripted model, on the slice's two
data-insight tasks: each run's answer is laid out as DA-Code's answer folder and scored by the
same code as `bench score`, the report grouped by category and hardness."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fake_llm import text_of
from scenarios import describe_script, fence
from shared_data import DACODE, needs_dacode

pytestmark = [pytest.mark.slow, needs_dacode]

ANSWERS = {  # the first right, the second names the wrong country
    "di-text-001": {"highest country": ["Monaco"], "lowest country": ["Mongolia"]},
    "di-text-002": {"highest country": ["Chad"], "Agriculytural Land %": [82.6]},
}


def script_model(llm) -> None:
    def finalyzer(req: dict):
        text = text_of(req)
        task = "di-text-001" if "population densities" in text else "di-text-002"
        return fence(f"import json\nprint(json.dumps({ANSWERS[task]!r}))")

    llm.default("analyzer", describe_script)
    llm.default("planner", lambda req: "Load the table and find the country.")
    llm.default("coder", lambda req: fence("print('computed', 42)"))
    llm.default("verifier", lambda req: "Yes")
    llm.default("finalyzer", finalyzer)


@pytest.mark.timeout(900)
def test_bench_run_dacode_scores_each_runs_answer_folder(env, llm, tmp_path):
    script_model(llm)
    out = tmp_path / "bench"
    argv = ["bench", "run", "--suite", "dacode", "--root", str(DACODE), "--task-ids",
            "di-text-001,di-text-002", "--out", str(out), "--json"]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "dsstar", *argv], capture_output=True,
                          text=True, timeout=850, env=os.environ.copy())  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["tasks"] == 2 and result["summary"]["by_category"]["di-text"]["score"] == 50.0
    scores = {
        r["task_id"]: r["score"] for r in json.loads((out / "scores.json").read_text())["tasks"]
    }
    assert scores == {"di-text-001": 1.0, "di-text-002": 0.0}
    kept = json.loads((out / "answers" / "di-text-001" / "dabench" / "result.json").read_text())
    assert kept["finished"] is True and "Monaco" in kept["result"]
    again = subprocess.run([sys.executable, "-m", "dsstar", "bench", "score", "--suite", "dacode",
                            "--answers", str(out / "answers"), "--truth", str(DACODE), "--json"],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    rescored = {r["task_id"]: r["score"] for r in json.loads(again.stdout)["tasks"]}
    assert {k: rescored[k] for k in scores} == scores  # bench score agrees with the run
    report = (out / "report.md").read_text()
    assert "## Per category" in report and "| di-text | 2 | 50.0 |" in report
