"""`dsstar bench run` end to end on KramaBench's legal domain with a scripted model: the three
outputs, and a second call that runs no finished task again and resumes the failed one from
its cache.

The scripted model reads no data, so the suite's root is a copy of the legal domain without
its two State MSA folders (52 files each): the workload and the rest of the input (28 files).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest
from conftest import _free_port
from fake_llm import Error, text_of
from rendered import shown_text
from scenarios import describe_script, fence
from shared_data import KRAMABENCH, needs_kramabench

pytestmark = pytest.mark.slow

LEGAL = KRAMABENCH / "workload" / "legal.json"
WORKLOAD = json.loads(LEGAL.read_text()) if LEGAL.exists() else []
FIRST_FIVE = WORKLOAD[:5]
WRONG = {"legal-easy-5": "5000"}  # the scripted model gets this one wrong
FAILS_FIRST = "legal-easy-4"  # its finalyzer call is refused during the first call


def printed(task: dict) -> str:
    return WRONG.get(task["id"], str(task["answer"]))


def script_model(llm, refuse: str | None) -> None:
    def task_of(req: dict) -> dict:
        text = text_of(req)
        return next(t for t in FIRST_FIVE if t["query"][:80] in text)

    def finalyzer(req: dict):
        task = task_of(req)
        if task["id"] == refuse:
            return Error(401, "invalid api key")
        return fence(f"print({printed(task)!r})")

    llm.default("analyzer", describe_script)
    llm.default("planner", lambda req: "Load the files the question needs and compute it.")
    llm.default("coder", lambda req: fence("print('computed', 42)"))
    llm.default("verifier", lambda req: "Yes")
    llm.default("finalyzer", finalyzer)
    llm.default("judge", lambda req: "Yes")


@pytest.fixture
def legal_root(tmp_path) -> Path:
    """A KramaBench root holding the legal workload and its input less the State MSA folders."""
    root = tmp_path / "kramabench"
    (root / "workload").mkdir(parents=True)
    shutil.copy(LEGAL, root / "workload" / "legal.json")
    shutil.copytree(KRAMABENCH / "data" / "legal" / "input", root / "data" / "legal" / "input",
                    ignore=shutil.ignore_patterns("State MSA *"))  # fmt: skip
    return root


def bench(root: Path, out: Path) -> subprocess.CompletedProcess:
    argv = ["bench", "run", "--suite", "kramabench", "--root", str(root), "--domain", "legal",
            "--limit", "5", "--out", str(out), "--parallel", "2", "--json"]  # fmt: skip
    return forked_cli.run([sys.executable, "-m", "dsstar", *argv], capture_output=True,
                          text=True, timeout=1200, env=os.environ.copy())  # fmt: skip


@pytest.mark.timeout(1800)  # three bench calls; the first analyzes the domain's files
@needs_kramabench
def test_bench_run_writes_its_outputs_and_resumes_without_repeating_work(
    env, llm, legal_root, tmp_path
):
    out = tmp_path / "bench"
    script_model(llm, refuse=FAILS_FIRST)
    first = bench(legal_root, out)
    assert first.returncode == 1 and first.stdout.startswith("{"), first.stderr[-3000:]
    result = json.loads(first.stdout)  # one task failed, told in the JSON result
    assert result["tasks"] == 5 and result["failed"] == 1, (out / "report.md").read_text()[-3000:]
    for name in ("submission.jsonl", "scores.json", "report.md"):
        assert (out / name).is_file()
    report = (out / "report.md").read_text()
    failures = shown_text(report.split("## Failures")[1])
    assert FAILS_FIRST in failures and "DSSTAR_API_KEY" in failures
    # The domain's files were analyzed once, by the shared analysis, not once per task.
    analyzed = [r["run"] for r in llm.calls("analyzer")]
    assert len(analyzed) == len(set(text_of(r) for r in llm.calls("analyzer")))
    assert {run.rsplit("-", 1)[-1] for run in analyzed} == {"analysis"}
    first_requests = len(llm.requests)

    script_model(llm.reset(), refuse=None)
    second = bench(legal_root, out)
    assert second.returncode == 0, second.stderr[-3000:]
    again = llm.requests
    # Only the failed task ran again, and only its refused call was asked again.
    assert {r["agent"] for r in again} == {"finalyzer"}, [r["agent"] for r in again]
    assert len(again) == 1 and again[0]["run"].endswith(FAILS_FIRST)
    assert first_requests > 5

    submission = [json.loads(line) for line in (out / "submission.jsonl").read_text().splitlines()]
    assert [s["task_id"] for s in submission] == [t["id"] for t in FIRST_FIVE]
    assert all(set(s) == {"task_id", "agent_answer", "reasoning_trace"} for s in submission)
    assert {s["task_id"]: s["agent_answer"] for s in submission} == {
        t["id"]: printed(t) for t in FIRST_FIVE
    }
    assert "Plan:" in submission[0]["reasoning_trace"]
    scores = json.loads((out / "scores.json").read_text())
    assert scores["summary"]["all"]["score"] == 80.0  # four of five right
    assert {r["task_id"]: r["score"] for r in scores["tasks"]}["legal-easy-5"] == 0
    report = (out / "report.md").read_text()
    for heading in ("## Accuracy", "## Per agent", "## Per task", "## Failures"):
        assert heading in report
    assert "input_tokens_per_call" in report and "finalyzer" in report

    # The table artifact in the Prefect UI: one row per task, with tokens, cost and failures.
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from tasks.cache_keys import artifact_key

    bench_id = json.loads((out / "bench.json").read_text())["bench_id"]
    key = ArtifactFilterKey(any_=[artifact_key(f"{bench_id}-bench")])
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(key=key))
    assert artifacts and artifacts[0].type == "table"
    table = (
        artifacts[0].data if isinstance(artifacts[0].data, list) else json.loads(artifacts[0].data)
    )
    assert {"task_id", "score", "llm_calls", "input_tokens", "output_tokens", "cost_usd",
            "rounds", "seconds", "failure"} <= set(table[0])  # fmt: skip

    third = bench(legal_root, out)  # everything finished: nothing is asked at all
    assert third.returncode == 0 and len(llm.requests) == len(again)


@needs_kramabench
def test_a_bench_stopped_by_an_unreachable_prefect_api_says_so_as_json(
    env, llm, legal_root, tmp_path
):
    """Under --json a benchmark that cannot go on (here: no Prefect API answers) prints its
    error as JSON on stdout and in one line on stderr, with how to resume; no traceback."""
    script_model(llm, refuse=None)
    out = tmp_path / "bench"
    argv = ["bench", "run", "--suite", "kramabench", "--root", str(legal_root), "--domain",
            "legal", "--limit", "1", "--out", str(out), "--json"]  # fmt: skip
    gone = {
        "PREFECT_API_URL": f"http://127.0.0.1:{_free_port()}/api",  # nothing listens there
        "PREFECT_CLIENT_MAX_RETRIES": "0",
    }
    done = forked_cli.run([sys.executable, "-m", "dsstar", *argv], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **gone})  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["out"] == str(out) and "Failed to reach API" in result["error"], result
    assert "the same command again resumes it" in result["error"]
    assert "Traceback" not in done.stderr and done.stderr.startswith("error: the benchmark stopped")
