"""Processes a test starts, and their end: each in a session of its own, so that whatever it
started in turn (a worker's flow runs, a served deployment's runs, a temporary Prefect server)
ends with it, also when the test fails."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["die_with_parent", "running", "start", "stop"]

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """The kernel kills this process with SIGKILL when the thread that started it ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def start(argv: list[str], **kwargs: Any) -> subprocess.Popen:
    """`subprocess.Popen(argv, **kwargs)` as the leader of a new process group, killed by the
    kernel when the test process that started it dies (a session stopped with SIGKILL has no
    teardown; what the process started in turn is ended by scripts/supervise.py)."""
    return subprocess.Popen(argv, start_new_session=True, preexec_fn=die_with_parent, **kwargs)


def stop(proc: subprocess.Popen, signum: int = signal.SIGTERM, grace: float = 30) -> bool:
    """Tell `proc` to stop with `signum`, then, after `grace` seconds, once more with SIGINT;
    whatever it did, end its process group. True when it stopped on being told.

    The second signal is for Prefect's workers: their handler answers SIGTERM by sending
    SIGINT to their own process, and that SIGINT has been seen left unhandled (the worker
    logged that it sent it, never that it got it, and did not exit); a signal that arrives
    later makes the interpreter run the handlers still pending."""
    try:
        for told in (signum, signal.SIGINT):
            if proc.poll() is not None:
                break
            proc.send_signal(told)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        return proc.poll() is not None
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # what it started, and itself if still there
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait(timeout=30)


@contextmanager
def running(
    argv: list[str], signum: int = signal.SIGTERM, **kwargs: Any
) -> Iterator[subprocess.Popen]:
    """`start(argv, **kwargs)`, stopped with `signum` (then its group killed) on leaving."""
    proc = start(argv, **kwargs)
    try:
        yield proc
    finally:
        stop(proc, signum)
