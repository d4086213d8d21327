"""Runs never wedge on a concurrency slot: not after a crash, not after many runs, not on a
PREFECT_HOME that older versions left slots counted in. A wait for a slot says who holds
it and ends with a stated error; `dsstar limits` frees what is held by processes that are
gone. After a crash, after many runs and on a home with counted slots: the chaos soaks
(tests/soak.py), on a command's temporary server, on a long-lived server over SQLite and on
one over PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import forked_cli
import pytest
from processes import stop
from soak import Soak, base_env, held, limits_state

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


# -- a stop from outside, from a fresh PREFECT_HOME, as a user's first runs --------------------
# (a SIGKILL during a script on a home that an older dsstar left slots counted in, and many runs
# in a row, are events of the chaos soak on a temporary server: tests/soak.py)


@pytest.mark.timeout(600)  # several whole runs, on 2 loaded cores
def test_sigterm_then_the_next_run_finishes(tmp_path, llm, sales):
    home = tmp_path / "home"
    env = base_env(tmp_path, llm, home)
    soak = Soak(llm, env, sales)
    proc, _ = soak.start("t0", "verified")
    # As `timeout 120 dsstar run` would, in the middle of the run: once its planner is asked
    # (its files analyzed, its scripts to come).
    deadline = time.monotonic() + 180
    while not soak.planner_at.get("t0"):
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the run never asked its planner"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    code, _, err = soak.finish(proc)
    assert code in (0, 143), err[-2000:]
    soak.event(1, "verified")
    assert soak.figures[-1]["exit"] == 0


# -- waits that say why, and `dsstar limits` -----------------------------------------------

HOLD = """
import sys, time
from tasks.slots import slot
with slot("exec", 1, "holder-run"):
    print("holding", flush=True)
    time.sleep(600)
"""
# The same holder, renewing its lease every second instead of every RENEW_S (15 s): it
# finds out sooner that its server lost the lease.
HOLD_RENEWING = "from tasks.slots import _leases\n_leases.RENEW_S = 1.0\n" + HOLD


@pytest.fixture
def one_exec_slot(fresh_limits):
    """The session's server with dsstar-exec at one slot (dropped again afterwards)."""
    from tasks.slots import ensure_limit

    ensure_limit("exec", 1, reset=True)


@pytest.mark.timeout(900)  # several whole runs, on 2 loaded cores
def test_a_wait_names_its_holders_ends_with_a_stated_error_and_limits_frees_it(
    env, llm, sales, one_exec_slot
):
    from scenarios import always_first_time

    always_first_time(llm)
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "holding"
    # The wait is shown after NOTICE_S (10 s), with who holds the slot, and fails at 14 s.
    run_env = {**os.environ, "DSSTAR_SLOT_WAIT": "14"}
    started = time.monotonic()
    done = forked_cli.run(
        [sys.executable, "-m", "dsstar", "run", "--data", str(sales), "--question", "Who?"],
        capture_output=True, text=True, env=run_env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    waiting = [line for line in done.stderr.splitlines() if "for a dsstar-exec slot" in line]
    assert waiting, done.stderr[-3000:]
    assert f"1/1 held: run holder-run pid {holder.pid}" in waiting[0]
    assert "no dsstar-exec slot came free within 14 s" in done.stderr
    assert "dsstar limits" in done.stderr
    assert time.monotonic() - started < 120

    listed = forked_cli.run(
        [sys.executable, "-m", "dsstar", "limits"], capture_output=True, text=True, timeout=120
    )
    assert "dsstar-exec: 1/1 held" in listed.stdout
    assert f"run holder-run pid {holder.pid}" in listed.stdout
    holder.kill()
    holder.wait()
    freed = forked_cli.run(
        [sys.executable, "-m", "dsstar", "limits"], capture_output=True, text=True, timeout=120
    )
    assert f"freed a dsstar-exec slot of run holder-run pid {holder.pid} (gone)" in freed.stdout
    assert "dsstar-exec: 0/1 held" in freed.stdout


@pytest.mark.timeout(600)  # several whole runs, on 2 loaded cores
def test_a_slot_of_a_killed_holder_comes_back_within_seconds(env, llm, sales, one_exec_slot):
    """The holder's lease would live on the server for up to a minute; the next run proves
    the holder dead by its record and takes the slot at once."""
    from scenarios import always_first_time

    always_first_time(llm)
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "holding"
    holder.kill()
    holder.wait()
    run_env = {**os.environ, "DSSTAR_SLOT_WAIT": "30"}
    done = forked_cli.run(
        [sys.executable, "-m", "dsstar", "run", "--data", str(sales), "--question", "Who?",
         "--json"],
        capture_output=True, text=True, env=run_env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "for a dsstar-exec slot" not in done.stderr  # freed before a wait was shown


def test_reset_frees_every_slot(env, one_exec_slot):
    holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        reset = forked_cli.run(
            [sys.executable, "-m", "dsstar", "limits", "--reset"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert reset.returncode == 0, reset.stderr
        assert "warning: every slot was freed" in reset.stderr
        assert "dsstar-exec: 0/1 held" in reset.stdout
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.timeout(600)  # several whole runs, on 2 loaded cores
def test_a_server_that_lost_its_leases_does_not_keep_the_slots_counted(tmp_path, llm):
    """A long-lived server restarted with in-memory lease storage forgets every lease while
    the counts stay in its database. The holder finds out at its next renewal and takes
    its slot off the count; when it ends there is nothing left to give back."""
    from conftest import _free_port, start_prefect_server

    home = tmp_path / "home"
    env = base_env(tmp_path, llm, home)
    port = _free_port()
    env["PREFECT_API_URL"] = f"http://127.0.0.1:{port}/api"
    server = start_prefect_server(env, port, tmp_path / "server.log")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_RENEWING], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        assert held(limits_state(env))["dsstar-exec"] == 1
        stop(server)
        # Counted in the database, with no lease behind it: without the holder's help the
        # count would stay at 1 for good.
        server = start_prefect_server(env, port, tmp_path / "server2.log")
        deadline = time.monotonic() + 60
        while exec_slots_held(env["PREFECT_API_URL"]) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert held(limits_state(env))["dsstar-exec"] == 0
        assert holder.poll() is None  # the holder goes on, it only stopped counting
    finally:
        holder.kill()
        holder.wait()
        stop(server)


def exec_slots_held(api_url: str) -> int:
    """The dsstar-exec slots the server at `api_url` counts as held, read in this process."""
    from prefect import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        return client.read_global_concurrency_limit_by_name("dsstar-exec").active_slots


def test_limits_without_a_server_says_one_thing_and_starts_none(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "home")
    done = forked_cli.run([sys.executable, "-m", "dsstar", "limits"], capture_output=True,
                          text=True, timeout=120, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert said.startswith("No shared Prefect server (PREFECT_API_URL is unset)")
    assert "no dsstar limits" not in said and "Below" not in said
    assert not list((tmp_path / "home").glob("*.db"))  # no temporary server was started
