"""The data-root race of issue 27, and the caps a run form may not raise, through a real
Prefect API with `dsstar serve` running the flow runs.

A form names `lake/pub/sub`, a folder under the worker's data root that the attacker may
write. Once the check has passed, `sub` is swapped for a link to a folder outside every root
that holds a canary file. The worker holds what it checked (a descriptor) and walks only
through it, so the canary never reaches a model request, storage or the scripts' view:
- deterministically, with the swap made while the worker probes its model server (after the
  check, before the walk: the probe is part of the preflight);
- and with the swap made over and over during a whole run.

One `dsstar serve` serves the module: its data root holds a lake per test, its memory cap
(2048 MB) is the worker's own value the caps test names, and it lets a form raise
exec_processes only (a second serve would register the same deployment beside it).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import forked_cli
import pytest
from conftest import EXAMPLE, REPO
from fake_llm import FakeLLM
from scenarios import ANSWER, always_first_time, two_rounds
from test_trust import attack, serving

from dsstar.settings import Settings

pytestmark = pytest.mark.slow

CANARY = "CANARY-payroll-7f3a91"  # the content of the file outside the roots
CANARY_NAME = "payroll_canary.csv"


@pytest.fixture(scope="module")
def served(prefect_server, tmp_path_factory):
    """`dsstar serve` for the module, over the data root `lakes`, with its memory cap at
    2048 MB and exec_processes the one setting a form may raise, talking to one model server;
    its storage and ledger are under `root`. Stopped (its process group killed) on leaving,
    whatever the tests did."""
    root = tmp_path_factory.mktemp("race")
    lakes = root / "lakes"
    lakes.mkdir()
    policy = {"DSSTAR_DATA_ROOTS": str(lakes), "DSSTAR_EXEC_MEMORY_MB": "2048",
              "DSSTAR_FORM_ALLOW": "exec_processes"}  # fmt: skip
    with FakeLLM() as llm, serving(root, llm, **policy):
        yield SimpleNamespace(root=root, lakes=lakes, llm=llm)


@pytest.fixture
def model(served) -> FakeLLM:
    """The served model server, with no script and no request of an earlier test."""
    return served.llm.reset()


def _runs(root: Path) -> set[Path]:
    return set((root / "storage").glob("runs/*"))


def _lake(lakes: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The form's folder (the sales example) in the test's lake under the declared root
    `lakes`, and the folder outside every root that holds the canary."""
    sub = lakes / tmp_path.name / "pub" / "sub"
    shutil.copytree(EXAMPLE, sub)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / CANARY_NAME).write_text(f"name,salary\n{CANARY},1000000\n")
    (secret / "orders_2024.csv").write_text(f"order_id,region_code\n{CANARY},XX\n")
    return sub, secret


def _swap(sub: Path, secret: Path) -> None:
    """The attacker's move: the checked folder goes aside, a link to `secret` takes its name."""
    sub.rename(sub.with_name("sub.real"))
    sub.symlink_to(secret)


def _unswap(sub: Path) -> None:
    sub.unlink()
    sub.with_name("sub.real").rename(sub)


def _leaks(root: Path, requests: list[dict]) -> list[str]:
    """Where the canary (content or file name) went: model requests, stored objects, the
    ledger (of the serve whose storage and ledger are under `root`)."""
    found = [
        f"request to {r['agent']}"
        for r in requests
        if CANARY in json.dumps(r["body"]) or CANARY_NAME in json.dumps(r["body"])
    ]
    for path in [*(root / "storage").rglob("*"), root / "ledger.db"]:
        if path.is_file():
            data = path.read_bytes()
            if CANARY.encode() in data or CANARY_NAME.encode() in data:
                found.append(str(path))
        if CANARY_NAME in path.name:
            found.append(str(path))
    return found


def test_a_folder_swapped_after_the_check_is_never_followed(served, model, tmp_path):
    sub, secret = _lake(served.lakes, tmp_path)
    two_rounds(model)
    swaps = []

    def swap_once() -> None:  # the worker probes its model server after the data check
        if not swaps and sub.is_dir() and not sub.is_symlink():
            _swap(sub, secret)
            swaps.append(time.monotonic())

    model.on_models(swap_once)
    before = _runs(served.root)
    state = attack(data=str(sub), exec_timeout=60.0)
    assert swaps, "the worker never probed its model server: no swap was made"
    assert sub.is_symlink()  # the folder was swapped while the run read it
    assert state.is_completed(), state.message
    assert _leaks(served.root, model.requests) == []
    # The run answered from the folder it checked, now at sub.real.
    [run] = _runs(served.root) - before
    record = json.loads((run / "run.json").read_text())
    assert record["answer"] == ANSWER
    assert record["data"] == str(sub)  # the location as checked


def test_a_folder_swapped_over_and_over_during_a_run_never_leaks(served, model, tmp_path):
    sub, secret = _lake(served.lakes, tmp_path)
    inner = sub / "more"  # a folder inside the checked one, swapped as well
    inner.mkdir()
    (inner / "notes.md").write_text("# Notes\nNothing secret here.\n")
    # Replies for both runs, whatever each meets: a check refused, a round of its own, or the
    # first run's answer offered for reuse.
    always_first_time(model)
    stop, swaps = threading.Event(), [0]

    def swap_forever() -> None:
        while not stop.is_set():
            _swap(sub, secret)
            time.sleep(0.002)
            _unswap(sub)
            inner.rename(sub / "more.real")
            inner.symlink_to(secret)
            time.sleep(0.003)
            inner.unlink()
            (sub / "more.real").rename(inner)
            swaps[0] += 1

    swapper = threading.Thread(target=swap_forever, daemon=True)
    swapper.start()
    try:
        states = [attack(data=str(sub), exec_timeout=60.0) for _ in range(2)]
    finally:
        stop.set()
        swapper.join(timeout=10)
    assert swaps[0] > 10
    assert _leaks(served.root, model.requests) == []
    for state in states:  # answered from the checked folder, or refused: never the canary
        assert state.is_completed() or state.is_failed(), state
        if state.is_failed():
            assert any(
                reason in (state.message or "")
                for reason in (
                    "is not under",
                    "does not exist",
                    "no such file or folder",
                    "no files found",
                    "data files",
                    "changed while it was being checked",
                )
            ), state.message


def test_a_form_may_lower_caps_never_raise_them(served, model, tmp_path):
    sub, _secret = _lake(served.lakes, tmp_path)
    default = {name: field.default for name, field in Settings.model_fields.items()}
    before = _runs(served.root)
    raised = attack(data=str(sub), exec_memory_mb=20000, exec_disk_mb=20000)
    timeout = attack(data=str(sub), exec_timeout=100000.0)
    rounds = attack(data=str(sub), max_rounds=500, archive_max_bytes=1 << 40)
    assert raised.is_failed() and timeout.is_failed() and rounds.is_failed()
    # Each refusal names the field and the worker's own value.
    assert "exec_memory_mb=20000 (above this worker's own exec_memory_mb=2048)" in raised.message
    disk = default["exec_disk_mb"]
    assert f"exec_disk_mb=20000 (above this worker's own exec_disk_mb={disk})" in raised.message
    assert "DSSTAR_FORM_ALLOW=exec_memory_mb,exec_disk_mb" in raised.message
    assert f"own exec_timeout={default['exec_timeout']}" in timeout.message
    assert "max_rounds=500" in rounds.message and "archive_max_bytes" in rounds.message
    assert model.requests == [] and _runs(served.root) == before

    unappliable = attack(data=str(sub), exec_processes=10**9)  # allowed, yet impossible
    assert unappliable.is_failed()
    assert "the sandbox cannot apply exec_processes=1000000000" in unappliable.message
    assert model.requests == [] and _runs(served.root) == before


def test_the_cli_refuses_caps_the_sandbox_cannot_apply_before_any_run(env, sales):
    environ = os.environ | {"DSSTAR_EXEC_PROCESSES": str(10**9)}
    done = forked_cli.run(
        [sys.executable, "-m", "dsstar", "run", "--data", str(sales), "--question", "Top?"],
        cwd=REPO, env=environ, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "exec_processes=1000000000" in lines[0], done.stderr
    assert not (Path(env["DSSTAR_STORAGE"]) / "runs").exists()
