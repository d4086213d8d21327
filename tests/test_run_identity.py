"""A run id continues only its own run: an interrupted run's id given with another question
and other data, by `dsstar run --run-id` or by a run form through a deployment, is refused
by name and the run's folder is left as it was; the same command or form again resumes it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest
from conftest import EXAMPLE
from fake_llm import FakeLLM
from prefect.deployments import run_deployment
from scenarios import ANSWER, FINAL_ONLY_ANSWER, LOAD, describe_script, fence
from test_trust import serving

from dsstar.inputs.form import RunForm, grouped

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
ATTACK = "Print every row of pay.csv."


def interrupted_first(llm: FakeLLM) -> None:
    """Replies up to round 00's verdict, and none for the verifier: the run fails there,
    its analyses stored, resumable."""
    llm.default("analyzer", describe_script)
    llm.script("planner", "Load the orders and compute revenue per region.")
    llm.script("coder", fence(LOAD))


def then_verified(llm: FakeLLM) -> None:
    """What a resume needs beyond the replies kept in the run's cache."""
    llm.script("verifier", "Yes")
    llm.script("finalyzer", fence(FINAL_ONLY_ANSWER))


def other_data(root: Path) -> Path:
    hr = root / "hr"
    hr.mkdir()
    (hr / "pay.csv").write_text("name,salary\nAda Park,183000\n")
    return hr


def files(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def cli(*args: str) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args, "--json"],
        capture_output=True, text=True, timeout=300, env=os.environ.copy(),
    )  # fmt: skip


def test_run_id_from_the_cli_continues_only_its_own_run(env, llm, sales, tmp_path):
    interrupted_first(llm)
    own = ("run", "--data", str(sales), "-q", QUESTION, "--run-id", "kept")
    first = cli(*own)
    assert first.returncode == 1 and json.loads(first.stdout)["status"] == "failed", first.stderr
    run_dir = Path(env["DSSTAR_STORAGE"]) / "runs" / "kept"
    before, asked = files(run_dir), len(llm.requests)

    attack = cli("run", "--data", str(other_data(tmp_path)), "-q", ATTACK, "--run-id", "kept")
    assert attack.returncode == 2, attack.stderr
    said = json.loads(attack.stdout)["error"]
    assert "run kept is another run (what differs: question, data)" in said
    assert "`dsstar resume kept`" in said and "new run id" in said
    more = cli(*own, "--max-rounds", "3")  # the run's own question, another setting
    assert more.returncode == 2
    assert "what differs: max_rounds (3 given, 20 in the run)" in json.loads(more.stdout)["error"]
    assert files(run_dir) == before and len(llm.requests) == asked  # untouched, no call

    then_verified(llm)
    again = cli(*own)  # the same command again resumes the run
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["answer"] == ANSWER
    record = json.loads((run_dir / "run.json").read_text())
    assert (record["question"], record["status"]) == (QUESTION, "verified")
    assert len(list((run_dir / "claims").iterdir())) == 2


def form_run(**parameters: object):
    """A flow run of the served deployment from a run form (its settings in their
    sections); its final state."""
    flow_run = run_deployment(
        "ds-star/on-demand", parameters=grouped(parameters, RunForm), timeout=240, poll_interval=1
    )
    return flow_run.state


def test_run_id_from_a_form_continues_only_its_own_run(tmp_path):
    lake = tmp_path / "lake"
    shutil.copytree(EXAMPLE, lake)
    hr = other_data(tmp_path)
    own = {"question": QUESTION, "data": str(lake), "run_id": "night-7"}
    run_dir = tmp_path / "storage" / "runs" / "night-7"
    with FakeLLM() as llm, serving(tmp_path, llm, DSSTAR_DATA_ROOTS=str(tmp_path)):
        interrupted_first(llm)
        first = form_run(**own)
        assert first.is_failed(), first
        stored = json.loads((run_dir / "run.json").read_text())
        assert (stored["question"], stored["status"]) == (QUESTION, "failed")
        before, asked = files(run_dir), len(llm.requests)

        # The attack: the interrupted run's id, another question, other data.
        attack = form_run(question=ATTACK, data=str(hr), run_id="night-7")
        assert attack.is_failed(), attack
        assert "run night-7 is another run (what differs: question, data)" in attack.message
        assert files(run_dir) == before and len(llm.requests) == asked  # untouched, no call

        then_verified(llm)
        again = form_run(**own)  # the same form again resumes the run
        assert again.is_completed(), again
    record = json.loads((run_dir / "run.json").read_text())
    assert (record["question"], record["status"], record["answer"]) == (
        QUESTION, "verified", ANSWER,
    )  # fmt: skip
    analysed = {json.loads(p.read_text())["path"] for p in run_dir.glob("analysis/*/attempts.json")}
    assert "pay.csv" not in analysed and "orders_2024.csv" in analysed
