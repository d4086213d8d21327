"""deployments/prefect.yaml on a process work pool, as an operator sets it up: the pool is
created from deployments/process/base-job-template.json, the on-demand deployment is deployed
from the file, a `prefect worker` polls the pool, and a run triggered with the UI form's
parameters is picked up and answered. A flow run's job variables cannot change how the worker
runs it: each variable of Prefect's default process template is refused by the server (no run,
no marker command), or only names and labels the run; and on a pool made without dsstar's
template, a run whose env would set the worker's policy fails before any model call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prefect.deployments import run_deployment
from prefect.exceptions import PrefectHTTPStatusError
from processes import start, stop
from scenarios import ANSWER, two_rounds

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
POOL = "dsstar"
TEMPLATE = "deployments/process/base-job-template.json"


def prefect(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "prefect", "--no-prompt", *args],
        cwd=REPO, capture_output=True, text=True, timeout=180, env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done


def start_worker(pool: str, log_path: Path):
    log = open(log_path, "w")
    worker = start(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", pool, "--limit", "1"],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
        # Its temporary folder is the test's: a worker stopped mid-run leaves Prefect's
        # workspace folders there, not in the machine's /tmp.
        env={**os.environ, "PREFECT_WORKER_QUERY_SECONDS": "1", "TMPDIR": str(log_path.parent)},
    )  # fmt: skip
    return worker, log


def test_a_process_worker_picks_up_a_run_from_the_form(env, llm, sales, tmp_path, record_property):
    two_rounds(llm)
    prefect("work-pool", "create", POOL, "--type", "process", "--overwrite",
            "--base-job-template", TEMPLATE)  # fmt: skip
    prefect("deploy", "--prefect-file", "deployments/prefect.yaml", "--name", "on-demand")
    question = "Which region had the highest revenue in 2024 H1, and who manages it?"
    parameters = {"question": question, "data": str(sales), "max_rounds": 5}
    marker = tmp_path / "marker"
    # Every variable of Prefect's default process template but name and labels, on a flow run.
    hostile = {
        "command": f"sh -c 'id > {marker}'",
        "env": {"DSSTAR_FORM_ALLOW": "*", "DSSTAR_DATA_ROOTS": "/"},
        "env.DSSTAR_SANDBOX": "none",
        "working_dir": "/",
        "stream_output": False,
    }
    for name, value in hostile.items():
        with pytest.raises(PrefectHTTPStatusError) as refused:
            run_deployment("ds-star/on-demand", parameters=parameters,
                           job_variables={name: value}, timeout=0)  # fmt: skip
        assert refused.value.response.status_code == 422
        assert name in refused.value.response.text, refused.value.response.text
    worker, log = start_worker(POOL, tmp_path / "worker.log")
    try:
        started = time.monotonic()
        flow_run = run_deployment(
            "ds-star/on-demand",
            parameters=parameters,
            job_variables={"name": "revenue-h1", "labels": {"team": "finance"}},
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
    assert flow_run.job_variables == {"name": "revenue-h1", "labels": {"team": "finance"}}
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "storage").glob("runs/*/run.json")]
    assert record["status"] == "verified" and record["answer"] == ANSWER
    assert not marker.exists()  # the refused command never ran
    record_property("figures", {"process pool: run_deployment to answer (s)": round(elapsed, 1)})


def test_a_run_whose_env_sets_the_worker_policy_fails_before_any_model_call(
    env, llm, tmp_path, record_property
):
    """A pool made with Prefect's default process template (without dsstar's) lets a flow
    run's env reach the flow's process: the flow refuses to start, naming the variables."""
    pool = "dsstar-default-template"
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "secret.csv").write_text("name,salary\nada,1\n")
    prefect("work-pool", "create", pool, "--type", "process", "--overwrite")
    prefect("deploy", "--prefect-file", "deployments/prefect.yaml", "--name", "on-demand",
            "--pool", pool)  # fmt: skip
    worker, log = start_worker(pool, tmp_path / "worker.log")
    try:
        flow_run = run_deployment(
            "ds-star/on-demand",
            parameters={"question": "What is in the data?", "data": str(outside),
                        "sandbox": "none", "max_tokens": 900000},
            job_variables={"env": {"DSSTAR_FORM_ALLOW": "*", "DSSTAR_DATA_ROOTS": "/"}},
            timeout=300, poll_interval=1,
        )  # fmt: skip
    finally:
        stop(worker)
        log.close()
    worker_log = (tmp_path / "worker.log").read_text()
    assert flow_run.state.is_failed(), (flow_run.state, worker_log[-3000:])
    message = flow_run.state.message
    assert "env.DSSTAR_DATA_ROOTS" in message and "env.DSSTAR_FORM_ALLOW" in message, message
    assert llm.calls() == []  # before any model call
    assert not list((tmp_path / "storage").glob("runs/*/run.json"))  # no run was started
