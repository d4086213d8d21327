"""Shared fixtures: one started Prefect server for the session, a fake LLM per test, and an
environment in which dsstar runs exactly as in production, against loopback servers."""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Prefect reads its settings when imported, so the server's address is fixed before that.
_PREFECT_HOME = Path(tempfile.mkdtemp(prefix="dsstar-test-prefect-"))
# Every process that imports this file made one; xdist's controller runs no session fixture.
atexit.register(shutil.rmtree, _PREFECT_HOME, ignore_errors=True)
_PREFECT_PORT = _free_port()
os.environ.update(
    {
        "PREFECT_HOME": str(_PREFECT_HOME),
        "PREFECT_API_URL": f"http://127.0.0.1:{_PREFECT_PORT}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
)
for _name in [k for k in os.environ if k.startswith("DSSTAR_")]:
    del os.environ[_name]

import forked_cli  # noqa: E402
from fake_llm import FakeLLM  # noqa: E402
from processes import start, stop  # noqa: E402
from scenarios import read_chart  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "sales"


def start_prefect_server(env: dict[str, str], port: int, log: Path) -> subprocess.Popen:
    """`prefect server start` on 127.0.0.1:`port` with `env`, once its API answers. At the
    garbage collector's pace of dsstar's own temporary server (dsstar/collector.py): it
    starts and serves with about an eighth less CPU, which the tests beside it get."""
    launch = (
        "import gc, runpy, sys; from dsstar.collector import PACE; gc.set_threshold(*PACE);"
        " sys.argv = ['prefect', *sys.argv[1:]];"
        " runpy.run_module('prefect', run_name='__main__', alter_sys=True)"
    )
    proc = start(
        [sys.executable, "-c", launch, "server", "start", "--host", "127.0.0.1",
         "--port", str(port)],
        stdout=log.open("w"), stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2):
                return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop(proc)
                raise RuntimeError(log.read_text()[-3000:]) from None
            time.sleep(0.5)


UNIT = Path(__file__).parent / "unit"  # the layers below the Prefect job: no server, no CLI


@pytest.fixture(scope="session")
def prefect_server(postgres_url):
    """A real Prefect API server for the whole session (runs share it), on PostgreSQL as
    docs/operations.md asks of a server that serves several runs at once: on SQLite, a loaded
    machine left requests waiting up to the client's 60 s on the database's single write lock.
    Only the server is given the database: the temporary servers of the tests' commands keep
    SQLite, and tests/test_soak_sqlite.py runs a lasting server on it."""
    database = create_database(postgres_url, "prefect_session", driver="asyncpg")
    server_env = os.environ | {"PREFECT_API_DATABASE_CONNECTION_URL": database}
    proc = start_prefect_server(server_env, _PREFECT_PORT, _PREFECT_HOME / "server.log")
    try:
        yield os.environ["PREFECT_API_URL"]
    finally:
        # The runs' last logs (a failed run's traceback) are still queued: sent while the
        # server lives, not at interpreter exit into a closed port.
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=10)
        stop(proc)


@pytest.fixture(scope="session", autouse=True)
def forked_commands():
    """The interpreter that forks the tests' `dsstar` commands (forked_cli.py), if one was
    started, ends with the session's servers: in its worker's last test, which then counts
    the commands' CPU (benchmarks/suite_cpu.py)."""
    yield
    forked_cli.shutdown()


@contextmanager
def prefect_api(url: str) -> Iterator[None]:
    """This process's Prefect client at `url` (a proxy, a test's own server) for the block.
    Prefect keeps services per process whose client stays bound to the API of their first
    use: the task engine's slot acquirers (a tagged task run, as a nightly question's, asks
    them for its tag's slots), the event and log workers. They are drained while that API is
    still up, so that the flows this process runs later are not sent to a server that is gone
    (a nightly batch after one through a closed proxy failed on its tag's slots)."""
    from prefect._internal.concurrency.services import QueueService
    from prefect.settings import PREFECT_API_URL, temporary_settings

    try:
        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield
    finally:
        QueueService.drain_all(timeout=30)  # every service; each is made again when next used


@pytest.fixture
def fresh_limits():
    """The shared test server starts and ends this test without dsstar's global limits."""
    from prefect import get_client

    from tasks.slots import LIMIT_NAMES, RATE_NAME

    def drop() -> None:
        with get_client(sync_client=True) as client:
            for name in [*LIMIT_NAMES.values(), RATE_NAME]:
                try:
                    client.delete_global_concurrency_limit_by_name(name)
                except Exception:  # ObjectNotFound: nothing to drop
                    pass

    drop()
    yield
    drop()


@pytest.fixture
def llm():
    """The scripted model server. A chart a script saves is described by the reader as a
    vision model that can read little of it would: a test that checks the reading scripts
    its own."""
    with FakeLLM() as server:
        server.default("reader", read_chart)
        yield server


def dsstar_settings(llm: FakeLLM, tmp_path: Path) -> dict[str, str]:
    """DSSTAR_* variables for runs against the fake model server, storing under `tmp_path`."""
    return {
        "DSSTAR_MODEL": "openai/gpt-4o-mini",  # a model litellm has prices for
        "DSSTAR_API_BASE": llm.base_url,
        "DSSTAR_API_KEY": "sk-test-not-secret",
        "DSSTAR_STORAGE": str(tmp_path / "storage"),
        "DSSTAR_WORK_DIR": str(tmp_path / "work"),
        "DSSTAR_DATABASE_URL": f"sqlite:///{tmp_path / 'ledger.db'}",
        "DSSTAR_LLM_RETRY_DELAY": "0.05",
    }


@pytest.fixture
def env(llm, tmp_path, monkeypatch):
    """DSSTAR_* settings pointing at the fake model server and a fresh storage folder."""
    values = {
        **dsstar_settings(llm, tmp_path),
        "DSSTAR_EXEC_TIMEOUT": "60",
        # A worker started from this environment takes forms' data from the test's folder.
        "DSSTAR_DATA_ROOTS": str(tmp_path),
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    (tmp_path / "work").mkdir()
    return values


@pytest.fixture
def sales(tmp_path) -> Path:
    """A private copy of the example data, so tests may change it."""
    target = tmp_path / "sales"
    shutil.copytree(EXAMPLE, target)
    return target


def _wait_http(url: str, proc: subprocess.Popen, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answered
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start") from None
            time.sleep(0.3)


@pytest.fixture(scope="session")
def moto_port():
    """moto's S3 server: a real S3 HTTP API on loopback."""
    port = _free_port()
    proc = start(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_http(f"http://127.0.0.1:{port}/", proc, "moto server")
        yield port
    finally:
        stop(proc)


@pytest.fixture
def s3(moto_port, monkeypatch, request):
    """A fresh bucket; DSSTAR_STORAGE points into it. Returns the storage URL."""
    import uuid

    import boto3

    credentials = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{moto_port}",
        "AWS_ACCESS_KEY_ID": "AKIADSSTARTEST",
        "AWS_SECRET_ACCESS_KEY": "dsstar-s3-secret-never-stored",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for key, value in credentials.items():
        monkeypatch.setenv(key, value)
    bucket = f"dsstar-{uuid.uuid4().hex[:12]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    url = f"s3://{bucket}/team"
    monkeypatch.setenv("DSSTAR_STORAGE", url)
    return url


@pytest.fixture(scope="session")
def open_folder() -> Iterator[Path]:
    """A folder every user may enter, removed at the end. pytest's temporary folders are
    root's alone, and a script of sandbox mode `none` runs as a dedicated unprivileged uid
    when dsstar is root: its work folder (DSSTAR_WORK_DIR) must be one it can enter."""
    folder = Path(tempfile.mkdtemp(prefix="dsstar-test-open-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def open_work(open_folder, request) -> Path:
    """A fresh work folder of this test under `open_folder`, which every user may enter."""
    folder = Path(tempfile.mkdtemp(prefix=f"{request.node.name[:40]}-", dir=open_folder))
    folder.chmod(0o755)
    return folder


@pytest.fixture(scope="session")
def plain_python(open_folder) -> str:
    """A Python, with this environment's libraries, that a dedicated unprivileged uid may run
    (sandbox mode `none` as root runs scripts as one, and refuses an interpreter it cannot
    reach): this one, or where it lies in a folder only root may enter (pyenv's, under
    /root), a virtual environment of a Python of the same version that every user may run,
    given this environment's site-packages (dsstar included: it can run dsstar itself)."""
    import site

    from dsstar.execution.sandbox.host import closed_interpreter, closed_to_others

    if closed_interpreter() is None:
        return sys.executable
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    bases = [shutil.which(f"python{version}"), shutil.which("python3"),
             f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]  # fmt: skip
    usable = [b for b in bases if b and os.access(b, os.X_OK) and closed_interpreter(b) is None]
    base = next((b for b in usable if _version(b) == version), None)
    packages = site.getsitepackages()
    closed = [p for p in packages if closed_to_others(Path(p) / "x")]
    if base is None or closed:
        pytest.fail(f"no Python {version} that every user may run here, or this environment's"
                    f" libraries are closed to them ({closed}): sandbox mode none cannot be"
                    " tested as root")  # fmt: skip
    venv = open_folder / "python"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    own = subprocess.run([str(venv / "bin" / "python"), "-I", "-c",
                          "import site; print(site.getsitepackages()[0])"],
                         capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    # Added as site folders: their own .pth files (an editable install's) apply too.
    added = "".join(f"import site; site.addsitedir({p!r})\n" for p in packages)
    Path(own, "dsstar-tests.pth").write_text(added)
    return str(venv / "bin" / "python")


def _version(python: str) -> str:
    code = "import sys; print(f'{sys.version_info.major}.{sys.version_info.minor}')"
    return subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.strip()


def require_binary(path: str | None, package: str) -> str:
    """The path of a system program the tests need. scripts/test installs them; where one is
    missing outside CI the test is skipped with the reason, in CI it fails."""
    if path and Path(path).exists():
        return path
    message = f"{package} is not installed (scripts/test installs it with apt-get)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_url():
    """A throwaway PostgreSQL cluster on loopback, from Debian's postgresql package."""
    import glob
    import pwd

    initdb = require_binary(next(iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))), None),
                            "postgresql")  # fmt: skip
    bin_dir = Path(initdb).parent
    # Not under pytest's tmp folders: those are private to root, and the server runs as the
    # postgres user (initdb refuses root).
    data = Path(tempfile.mkdtemp(prefix="dsstar-pg-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(data, user.pw_uid, user.pw_gid)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    port = _free_port()

    def run(*argv: str) -> None:
        subprocess.run([*as_postgres, *argv], check=True, capture_output=True, cwd="/tmp")

    run(str(bin_dir / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres")
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(data / "server.log"), "-w",
        "-o", f"-p {port} -h 127.0.0.1 -k {data}", "start")  # fmt: skip
    run(str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "dsstar")
    yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/dsstar"
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
    shutil.rmtree(data, ignore_errors=True)


def create_database(postgres_url: str, name: str, driver: str = "psycopg") -> str:
    """A database of its own on the session's PostgreSQL cluster; its URL for `driver`
    (psycopg for the ledger, asyncpg for a Prefect server)."""
    import psycopg

    plain = postgres_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    url = postgres_url.rsplit("/", 1)[0] + f"/{name}"
    return url.replace("+psycopg", f"+{driver}")


def pytest_configure(config):
    """The progress line every minute, printed by the session's controller only."""
    if not hasattr(config, "workerinput"):
        from progress import Progress

        config.pluginmanager.register(Progress(), "dsstar-progress")


def pytest_terminal_summary(terminalreporter):
    """Print the figures tests measured (soak and benchmark-like tests record them as the
    user property `figures`; they reach here from xdist workers too)."""
    shown = False
    for reports in terminalreporter.stats.values():
        for report in reports:
            for name, value in getattr(report, "user_properties", ()):
                if name == "figures" and getattr(report, "when", "call") == "call":
                    if not shown:
                        terminalreporter.section("measured figures")
                        shown = True
                    terminalreporter.write_line(str(value))


# The longest files, collected first so that with `--dist loadfile --no-loadscope-reorder`
# each starts at once on a worker of its own instead of last, after every other file.
LONGEST_FIRST = (
    "test_soak_temporary.py",
    "test_soak_sqlite.py",
    "test_soak_postgres.py",
    "test_container.py",
    "test_workers.py",
    "test_bench_run.py",
    "test_fuzz_replies.py",
    "test_deployments.py",
    "test_alerts.py",
    "test_bench_dacode_run.py",
    "test_runners.py",
    # A minute or two each: started early, so that short files fill the end of the run.
    "test_work_pool.py",
    "test_slots.py",
    "test_retry_resume.py",
    "test_api_quiet.py",
    "test_signals.py",
    "test_trust.py",
    "test_run_identity.py",
    "test_cli_piped.py",
    "test_likeness.py",
    "test_readme.py",
    "test_fanout.py",
    "test_operate.py",
    "test_replay.py",
)


def pytest_collection_modifyitems(items):
    """The longest files first (LONGEST_FIRST), in that order, then the rest as collected.
    Every test outside tests/unit uses the session's Prefect server, set up before any of its
    other fixtures (as a session fixture, it comes before a module's). A test in tests/unit
    has none: PREFECT_API_URL names a closed port there, so a test that reached Prefect would
    fail, not start a server of its own."""
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    for item in items:
        if UNIT not in item.path.parents and "prefect_server" not in item.fixturenames:
            item.fixturenames.insert(0, "prefect_server")


def _utf8(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A report that is not valid UTF-8 (a fuzzed file name in a captured log or an error
    message) cannot be sent from an xdist worker: the whole session would stop. Such text is
    shown with backslash escapes instead."""
    outcome = yield
    report = outcome.get_result()
    report.sections = [(title, _utf8(content)) for title, content in report.sections]
    if report.longrepr is not None:
        try:
            str(report.longrepr).encode("utf-8")
        except UnicodeEncodeError:
            report.longrepr = _utf8(str(report.longrepr))
