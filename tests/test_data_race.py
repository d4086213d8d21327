"""The data-root race of issue 27, and the caps a run form may not raise, through a real
Prefect API with `dsstar serve` running the flow runs.

A form names `lake/pub/sub`, a folder under the worker's data root that the attacker may
write. Once the check has passed, `sub` is swapped for a link to a folder outside every root
that holds a canary file. The worker holds what it checked (a descriptor) and walks only
through it, so the canary never reaches a model request, storage or the scripts' view:
- deterministically, with the swap made while the worker probes its model server (after the
  check, before the walk: the probe is part of the preflight);
- and with the swap made over and over during a whole run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import EXAMPLE, REPO
from scenarios import ANSWER, always_first_time, two_rounds
from test_trust import attack, serving

from dsstar.settings import Settings

pytestmark = pytest.mark.slow

CANARY = "CANARY-payroll-7f3a91"  # the content of the file outside the roots
CANARY_NAME = "payroll_canary.csv"


def _lake(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The declared root, the form's folder in it (the sales example) and the folder outside
    every root that holds the canary."""
    root = tmp_path / "lake"
    sub = root / "pub" / "sub"
    shutil.copytree(EXAMPLE, sub)
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / CANARY_NAME).write_text(f"name,salary\n{CANARY},1000000\n")
    (secret / "orders_2024.csv").write_text(f"order_id,region_code\n{CANARY},XX\n")
    return root, sub, secret


def _swap(sub: Path, secret: Path) -> None:
    """The attacker's move: the checked folder goes aside, a link to `secret` takes its name."""
    sub.rename(sub.with_name("sub.real"))
    sub.symlink_to(secret)


def _unswap(sub: Path) -> None:
    sub.unlink()
    sub.with_name("sub.real").rename(sub)


def _leaks(tmp_path: Path, requests: list[dict]) -> list[str]:
    """Where the canary (content or file name) went: model requests, stored objects, the
    ledger."""
    found = [
        f"request to {r['agent']}"
        for r in requests
        if CANARY in json.dumps(r["body"]) or CANARY_NAME in json.dumps(r["body"])
    ]
    for path in [*(tmp_path / "storage").rglob("*"), tmp_path / "ledger.db"]:
        if path.is_file():
            data = path.read_bytes()
            if CANARY.encode() in data or CANARY_NAME.encode() in data:
                found.append(str(path))
        if CANARY_NAME in path.name:
            found.append(str(path))
    return found


def test_a_folder_swapped_after_the_check_is_never_followed(tmp_path, llm):
    root, sub, secret = _lake(tmp_path)
    two_rounds(llm)
    swaps = []

    def swap_once() -> None:  # the worker probes its model server after the data check
        if not swaps and sub.is_dir() and not sub.is_symlink():
            _swap(sub, secret)
            swaps.append(time.monotonic())

    llm.on_models(swap_once)
    with serving(tmp_path, llm, DSSTAR_DATA_ROOTS=str(root)):
        state = attack(data=str(sub), exec_timeout=60.0)
    assert swaps, "the worker never probed its model server: no swap was made"
    assert sub.is_symlink()  # the folder was swapped while the run read it
    assert state.is_completed(), state.message
    assert _leaks(tmp_path, llm.requests) == []
    # The run answered from the folder it checked, now at sub.real.
    [run_json] = (tmp_path / "storage").glob("runs/*/run.json")
    record = json.loads(run_json.read_text())
    assert record["answer"] == ANSWER
    assert record["data"] == str(sub)  # the location as checked


def test_a_folder_swapped_over_and_over_during_a_run_never_leaks(tmp_path, llm):
    root, sub, secret = _lake(tmp_path)
    inner = sub / "more"  # a folder inside the checked one, swapped as well
    inner.mkdir()
    (inner / "notes.md").write_text("# Notes\nNothing secret here.\n")
    # Replies for both runs, whatever each meets: a check refused, a round of its own, or the
    # first run's answer offered for reuse.
    always_first_time(llm)
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
    with serving(tmp_path, llm, DSSTAR_DATA_ROOTS=str(root)):
        swapper.start()
        try:
            states = [attack(data=str(sub), exec_timeout=60.0) for _ in range(2)]
        finally:
            stop.set()
            swapper.join(timeout=10)
    assert swaps[0] > 10
    assert _leaks(tmp_path, llm.requests) == []
    for state in states:  # answered from the checked folder, or refused: never the canary
        assert state.is_completed() or state.is_failed(), state
        if state.is_failed():
            assert any(
                reason in (state.message or "")
                for reason in (
                    "is not under",
                    "does not exist",
                    "no files found",
                    "data files",
                    "changed while it was being checked",
                )
            ), state.message


def test_a_form_may_lower_caps_never_raise_them(tmp_path, llm):
    root, sub, _secret = _lake(tmp_path)
    default = {name: field.default for name, field in Settings.model_fields.items()}
    with serving(tmp_path, llm, DSSTAR_DATA_ROOTS=str(root), DSSTAR_EXEC_MEMORY_MB="2048"):
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
    assert llm.requests == [] and not list((tmp_path / "storage").glob("runs/*"))

    policy = {"DSSTAR_DATA_ROOTS": str(root), "DSSTAR_FORM_ALLOW": "exec_processes"}
    with serving(tmp_path, llm, **policy):
        unappliable = attack(data=str(sub), exec_processes=10**9)  # allowed, yet impossible
    assert unappliable.is_failed()
    assert "the sandbox cannot apply exec_processes=1000000000" in unappliable.message
    assert llm.requests == [] and not list((tmp_path / "storage").glob("runs/*"))


def test_the_cli_refuses_caps_the_sandbox_cannot_apply_before_any_run(env, sales):
    environ = os.environ | {"DSSTAR_EXEC_PROCESSES": str(10**9)}
    done = subprocess.run(
        [sys.executable, "-m", "dsstar", "run", "--data", str(sales), "--question", "Top?"],
        cwd=REPO, env=environ, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "exec_processes=1000000000" in lines[0], done.stderr
    assert not (Path(env["DSSTAR_STORAGE"]) / "runs").exists()
