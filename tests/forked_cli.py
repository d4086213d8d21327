"""`python -m dsstar ...` for tests, forked from an interpreter that has already imported it.

A `dsstar` command that asks a model spends about 2 s of CPU on this machine importing
litellm, dsstar and the libraries Prefect builds on before it does anything. `run` starts the
command as its own process all the same, with its own pid, session, stdin, stdout, stderr,
working directory, environment and exit status, through `dsstar.cli.main` as `python -m
dsstar` does; only those imports were done before the fork, once per pytest worker.

What an import reads is fixed in the forked interpreter, so a command whose environment
differs in anything but the variables read while it runs (`RUNTIME_VARIABLES`) is started
the usual way, as are calls with options this module does not give (`run` then is
`subprocess.run`). Tests about the process itself (signals, start-up, imports) start their
own with `subprocess` or `processes.start`.
"""

from __future__ import annotations

import json
import locale
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from processes import die_with_parent, start, stop

__all__ = ["run", "shutdown"]

# Read when a command runs, not by what the forked interpreter imported: a command may differ
# from its environment in these alone. dsstar reads its settings when a command starts;
# Prefect, botocore and the OpenMP runtime are not imported or loaded before the fork;
# tiktoken reads its cache folder when it loads an encoding; PATH is searched when a program
# is started; rich reads COLUMNS and LINES when a console measures itself, unless they were
# set when the console was made (the forked interpreter starts without them).
RUNTIME_VARIABLES = (
    "DSSTAR_", "PYTEST_", "TMPDIR", "PREFECT_", "AWS_", "KMP_", "TIKTOKEN_CACHE_DIR", "PATH",
    "COLUMNS", "LINES",
)  # fmt: skip
_ENVIRONMENT = dict(os.environ)  # as conftest.py set it, before any test changed it
_TESTS = Path(__file__).resolve().parent
_MAIN = str(_TESTS.parent / "dsstar" / "__main__.py")  # sys.argv[0] under `python -m dsstar`
_OPTIONS = {"input", "capture_output", "text", "timeout", "env", "cwd", "check"}


def run(argv: list[str], **options: Any) -> subprocess.CompletedProcess:
    """`subprocess.run(argv, **options)`, forked from the warm interpreter when `argv` is
    `python -m dsstar ...` and the options are ones it gives."""
    env = options.get("env")
    forkable = _is_dsstar(argv) and set(options) <= _OPTIONS and _same_imports(env)
    server = _Server.get() if forkable else None
    if server is None:
        return subprocess.run(argv, **options)
    return server.run(
        argv, input=options.get("input"), capture=options.get("capture_output", False),
        text=options.get("text", False), timeout=options.get("timeout"),
        env=dict(os.environ if env is None else env), cwd=options.get("cwd"),
        check=options.get("check", False),
    )  # fmt: skip


def shutdown() -> None:
    """End this worker's forking interpreter, if it was started (with the session)."""
    with _Server._lock:
        if _Server._started is not None:
            stop(_Server._started.proc)
            _Server._started = None


def _is_dsstar(argv: Any) -> bool:
    return isinstance(argv, list) and argv[:3] == [sys.executable, "-m", "dsstar"]


def _same_imports(env: dict[str, str] | None) -> bool:
    env = os.environ if env is None else env
    return all(
        key.startswith(RUNTIME_VARIABLES)
        for key in set(env) | set(_ENVIRONMENT)
        if env.get(key) != _ENVIRONMENT.get(key)
    )


class _Server:
    """The warm interpreter of this pytest worker: started at its first use, from the main
    thread (it dies with the thread that started it), and ended with the session."""

    _lock = threading.Lock()
    _started: _Server | None = None
    _failed = False

    @classmethod
    def get(cls) -> _Server | None:
        with cls._lock:
            if cls._started is None and not cls._failed:
                if threading.current_thread() is not threading.main_thread():
                    return None
                try:
                    cls._started = cls()
                except RuntimeError:
                    cls._failed = True
                    raise
            return cls._started

    def __init__(self) -> None:
        folder = Path(tempfile.mkdtemp(prefix="dsstar-forks-"))
        self.address = str(folder / "socket")
        log = folder / "server.log"
        serve = (
            f"import sys; sys.path.insert(0, {str(_TESTS)!r}); import forked_cli;"
            f" forked_cli.serve({self.address!r})"
        )
        self.proc = start(
            [sys.executable, "-c", serve], cwd=str(_TESTS.parent),
            env={k: v for k, v in _ENVIRONMENT.items() if k not in ("COLUMNS", "LINES")},
            stdout=log.open("w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while not os.path.exists(self.address):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                stop(self.proc)
                raise RuntimeError(f"the forking interpreter did not start: {log.read_text()}")
            time.sleep(0.1)

    def run(
        self, argv: list[str], *, input: Any, capture: bool, text: bool, timeout: float | None,
        env: dict[str, str], cwd: Any, check: bool,
    ) -> subprocess.CompletedProcess:  # fmt: skip
        deadline = None if timeout is None else time.monotonic() + timeout
        theirs = [0, 1, 2]  # the command's stdin, stdout and stderr: ours unless piped
        ends: list[int] = []  # the pipes' ends the command gets, closed here once sent
        pipes: dict[int, int] = {}  # the command's stream -> our end of its pipe
        for stream in ([0] if input is not None else []) + ([1, 2] if capture else []):
            read, write = os.pipe()
            theirs[stream], pipes[stream] = (read, write) if stream == 0 else (write, read)
            ends.append(theirs[stream])
        # Arguments as the command's sys.argv has them: bytes that are not UTF-8 as surrogates.
        args = [os.fsdecode(arg) for arg in argv[3:]]
        request = {"args": args, "env": env, "cwd": str(cwd or os.getcwd())}
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as conn:
            conn.connect(self.address)
            socket.send_fds(conn, [json.dumps(request).encode()], theirs)
            for fd in ends:
                os.close(fd)
            pid = json.loads(conn.recv(256))["pid"]
            pumps = {stream: _Pump(fd, input if stream == 0 else None)
                     for stream, fd in pipes.items()}  # fmt: skip
            try:
                conn.settimeout(_left(deadline))
                status = json.loads(conn.recv(256))["status"]
                for pump in pumps.values():
                    pump.join(_left(deadline))
                    if pump.is_alive():
                        raise TimeoutError
            except TimeoutError:
                _kill(pid)
                raise subprocess.TimeoutExpired(argv, timeout or 0) from None
        out, err = (_decode(pumps[s].data, text) for s in (1, 2)) if capture else (None, None)
        done = subprocess.CompletedProcess(argv, status, out, err)
        if check:
            done.check_returncode()
        return done


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.001, deadline - time.monotonic())


class _Pump(threading.Thread):
    """Writes `data` to `fd` (stdin), or reads `fd` to its end, then closes it."""

    def __init__(self, fd: int, data: str | bytes | None = None) -> None:
        super().__init__(daemon=True)
        self.input = data.encode() if isinstance(data, str) else data
        self.fd, self.data = fd, b""
        self.start()

    def run(self) -> None:
        try:
            if self.input is not None:
                with open(self.fd, "wb", closefd=True) as stream:
                    try:
                        stream.write(self.input)
                    except BrokenPipeError:
                        pass
                return
            with open(self.fd, "rb", closefd=True) as stream:
                self.data = stream.read()
        except OSError:
            pass


def _decode(data: bytes, text: bool) -> str | bytes:
    if not text:
        return data
    decoded = data.decode(locale.getpreferredencoding(False))
    return decoded.replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # the command leads a session of its own
    except (ProcessLookupError, PermissionError):
        pass


# The forking interpreter ---------------------------------------------------------------

# litellm and the command line, then what Prefect imports, but not Prefect: it reads its
# settings and configures its logging when imported, after the command has set them
# (cli/_app.py:prefect_quietly).
_PREIMPORTED = (
    "litellm", "dsstar.cli", "sqlalchemy.orm", "sqlalchemy.ext.asyncio", "alembic", "griffe",
    "nbformat", "pendulum", "websockets", "opentelemetry.trace", "prometheus_client", "fastapi",
    "uvicorn", "httpx", "sqlmodel", "jsonschema",
)  # fmt: skip


def serve(address: str) -> None:
    """Import what `dsstar` commands import, then fork a command for each request."""
    import gc
    import importlib

    for module in _PREIMPORTED:
        importlib.import_module(module)
    for module in ("prefect", "botocore"):  # see RUNTIME_VARIABLES
        if module in sys.modules:
            raise RuntimeError(f"{module} was imported: each command must import it itself")
    gc.collect()
    gc.freeze()  # the forks' collections leave the imported objects (and their pages) alone
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address + ".new")
    listener.listen(64)
    os.rename(address + ".new", address)  # the socket is there once it accepts
    try:
        while True:
            conn, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                try:
                    _wait_for(conn)
                finally:
                    os._exit(0)
            conn.close()
            _reap()
    finally:
        _reap()  # the commands' CPU then counts in this process's children, as a test's


def _reap() -> None:
    """Reap the waiters that are done (each has reaped its command)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _wait_for(conn: socket.socket) -> None:
    """In a child of the server: fork the command, tell its pid, wait, tell its status."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent()
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        try:
            conn.close()
            _become(request, fds)
        except BaseException:
            traceback.print_exc()  # on the command's stderr, as the interpreter would
            sys.stderr.flush()
        finally:
            os._exit(1)
    for fd in fds:
        os.close(fd)
    conn.send(json.dumps({"pid": pid}).encode())
    _, status = os.waitpid(pid, 0)
    conn.send(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode())


def _become(request: dict, fds: list[int]) -> None:
    """In the command's process: its own session, stdio, directory and environment, then
    `dsstar` as `python -m dsstar` runs it."""
    os.setsid()
    die_with_parent()
    for target, fd in zip((0, 1, 2), fds, strict=True):
        if fd != target:
            os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # found again from TMPDIR
    sys.argv = [_MAIN, *request["args"]]
    from dsstar.cli import main

    main()
