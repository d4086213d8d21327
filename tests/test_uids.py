"""Sandbox uids are the machine's: held in one machine-wide folder whatever a process's
TMPDIR or HOME, never in a folder others may write, and taken only when no process runs as
them (a dead holder's leftovers excepted)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsstar.errors import ConfigError
from dsstar.execution.sandbox import uids
from dsstar.execution.sandbox.supervise import scan

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="uid slots are held only as root")

REPO = Path(__file__).resolve().parents[1]
HOLD = """
import sys
from dsstar.execution.sandbox import uid_slot
with uid_slot() as uid:
    print(uid, flush=True)
    sys.stdin.readline()
"""


def test_two_processes_with_other_temp_folders_and_homes_never_share_a_uid(tmp_path):
    holders, taken = [], []
    try:
        for side in ("a", "b"):
            (tmp_path / side).mkdir()
            env = {**os.environ, "TMPDIR": str(tmp_path / side), "HOME": str(tmp_path / side),
                   "PYTHONPATH": str(REPO)}  # fmt: skip
            proc = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
            holders.append(proc)
            taken.append(int(proc.stdout.readline()))  # held until its stdin closes
        assert taken[0] != taken[1]
    finally:
        for proc in holders:
            proc.communicate("\n", timeout=30)
    folder = uids.slot_folder()
    assert folder == Path("/run/dsstar/uid-slots")
    info = folder.lstat()
    assert info.st_uid == 0 and oct(info.st_mode & 0o777) == "0o700"


def test_a_folder_others_may_write_or_a_link_is_never_used(tmp_path):
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(open_to_all)
    good = tmp_path / "good"
    assert uids.slot_folder((open_to_all, link, good)) == good
    assert oct(good.stat().st_mode & 0o777) == "0o700"
    with pytest.raises(ConfigError, match="only root may write"):
        uids.slot_folder((open_to_all,))


@pytest.fixture
def private(tmp_path, monkeypatch):
    """Slot locks in a folder of this test's, for uids no other test uses."""
    monkeypatch.setattr(uids, "SLOT_FOLDERS", (tmp_path / "slots",))
    monkeypatch.setattr(uids, "LEGACY_FOLDER", tmp_path / "legacy")
    monkeypatch.setenv("DSSTAR_EXEC_UID_BASE", "1700000")
    uids.uid_range.cache_clear()
    yield tmp_path / "slots"
    uids.uid_range.cache_clear()


def sleeper(uid: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "60"]
    )
    while not scan(uid)[0]:
        time.sleep(0.02)
    return proc


def test_a_uid_with_processes_while_its_slot_is_free_is_skipped(private):
    """Another dsstar that locks elsewhere runs a script as the first uid: it is not taken,
    and its process lives on."""
    other = sleeper(1_700_000)
    try:
        with uids.uid_slot() as uid:
            assert uid == 1_700_001
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_leftovers_of_a_holder_that_died_are_killed_and_the_uid_taken(private):
    left = sleeper(1_700_000)
    with uids.uid_slot() as uid:
        assert uid == 1_700_001  # no holder recorded: not known to be leftovers
    (private / "0").write_text("999999999 1\n")  # its last holder is gone
    with uids.uid_slot() as uid:
        assert uid == 1_700_000
    assert left.wait(timeout=10) == -9
