"""Run a command (the test session) and end every process it leaves behind.

    python scripts/supervise.py COMMAND [ARG ...]

This process makes itself a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): whatever the
command starts, and whatever those start in turn (servers, workers, sandboxes, podman's
service and its containers' monitors, daemons that fork twice), stays its descendant, because
an orphan is handed to the nearest subreaper instead of to init. The command gets a
parent-death signal, so a supervisor killed with SIGKILL does not leave it running either.

When the command ends, normally or because it was stopped (SIGTERM and SIGINT are passed on to
it), every descendant still alive is listed on stderr, told to stop, then killed. If the
command had succeeded and something was left behind, the supervisor fails: a test that leaves a
process running is a bug to fix, not to sweep up.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

import psutil

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 5


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _descendants() -> list[psutil.Process]:
    alive = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.Error:
            continue
    return alive


def _describe(proc: psutil.Process) -> str:
    try:
        return f"pid {proc.pid}: {' '.join(proc.cmdline())[:200] or proc.name()}"
    except psutil.Error:
        return f"pid {proc.pid}"


def _reap() -> None:
    """Collect the exit status of orphans handed to us, so they do not stay zombies."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_left_behind() -> list[str]:
    """Stop (SIGTERM, then SIGKILL after a grace) every descendant still alive; their names."""
    left = _descendants()
    names = [_describe(proc) for proc in left]
    for proc in left:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    deadline = time.monotonic() + GRACE_S
    while _descendants() and time.monotonic() < deadline:
        _reap()
        time.sleep(0.1)
    for proc in _descendants():
        try:
            proc.kill()
        except psutil.Error:
            pass
    time.sleep(0.2)
    _reap()
    return names


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    before = len(psutil.pids())
    child = subprocess.Popen(argv, preexec_fn=lambda: _prctl(PR_SET_PDEATHSIG, signal.SIGKILL))
    stopped_by: list[int] = []

    def pass_on(signum: int, _frame: object) -> None:
        stopped_by.append(signum)
        try:
            child.send_signal(signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, pass_on)
    # Wait for the command while collecting the orphans that reach us on the way.
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child.pid:
            code = os.waitstatus_to_exitcode(status)
            break
    left = end_left_behind()
    after = len(psutil.pids())
    print(f"processes on the machine: {before} before the tests, {after} after", file=sys.stderr)
    if left:
        print(f"{len(left)} process(es) were still running when the tests ended:", file=sys.stderr)
        for name in left:
            print(f"  {name}", file=sys.stderr)
        print("they were stopped; the test that started each must end it", file=sys.stderr)
    if stopped_by:
        return 128 + stopped_by[0]
    if code < 0:
        return 128 - code
    if left and code == 0:
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
