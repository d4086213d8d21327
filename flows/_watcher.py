"""The watcher: a small process that outlives the dsstar process it watches, to settle the
runs that process leaves when it dies without a word (SIGKILL, the out-of-memory killer).

Each process that runs ds-star flows against a server that lasts starts one watcher, on the
first such run. It reads the process's runs from a pipe: a line when a run starts, another
when it ends. The dying process's end of the pipe is closed by the kernel, however it died,
so the watcher reads the end of the pipe at once; it then settles every run still started
(flows/_settle.py: the flow run Crashed with the reason and the command that continues it,
and a card that says so, or Completed when the answer was stored; the task runs it left
running crashed) and exits. When the process exits normally its runs have ended and the
watcher exits with nothing to do.

The watcher imports only the standard library until it has work, and leaves the terminal's
Ctrl-C and hang-up to the process it watches, in whose process group it stays: whoever ends
the whole group (`kill -9 -PGID`, a container's end) ends it too, and the heartbeat
automation (flows/workers.py) is then what marks the runs Crashed. A command stopped by
SIGINT or SIGTERM kills its children but the watcher: a run its stop cut short before its
flow run said so is still settled (as interrupted, run.json says by which signal).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
from typing import IO, Any

from dsstar.execution import stopping

__all__ = ["main", "unwatch", "watch"]

# What the settling may take, all together: the API may be as gone as the process.
_SETTLE_S = 120


class _Pipe:
    """This process's watcher, the write end of its pipe, and the runs it was told of."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid = 0  # the process that started it (a fork must start its own)
        self.runs: dict[str, dict[str, Any]] = {}

    def tell(self, flow_run_id: str, started: dict[str, Any] | None) -> None:
        """A run started (`started`: what settles it) or ended (None)."""
        with self.lock:
            if started is None and self.runs.pop(flow_run_id, None) is None:
                return
            if started is None and (self.proc is None or self.proc.poll() is not None):
                return  # a watcher gone has nothing to forget
            if started is not None:
                self.runs[flow_run_id] = started
            line = started or {"end": True, "flow_run_id": flow_run_id}
            for _ in range(2):  # a watcher that died is started again, with the runs so far
                try:
                    stdin = self._stdin()
                    stdin.write((json.dumps(line) + "\n").encode())
                    stdin.flush()
                    return
                except OSError:
                    self.proc = None

    def _stdin(self) -> IO[bytes]:
        if self.proc is None or self.pid != os.getpid() or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "flows._watcher"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=_ROOT,  # where `flows` is found
            )
            self.pid = os.getpid()
            stopping.spare(self.proc.pid)  # a stopped command's runs may still need it
            assert self.proc.stdin is not None
            for started in self.runs.values():
                self.proc.stdin.write((json.dumps(started) + "\n").encode())
        assert self.proc.stdin is not None
        return self.proc.stdin

    def close(self) -> None:
        """At this process's normal exit: the pipe closes and the watcher, told of no run
        left, exits at once."""
        with self.lock:
            proc, self.proc = self.proc, None
            if proc is None or self.pid != os.getpid():
                return
            try:
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass

    def forget(self) -> None:
        """In a child forked from this process: the pipe is the parent's; it is closed here,
        so that the watcher still learns when the parent dies."""
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        self.lock, self.proc, self.pid, self.runs = threading.Lock(), None, 0, {}


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_pipe = _Pipe()
atexit.register(_pipe.close)
os.register_at_fork(after_in_child=_pipe.forget)


def watch(run: dict[str, Any]) -> None:
    """Have the watcher settle `run` if this process dies before `unwatch`. `run`:
    flow_run_id, run_id, storage, attempt (the flow run's run count), api (the Prefect API
    URL), pid and host."""
    _pipe.tell(run["flow_run_id"], {"start": True, **run})


def unwatch(flow_run_id: str) -> None:
    """The run ended (its flow run reports its own state): nothing to settle."""
    _pipe.tell(flow_run_id, None)


# -- the watcher process ---------------------------------------------------------------------


def main() -> None:
    """Read runs from stdin until it closes; then settle those that did not end."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):  # the terminal's, not ours
        signal.signal(signum, signal.SIG_IGN)
    runs: dict[str, dict[str, Any]] = {}
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if message.get("start"):
            runs[message["flow_run_id"]] = message
        else:
            runs.pop(message.get("flow_run_id"), None)
    if runs:
        signal.alarm(_SETTLE_S)  # SIGALRM ends this process, whatever is left undone
        for run in runs.values():
            _settle(run)


def _settle(run: dict[str, Any]) -> None:
    """Settle one run of the process that died (imports Prefect: only now)."""
    os.environ.setdefault("PREFECT_CLIENT_MAX_RETRIES", "2")  # the API may be gone too
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from dsstar.keys import run_record
    from dsstar.storage import Store
    from flows._settle import settle

    record: dict[str, Any] = {"run_id": run["run_id"], "status": "running"}
    try:
        record = Store(run["storage"]).read_json(run_record(run["run_id"]))
    except Exception:  # unreadable storage: the run is settled as it stood, running
        pass
    if record.get("flow_run_id") != run["flow_run_id"]:  # another attempt wrote it since
        record = {**record, "flow_run_id": run["flow_run_id"], "status": "running"}
    cause = (
        f"its process (pid {run['pid']} on {run['host']}) died without a word: killed by"
        " SIGKILL (kill -9, or the kernel when out of memory), or crashed"
    )
    with temporary_settings({PREFECT_API_URL: run["api"]}):  # the run's, as it talked to
        settle(record, cause, attempt=run["attempt"], storage=run["storage"])


if __name__ == "__main__":
    main()
