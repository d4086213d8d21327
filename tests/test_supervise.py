"""scripts/supervise.py, under which scripts/test runs pytest: nothing the tests started is
left running, whether the session ends, fails, or is stopped from outside."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
from conftest import REPO
from soak import EVENTS, KILLS

SUPERVISE = [sys.executable, str(REPO / "scripts" / "supervise.py")]


def alive(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if marker in " ".join(proc.info["cmdline"] or []) and proc.status() != "zombie":
            found.append(proc)
    return found


def test_what_a_command_left_behind_is_named_ended_and_fails_the_run():
    # A daemon (started in a session of its own, its parent gone) and a plain orphan.
    script = "setsid sleep 971 & (sleep 972 &) ; exit 0"
    done = subprocess.run([*SUPERVISE, "sh", "-c", script], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert "2 process(es) were still running" in done.stderr
    assert "sleep 971" in done.stderr and "sleep 972" in done.stderr
    assert alive("sleep 971") == [] and alive("sleep 972") == []


def test_a_command_that_leaves_nothing_keeps_its_exit_code():
    assert subprocess.run([*SUPERVISE, "sh", "-c", "exit 0"]).returncode == 0
    done = subprocess.run([*SUPERVISE, "sh", "-c", "exit 3"], capture_output=True, text=True)
    assert done.returncode == 3
    assert "still running" not in done.stderr


def test_stopped_with_sigterm_it_ends_the_whole_tree():
    # As `timeout` stops the test command: the session, its servers and their daemons go.
    script = (
        "import subprocess, time; subprocess.Popen(['setsid', 'sleep', '973']); time.sleep(974)"
    )
    proc = subprocess.Popen([*SUPERVISE, sys.executable, "-c", script], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not alive("sleep 973") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive("sleep 973")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    assert b"sleep 973" in err
    assert alive("sleep 973") == [] and alive("time.sleep(974)") == []


def test_killed_with_sigkill_its_command_dies_with_it():
    script = "import time; time.sleep(975)"
    proc = subprocess.Popen([*SUPERVISE, sys.executable, "-c", script])
    deadline = time.monotonic() + 30
    while not alive("time.sleep(975)") and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while alive("time.sleep(975)") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert alive("time.sleep(975)") == []


def test_the_soaks_together_play_every_kind_of_kill_on_each_kind_of_backend():
    played = {kind for events in EVENTS.values() for kind in events}
    assert KILLS <= played
    for mode, events in EVENTS.items():
        assert "concurrent" in events, mode
        if mode != "temporary-server":
            assert {"failing-script", "failed-run"} <= set(events), mode
        assert any(k.endswith("-llm") or k == "kill-server" for k in events), mode
        assert any(k.endswith("-script") for k in events), mode
