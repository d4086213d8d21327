"""The sandbox in every mode, with real subprocesses: modes, limits, the pool, clean-up."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid

import forked_cli
import pytest
from pydantic import ValidationError

from dsstar import sandbox_names
from dsstar.errors import ConfigError
from dsstar.execution.sandbox import Limits, pool, resolve_mode, run_script, sweep_stale
from dsstar.execution.sandbox import modes as sandbox_modes
from dsstar.execution.sandbox import supervise as sandbox_supervise
from dsstar.execution.sandbox.treecpu import TreeCpu
from dsstar.inputs.preflight import check_isolation
from dsstar.settings import Settings

ISOLATED = [m for m in ("bwrap", "unshare") if sandbox_modes._usable(m)]
MODES = [*ISOLATED, "none"]
LIMITS = Limits(timeout_s=10, memory_mb=1024, output_bytes=20_000, disk_mb=64)


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "data"
    (folder / "sub").mkdir(parents=True)
    (folder / "table.csv").write_text("a,b\n1,2\n3,4\n")
    (folder / "sub" / "notes.txt").write_text("hello")
    return folder


@pytest.fixture(params=MODES)
def mode(request):
    return request.param


# As root, mode `none` runs each script as a dedicated uid, which must reach the interpreter
# and the work folder (pytest's folders are root's alone): this test's, from the fixture below.
PLAIN: dict[str, object] = {}


@pytest.fixture(autouse=True)
def _reachable_by_the_script_uid(plain_python, open_work, monkeypatch):
    monkeypatch.setitem(PLAIN, "python", plain_python)
    monkeypatch.setitem(PLAIN, "work_root", open_work)


def where(mode, tmp_path):
    """run_script's work root and interpreter for `mode`: for one that does not isolate, a
    folder and a Python the script's own uid may enter and run."""
    if sandbox_modes.isolates(mode):
        return {"work_root": tmp_path}
    return dict(PLAIN)


def run(code, data, mode, tmp_path, **caps):
    limits = Limits(**{**vars(LIMITS), **caps})
    return run_script(code, data_dir=data, limits=limits, mode=mode, **where(mode, tmp_path))


def test_modes_resolve_and_fail_closed(monkeypatch, caplog):
    assert resolve_mode("auto") == ISOLATED[0]
    for mode in ISOLATED:
        assert resolve_mode(mode) == mode
    sandbox_names._warn_deprecated.cache_clear()  # logged once per process
    with caplog.at_level(logging.WARNING):
        assert resolve_mode("none") == "none"
        assert resolve_mode("process") == "none"  # the old name, deprecated
    assert "deprecated" in caplog.text
    with pytest.raises(ConfigError, match="unknown sandbox mode"):
        resolve_mode("chroot")
    monkeypatch.setattr(sandbox_modes, "_usable", lambda mode: False)  # no isolation here
    with pytest.raises(ConfigError, match="--sandbox none"):
        resolve_mode("auto")
    with pytest.raises(ConfigError, match="apt-get install bubblewrap"):
        resolve_mode("bwrap")
    with pytest.raises(ConfigError, match="does not work"):
        resolve_mode("unshare")
    assert resolve_mode("none") == "none"  # only ever by explicit choice
    # Without probing only the name counts: settings load where no isolation exists.
    names = sandbox_modes.MODES
    assert [resolve_mode(m, probe=False) for m in names] == list(names)
    assert resolve_mode("process", probe=False) == "none"


def test_settings_and_preflight_use_the_one_resolver(monkeypatch, caplog):
    """Settings check the name (without probing); preflight resolves it and warns for 'none';
    the executor runs in what the same function picked."""
    assert Settings(sandbox="process").sandbox == "none"
    with pytest.raises(ValidationError, match="unknown sandbox mode 'chroot'"):
        Settings(sandbox="chroot")
    plain = Settings(sandbox="none", script_python=PLAIN["python"], work_dir=PLAIN["work_root"])
    # As if dsstar ran from a Python every user may run (it runs the offline profiler, and
    # mode none as root runs that as a dedicated uid too).
    monkeypatch.setattr(sys, "executable", PLAIN["python"])
    with caplog.at_level(logging.WARNING):
        assert check_isolation(plain) == "none"
    assert "WITHOUT isolation" in caplog.text
    if ISOLATED:
        assert check_isolation(Settings(sandbox="auto")) == ISOLATED[0]
    monkeypatch.setattr(sandbox_modes, "_usable", lambda mode: False)
    assert Settings(sandbox="bwrap").sandbox == "bwrap"  # no probe when reading settings
    with pytest.raises(ConfigError, match="apt-get install bubblewrap"):
        check_isolation(Settings(sandbox="bwrap"))


def test_reads_inputs_under_data(data, mode, tmp_path):
    code = "print(open('data/table.csv').read() + open('data/sub/notes.txt').read())"
    result = run(code, data, mode, tmp_path)
    assert result.ok, result.output
    assert "a,b\n1,2" in result.output and "hello" in result.output
    assert result.sandbox == mode
    assert result.start == ("cold" if mode == "none" else "warm")


def test_environment_holds_no_secrets(data, mode, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak-me")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-leak-me")
    result = run("import os; print(sorted(os.environ.items()))", data, mode, tmp_path)
    assert result.ok
    assert "leak-me" not in result.output and "PATH" in result.output


def test_inputs_are_never_changed(data, mode, tmp_path):
    run("open('data/table.csv', 'w').write('overwritten')", data, mode, tmp_path)
    run("open('data/new.txt', 'w').write('x')", data, mode, tmp_path)
    assert (data / "table.csv").read_text() == "a,b\n1,2\n3,4\n"
    assert not (data / "new.txt").exists()


def test_endless_loop_and_its_children_are_killed_at_the_timeout(data, mode, tmp_path):
    marker = f"{uuid.uuid4().int % 10**6}.5"
    code = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({marker})'],"
        " start_new_session=True)\n"
        "print('looping')\n"
        "while True: pass\n"
    )
    result = run(code, data, mode, tmp_path, timeout_s=2)
    assert result.timed_out and not result.ok and "timeout" in result.limits_hit
    assert "looping" in result.output and "exec timeout" in result.output
    assert not _processes_with(marker)


def test_huge_allocation_is_stopped(data, mode, tmp_path):
    result = run("x = bytearray(30 * 1024**3)\nprint('allocated')", data, mode, tmp_path)
    assert not result.ok and "MemoryError" in result.output
    assert "allocated" not in result.output and "memory" in result.limits_hit


def test_failure_reports_exit_code_and_traceback(data, mode, tmp_path):
    result = run("import pandas as pd\npd.read_csv('data/missing.csv')", data, mode, tmp_path)
    assert not result.ok and result.exit_code == 1
    assert "FileNotFoundError" in result.output


EQUALITY_SCRIPTS = [
    "import pandas as pd\ndf = pd.read_csv('data/table.csv')\nprint(df.describe())\n"
    "print(df.sum().to_dict(), __name__)",
    "import sys\nprint('to stdout'); print('to stderr', file=sys.stderr)\nsys.exit(3)",
    "def f():\n    raise KeyError('missing')\nf()",
    "x = (\n",
    "import os, sys\nopen('out.txt', 'w').write('kept')\n"
    "print(sorted(os.listdir('.')), open('out.txt').read(), sys.argv, __file__, os.getcwd())",
    "import atexit\natexit.register(lambda: print('at exit'))\nraise SystemExit('bye')",
    "import sys\nprint(repr(sys.stdin.read()))\ninput()",
]


@pytest.mark.parametrize("mode", ISOLATED)
def test_warm_runs_equal_cold_runs(data, mode, tmp_path):
    for code in EQUALITY_SCRIPTS:
        cold = run(code, data, mode, tmp_path, warm=False)
        warm = run(code, data, mode, tmp_path, warm=True)
        assert (cold.start, warm.start) == ("cold", "warm"), warm.note
        for field in ("ok", "exit_code", "output", "stdout", "truncated", "limits_hit"):
            assert getattr(warm, field) == getattr(cold, field), (code, field, warm, cold)


@pytest.mark.parametrize("mode", ISOLATED)
def test_each_warm_script_gets_a_fresh_directory(data, mode, tmp_path):
    first = run("open('/tmp/left', 'w').write('x'); open('left', 'w').write('x')", data, mode,
                tmp_path)  # fmt: skip
    second = run("import os; print(os.listdir('/tmp'), sorted(os.listdir('.')))", data, mode,
                 tmp_path)  # fmt: skip
    assert first.ok and second.ok and second.start == "warm"
    assert "left" not in second.output


def test_pool_falls_back_to_cold_with_a_stated_reason(data, tmp_path, monkeypatch):
    pool.shutdown()
    monkeypatch.setattr(pool, "boot_argv", lambda *args: ["false"])
    try:
        result = run("print('still ran')", data, ISOLATED[0], tmp_path)
    finally:
        monkeypatch.undo()
        pool.shutdown()
    assert result.ok and "still ran" in result.output
    assert result.start == "cold" and "could not start" in result.note


def test_temporary_folders_are_removed_and_stale_ones_swept(data, tmp_path):
    for mode in MODES:
        run("print('x')", data, mode, tmp_path, warm=False)
    assert not list(tmp_path.glob("dsstar-exec-*"))
    assert not list(PLAIN["work_root"].glob("dsstar-exec-*"))
    stale = tmp_path / "dsstar-exec-999999999-abc"
    (stale / "inner").mkdir(parents=True)
    (stale / "inner").chmod(0o500)
    mine = tmp_path / f"dsstar-exec-{os.getpid()}-abc"
    mine.mkdir()
    assert sweep_stale(tmp_path) == [stale]
    assert not stale.exists() and mine.exists()
    pool.shutdown()
    assert not list(tmp_path.glob("dsstar-pool-*"))


@pytest.mark.parametrize("mode", ISOLATED)
def test_scripts_and_pool_die_with_a_killed_parent(data, mode, tmp_path):
    marker = f"{uuid.uuid4().int % 10**6}.75"
    parent = (
        "import sys\n"
        "from pathlib import Path\n"
        "from dsstar.execution.sandbox import Limits, run_script\n"
        "code = 'import subprocess, sys, time\\n' \\\n"
        f'    \'subprocess.Popen([sys.executable, "-c", "import time; time.sleep({marker})"],'
        " start_new_session=True)\\n' \\\n"
        f"    'time.sleep({marker})'\n"
        f"run_script(code, data_dir=Path({str(data)!r}), limits=Limits(timeout_s=300),"
        f" mode={mode!r}, work_root=Path({str(tmp_path)!r}))\n"
    )
    host = subprocess.Popen([sys.executable, "-c", parent], start_new_session=True)
    try:
        _wait_for(lambda: _processes_with(marker), 60)
        assert _processes_with(marker) and _processes_with(str(data))  # script and sandbox
        os.kill(host.pid, signal.SIGKILL)
        host.wait()
        _wait_for(lambda: not _processes_with(marker) and not _processes_with(str(data)), 15)
    finally:
        if host.poll() is None:
            host.kill()
    assert not _processes_with(marker)
    assert not _processes_with(str(data))  # the pool interpreter and bwrap/unshare too


def _wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not condition():
        time.sleep(0.1)


def _processes_with(marker):
    found = []
    for name in os.listdir("/proc"):
        try:
            if marker.encode() in open(f"/proc/{name}/cmdline", "rb").read():
                found.append(name)
        except OSError:
            continue
    return found


@pytest.mark.parametrize("mode", ISOLATED)
def test_private_data_folder_is_readable_and_links_stay_inside(mode, tmp_path):
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    (folder / "t.csv").write_text("a,b\n5,6\n")
    (folder / "t.csv").chmod(0o600)
    (folder / "shadow").symlink_to("/etc/shadow")
    code = (
        "print(open('data/t.csv').read())\n"
        "try:\n"
        "    print(open('data/shadow').read())\n"
        "except OSError as exc:\n"
        "    print('refused', type(exc).__name__)\n"
    )
    result = run(code, folder, mode, tmp_path)
    shadow_head = open("/etc/shadow").read().split(":")[0] + ":"
    assert result.ok and "a,b\n5,6" in result.output, result.output
    assert "refused" in result.output and shadow_head not in result.output


def test_run_refuses_an_unknown_sandbox_mode():
    cli = forked_cli.run(
        [sys.executable, "-m", "dsstar", "run", "--data", "examples/sales", "-q", "x",
         "--sandbox", "chroot"],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        env={**os.environ, "DSSTAR_MODEL": "openai/gpt-4o-mini", "OPENAI_API_KEY": "x"},
    )  # fmt: skip
    assert cli.returncode == 2
    assert "auto, bwrap, unshare, none" in cli.stdout + cli.stderr


@pytest.mark.parametrize("mode", ISOLATED)
def test_concurrent_scripts_get_their_own_uid_and_folder(data, mode, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    code = (
        "import os, time\n"
        "open('mine', 'w').write(str(os.getuid()))\n"
        "time.sleep(1)\n"
        "print(os.getuid(), open('mine').read(), sorted(os.listdir('.')))\n"
    )
    with ThreadPoolExecutor(4) as workers:
        results = list(workers.map(lambda _: run(code, data, mode, tmp_path), range(4)))
    assert all(r.ok and r.start == "warm" for r in results), results
    uids = {r.stdout.split()[0] for r in results}
    assert len(uids) == 4  # one uid per running script
    for r in results:
        uid, mine, listing = r.stdout.split(maxsplit=2)
        assert uid == mine and listing.strip() == "['data', 'mine', 'script.py']"


SHADOW_PROBE = (
    "import os\n"
    "print('uid', os.getuid())\n"
    "try:\n"
    "    print('shadow', open('/etc/shadow').read()[:20])\n"
    "except OSError as exc:\n"
    "    print('shadow', type(exc).__name__)\n"
)


@pytest.mark.skipif(os.geteuid() != 0, reason="scripts have uids of their own only as root")
def test_mode_none_as_root_runs_scripts_as_a_dedicated_uid_or_not_at_all(
    data, tmp_path, monkeypatch
):
    """Mode none does not isolate, but as root it still runs each script as an unprivileged
    uid of its own: never as root, which could read /etc/shadow. Where that uid could not run
    the interpreter or enter the work folder, the script is refused, saying what to change."""
    from dsstar.execution.sandbox import uid_range

    ran = run(SHADOW_PROBE, data, "none", tmp_path)
    assert ran.ok, ran.output
    assert int(ran.stdout.split()[1]) in uid_range()
    assert "shadow PermissionError" in ran.stdout

    (tmp_path / "work").mkdir()
    closed = tmp_path / "closed"  # a virtual environment in a folder only root may enter
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(closed)], check=True)
    refusals = [
        dict(PLAIN, python=str(closed / "bin" / "python")),
        dict(PLAIN, work_root=tmp_path / "work"),  # pytest's folders are root's alone
    ]
    for where, fix in zip(refusals, ("DSSTAR_SCRIPT_PYTHON", "DSSTAR_WORK_DIR"), strict=True):
        with pytest.raises(ConfigError) as refused:
            run_script(SHADOW_PROBE, data_dir=data, limits=LIMITS, mode="none", **where)
        said = str(refused.value)
        assert "runs scripts as a dedicated unprivileged uid" in said and fix in said, said
        assert "never as root" in said and "bwrap" in said
    assert not list((tmp_path / "work").glob("dsstar-exec-*"))  # nothing was staged
    # The preflight says so too, of the scripts' Python, of dsstar's own (which runs the
    # offline profiler: here as if it were one every user may run) and of the work folder.
    with monkeypatch.context() as patched:
        patched.setattr(sys, "executable", PLAIN["python"])
        with pytest.raises(ConfigError, match="DSSTAR_WORK_DIR"):
            check_isolation(Settings(sandbox="none", work_dir=tmp_path / "work",
                                     script_python=PLAIN["python"]))  # fmt: skip
        patched.setattr(sys, "executable", refusals[0]["python"])
        with pytest.raises(ConfigError, match="run dsstar from a Python every user may run"):
            check_isolation(Settings(sandbox="none", work_dir=PLAIN["work_root"],
                                     script_python=PLAIN["python"]))  # fmt: skip


@pytest.fixture
def own_uids(monkeypatch):
    """Scripts run as uids from 1,750,000, which no other test uses."""
    from dsstar.execution.sandbox import uid_range

    monkeypatch.setenv("DSSTAR_EXEC_UID_BASE", "1750000")
    uid_range.cache_clear()
    yield uid_range()
    uid_range.cache_clear()


@pytest.mark.skipif(os.geteuid() != 0, reason="scripts have uids of their own only as root")
def test_a_script_killed_from_outside_runs_again(data, tmp_path, own_uids):
    """Another process SIGKILLs the script's uid once (as a dsstar that shared it did): the
    script was not at fault, so it runs again and finishes."""
    import threading

    from dsstar.execution.sandbox.supervise import kill_uid

    killed: list[int] = []

    def kill_once() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for uid in own_uids:
                if sandbox_supervise.scan(uid)[0]:
                    kill_uid(uid)
                    killed.append(uid)
                    return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_once)
    killer.start()
    # Long enough for the killer's scan to find it on a loaded machine.
    result = run("import time\ntime.sleep(6)\nprint('finished')\n", data, "auto", tmp_path,
                 warm=False)  # fmt: skip
    killer.join()
    assert killed and result.ok and result.stdout.strip() == "finished", result.output


@pytest.mark.skipif(os.geteuid() != 0, reason="scripts have uids of their own only as root")
def test_a_script_the_kernel_kills_at_its_cpu_cap_is_not_run_again(data, tmp_path):
    """RLIMIT_CPU's hard limit ends a busy script with SIGKILL: that is its own cap."""
    result = run("while True:\n    pass\n", data, "auto", tmp_path, cpu_s=1, timeout_s=30,
                 warm=False)  # fmt: skip
    assert result.exit_code == -signal.SIGKILL and "cpu" in result.limits_hit, result.output
    assert not result.killed_outside
    assert "CPU time" in result.output


BUSY_TREE = """
import time
{start}
def busy(_):
    end = time.process_time() + {each}
    while time.process_time() < end:
        pass
    return 1
if __name__ == "__main__":
    print("done", sum({run}))
"""
MULTIPROCESSING = {
    "start": "from multiprocessing import Pool",
    "run": "Pool(4).map(busy, range(4))",
}
LOKY = {
    "start": "from joblib import Parallel, delayed",
    "run": "Parallel(n_jobs=4, backend='loky')(delayed(busy)(i) for i in range(4))",
}


@pytest.mark.skipif(os.geteuid() != 0, reason="scripts have uids of their own only as root")
@pytest.mark.parametrize("how", [MULTIPROCESSING, LOKY], ids=["multiprocessing", "loky"])
def test_the_cpu_cap_holds_for_the_script_processes_together(data, tmp_path, how):
    """Four busy workers of 1.2 s each under cpu_s=2: none passes the cap alone, together
    they do, and the tree is stopped long before its timeout, `cpu` named."""
    code = BUSY_TREE.format(each=1.2, **how)
    result = run(code, data, "auto", tmp_path, cpu_s=2, timeout_s=60, warm=False)
    assert "cpu" in result.limits_hit and not result.timed_out, result.output
    assert not result.ok and "done" not in result.stdout
    assert "CPU time, its processes together (exec CPU limit)" in result.output


def test_tree_cpu_counts_each_process_once():
    """Samples of a tree, in clock ticks: the script (pid 10, under the supervisor 1) starts
    two workers; one is reaped by the script (its time moves into the script's children's
    time: counted once), the other is orphaned and reaped by the supervisor (counted at its
    last sample)."""
    tick = 1 / os.sysconf("SC_CLK_TCK")
    tree = TreeCpu()
    script, worker, orphan = (10, 100), (11, 101), (12, 102)
    assert tree.seconds({script: (1, 5, 0), worker: (10, 30, 0), orphan: (10, 40, 0)}) == (
        pytest.approx(75 * tick)
    )
    # The worker ran on to 35 ticks and was reaped; the orphan's parent is now the supervisor.
    assert tree.seconds({script: (1, 6, 35), orphan: (1, 50, 0)}) == pytest.approx(91 * tick)
    assert tree.seconds({script: (1, 6, 35)}) == pytest.approx(91 * tick)  # the orphan, gone
    assert tree.seconds({}) == pytest.approx(91 * tick)  # the script, gone too


@pytest.mark.skipif(os.geteuid() != 0, reason="scripts have uids of their own only as root")
def test_a_tree_within_its_cpu_cap_finishes(data, tmp_path):
    """Four workers of 0.3 s each under cpu_s=2: each counted once (a worker its parent has
    reaped is not counted again), so the script finishes."""
    light = run(BUSY_TREE.format(each=0.3, **MULTIPROCESSING), data, "auto", tmp_path, cpu_s=2,
                timeout_s=60, warm=False)  # fmt: skip
    assert light.ok and light.stdout.strip() == "done 4", light.output


def test_outside_kills_are_retried_a_bounded_number_of_times_and_never_while_stopping(
    monkeypatch, tmp_path
):
    import dsstar.execution.sandbox as sandbox
    from dsstar.execution import stopping
    from dsstar.execution.sandbox import ExecResult

    runs: list[int] = []

    def killed(*args, **kwargs):
        runs.append(1)
        return ExecResult(ok=False, exit_code=-9, output="", timed_out=False, duration_s=0.1,
                          truncated=False, sandbox="bwrap")  # fmt: skip

    monkeypatch.setattr(sandbox, "_run_once", killed)
    assert sandbox.run_script("x", data_dir=tmp_path, limits=LIMITS).killed_outside
    assert len(runs) == 1 + sandbox.OUTSIDE_RETRIES
    runs.clear()
    monkeypatch.setattr(stopping, "requested", lambda: signal.SIGTERM)
    sandbox.run_script("x", data_dir=tmp_path, limits=LIMITS)
    assert len(runs) == 1  # the stop killed it: not run again


@pytest.mark.parametrize("warm", [True, False])
def test_a_script_given_files_sees_those_files_alone(data, mode, tmp_path, warm):
    """A file's analysis sees its own file under data/: not the rest of the lake, not the
    folder the lake is mounted from, and never a path that leads out of the data."""
    (data / "sub" / "secret.csv").write_text("name,pay\nalice,SECRET-PAY-1\n")
    code = (
        "import os\n"
        "for top in ('data', '/.data'):\n"
        "    for folder, _, names in os.walk(top):\n"
        "        for name in names:\n"
        "            path = os.path.join(folder, name)\n"
        "            try:\n"
        "                print(path, open(path, errors='replace').read().strip())\n"
        "            except OSError as exc:\n"
        "                print(path, 'refused', type(exc).__name__)\n"
        "open('data/sub/notes.txt', 'w')\n"
    )
    limits = Limits(**{**vars(LIMITS), "warm": warm})
    wanted = ["sub/notes.txt", "../data/table.csv", "/etc/hosts", "sub/missing.csv"]
    result = run_script(
        code, data_dir=data, limits=limits, mode=mode, files=wanted, **where(mode, tmp_path)
    )
    assert "data/sub/notes.txt hello" in result.output, result.output
    # Read-only: mounted so, or (mode none) a copy the script's uid may not write.
    refused = "Read-only file system" if mode != "none" else "Permission denied"
    assert not result.ok and refused in result.output, result.output
    assert "SECRET" not in result.output and "table.csv" not in result.output
    assert "localhost" not in result.output and "missing" not in result.output
    assert (data / "sub" / "notes.txt").read_text() == "hello"


def test_a_script_gets_signals_as_a_fresh_interpreter_whatever_the_host_had(data, tmp_path):
    # A host thread that blocked or ignored SIGINT when it started the sandbox (or the warm
    # pool) handed that on through fork and exec: the script's Ctrl-C did nothing, once in
    # a whole suite, as the pool happened to be started. Here a host that does both.
    probe = (
        "import json, signal, sys\n"
        "from pathlib import Path\n"
        "from dsstar.execution.sandbox import Limits, run_script\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "code = ('import os, signal\\n'\n"
        "        'print(signal.getsignal(signal.SIGHUP) == signal.SIG_DFL,'\n"
        "        ' sorted(signal.pthread_sigmask(0, [])))\\n'\n"
        "        'os.kill(os.getpid(), signal.SIGINT)\\n'\n"
        "        'print(\"survived\")\\n')\n"
        "found = {}\n"
        "for mode in sys.argv[5:]:\n"
        "    where = ({'work_root': Path(sys.argv[2])} if mode != 'none' else\n"
        "             {'python': sys.argv[3], 'work_root': Path(sys.argv[4])})\n"
        "    for warm in (False, True):\n"
        "        limits = Limits(timeout_s=20, memory_mb=1024, warm=warm)\n"
        "        done = run_script(code, data_dir=Path(sys.argv[1]), limits=limits, mode=mode,\n"
        "                          **where)\n"
        "        found[f'{mode} warm={warm}'] = [done.exit_code, done.output]\n"
        "print(json.dumps(found))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(data), str(tmp_path), PLAIN["python"],
         str(PLAIN["work_root"]), *MODES],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert len(found) == 2 * len(MODES)
    for how, (exit_code, output) in found.items():
        assert exit_code == 1 and output.rstrip().endswith("KeyboardInterrupt"), (how, output)
        assert output.startswith("True []"), (how, output)  # none blocked
        assert "survived" not in output, (how, output)
