"""The sandbox, in both isolation modes, with real subprocesses."""

from __future__ import annotations

import time

import pytest

from dsstar.errors import ConfigError
from dsstar.sandbox import Limits, _bwrap, resolve_mode, run_script

MODES = ["process"] + (["bwrap"] if _bwrap() else [])
LIMITS = Limits(timeout_s=5, memory_mb=1024, output_bytes=20_000)


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "data"
    (folder / "sub").mkdir(parents=True)
    (folder / "table.csv").write_text("a,b\n1,2\n")
    (folder / "sub" / "notes.txt").write_text("hello")
    return folder


@pytest.fixture(params=MODES)
def mode(request):
    return request.param


def run(code, data, mode, tmp_path, limits=LIMITS):
    return run_script(code, data_dir=data, limits=limits, mode=mode, work_root=tmp_path)


def test_auto_mode_uses_bubblewrap_or_fails_closed_for_root(monkeypatch):
    if _bwrap():
        assert resolve_mode("auto") == "bwrap"
    import dsstar.sandbox as sandbox

    monkeypatch.setattr(sandbox, "_bwrap", lambda: None)  # as on a machine without it
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    with pytest.raises(ConfigError, match="apt-get install bubblewrap"):
        resolve_mode("auto")
    with pytest.raises(ConfigError, match="DSSTAR_SANDBOX=bwrap"):
        resolve_mode("bwrap")
    assert resolve_mode("process") == "process"  # an explicit opt-in
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    assert resolve_mode("auto") == "process"  # an ordinary user: limits and a warning


def test_reads_inputs_under_data(data, mode, tmp_path):
    result = run(
        "print(open('data/table.csv').read() + open('data/sub/notes.txt').read())",
        data,
        mode,
        tmp_path,
    )
    assert result.ok, result.output
    assert "a,b\n1,2" in result.output and "hello" in result.output
    assert result.sandbox == mode


def test_environment_holds_no_secrets(data, mode, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak-me")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-leak-me")
    monkeypatch.setenv("DSSTAR_API_KEY", "dsstar-leak-me")
    result = run("import os; print(sorted(os.environ.items()))", data, mode, tmp_path)
    assert result.ok
    assert "leak-me" not in result.output
    assert "PATH" in result.output


def test_writing_into_data_fails_and_input_is_unchanged(data, mode, tmp_path):
    result = run(
        "open('data/table.csv', 'w').write('overwritten')\nprint('wrote')", data, mode, tmp_path
    )
    assert (data / "table.csv").read_text() == "a,b\n1,2\n"
    if mode == "bwrap":
        assert not result.ok
        assert "Read-only file system" in result.output
    new_file = run("open('data/new.txt', 'w').write('x')", data, mode, tmp_path)
    assert not (data / "new.txt").exists()
    if mode == "bwrap":
        assert not new_file.ok


def test_writing_in_the_working_directory_works(data, mode, tmp_path):
    result = run(
        "open('out.csv', 'w').write('x'); print(open('out.csv').read())", data, mode, tmp_path
    )
    assert result.ok and "x" in result.output


@pytest.mark.skipif("bwrap" not in MODES, reason="needs bubblewrap (installed by .ci/run)")
def test_bwrap_blocks_writes_outside_and_network(data, tmp_path):
    outside = tmp_path / "outside.txt"
    code = f"open({str(outside)!r}, 'w').write('x')"
    result = run(code, data, "bwrap", tmp_path)
    assert not result.ok and not outside.exists()
    net = run(
        "import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)",
        data,
        "bwrap",
        tmp_path,
    )
    assert not net.ok and ("unreachable" in net.output or "Errno" in net.output)


def test_endless_loop_is_killed_at_the_timeout(data, mode, tmp_path):
    limits = Limits(timeout_s=2, memory_mb=1024, output_bytes=20_000)
    started = time.monotonic()
    code = "import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'while True: pass'])\n"
    result = run(code + "while True: pass", data, mode, tmp_path, limits)
    assert time.monotonic() - started < 15
    assert result.timed_out and not result.ok
    assert "exec timeout" in result.output


def test_huge_allocation_is_stopped(data, mode, tmp_path):
    result = run("x = bytearray(30 * 1024**3)\nprint('allocated')", data, mode, tmp_path)
    assert not result.ok
    assert "MemoryError" in result.output
    assert "allocated" not in result.output


def test_output_is_bounded_but_keeps_the_traceback(data, mode, tmp_path):
    code = "print('x' * 200_000)\nraise ValueError('the real error')"
    result = run(code, data, mode, tmp_path)
    assert result.truncated
    assert len(result.output) < 25_000
    assert "ValueError: the real error" in result.output


def test_failure_reports_exit_code_and_traceback(data, mode, tmp_path):
    result = run("import pandas as pd\npd.read_csv('data/missing.csv')", data, mode, tmp_path)
    assert not result.ok and result.exit_code == 1
    assert "FileNotFoundError" in result.output
