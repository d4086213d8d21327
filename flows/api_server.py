"""The Prefect API a command talks to: the configured one, else a server for this command only.

Left alone, Prefect starts a temporary server in a subprocess when `PREFECT_API_URL` is unset,
and that subprocess outlives a CLI killed with SIGKILL. This one runs the same application
(without the UI) under a small launcher that asks the kernel to kill it when the CLI dies
(PR_SET_PDEATHSIG), in its own session so that a Ctrl-C in the terminal reaches only the CLI,
which stops it in order.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from dsstar.collector import PACE
from dsstar.execution import stopping
from dsstar.settings import Settings

__all__ = [
    "EphemeralServer",
    "api_configured",
    "ensure_api",
    "open_api_warning",
    "prefect_api",
    "start_early",
]

# Runs before the server: arm the parent-death signal, make sure the parent did not die in
# the meantime, then become the server (`python -m uvicorn ...`, in this same process) at
# dsstar's garbage collector pace.
_LAUNCH = f"""\
import ctypes, gc, os, runpy, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)
gc.set_threshold(*{PACE})
sys.argv = ["uvicorn", *sys.argv[2:]]
runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)
"""


class EphemeralServer:
    """A Prefect API server on a free loopback port that dies with this process."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.stopping = False
        self.url = f"http://127.0.0.1:{self.port}/api"
        # Where prefect is installed, found without importing it (that takes a second or more).
        site = os.path.dirname(os.path.dirname(importlib.util.find_spec("prefect").origin))
        argv = [
            "--app-dir", site,
            "--factory", "prefect.server.api.server:create_app",
            "--host", "127.0.0.1", "--port", str(self.port),
            "--log-level", "error", "--lifespan", "on",
        ]  # fmt: skip
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1"}
        env.pop("PREFECT_API_URL", None)
        self.process = subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, str(os.getpid()), *argv],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 90.0, longest: float = 900.0) -> None:
        """Block until the API answers its health check. The server gets `timeout` seconds
        of its own CPU time (its start is imports and database migrations): on a busy
        machine, where that takes many times as long on the clock, it is not given up for
        being slow, only once it exits, uses no CPU for `timeout` seconds (stuck), or has
        not answered after `longest` seconds on the clock."""
        started = moved = time.monotonic()
        last = 0.0
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2):
                    return
            except OSError:
                now, spent = time.monotonic(), self._cpu_seconds()
                if spent is not None and spent > last:
                    last, moved = spent, now
                if (
                    spent is None
                    or spent > timeout
                    or now - moved > timeout
                    or (now - started > max(timeout, longest))
                ):
                    raise RuntimeError("the temporary Prefect server did not start") from None
                time.sleep(0.1)

    def _cpu_seconds(self) -> float | None:
        """The CPU time the server has used so far (None once it has exited)."""
        import psutil

        if self.process.poll() is not None:
            return None
        try:
            times = psutil.Process(self.process.pid).cpu_times()
        except psutil.Error:
            return None
        return times.user + times.system

    def watch(self) -> None:
        """Stop this command (as SIGTERM would: the run is marked interrupted and can be
        resumed) if the server exits under it. Without its API a run cannot go on, and
        Prefect's clients would retry every call for minutes before giving up."""

        def wait() -> None:
            code = self.process.wait()
            if self.stopping:
                return
            print(
                f"error: the temporary Prefect server exited (code {code}) under this command;"
                " stopping it",
                file=sys.stderr,
                flush=True,
            )
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=wait, name="dsstar-server-watch", daemon=True).start()

    def stop(self, *_: object) -> None:
        """Terminate the server (politely, then not)."""
        self.stopping = True
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def api_configured() -> bool:
    """Whether a Prefect API is configured (environment or profile). Without one, a command
    talks to a temporary server that ends with it."""
    from prefect.settings import get_current_settings

    return bool(os.environ.get("PREFECT_API_URL") or get_current_settings().api.url)


_early: EphemeralServer | None = None  # started by start_early, not yet handed out


def start_early() -> None:
    """Start the server `ensure_api` will hand out now, when the environment names no API:
    it takes seconds to start (it imports Prefect's server), which then overlap with the
    command's own imports and checks instead of following them. Nothing talks to it until
    `ensure_api`, which stops it if the active Prefect profile names an API after all.
    Call after the command has set Prefect's variables (prefect_quietly)."""
    global _early
    if _early is None and not os.environ.get("PREFECT_API_URL"):
        if sys.platform.startswith("linux"):
            _early = EphemeralServer()
            atexit.register(_early.stop)  # the command may end before it is used


def ensure_api() -> EphemeralServer | None:
    """Start a server for this process when Prefect has no API URL configured (neither in the
    environment nor in the active profile); Prefect then talks to it through PREFECT_API_URL,
    and knows of no UI (PREFECT_UI_URL empty).
    It is marked private (DSSTAR_PRIVATE_API_URL): runs take no slot of its global limits,
    whose counts would outlive it in the database all runs of the user share."""
    from prefect.context import refresh_global_settings_context

    global _early
    early, _early = _early, None
    # Configured (a profile's API is the user's server, not ours); or no PR_SET_PDEATHSIG
    # here: Prefect's own temporary server then.
    if api_configured() or not sys.platform.startswith("linux"):
        if early is not None:
            early.stop()
        return None
    server = early or EphemeralServer()
    os.environ["PREFECT_API_URL"] = os.environ["DSSTAR_PRIVATE_API_URL"] = server.url
    # It serves no UI: Prefect's "View at <UI>/runs/..." lines and the links dsstar shows
    # (guidance) are left out rather than pointing at pages that are not there.
    os.environ["PREFECT_UI_URL"] = ""
    refresh_global_settings_context()
    return server


@contextmanager
def prefect_api() -> Iterator[None]:
    """A Prefect API for the flows of this command: the configured one, else a temporary
    server that dies with this process (even on SIGKILL)."""
    server = ensure_api()
    if server is None:
        yield
        return
    atexit.register(server.stop)  # after Prefect's own exit handlers have flushed to it
    with stopping.on_stop(server.stop):
        server.wait_ready()
        server.watch()
        yield


def open_api_warning(settings: Settings) -> str | None:
    """What to tell the operator when the Prefect API answers a request that carries no
    credentials: then anyone who can reach it can start runs here (None when it refuses)."""
    from prefect.settings import get_current_settings

    url = str(get_current_settings().api.url or "").rstrip("/")
    try:  # asked without credentials on purpose: what an intruder would see
        with urllib.request.urlopen(f"{url}/admin/version", timeout=5):
            pass
    except urllib.error.HTTPError:
        return None  # 401: the server wants credentials
    except (OSError, ValueError):
        return None  # unreachable: Prefect itself reports that
    allowed = ", ".join(settings.form_allow) or "none"
    roots = ", ".join(settings.data_roots) or "none (forms cannot name data)"
    return (
        f"the Prefect API at {url} accepts requests without credentials: anyone who can reach"
        " it can start runs on this process and read their artifacts. Start the server with"
        " PREFECT_SERVER_API_AUTH_STRING=user:secret and give this process the same value in"
        " PREFECT_API_AUTH_STRING. Run forms may choose guarded settings: "
        f"{allowed} (DSSTAR_FORM_ALLOW); data roots: {roots} (DSSTAR_DATA_ROOTS)."
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
