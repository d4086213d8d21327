"""Run untrusted, LLM-written Python scripts in a sandbox.

Each script gets a fresh working directory with the input files read-only under `data/`, a
clean environment built from an allowlist (no API keys, cloud credentials or tokens of the
parent), a wall-clock timeout that kills its whole process group, limits on address space,
CPU time and file size, and a bound on the output kept (head and tail, so tracebacks survive).

Two isolation modes:
- `bwrap` (bubblewrap, preferred): a private mount, PID, network and user namespace; only the
  system and Python directories are visible, read-only; the script runs as an unprivileged
  user, cannot reach the network and cannot write anywhere but its working directory.
- `process`: a plain subprocess with the same limits and environment, for machines without
  bubblewrap; `data/` is then a read-only copy, so the inputs themselves cannot be changed.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .errors import ConfigError

__all__ = ["ExecResult", "Limits", "resolve_mode", "run_script"]

log = logging.getLogger(__name__)

SCRIPT_NAME = "script.py"
INSIDE = "/sandbox"  # the working directory as the script sees it under bwrap
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
_PASSTHROUGH_ENV = ("LANG", "LC_ALL", "TZ")
_STAGE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Limits:
    """Bounds on one script run."""

    timeout_s: float = 120.0
    memory_mb: int = 4096
    output_bytes: int = 200_000


@dataclass(frozen=True)
class ExecResult:
    """What a script run produced. JSON-safe."""

    ok: bool
    exit_code: int | None
    output: str  # stdout, then stderr: what the agents see
    timed_out: bool
    duration_s: float
    truncated: bool
    sandbox: str
    stdout: str = ""  # stdout alone: the answer of a final script

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExecResult:
        return cls(**data)


@cache
def _bwrap() -> str | None:
    """The bubblewrap binary, if it is installed and works here."""
    path = shutil.which("bwrap")
    if not path:
        return None
    probe = subprocess.run(
        [path, "--unshare-all", "--ro-bind", "/", "/", "true"], capture_output=True, timeout=30
    )
    return path if probe.returncode == 0 else None


def resolve_mode(mode: str = "auto") -> str:
    """The isolation mode to use: 'bwrap' or 'process'."""
    if mode == "process":
        return "process"
    if _bwrap():
        return "bwrap"
    if mode == "bwrap":
        raise ConfigError(
            "DSSTAR_SANDBOX=bwrap but bubblewrap is not usable here; install it"
            " (apt-get install bubblewrap) or set DSSTAR_SANDBOX=process."
        )
    if os.geteuid() == 0:  # a plain subprocess of root could do anything: fail closed
        raise ConfigError(
            "bubblewrap is not installed and dsstar runs as root, so generated scripts would"
            " run with full control of this machine. Install it (apt-get install bubblewrap),"
            " or set DSSTAR_SANDBOX=process to accept running them without isolation."
        )
    _warn_weak_sandbox()
    return "process"


@cache
def _warn_weak_sandbox() -> None:
    log.warning(
        "bubblewrap is not installed: generated scripts run as plain subprocesses (clean"
        " environment and limits, no filesystem or network isolation). apt-get install bubblewrap"
    )


def run_script(
    code: str,
    *,
    data_dir: Path,
    limits: Limits,
    mode: str = "auto",
    work_root: Path | None = None,
) -> ExecResult:
    """Run `code` as a script with `data_dir` mounted read-only at `data/`."""
    mode = resolve_mode(mode)
    if work_root:
        work_root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="dsstar-exec-", dir=work_root))
    try:
        (workdir / SCRIPT_NAME).write_text(code, encoding="utf-8")
        if mode == "bwrap":
            argv, cwd, home = _bwrap_argv(workdir, data_dir.resolve()), None, INSIDE
        else:
            (workdir / "data").symlink_to(_readonly_copy(data_dir.resolve(), work_root))
            argv, cwd, home = _python_argv(limits), workdir, str(workdir)
        env = _environment(home)
        if mode == "bwrap":
            argv = [*argv, *_bwrap_env(env), *_python_argv(limits)]
        return _supervise(argv, cwd=cwd, env=env, limits=limits, mode=mode)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# Applied inside the sandbox, just before the script starts, so limits bind the script only.
_BOOT = """\
import os, resource, sys
mem, cpu = int(sys.argv[1]), int(sys.argv[2])
for limit, value in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_FSIZE, mem),
                     (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(limit, (value, value))
os.execv(sys.executable, [sys.executable, "-I", sys.argv[3]])
"""


def _python_argv(limits: Limits) -> list[str]:
    memory = limits.memory_mb * 1024 * 1024
    cpu = int(limits.timeout_s) + 2  # a backstop; the wall timeout normally fires first
    return [sys.executable, "-I", "-c", _BOOT, str(memory), str(cpu), SCRIPT_NAME]


def _environment(home: str) -> dict[str, str]:
    """An allowlisted environment: nothing of the parent's secrets can leak through it."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        # One thread per BLAS pool keeps the address space of numpy small under RLIMIT_AS.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update({k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ})
    return env


def _bwrap_argv(workdir: Path, data_dir: Path) -> list[str]:
    binds: list[str] = []
    python_dirs = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parents[1])}
    for path in sorted(set(_SYSTEM_DIRS) | python_dirs):
        if os.path.exists(path):
            binds += ["--ro-bind", path, path]
    return [
        _bwrap() or "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--uid", "65534",
        "--gid", "65534",
        # A private /tmp first: the Python directories bound next may live under /tmp.
        "--tmpfs", "/tmp",
        *binds,
        "--proc", "/proc",
        "--dev", "/dev",
        "--bind", str(workdir), INSIDE,
        "--ro-bind", str(data_dir), f"{INSIDE}/data",
        "--chdir", INSIDE,
        "--clearenv",
    ]  # fmt: skip


def _bwrap_env(env: dict[str, str]) -> list[str]:
    args: list[str] = []
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args


def _readonly_copy(data_dir: Path, work_root: Path | None) -> Path:
    """A read-only copy of `data_dir`, made once per process and data folder."""
    root = Path(work_root or tempfile.gettempdir())
    target = root / f"dsstar-data-{abs(hash((str(data_dir), os.getpid()))):x}"
    with _STAGE_LOCK:
        if not target.exists():
            staging = Path(tempfile.mkdtemp(prefix="dsstar-stage-", dir=root))
            shutil.copytree(data_dir, staging / "data", symlinks=False)
            for path in sorted((staging / "data").rglob("*"), reverse=True):
                path.chmod(0o555 if path.is_dir() else 0o444)
            (staging / "data").chmod(0o555)
            (staging / "data").rename(target)
            staging.rmdir()
    return target


def _supervise(
    argv: list[str], *, cwd: Path | None, env: dict[str, str], limits: Limits, mode: str
) -> ExecResult:
    started = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, so a timeout kills every child
    )
    captures = {"stdout": _BoundedCapture(limits.output_bytes),
                "stderr": _BoundedCapture(limits.output_bytes)}  # fmt: skip
    readers = [
        threading.Thread(target=capture.drain, args=(getattr(proc, name),), daemon=True)
        for name, capture in captures.items()
    ]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        proc.wait(timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    _kill_group(proc)
    proc.wait()
    for reader in readers:
        reader.join(timeout=5)
    stdout, stderr = captures["stdout"].text(), captures["stderr"].text()
    output = stdout + (("\n" if stdout and not stdout.endswith("\n") else "") + stderr)
    if timed_out:
        output += f"\n[dsstar] the script was killed after {limits.timeout_s:g} s (exec timeout)."
    elif proc.returncode and proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        output += f"\n[dsstar] the script was terminated by {name}."
    return ExecResult(
        ok=proc.returncode == 0 and not timed_out,
        exit_code=proc.returncode,
        output=output,
        timed_out=timed_out,
        duration_s=round(time.monotonic() - started, 3),
        truncated=any(capture.truncated for capture in captures.values()),
        sandbox=mode,
        stdout=stdout,
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


class _BoundedCapture:
    """Keeps the first bytes of a stream and a rolling tail, dropping the middle."""

    def __init__(self, limit: int) -> None:
        self.tail_limit = min(limit // 4, 32_000)
        self.head_limit = limit - self.tail_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def drain(self, stream: Any) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            room = self.head_limit - len(self.head)
            self.head += chunk[:room]
            self.tail += chunk[room:] if room > 0 else chunk
            if len(self.tail) > self.tail_limit:
                self.dropped += len(self.tail) - self.tail_limit
                del self.tail[: len(self.tail) - self.tail_limit]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.dropped:
            return f"{head}\n[dsstar] ... {self.dropped} bytes of output left out ...\n{tail}"
        return head + tail
