"""deployments/prefect.yaml on a process work pool, as an operator sets it up: the pool is
created, the on-demand deployment is deployed from the file, a `prefect worker` polls the
pool, and a run triggered with the UI form's parameters is picked up and answered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prefect.deployments import run_deployment
from processes import start, stop
from scenarios import ANSWER, two_rounds

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
POOL = "dsstar"


def prefect(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "prefect", "--no-prompt", *args],
        cwd=REPO, capture_output=True, text=True, timeout=180, env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done


def test_a_process_worker_picks_up_a_run_from_the_form(env, llm, sales, tmp_path, record_property):
    two_rounds(llm)
    prefect("work-pool", "create", POOL, "--type", "process", "--overwrite")
    prefect("deploy", "--prefect-file", "deployments/prefect.yaml", "--name", "on-demand")
    log = open(tmp_path / "worker.log", "w")
    worker = start(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", POOL, "--limit", "1"],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "PREFECT_WORKER_QUERY_SECONDS": "1"},
    )  # fmt: skip
    try:
        question = "Which region had the highest revenue in 2024 H1, and who manages it?"
        started = time.monotonic()
        flow_run = run_deployment(
            "ds-star/on-demand",
            parameters={"question": question, "data": str(sales), "max_rounds": 5},
            timeout=300,
            poll_interval=1,
        )
        elapsed = time.monotonic() - started
    finally:
        stopped = stop(worker)  # its process group ends too, whatever happened
        log.close()
    worker_log = (tmp_path / "worker.log").read_text()
    assert stopped, worker_log[-3000:]  # the worker stopped when told
    assert flow_run.state.is_completed(), (flow_run.state, worker_log[-3000:])
    assert flow_run.work_pool_name == POOL  # the pool's only worker ran it
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "storage").glob("runs/*/run.json")]
    assert record["status"] == "verified" and record["answer"] == ANSWER
    record_property("figures", {"process pool: run_deployment to answer (s)": round(elapsed, 1)})
