"""The warm pool: sandboxed interpreters with the data stack imported, one per data folder.

A zygote is the boot program in role 'zygote' inside the same namespaces and read-only root
as a cold script, with the run's data folder at /.data. It imports numpy, pandas and pyarrow
(what is installed) once, then for each request forks a child that makes its own mount
namespace and capped tmpfs working directory, forks the script under the request's uid with
the request's limits, and exits with it: an interpreter never serves two scripts. Zygotes
are keyed by (mode, data folder, the scripts' interpreter); the few most recent are kept.
When one cannot be built, scripts start cold and the reason is logged once and recorded on
each result.
"""

from __future__ import annotations

import array
import atexit
import json
import logging
import os
import signal
import socket
import subprocess
import threading
from collections import OrderedDict
from pathlib import Path

from dsstar.execution.sandbox.boot import HEADER
from dsstar.execution.sandbox.host import environment, is_root
from dsstar.execution.sandbox.interpreter import resolve_python, stage_fonts
from dsstar.execution.sandbox.modes import boot_argv, isolates
from dsstar.execution.sandbox.staging import new_dir, remove, sweep_once, write_etc
from dsstar.execution.sandbox.supervise import kill_uid, result, watch
from dsstar.execution.sandbox.types import ExecResult, Limits
from dsstar.execution.sandbox.uids import uid_range

__all__ = ["Zygote", "get", "kill_group", "shutdown", "spawn"]

log = logging.getLogger(__name__)

PRELOAD = ("numpy", "pandas", "pyarrow")
MAX_ZYGOTES = 4
READY_TIMEOUT_S = 120.0
_LOCK = threading.Lock()
_ZYGOTES: OrderedDict[tuple[str, str, str], Zygote] = OrderedDict()
_FAILED: dict[tuple[str, str, str], str] = {}


def spawn(argv: list[str], pipes: list[tuple[int, int]], env: dict[str, str], cwd: Path | None):
    """Start a boot program with stdout, stderr and the status pipe's write ends, then close
    those here so that end of file means the script's processes are gone."""
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=pipes[0][1],
            stderr=pipes[1][1],
            pass_fds=(pipes[2][1],),
            env=env,
            cwd=cwd,
            start_new_session=True,  # its own process group, killed as one when needed
        )
    finally:
        for _, write in pipes:
            os.close(write)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


def get(
    mode: str, data_dir: Path, work_root: Path | None, python: str | None = None
) -> tuple[Zygote | None, str]:
    """The zygote for this mode, data folder and interpreter (None: this one), started on
    first use; or None and why."""
    if not isolates(mode):
        return None, f"no warm pool in mode {mode!r}"
    if not is_root():
        return None, "the warm pool needs a dedicated uid per script, so dsstar must run as root"
    python = resolve_python(python)
    key = (mode, str(data_dir), python)
    with _LOCK:
        if key in _FAILED:
            return None, _FAILED[key]
        zygote = _ZYGOTES.get(key)
        if zygote is not None and zygote.alive():
            _ZYGOTES.move_to_end(key)
            return zygote, ""
        sweep_once(work_root)
        try:
            zygote = Zygote(mode, data_dir, work_root, python)
        except (OSError, RuntimeError) as exc:
            reason = f"the warm pool could not start ({exc}); scripts start cold"
            log.warning(reason)
            _FAILED[key] = reason
            return None, reason
        _ZYGOTES[key] = zygote
        while len(_ZYGOTES) > MAX_ZYGOTES:
            _ZYGOTES.popitem(last=False)[1].close()
        return zygote, ""


@atexit.register
def shutdown() -> None:
    """Stop every zygote (they also die with this process on their own)."""
    with _LOCK:
        while _ZYGOTES:
            _ZYGOTES.popitem()[1].close()
        _FAILED.clear()


class Zygote:
    """One warm interpreter inside the sandbox, serving forked children."""

    def __init__(
        self, mode: str, data_dir: Path, work_root: Path | None, python: str | None = None
    ) -> None:
        self.mode, self.failure = mode, ""
        self.lock = threading.Lock()
        self.stage = new_dir("pool", work_root)
        try:
            write_etc(self.stage, uid_range())
            # matplotlib's font list is built (once per process) while the pool interpreter
            # imports pandas: the stage is bound live, so the children find it there.
            fonts = threading.Thread(target=stage_fonts, args=(self.stage / "fonts", python))
            fonts.start()
            self.conn, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            spec = {"role": "zygote", "preload": list(PRELOAD), "python": resolve_python(python)}
            self.log = open(self.stage.parent / f"{self.stage.name}.log", "w+b")  # noqa: SIM115
            os.unlink(self.log.name)  # read through the open handle only
            with inside:
                self.proc = subprocess.Popen(
                    boot_argv(mode, self.stage, data_dir, spec),
                    stdin=inside,
                    stdout=subprocess.DEVNULL,
                    stderr=self.log,
                    env=environment("/sandbox", "/tmp"),
                    start_new_session=True,
                )
            self.conn.settimeout(READY_TIMEOUT_S)
            line = self.conn.makefile("rb").readline()
            if not line:
                raise RuntimeError(f"the pool interpreter exited: {self._log()}")
            self.loaded = json.loads(line)["ready"]
            fonts.join()
            self.conn.settimeout(None)
        except BaseException:
            self.close()
            raise

    def _log(self) -> str:
        self.proc.wait(timeout=5)
        self.log.seek(0)
        tail = self.log.read()[-500:].decode("utf-8", "replace").strip()
        return f"exit code {self.proc.returncode}: {tail}"

    def alive(self) -> bool:
        return self.proc.poll() is None and not self.failure

    def run(
        self, code: str, uid: int | None, limits: Limits, files: list[str] | None = None
    ) -> ExecResult | None:
        """Run one script in a fresh child (with only `files` of the data, when given);
        None when the pool failed before it started."""
        pipes = [os.pipe() for _ in range(3)]
        spec: dict = {"uid": uid, "limits": limits.boot()}
        if files is not None:
            spec["files"] = files
        body = json.dumps({"code": code, "spec": spec})
        try:
            with self.lock:
                fds = array.array("i", [w for _, w in pipes])
                self.conn.sendmsg(
                    [HEADER.pack(len(body.encode()))],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)],
                )
                self.conn.sendall(body.encode())
        except OSError as exc:
            self.failure = f"the warm pool stopped ({exc}); this script started cold"
            for read, _ in pipes:
                os.close(read)
            return None
        finally:
            for _, write in pipes:
                os.close(write)
        report, facts = watch(tuple(r for r, _ in pipes), uid, limits, kill=lambda: kill_uid(uid))
        if not report or "error" in report:
            self.failure = (
                f"the warm pool failed to start a script ({report.get('error', 'no status')});"
                " this script started cold"
            )
            log.warning(self.failure)
            return None
        return result(report, facts, limits, self.mode, start="warm")

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()  # the zygote exits at end of file
        proc = getattr(self, "proc", None)
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                kill_group(proc)
                proc.wait()
        if getattr(self, "log", None) is not None:
            self.log.close()
        remove(self.stage)
