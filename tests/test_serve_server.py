"""`dsstar serve` without PREFECT_API_URL: it serves against a temporary Prefect server of
its own, says that this API takes requests without credentials, and the server dies with it,
even when `serve` is killed with SIGKILL (nothing left listening)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import forked_cli
import psutil
import pytest
from conftest import REPO, _free_port

pytestmark = pytest.mark.slow


def _listening(proc: psutil.Process) -> bool:
    try:
        return any(c.status == psutil.CONN_LISTEN for c in proc.net_connections("inet"))
    except psutil.Error:
        return False


def test_the_temporary_server_of_serve_dies_with_it_on_sigkill(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSSTAR_", "PREFECT_API"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), DSSTAR_STORAGE=str(tmp_path / "runs"))
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        proc = forked_cli.popen(
            [sys.executable, "-m", "dsstar", "serve"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while "serving ds-star/on-demand" not in log_path.read_text():
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.5)
        servers = [c for c in psutil.Process(proc.pid).children(recursive=True) if _listening(c)]
        assert servers, "serve runs no server of its own"
        text = " ".join(log_path.read_text().split())
        assert "accepts requests without credentials" in text
        assert "warning: the Prefect API at" in text and "[yellow]" not in text  # plain: no markup
        assert "PREFECT_SERVER_API_AUTH_STRING" in text
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    gone, alive = psutil.wait_procs(servers, timeout=20)
    assert not alive, f"left running after serve died: {[p.pid for p in alive]}"


def test_a_server_started_early_is_handed_out_or_stopped(tmp_path):
    """A command starts its temporary server before its own checks (`start_early`);
    `ensure_api` hands out that one, or stops it when the active Prefect profile names an
    API (then the profile's API is used, and no server of the command's own runs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSSTAR_", "PREFECT_API"))}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    handed = (
        "import os\n"
        "from flows import api_server as _server\n"
        "_server.start_early(); early = _server._early\n"
        "s = _server.ensure_api(); assert s is early, s\n"
        "s.wait_ready(); assert os.environ['DSSTAR_PRIVATE_API_URL'] == s.url\n"
        "s.stop()\n"
    )
    done = subprocess.run([sys.executable, "-c", handed], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

    profiles = tmp_path / "profiles.toml"
    profiles.write_text(
        'active = "team"\n[profiles.team]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n'
    )
    stopped = (
        "from flows import api_server as _server\n"
        "_server.start_early(); early = _server._early\n"
        "assert _server.ensure_api() is None\n"
        "assert early.process.wait(timeout=30) is not None\n"
    )
    env["PREFECT_PROFILES_PATH"] = str(profiles)
    done = subprocess.run([sys.executable, "-c", stopped], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_wait_for_a_temporary_server_gives_up_on_a_stuck_or_dead_one_only():
    """The wait counts the server's own CPU time, so a slow start on a busy machine is
    waited for; a server process that uses no CPU (stuck) or has exited is given up."""
    from flows.api_server import EphemeralServer

    server = EphemeralServer.__new__(EphemeralServer)  # a stand-in process, no real server
    server.url = f"http://127.0.0.1:{_free_port()}/api"  # nothing answers there
    server.process = subprocess.Popen(["sleep", "60"])  # alive, using no CPU
    try:
        with pytest.raises(RuntimeError, match="did not start"):
            server.wait_ready(timeout=2)
    finally:
        server.process.kill()
        server.process.wait()
    server.process = subprocess.Popen([sys.executable, "-c", "pass"])
    server.process.wait()  # exited before it answered
    with pytest.raises(RuntimeError, match="did not start"):
        server.wait_ready(timeout=60)
