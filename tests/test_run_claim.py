"""One run id, one run (dsstar.records.claim): a claim created in one step on a local folder and
on S3 (moto's server), refused while its holder lives or after the run finished, taken over
from a dead holder; and two real `dsstar run --run-id X` started together: one is refused,
the other's artifacts are intact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import forked_cli
import pytest
from scenarios import ANSWER, two_rounds

from dsstar.errors import RunIdInUse
from dsstar.records.claim import claim_run
from dsstar.records.identity import CONTINUE_MAY_CHANGE, RunIdentity, differences
from dsstar.settings import Settings
from dsstar.storage import Store

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"


def test_create_json_is_exclusive_on_a_local_folder(tmp_path):
    store = Store(str(tmp_path))
    assert store.create_json("runs/a/claims/000001.json", {"n": 1}) is True
    assert store.create_json("runs/a/claims/000001.json", {"n": 2}) is False
    assert store.read_json("runs/a/claims/000001.json") == {"n": 1}


def test_create_json_is_exclusive_on_s3(s3):
    store = Store(s3)
    assert store.create_json("runs/a/claims/000001.json", {"n": 1}) is True
    assert store.create_json("runs/a/claims/000001.json", {"n": 2}) is False
    assert store.read_json("runs/a/claims/000001.json") == {"n": 1}


class _Overtaken(Store):
    """A store where another run creates the claim between our look and our create."""

    def create_json(self, key, data):
        Store(self.url).create_json(key, data | {"pid": 4242, "host": "other-host"})
        return super().create_json(key, data)


def test_losing_the_race_for_a_claim_names_the_run_that_won(tmp_path):
    with pytest.raises(RunIdInUse, match="run r1 is in use by pid 4242 on other-host"):
        claim_run(_Overtaken(str(tmp_path)), "r1")


def test_a_held_id_is_refused_until_released(tmp_path):
    store = Store(str(tmp_path))
    first = claim_run(store, "r1", "flow-1")
    with pytest.raises(RunIdInUse, match=f"in use by pid {os.getpid()}"):
        claim_run(store, "r1", "flow-2")
    first.release()
    second = claim_run(store, "r1", "flow-3")  # a resume after the first attempt ended
    assert second.key.endswith("claims/000002.json")


def test_a_dead_holder_is_taken_over_and_a_finished_run_never(tmp_path):
    store = Store(str(tmp_path))
    claim_run(store, "r2")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    held = store.read_json("runs/r2/claims/000001.json")
    store.write_json("runs/r2/claims/000001.json", held | {"pid": int(dead)})  # killed -9
    claim_run(store, "r2")  # the crashed run is resumed under its id
    store.write_json("runs/r2/run.json", {"run_id": "r2", "status": "verified"})
    with pytest.raises(RunIdInUse, match="has finished"):
        claim_run(store, "r2")


@pytest.mark.slow
def test_two_runs_with_one_id_one_refused_the_other_intact(env, llm, sales, tmp_path):
    two_rounds(llm)
    argv = [sys.executable, "-m", "dsstar", "run", "--data", str(sales), "--question",
            QUESTION, "--run-id", "shared-id", "--json"]  # fmt: skip
    procs = [
        forked_cli.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    done = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in done)
    assert codes == [0, 2], [(c, err[-2000:]) for c, _, err in done]
    refused = next(json.loads(out) for code, out, _ in done if code == 2)
    assert "shared-id" in refused["error"] and (
        "in use" in refused["error"] or "has finished" in refused["error"]
    )
    winner = next(json.loads(out) for code, out, _ in done if code == 0)
    run_dir = Path(env["DSSTAR_STORAGE"]) / "runs" / "shared-id"
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "verified" and record["answer"] == ANSWER
    assert record["flow_run_id"] == winner["flow_run_id"]
    assert sorted(p.name for p in (run_dir / "rounds").iterdir()) == ["00", "01"]
    assert len(list((run_dir / "claims").iterdir())) == 1  # the refused run claimed nothing

    # A third run under the finished id is refused; nothing stored changes.
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    time.sleep(1)
    third = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert third.returncode == 2 and "has finished (verified)" in third.stdout
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def test_a_retried_flow_run_takes_over_its_own_claim_from_another_host(tmp_path):
    store = Store(str(tmp_path))
    claim_run(store, "r3", "flow-9")
    held = store.read_json("runs/r3/claims/000001.json")
    # Its worker's machine died: the claim was never released and its host cannot be asked.
    store.write_json("runs/r3/claims/000001.json", held | {"host": "worker-gone", "pid": 1})
    with pytest.raises(RunIdInUse, match="in use by pid 1 on worker-gone"):
        claim_run(store, "r3", "flow-10")  # another flow run: the holder may still live
    with pytest.raises(RunIdInUse, match="in use"):
        claim_run(store, "r3")  # a command, e.g. `dsstar resume`
    retried = claim_run(store, "r3", "flow-9")  # the same flow run, started again
    assert retried.key.endswith("claims/000002.json")
    with pytest.raises(RunIdInUse, match=f"in use by pid {os.getpid()}"):
        claim_run(store, "r3", "flow-11")  # while the retry runs, a duplicate is refused
    # Two `dsstar resume` of one run both continue its flow run: the second sees the first
    # alive on this host, and is refused.
    with pytest.raises(RunIdInUse, match=f"in use by pid {os.getpid()}"):
        claim_run(store, "r3", "flow-9")


# -- a run id continues only its own run (dsstar.records.identity) ---------------------------

STORED = {
    "run_id": "r4",
    "question": "Which region sold most?",
    "data": "/lake/a",
    "guidelines": "",
    "status": "interrupted",
    "settings": {"max_rounds": 20, "model": "openai/gpt-4o", "max_parallel": 8},
}


def _stored_run(tmp_path) -> Store:
    store = Store(str(tmp_path))
    claim_run(store, "r4").release()  # its first attempt, interrupted
    store.write_json("runs/r4/run.json", STORED)
    return store


def _files(store: Store) -> dict:
    root = Path(store.url) / "runs" / "r4"
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_another_question_or_data_under_a_stored_runs_id_is_refused_by_name(tmp_path):
    store = _stored_run(tmp_path)
    before = _files(store)
    other = RunIdentity.of({"question": "Print the payroll.", "data": "/lake/b", "guidelines": ""})
    with pytest.raises(RunIdInUse, match=r"run r4 is another run \(what differs: question, data\)"):
        claim_run(store, "r4", "flow-2", other)
    with pytest.raises(RunIdInUse, match=r"what differs: guidelines\).*dsstar resume r4"):
        claim_run(store, "r4", None, RunIdentity.of({**STORED, "guidelines": "in EUR"}))
    assert _files(store) == before  # refused before anything was written


def test_the_same_run_continues_and_may_change_only_what_resume_may(tmp_path):
    store = _stored_run(tmp_path)
    given = {"max_rounds": 5, "model": "openai/gpt-4o-mini", "max_parallel": 2}
    with pytest.raises(RunIdInUse, match=r"what differs: max_rounds \(5 given, 20 in the run\)"):
        claim_run(store, "r4", None, RunIdentity.of(STORED, given))
    # Another model (as `dsstar resume --model`), another worker's parallelism, a setting
    # the run was not given, or one its run.json does not know: the same run.
    same = {"max_rounds": 20, "model": "openai/gpt-4o-mini", "max_parallel": 2, "top_k": 5}
    claim = claim_run(store, "r4", "flow-3", RunIdentity.of(STORED, same))
    assert claim.key.endswith("claims/000002.json")


def test_a_run_that_stored_no_question_yet_is_anyones_to_continue(tmp_path):
    store = Store(str(tmp_path))
    claim_run(store, "r5").release()  # died before its first run.json
    assert differences({}, RunIdentity.of(STORED)) == []
    claim_run(store, "r5", None, RunIdentity.of(STORED))


def test_a_run_stored_while_the_claim_was_taken_is_refused_after_it(tmp_path):
    """The stored run is read again once the claim is ours: a run that wrote its run.json
    between our look and our claim is not overwritten, and our claim is given back."""

    class _Raced(Store):
        def create_json(self, key, data):
            made = super().create_json(key, data)
            self.write_json("runs/r6/run.json", STORED | {"run_id": "r6"})
            return made

    store = _Raced(str(tmp_path))
    with pytest.raises(RunIdInUse, match="what differs: question"):
        claim_run(store, "r6", None, RunIdentity.of({**STORED, "question": "Another?"}))
    assert store.read_json("runs/r6/claims/000001.json")["released_at"]


def test_what_a_continuation_may_change_are_settings():
    assert CONTINUE_MAY_CHANGE <= set(Settings.model_fields)
