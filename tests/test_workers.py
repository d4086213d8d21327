"""Several workers, one job: a Prefect server on PostgreSQL and two process workers, each
with its own host name, HOME, PREFECT_HOME and scratch folders, sharing only the server,
S3 (moto's server) and the PostgreSQL ledger, as two machines would.

A nightly batch of six questions over two data roots in S3 runs each question as its own
flow run of ds-star/on-demand: both workers take a share, the shared LLM limit holds across
them, and when one worker is killed with its flow runs (kill -9 of everything it started, as
a machine dies) its runs are marked Crashed, retried by the automations `dsstar workers`
set up, and finished by the other worker from their stored work. At the end every question
has exactly one answer in the ledger and each run's artifacts are its own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

import boto3
import psutil
import pytest
from conftest import EXAMPLE, REPO, _free_port, create_database, start_prefect_server
from fake_llm import FakeLLM
from prefect import get_client
from prefect.client.schemas.actions import WorkPoolCreate
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
from prefect.deployments import run_deployment
from prefect.settings import PREFECT_API_URL, temporary_settings
from rendered import cells_shown
from scenarios import ANSWER, always_first_time

from dsstar.inputs.form import run_id_in
from dsstar.locations import normalize_location
from dsstar.records.ledger import Ledger, question_key
from flows.workers import RETRY_CRASHED, SILENT_RUN, ensure_worker_recovery

pytestmark = pytest.mark.slow

WORKERS = ("worker-a", "worker-b")
LLM_LIMIT = 2
HEARTBEAT_TIMEOUT_S = 45  # a run whose heartbeats stop this long is Crashed (beats: 15 s)
QUESTIONS = {
    "sales-a": ("Top region and manager?", "Who leads the best region?", "Best region, manager?"),
    "sales-b": ("Top region by revenue?", "Which region sold most?", "Manager of the top region?"),
}


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the process, its process group and every process it started (flow runs start
    in sessions of their own), as when its machine dies."""
    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for member in family:
        try:
            member.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait(timeout=30)


def run_cli(argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])


def upload_lake(bucket: str) -> None:
    """Two data roots: the example sales data, and a copy whose README differs."""
    s3 = boto3.client("s3")
    for root in QUESTIONS:
        for path in EXAMPLE.iterdir():
            body = path.read_bytes()
            if root == "sales-b" and path.name == "README.md":
                body += b"\nThis copy is the second team's.\n"
            s3.put_object(Bucket=bucket, Key=f"lake/{root}/{path.name}", Body=body)


@pytest.fixture(scope="module")
def cluster(postgres_url, moto_port, tmp_path_factory):
    """The server, the shared S3 bucket and ledger, the deployments, and two workers."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        message = "two workers with host names of their own need root and unshare"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    root = tmp_path_factory.mktemp("workers")
    suffix = uuid.uuid4().hex[:8]
    prefect_db = create_database(postgres_url, f"prefect_{suffix}", driver="asyncpg")
    ledger_url = create_database(postgres_url, f"ledger_{suffix}")
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    aws = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{moto_port}",
        "AWS_ACCESS_KEY_ID": "AKIADSSTARTEST",
        "AWS_SECRET_ACCESS_KEY": "dsstar-s3-secret-never-stored",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    saved = {k: os.environ.get(k) for k in aws}
    os.environ.update(aws)  # for boto3 in this process; restored at the end
    bucket = f"dsstar-workers-{suffix}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    upload_lake(bucket)
    llm = FakeLLM().start()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DSSTAR_", "PREFECT_"))}
    base |= aws | {
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "INFO",
    }
    procs: list[subprocess.Popen] = []
    try:
        server_env = base | {
            "PREFECT_HOME": str(root / "server-home"),
            "PREFECT_API_DATABASE_CONNECTION_URL": prefect_db,
            "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "true",
            "PREFECT_SERVER_SERVICES_ACTIONS_ENABLED": "true",
            "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "true",
        }
        procs.append(start_prefect_server(server_env, port, root / "server.log"))
        admin = base | {"PREFECT_HOME": str(root / "admin-home")}
        prefect = [sys.executable, "-m", "prefect", "--no-prompt"]
        with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
            client.create_work_pool(WorkPoolCreate(name="dsstar", type="process"))
        run_cli([*prefect, "deploy", "--prefect-file", "deployments/prefect.yaml",
                 "--name", "on-demand", "--name", "nightly"], admin)  # fmt: skip
        heartbeat_timeout = HEARTBEAT_TIMEOUT_S
        run_cli([sys.executable, "-m", "dsstar", "workers", "--heartbeat-timeout",
                 str(heartbeat_timeout), "--llm-concurrency", str(LLM_LIMIT)], admin)  # fmt: skip
        with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
            ensure_worker_recovery(heartbeat_timeout)  # again: nothing is duplicated
            for name in (SILENT_RUN, RETRY_CRASHED):
                assert len(client.read_automations_by_name(name)) == 1
            for name in ("ds-star/on-demand", "ds-star-nightly/nightly"):  # forms closed
                deployed = client.read_deployment_by_name(name)
                assert deployed.parameter_openapi_schema["additionalProperties"] is False
        workers = {}
        for name in WORKERS:
            home = root / name
            for folder in ("home", "prefect", "work", "embeddings", "tmp"):
                (home / folder).mkdir(parents=True)
            # Each worker its own temporary folder, as two users' workers on one machine: the
            # sandbox's uid slots are machine-wide all the same (dsstar/execution/sandbox/uids.py),
            # and what a killed worker leaves there (Prefect's workspace folders) is the test's.
            env = base | {
                "TMPDIR": str(home / "tmp"),
                "HOME": str(home / "home"),
                "PREFECT_HOME": str(home / "prefect"),
                "PREFECT_WORKER_QUERY_SECONDS": "1",
                "DSSTAR_WORK_DIR": str(home / "work"),
                "DSSTAR_EMBEDDING_CACHE_DIR": str(home / "embeddings"),
                "DSSTAR_STORAGE": f"s3://{bucket}/team",
                "DSSTAR_DATABASE_URL": ledger_url,
                "DSSTAR_DATA_ROOTS": f"s3://{bucket}/lake,{root / 'sets'}",
                "DSSTAR_MODEL": "openai/gpt-4o-mini",
                "DSSTAR_API_BASE": llm.base_url,
                "DSSTAR_API_KEY": "sk-test-not-secret",
                "DSSTAR_LLM_RETRY_DELAY": "0.05",
                "DSSTAR_LLM_CONCURRENCY": str(LLM_LIMIT),
            }
            start = f"hostname {name} && exec {sys.executable} -m prefect worker start" \
                    f" --pool dsstar --name {name} --limit 3"  # fmt: skip
            log = (root / f"{name}.log").open("w")
            proc = subprocess.Popen(
                ["unshare", "--uts", "sh", "-c", start], cwd=REPO, env=env,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            procs.append(proc)
            workers[name] = proc
        yield SimpleNamespace(
            api=api, root=root, llm=llm, bucket=bucket, workers=workers,
            ledger=Ledger(ledger_url, normalize_location(f"s3://{bucket}/team")),
            heartbeat_timeout=heartbeat_timeout,
        )  # fmt: skip
    finally:
        for proc in reversed(procs):
            kill_tree(proc)
        llm.stop()
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.update({key: value})


def read_json(bucket: str, key: str) -> dict | None:
    try:
        body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    except boto3.client("s3").exceptions.NoSuchKey:
        return None
    return json.loads(body)


def claims(bucket: str, run_id: str) -> list[dict]:
    """The claims of a run, in order: one per attempt, each with the host that ran it."""
    listed = boto3.client("s3").list_objects_v2(Bucket=bucket, Prefix=f"team/runs/{run_id}/claims/")
    keys = sorted(item["Key"] for item in listed.get("Contents", []))
    return [read_json(bucket, key) for key in keys]


def worker_of(cluster, pid: int) -> str | None:
    """The worker whose process tree holds `pid`."""
    for name, proc in cluster.workers.items():
        try:
            family = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(True))]
        except psutil.NoSuchProcess:
            continue
        if pid in family:
            return name
    return None


def wait_for(check, what: str, deadline_s: float = 300):
    deadline = time.monotonic() + deadline_s
    while not (found := check()):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.3)
    return found


@pytest.mark.timeout(1200)
def test_a_nightly_batch_spreads_over_two_workers_and_survives_one_dying(cluster, record_property):
    llm, bucket = cluster.llm, cluster.bucket
    always_first_time(llm)
    victim: dict[str, str] = {}
    release = threading.Event()
    held: list[str] = []
    held_at: dict[str, float] = {}
    hosts: dict[str, str] = {}

    def host_of(run_id: str) -> str | None:
        if run_id not in hosts:
            record = read_json(bucket, f"team/runs/{run_id}/run.json") or {}
            if record.get("host"):
                hosts[run_id] = record["host"]
        return hosts.get(run_id)

    def pace(request):
        """Every reply takes a moment (so that requests overlap); the victim's verifiers
        wait until the worker that sent them is dead."""
        asked_at = time.monotonic()
        time.sleep(0.3)
        if request["agent"] == "verifier" and victim and host_of(request["run"]) == victim["name"]:
            held_at.setdefault(request["run"], asked_at)
            held.append(request["run"])
            release.wait(timeout=600)
        return None  # the scripted reply

    llm.intercept(pace)
    sets = cluster.root / "sets"
    sets.mkdir()
    questions_file = sets / "questions.yaml"
    questions_file.write_text("".join(
        f"- question: {q}\n  data: s3://{bucket}/lake/{data}\n"
        for data, asked in QUESTIONS.items() for q in asked
    ))  # fmt: skip
    with temporary_settings({PREFECT_API_URL: cluster.api}), get_client(sync_client=True) as client:
        started = time.monotonic()
        batch = run_deployment(
            "ds-star-nightly/nightly",
            parameters={"questions_file": str(questions_file),
                        "question_deployment": "ds-star/on-demand"},
            timeout=0,
        )  # fmt: skip
        # The worker running the batch stays; the other one will die mid-run.
        batch_pid = wait_for(lambda: client.read_flow_run(batch.id).infrastructure_pid,
                             "the batch to start on a worker", 120)  # fmt: skip
        batch_worker = worker_of(cluster, int(batch_pid))
        [victim["name"]] = [name for name in WORKERS if name != batch_worker]
        wait_for(lambda: held, "a run of the doomed worker to reach its verifier")
        killed_at = datetime.now(UTC)
        killed = time.monotonic()
        kill_tree(cluster.workers[victim["name"]])
        release.set()
        final = wait_for(lambda: (s := client.read_flow_run(batch.id).state).is_final() and s,
                         "the batch to end", 600)  # fmt: skip
        batch_s = time.monotonic() - started
        assert final.is_completed(), final
        rows = nightly_table(client, batch.id)
        batch_id = f"{batch.created:%Y%m%d-%H%M%S}-{str(batch.id)[:6]}"  # as the flow names it
        question_runs = {  # this server's only ds-star flow runs
            run_id_in(run.parameters): run
            for run in client.read_flow_runs()
            if "question" in run.parameters
        }
        histories = {
            run_id: [s.name for s in client.read_flow_run_states(run.id)]
            for run_id, run in question_runs.items()
        }

    # Every question answered, once, by a flow run of its own.
    asked = [q for data in QUESTIONS.values() for q in data]
    assert [(r["question"], r["status"], r["answer"]) for r in rows[:-1]] == [
        (q, "verified", ANSWER) for q in asked
    ]
    assert len(question_runs) == len(asked)
    for question in asked:
        [row] = cluster.ledger.history(question_key(question))
        assert row.answer == ANSWER and row.status == "verified"

    # Both workers took a share; the dead one's runs crashed and finished on the other.
    attempts = {run_id: [c["host"] for c in claims(bucket, run_id)] for run_id in question_runs}
    first_hosts = [hosts[0] for hosts in attempts.values()]
    per_worker = {name: first_hosts.count(name) for name in WORKERS}
    assert all(per_worker.values()), per_worker
    crashed = {run_id for run_id, hosts in attempts.items() if victim["name"] in hosts[:1]}
    finished_late = {run_id for run_id in crashed if len(attempts[run_id]) > 1}
    assert set(held) <= crashed and set(held) <= finished_late
    for run_id in finished_late:
        assert attempts[run_id] == [victim["name"], batch_worker], attempts[run_id]
        assert "Crashed" in histories[run_id] and histories[run_id][-1] == "Verified"
        assert "AwaitingRetry" in histories[run_id]
    survivors = set(question_runs) - crashed
    assert all(attempts[run_id] == [batch_worker] for run_id in survivors), attempts

    # Resumed from stored work. The reply a run received last before the kill may not have
    # been stored yet (the process died in between); every earlier one was, and is not asked
    # again. A run held at its verifier had stored every reply up to its round's code before
    # the script ran; the router and planner asked beside the verifier (rounds ask the three
    # at once) may have been answered and cut off by the kill, as any last reply.
    for run_id in finished_late:
        mine = [r for r in llm.requests if r["run"] == run_id]
        answered = [json.dumps(r["messages"]) for r in mine
                    if r["status"] == 200 and r["at"] <= killed]  # fmt: skip
        again = {json.dumps(r["messages"]) for r in mine if r["at"] > killed}
        assert again, run_id
        if run_id in held:
            code = [r["at"] for r in mine if r["agent"] in ("coder", "debugger")]
            coded = max(at for at in code if at < held_at[run_id])
            stored = [json.dumps(r["messages"]) for r in mine
                      if r["status"] == 200 and r["at"] <= coded]  # fmt: skip
            assert len(stored) >= 2 and not set(stored) & again, run_id
        else:
            assert not set(answered[:-1]) & again, run_id

    # One analysis per data root, made by the batch ahead of its questions: no question run,
    # on either worker, described a file again.
    analyzed = llm.calls("analyzer")
    assert analyzed and {r["run"] for r in analyzed} == {f"{batch_id}-analysis"}

    # The shared LLM limit held across both workers (and was reached).
    assert llm.peak_in_flight == LLM_LIMIT

    # Each run's artifacts are its own, under its own folder.
    for run_id, run in question_runs.items():
        record = read_json(bucket, f"team/runs/{run_id}/run.json")
        assert record["run_id"] == run_id and record["flow_run_id"] == str(run.id)
        assert record["question"] == run.parameters["question"]
        assert record["data"] == run.parameters["data"]
        answer = read_json(bucket, f"team/runs/{run_id}/final/answer.json")
        assert answer and ANSWER in json.dumps(answer)
        plan = read_json(bucket, f"team/runs/{run_id}/rounds/00/plan.json")
        assert plan is not None
    recovered = [question_runs[r].end_time for r in finished_late]
    figures = {
        "runs_per_worker": per_worker,
        "crashed_runs": len(finished_late),
        "batch_s": round(batch_s, 1),
        "kill_to_last_recovered_s": round((max(recovered) - killed_at).total_seconds(), 1),
        "kill_to_batch_end_s": round(time.monotonic() - killed, 1),
        "heartbeat_timeout_s": cluster.heartbeat_timeout,
    }
    record_property("figures", f"two workers, one nightly batch: {figures}")


def nightly_table(client, flow_run_id) -> list[dict]:
    artifacts = client.read_artifacts(
        artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
    )
    [table] = [a for a in artifacts if a.type == "table" and (a.key or "").endswith("nightly")]
    return cells_shown(json.loads(table.data) if isinstance(table.data, str) else table.data)
