"""Stopping a command cleanly on SIGINT or SIGTERM, leaving no child process behind.

The CLI calls `install()` on every command; a process that runs many commands (a test, an
embedding program) still has one signal pipe and one watcher thread. The first SIGINT or SIGTERM
then:

- raises `Interrupted` in the main thread, so the flow unwinds and marks its run
  `interrupted` (while a flow runs, Prefect's own SIGTERM handler raises its
  `TerminationSignal` first; the run unwinds the same way);
- arms a deadline: a model call in a worker thread cannot be cut short, so when the main
  thread has not finished within `GRACE_S`, a watchdog thread finishes the stop itself.

`finish()` runs the stop hooks once, newest first (mark the run, print the resume hint, stop
the Prefect server, delete temporary folders) and those added with `last` after them, kills
every remaining child process (but a `spare`d one) and exits with 128 + the signal number:
130 for SIGINT, 143 for SIGTERM. Scripts are killed last, so a script killed by the stop is
never taken for a finished (and cached) execution.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import NoReturn

from dsstar.errors import Interrupted

__all__ = [
    "GRACE_S",
    "at_stop",
    "finish",
    "install",
    "kill_children",
    "on_stop",
    "requested",
    "spare",
]

log = logging.getLogger(__name__)

GRACE_S = 5.0  # how long the main thread may take to unwind before the watchdog steps in
HOOKS_S = 3.0  # how long the stop hooks may take, all together
_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Hook = Callable[[int], None]
_hooks: list[Hook] = []
_last: list[Hook] = []  # cleanups that may wait on a server: after those that tell the user
_state: dict[str, float | int | bool | None] = {"signum": None, "at": None, "raised": False}
_state_lock = threading.Lock()
_finish_lock = threading.Lock()
_wakeup: list[int] = []  # the signal pipe's write end, made (and watched) once per process
_spared: set[int] = set()  # children that outlive a stop on purpose


def install() -> None:
    """Handle SIGINT and SIGTERM as described above. Call from the main thread; calling again
    re-arms the handlers and adds nothing."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in _SIGNALS:
        signal.signal(signum, _handler)
    # The wakeup fd sees every signal, even while Prefect's handler replaces ours, so the
    # deadline is armed at once whichever Python handler runs.
    if not _wakeup:
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        threading.Thread(target=_watch, args=(read_end,), daemon=True, name="dsstar-stop").start()
        _wakeup.append(write_end)
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(_wakeup[0], warn_on_full_buffer=False)


def requested() -> int | None:
    """The signal that asked this process to stop, if one did."""
    return _state["signum"]  # type: ignore[return-value]


def at_stop(hook: Hook, *, last: bool = False) -> None:
    """Run `hook(signum)` whenever this process is stopped (hooks run newest first, each once).
    `last` hooks run after all the others, whenever they were added: a cleanup that may wait
    on a busy server (and has a fallback) must not use up the time of the hook that marks the
    run and tells the user how to resume it."""
    hooks = _last if last else _hooks
    if hook not in hooks:
        hooks.append(hook)


@contextlib.contextmanager
def on_stop(hook: Hook) -> Iterator[None]:
    """Run `hook(signum)` if the process is stopped while the block runs (or unwinds)."""
    _hooks.append(hook)
    try:
        yield
    finally:
        if requested() is None and hook in _hooks:  # stopping: `finish` still needs it
            _hooks.remove(hook)


def finish() -> NoReturn:
    """Run the stop hooks (once), kill every child process and exit with 128 + signal."""
    signum = requested() or signal.SIGINT
    started = float(_state["at"] or time.monotonic())
    budget = max(0.5, started + GRACE_S + HOOKS_S - time.monotonic())
    if _finish_lock.acquire(timeout=budget):
        hooks = [*reversed(_hooks), *reversed(_last)]
        _hooks.clear()
        _last.clear()
        runner = threading.Thread(target=_run_hooks, args=(hooks, signum), daemon=True)
        runner.start()
        runner.join(timeout=budget)
    kill_children()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(128 + signum)


def spare(pid: int) -> None:
    """Leave the child `pid` alive when stopping: a watcher that settles what this process
    leaves undone once it is gone (flows/_watcher.py)."""
    _spared.add(pid)


def kill_children() -> None:
    """SIGKILL every descendant of this process (scripts, servers), deepest first, but those
    spared."""
    import psutil

    try:
        children = [c for c in psutil.Process().children(recursive=True) if c.pid not in _spared]
    except psutil.Error:
        return
    for child in reversed(children):
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(children, timeout=2)


def _begin(signum: int) -> bool:
    """Record the stop and arm the deadline; True the first time."""
    with _state_lock:
        if _state["signum"] is not None:
            return False
        _state.update(signum=signum, at=time.monotonic())
    threading.Thread(target=_deadline, daemon=True, name="dsstar-deadline").start()
    return True


def _handler(signum: int, frame: object) -> None:
    _begin(signum)
    with _state_lock:
        if _state["raised"]:  # a repeated signal, or Prefect re-sending SIGTERM: unwinding
            return
        _state["raised"] = True
    raise Interrupted(signum)


def _watch(read_end: int) -> None:
    while True:
        try:
            data = os.read(read_end, 64)
        except OSError:
            return
        for signum in data:
            if signum in _SIGNALS:
                _begin(signum)


def _deadline() -> None:
    time.sleep(GRACE_S)
    log.warning("the command did not stop within %.0f s; stopping it now", GRACE_S)
    finish()


def _run_hooks(hooks: list[Hook], signum: int) -> None:
    for hook in hooks:
        try:
            hook(signum)
        except Exception as exc:  # one failing hook must not keep the others from running
            log.warning("stop hook %s failed: %s", getattr(hook, "__name__", hook), exc)
