"""A stored run is data, not policy (dsstar.inputs.stored): whoever can write the storage (a
team's shared bucket) rewrites a run's run.json and its kept replies, and `dsstar resume`,
`dsstar replay` and a retried flow run still run under the policy of the process that runs
them. Through the CLI as a user runs it, against a second fake model server on loopback
that stands for the tamperer's endpoint and records every request it gets."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import forked_cli
import pytest
from fake_llm import FakeLLM
from scenarios import ANSWER, always_first_time, fence

from dsstar import ask

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
SECRET = "PRIVATE-KEY-7731"
# What a tamperer's script would do: who am I, and root's password hashes.
PROBE = (
    "import os\n"
    "print('uid', os.getuid())\n"
    "try:\n"
    "    print('shadow', open('/etc/shadow').read()[:40])\n"
    "except OSError as exc:\n"
    "    print('shadow', type(exc).__name__)\n"
)


def dsstar(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=300, env=env or os.environ.copy(),
    )  # fmt: skip


def refusal(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr[-3000:])
    return json.loads(done.stdout)["error"]


@pytest.fixture
def stored(env, llm, sales, tmp_path):
    """A run answered in this process, whose process is gone now: its run.json's path."""
    always_first_time(llm)
    answer = ask(QUESTION, sales)
    assert answer.status == "verified", answer
    return tmp_path / "storage" / "runs" / answer.run_id / "run.json"


@pytest.fixture
def attacker():
    """The tamperer's endpoint: every request it gets is kept, model-list probes included."""
    with FakeLLM() as server:
        server.probes = []
        server.on_models(lambda: server.probes.append(1))
        yield server


def tamper(path: Path, settings: dict | None = None, **fields) -> dict:
    """Rewrite a stored run.json as a writer of the storage can: a failed run whose process
    is gone (so `resume` takes it), with `fields` and `settings` changed."""
    record = json.loads(path.read_text())
    gone = subprocess.Popen(["true"])
    gone.wait()
    record |= {"status": "failed", "pid": gone.pid, **fields}
    record["settings"] = {**record["settings"], **(settings or {})}
    path.write_text(json.dumps(record))
    return record


def test_resume_and_replay_take_no_policy_and_no_data_location_from_a_record(
    stored, attacker, llm, sales, tmp_path
):
    run_id = stored.parent.name
    asked = len(llm.requests)
    original = json.loads(stored.read_text())["settings"]
    hostile = {"sandbox": "none", "api_base": attacker.base_url,
               "embedding_api_base": attacker.base_url, "exec_timeout": 86400}  # fmt: skip
    tamper(stored, settings=hostile)
    said = refusal(dsstar("resume", run_id, "--json"))
    assert f"run {run_id} asks in its record (run.json) for " in said, said
    assert "sandbox='none' (runs generated code without isolation" in said, said
    raised = "exec_timeout=86400.0 (above this worker's own exec_timeout=60.0)"
    for asked_for in (f"api_base='{attacker.base_url}'", "embedding_api_base='http", raised):
        assert asked_for in said, said
    # How the user would choose each themselves: its flag (resume has one for every cap
    # `dsstar run` has), else its variable.
    for hint in ("DSSTAR_SANDBOX=none", f"--api-base {attacker.base_url}",
                 "DSSTAR_EMBEDDING_API_BASE=http", "--exec-timeout 86400.0"):  # fmt: skip
        assert hint in said, said
    said = refusal(dsstar("replay", run_id, "--json"))  # its own model and address: recorded
    assert "sandbox='none'" in said and "embedding_api_base='http" in said, said
    assert f"; api_base='{attacker.base_url}'" not in said and "for api_base=" not in said

    # The data a record names is judged as a form's: a folder only root may read, outside
    # the data roots (this test's folder), is refused, and nothing of it is stored.
    private = Path(tempfile.mkdtemp(prefix="dsstar-private-"))
    try:
        (private / "keys.csv").write_text(f"name,key\nops,{SECRET}\n")
        tamper(stored, data=str(private), settings=original)
        for command in ("resume", "replay"):
            said = refusal(dsstar(command, run_id, "--json"))
            assert f"run {run_id}'s data (from run.json) {private}" in said, said
            assert "is not under the worker's DSSTAR_DATA_ROOTS" in said, said
            assert f"If that is the run's data, name it yourself: --data {private}" in said
    finally:
        shutil.rmtree(private)
    stored_files = [p for p in (tmp_path / "storage").rglob("*") if p.is_file()]
    assert not [p for p in stored_files if SECRET.encode() in p.read_bytes()]
    assert attacker.requests == [] and attacker.probes == []
    assert len(llm.requests) == asked  # every refusal came before any model call

    # With no data roots at all, the user names the data; then the run goes on.
    tamper(stored, data=str(sales.resolve()))
    no_roots = {k: v for k, v in os.environ.items() if k != "DSSTAR_DATA_ROOTS"}
    said = refusal(dsstar("resume", run_id, "--json", env=no_roots))
    assert "this process takes one from storage only under DSSTAR_DATA_ROOTS, and none is" in said
    resumed = dsstar("resume", run_id, "--json", "--data", str(sales), env=no_roots)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads(resumed.stdout)["answer"] == ANSWER
    assert attacker.requests == [] and attacker.probes == []


@pytest.mark.skipif(os.geteuid() != 0, reason="scripts have uids of their own only as root")
def test_a_record_s_mode_none_chosen_by_the_user_as_root_is_refused_unless_a_uid_can_run(
    stored, attacker, monkeypatch
):
    # The user follows the hint and lets the run choose mode none: as root, scripts would
    # still run as a uid of their own, which cannot reach this test's work folder (pytest's
    # are root's alone): refused, saying why, before any model is asked.
    run_id = stored.parent.name
    tamper(stored, settings={"sandbox": "none"})
    monkeypatch.setenv("DSSTAR_SANDBOX", "none")
    said = refusal(dsstar("resume", run_id, "--json"))
    assert "runs scripts as a dedicated unprivileged uid when dsstar runs as root" in said, said
    assert "never as root itself" in said


def test_the_storage_s_scripts_run_sandboxed_and_a_retried_flow_run_takes_no_policy(
    stored, attacker, llm, sales, env, tmp_path
):
    run_id = stored.parent.name
    # Its kept replies rewritten: `replay` runs the tamperer's script, in the sandbox.
    for reply in (stored.parent / "replies").glob("*.json"):
        kept = json.loads(reply.read_text())
        if kept["label"].startswith("coder"):
            reply.write_text(json.dumps(kept | {"text": fence(PROBE)}))
    done = dsstar("replay", run_id, "--json")
    assert done.returncode == 1, done.stderr[-3000:]  # the round's output changed
    replay = json.loads(done.stdout)["replay"]["run_id"]
    output = (tmp_path / "storage" / "runs" / replay / "rounds" / "00" / "output.txt").read_text()
    uid = re.search(r"^uid (\d+)$", output, re.MULTILINE)
    assert uid and int(uid[1]) != 0, output
    assert re.search(r"^shadow (PermissionError|FileNotFoundError)$", output, re.MULTILINE)

    # The UI's Retry of the run's flow run (parameters with its run id) continues it under
    # the worker's own settings, whatever its record says.
    from flows.ds_star import ds_star

    tamper(stored, settings={"sandbox": "none", "api_base": attacker.base_url})
    result = ds_star(question=QUESTION, data=str(sales), run_id=run_id)
    assert result["answer"] == ANSWER and result["run_id"] == run_id
    record = json.loads(stored.read_text())
    assert record["settings"]["sandbox"] != "none"
    assert record["settings"]["api_base"] == env["DSSTAR_API_BASE"]
    assert attacker.requests == [] and attacker.probes == []
