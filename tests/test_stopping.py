"""A process that runs many commands (a test session, a program embedding the CLI) installs the
stop handling many times: it must keep one signal pipe, one watcher thread and each stop hook
once, and still stop with 143 on SIGTERM. Each case is a real subprocess receiving a real
signal."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    from dsstar.errors import Interrupted
    from dsstar.execution import stopping

    def hook(signum):
        print("hook", signum, flush=True)

    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        stopping.install()
        stopping.at_stop(hook)
    watchers = [t for t in threading.enumerate() if t.name == "dsstar-stop"]
    print("watchers", len(watchers), "new fds", len(os.listdir("/proc/self/fd")) - fds, flush=True)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    except Interrupted:  # what the CLI does with it
        stopping.finish()
    """
)


def test_installing_again_adds_no_thread_no_pipe_and_no_hook():
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "watchers 1 new fds 2", done.stderr  # one pipe: its two ends
    assert lines[1:] == [f"hook {signal.SIGTERM.value}"], done.stderr  # the hook ran once
    assert done.returncode == 128 + signal.SIGTERM, done.stderr


ORDER = textwrap.dedent(
    """
    import os, signal, time
    from dsstar.errors import Interrupted
    from dsstar.execution import stopping

    def report(signum):  # the run's hook: marks it and says how to resume, added first
        print("report", signum, flush=True)

    def release(signum):  # a cleanup waiting on a server that does not answer, added later
        print("release", flush=True)
        time.sleep(60)

    def scratch(signum):
        print("scratch", flush=True)

    stopping.install()
    stopping.at_stop(report)
    stopping.at_stop(release, last=True)
    stopping.at_stop(scratch)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    except Interrupted:
        stopping.finish()
    """
)


def test_a_cleanup_added_last_runs_after_the_hook_that_reports_the_run():
    """Hooks run newest first, but one added with `last` (the release of concurrency leases,
    which may wait on a busy server) runs after all the others: the run is reported even when
    that cleanup outlasts the stop's time, and the process still exits in that time."""
    done = subprocess.run([sys.executable, "-c", ORDER], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ["scratch", "report 15", "release"], done.stderr
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
