"""Operating dsstar like a Prefect job: object storage (moto's real S3 API), resume after an
LLM outage, a SIGKILL or a storage outage, and run inspection."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import boto3
import forked_cli
import pytest
from fake_llm import Error
from scenarios import (
    ANSWER,
    FINAL_ONLY_ANSWER,
    JOIN,
    LOAD,
    answered,
    asked,
    coder_outage,
    describe_script,
    fence,
    two_rounds,
)
from tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
BAD = "\ud800"  # a lone surrogate, as a JSON escape in a reply decodes


def dsstar(*args: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )


def run_cli(sales, *extra: str) -> subprocess.CompletedProcess:
    return dsstar("run", "--data", str(sales), "--question", QUESTION, "--json", *extra)


def start(*args: str) -> subprocess.Popen | forked_cli.Forked:
    return forked_cli.popen(
        [sys.executable, "-m", "dsstar", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def objects(storage_url: str) -> dict[str, bytes]:
    bucket, prefix = storage_url.removeprefix("s3://").split("/", 1)
    client = boto3.client("s3")
    keys = [
        o["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for o in page.get("Contents", [])
    ]
    return {
        k.removeprefix(prefix + "/"): client.get_object(Bucket=bucket, Key=k)["Body"].read()
        for k in keys
    }


def test_run_on_s3_stores_the_layout_and_runs_show_reads_it(env, llm, sales, s3):
    two_rounds(llm)
    done = run_cli(sales, "--run-id", "s3-run")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["artifacts_uri"] == f"{s3}/runs/s3-run"
    assert result["solution_uri"] == f"{s3}/runs/s3-run/final/solution.py"

    stored = objects(s3)
    for key in (
        "run.json",
        "final/solution.py",
        "final/answer.json",
        "final/notebook.ipynb",
        "rounds/00/plan.json",
        "rounds/00/code.py",
        "rounds/00/output.txt",
        "rounds/00/verdict.json",
        "rounds/01/route.json",
        "rounds/01/verdict.json",
        "analysis/orders_2024.csv/output.txt",
    ):
        assert f"runs/s3-run/{key}" in stored
    assert any(k.startswith("cache/") for k in stored)  # Prefect's results, same bucket
    for body in stored.values():
        assert b"dsstar-s3-secret-never-stored" not in body
        assert b"sk-test-not-secret" not in body

    shown = json.loads(dsstar("runs", "show", "s3-run", "--json").stdout)
    assert shown["answer"] == ANSWER
    assert [row["verdict"] for row in shown["round_table"]] == [False, True]
    assert shown["round_table"][1]["route"] == "Add Step"
    one = json.loads(dsstar("runs", "show", "s3-run", "--round", "1", "--json").stdout)
    assert len(one["plan"]) == 2 and "regions.json" in one["code"]
    assert one["route"]["decision"] == "Add Step"
    human = dsstar("runs", "show", "s3-run")
    assert "Add Step" in human.stdout and "verified" in human.stdout
    listed = json.loads(dsstar("runs", "list", "--json").stdout)["runs"]
    assert [(r["run_id"], r["status"], r["rounds"]) for r in listed] == [("s3-run", "verified", 2)]


def test_unreachable_storage_fails_before_the_first_llm_call(env, llm, sales, s3, monkeypatch):
    two_rounds(llm)
    missing = run_cli(sales, "--storage", "s3://no-such-bucket-dsstar/x")
    assert missing.returncode == 2  # preflight: a usage error, before anything is stored
    assert "bucket does not exist" in json.loads(missing.stdout)["error"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    down = run_cli(sales)
    assert down.returncode == 2
    error = json.loads(down.stdout)["error"]
    assert "cannot write to storage" in error and "AWS_ENDPOINT_URL" in error
    assert "dsstar-s3-secret-never-stored" not in down.stdout + down.stderr
    assert llm.requests == []


def surrogate_two_rounds(llm) -> None:
    """two_rounds, with a lone surrogate (as a JSON escape in a reply decodes) in every reply."""
    llm.default("analyzer", lambda req: describe_script(req) + BAD)
    llm.script("planner", f"Load the orders {BAD}.", f"Join the regions {BAD}.")
    llm.script("coder", fence(LOAD) + BAD, fence(JOIN) + BAD)
    llm.script("verifier", f"No{BAD}", f"Yes{BAD}")
    llm.script("router", f"Add Step{BAD}")
    llm.script("finalyzer", fence(FINAL_ONLY_ANSWER) + BAD)


def test_llm_outage_then_resume_repeats_no_answered_request(env, llm, sales, s3):
    """Replies carry lone surrogates: the failed run's record and the resume read them."""
    surrogate_two_rounds(llm)
    coder_outage(llm)  # the second coder call gets 503 until the outage ends
    first = run_cli(sales, "--run-id", "outage")
    assert first.returncode == 1
    failed = json.loads(first.stdout)
    assert failed["status"] == "failed" and "transient" in failed["error"]
    before = list(llm.requests)

    llm.intercept(None)  # the model server recovers, and is now reached by another name
    other_name = env["DSSTAR_API_BASE"].replace("127.0.0.1", "localhost")
    second = dsstar("resume", "outage", "--json", "--api-base", other_name)
    assert second.returncode == 0, second.stderr
    result = json.loads(second.stdout)
    assert result["status"] == "verified" and result["answer"] == ANSWER
    assert result["rounds"] == 2
    resumed = llm.requests[len(before) :]
    assert resumed, "the resumed run asked for what it was missing"
    assert answered(before) & asked(resumed) == set()


def test_sigkill_in_round_one_then_resume(env, llm, sales, s3):
    two_rounds(llm)
    proc = start(
        "run", "--data", str(sales), "--question", QUESTION, "--json", "--run-id", "killed"
    )

    coder_calls = []

    def kill_in_round_one(request):
        coder_calls.extend([request] if request["agent"] == "coder" else [])
        if len(coder_calls) == 2:
            os.kill(proc.pid, signal.SIGKILL)  # mid-round: the coder's answer never arrives
            return Error(503, "gone")
        return None

    llm.intercept(kill_in_round_one)
    proc.wait(timeout=300)
    assert proc.returncode == -signal.SIGKILL
    before = list(llm.requests)
    llm.intercept(None)

    resumed = dsstar("resume", "killed", "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "verified" and result["answer"] == ANSWER
    after = llm.requests[len(before) :]
    assert answered(before) & asked(after) == set()
    assert [r["agent"] for r in after][:1] == ["coder"]  # picks up exactly where it stopped


def test_storage_outage_fails_cleanly_and_resumes(env, llm, sales, s3, moto_port, monkeypatch):
    proxy = TcpProxy(moto_port)
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    # A failing write is still retried (3 times by Prefect, each try 5 times by s3fs), with
    # less waiting: no second attempt by botocore, 0.05 s (not 1, 4, 10 s) between Prefect's.
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("DSSTAR_STORAGE_RETRY_DELAY", "0.05")
    two_rounds(llm)

    def outage(request):
        if request["agent"] == "router":
            proxy.down()  # storage goes away after round 00 was stored
        return None

    llm.intercept(outage)
    try:
        first = run_cli(sales, "--run-id", "storage-outage")
        assert first.returncode == 1
        assert json.loads(first.stdout)["status"] == "failed"
        proxy.up()
        stored = objects(s3)
        for key in (
            "rounds/00/plan.json",
            "rounds/00/code.py",
            "rounds/00/verdict.json",
            "analysis/orders_2024.csv/output.txt",
        ):
            assert f"runs/storage-outage/{key}" in stored  # what was written is kept
        llm.intercept(None)
        # The router's answer arrived while storage was down, so it could not be kept: the
        # resumed run asks for it again (and nothing before it).
        llm.script("router", "Add Step")
        second = dsstar("resume", "storage-outage", "--json")
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["answer"] == ANSWER
    finally:
        proxy.close()
