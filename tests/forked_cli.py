"""`python -m dsstar ...` for tests, forked from an interpreter that has already imported it.

A `dsstar` command that asks a model spends about 2 s of CPU on this machine importing
litellm, dsstar and the libraries Prefect builds on before it does anything. `run`, `popen`
and `start` start the command as its own process all the same, with its own pid, session,
stdin, stdout, stderr, working directory, environment and exit status, through
`dsstar.cli.main` as `python -m dsstar` does; only those imports were done before the fork,
once per pytest worker.

What an import reads is fixed in the forked interpreter, so a command whose environment
differs in anything but the variables read while it runs (`RUNTIME_VARIABLES`) is started
the usual way, as are calls with options this module does not give (`run` then is
`subprocess.run`). Tests about start-up and imports start their own with `subprocess`.

A forked command's /proc/PID/environ and cmdline are the forking interpreter's: the kernel
keeps what a process was started with. What the command starts in turn has its own.
"""

from __future__ import annotations

import io
import json
import locale
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import IO, Any

import processes
from processes import die_with_parent, stop

__all__ = ["Forked", "popen", "run", "shutdown", "start"]

# CPU seconds of this worker's forked commands that have ended, each counted when its test
# learns its status (benchmarks/suite_cpu.py), and how much of it ended with the interpreter
# in `shutdown`, where the caller's reaped children count it a second time.
CPU = 0.0
CPU_AT_SHUTDOWN = 0.0

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
_OPTIONS = {"stdin", "stdout", "stderr", "text", "env", "cwd"}


def run(argv: list[str], **options: Any) -> subprocess.CompletedProcess:
    """`subprocess.run(argv, **options)`, forked from the warm interpreter when `argv` is
    `python -m dsstar ...` and the options are ones it gives. On a timeout the command's
    process group is killed."""
    given = dict(options)
    input, timeout, check = (given.pop(k, None) for k in ("input", "timeout", "check"))
    if given.pop("capture_output", False):
        given.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        given["stdin"] = subprocess.PIPE
    proc = _fork(argv, given)
    if proc is None:
        return subprocess.run(argv, **options)
    with proc:
        try:
            out, err = proc.communicate(input, timeout)
        except subprocess.TimeoutExpired:
            _kill(proc.pid)
            raise
    done = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def popen(argv: list[str], **options: Any) -> subprocess.Popen | Forked:
    """`subprocess.Popen(argv, start_new_session=True, **options)`, forked from the warm
    interpreter when it can be (see `run`). Either way the command leads a session of its
    own and has a pid, its streams, `poll`, `wait`, `communicate` and the signals."""
    return _fork(argv, options) or subprocess.Popen(argv, start_new_session=True, **options)


def start(argv: list[str], **options: Any) -> subprocess.Popen | Forked:
    """`processes.start(argv, **options)` (a session of its own, killed when this process
    dies), forked from the warm interpreter when it can be: a forked command dies with it
    too, through the interpreter."""
    return _fork(argv, options) or processes.start(argv, **options)


def shutdown() -> None:
    """End this worker's forking interpreter, if it was started (with the session)."""
    global CPU_AT_SHUTDOWN
    with _Server._lock:
        if _Server._started is not None:
            stop(_Server._started.proc)
            CPU_AT_SHUTDOWN = CPU
            shutil.rmtree(_Server._started.folder, ignore_errors=True)
            _Server._started = None


def _fork(argv: Any, options: dict[str, Any]) -> Forked | None:
    env = options.get("env")
    if not (_is_dsstar(argv) and set(options) <= _OPTIONS and _same_imports(env)):
        return None
    server = _Server.get()
    if server is None:
        return None
    env = dict(os.environ if env is None else env)
    return Forked(server.address, argv, env=env, **{k: v for k, v in options.items() if k != "env"})


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
        self.folder = folder = Path(tempfile.mkdtemp(prefix="dsstar-forks-"))
        self.address = str(folder / "socket")
        log = folder / "server.log"
        serve = (
            f"import sys; sys.path.insert(0, {str(_TESTS)!r}); import forked_cli;"
            f" forked_cli.serve({self.address!r})"
        )
        self.proc = processes.start(
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


class Forked:
    """A command forked from the warm interpreter, with what tests use of `subprocess.Popen`:
    `args`, `pid`, `returncode`, `stdin`, `stdout`, `stderr`, `poll`, `wait`, `communicate`,
    `send_signal`, `terminate`, `kill`, and `with`. Its waiter (a child of the interpreter)
    reaps it and sends its exit status over the connection."""

    def __init__(
        self, address: str, argv: list[str], *, env: dict[str, str], stdin: Any = None,
        stdout: Any = None, stderr: Any = None, text: bool = False, cwd: Any = None,
    ) -> None:  # fmt: skip
        self.args, self.returncode = argv, None
        theirs = [0, 1, 2]  # the command's stdin, stdout and stderr: ours unless told
        ours: dict[int, int] = {}  # the command's stream -> our end of its pipe
        opened: list[int] = []  # descriptors made here for the command, closed once sent
        for stream, choice in enumerate((stdin, stdout, stderr)):
            if choice is None:
                continue
            if choice == subprocess.STDOUT:  # stderr, where stdout goes
                theirs[stream] = theirs[1]
            elif choice == subprocess.PIPE:
                read, write = os.pipe()
                theirs[stream], ours[stream] = (read, write) if stream == 0 else (write, read)
                opened.append(theirs[stream])
            elif choice == subprocess.DEVNULL:
                theirs[stream] = os.open(os.devnull, os.O_RDWR)
                opened.append(theirs[stream])
            else:  # a descriptor, or a file that has one
                theirs[stream] = choice if isinstance(choice, int) else choice.fileno()
        # Arguments as the command's sys.argv has them: bytes that are not UTF-8 as surrogates.
        args = [os.fsdecode(arg) for arg in argv[3:]]
        request = {"args": args, "env": env, "cwd": os.fspath(cwd or os.getcwd())}
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._conn.connect(address)
            socket.send_fds(self._conn, [json.dumps(request).encode()], theirs)
        finally:
            for fd in opened:
                os.close(fd)
        self.pid: int = json.loads(self._conn.recv(256))["pid"]
        self.stdin, self.stdout, self.stderr = (
            _stream(ours[s], s == 0, text) if s in ours else None for s in (0, 1, 2)
        )  # fmt: skip
        self._waiting = threading.Lock()  # one thread reads the status at a time
        self._pumps: dict[str, _Pump] | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._waiting.acquire(blocking=False):
            try:
                self._conn.setblocking(False)
                self._done(self._conn.recv(256))
            except BlockingIOError:
                pass
            finally:
                self._waiting.release()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            with self._waiting:
                if self.returncode is None:
                    self._conn.settimeout(timeout)
                    try:
                        self._done(self._conn.recv(256))
                    except TimeoutError:
                        raise subprocess.TimeoutExpired(self.args, timeout) from None
        return self.returncode  # type: ignore[return-value]

    def _done(self, message: bytes) -> None:
        if not message:
            raise RuntimeError("the forking interpreter ended before the command")
        done = json.loads(message)
        self.returncode = done["status"]
        self._conn.close()
        global CPU
        CPU += done["cpu"]

    def communicate(
        self, input: str | bytes | None = None, timeout: float | None = None
    ) -> tuple[Any, Any]:
        """As `Popen.communicate`: a call after a timeout goes on collecting."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._pumps is None:
            streams = {"stdin": self.stdin, "stdout": self.stdout, "stderr": self.stderr}
            self._pumps = {name: _Pump(stream, input if name == "stdin" else None)
                           for name, stream in streams.items() if stream is not None}  # fmt: skip
        for pump in self._pumps.values():
            pump.join(_left(deadline))
            if pump.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(_left(deadline))
        collected = (self._pumps.get(name) for name in ("stdout", "stderr"))
        return tuple(pump.data if pump else None for pump in collected)  # type: ignore[return-value]

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc: object) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self.wait()


def _stream(fd: int, writing: bool, text: bool) -> IO[Any]:
    """Our end of a pipe, as Popen opens it (text: the locale's encoding, universal newlines)."""
    raw = open(fd, "wb" if writing else "rb")  # noqa: SIM115 - closed by its owner
    if not text:
        return raw
    encoding = locale.getpreferredencoding(False)
    return io.TextIOWrapper(raw, encoding=encoding, write_through=writing)


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.001, deadline - time.monotonic())


class _Pump(threading.Thread):
    """Writes `data` to `stream` (stdin) and closes it, or reads `stream` to its end."""

    def __init__(self, stream: IO[Any], data: str | bytes | None = None) -> None:
        super().__init__(daemon=True)
        self.stream, self.input = stream, data
        self.data: str | bytes = "" if isinstance(stream, io.TextIOBase) else b""
        self.start()

    def run(self) -> None:
        try:
            if self.stream.writable():
                try:
                    if self.input:
                        self.stream.write(self.input)
                finally:
                    self.stream.close()
                return
            self.data = self.stream.read()
        except (OSError, ValueError):
            pass


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
    _, status, usage = os.wait4(pid, 0)  # the command's CPU with that of what it reaped
    cpu = usage.ru_utime + usage.ru_stime
    conn.send(json.dumps({"status": os.waitstatus_to_exitcode(status), "cpu": cpu}).encode())


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
