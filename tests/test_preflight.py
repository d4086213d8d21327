"""Preflight: what cannot work is said in one line that names the fix, with exit code 2, before
any LLM call, execution or stored run. Each case runs the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import forked_cli
import pytest
from fake_llm import Error

from dsstar.errors import ConfigError
from dsstar.inputs.preflight import check_keys
from dsstar.model.reachability import check_models
from dsstar.settings import Settings

pytestmark = pytest.mark.slow

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"


def dsstar(*args: str, env: dict | None = None, **options) -> subprocess.CompletedProcess:
    return forked_cli.run(
        [sys.executable, "-m", "dsstar", *args],
        capture_output=True, text=True, timeout=300, env=env or os.environ.copy(), **options,
    )  # fmt: skip


def refused(done: subprocess.CompletedProcess, env: dict, *words: str) -> str:
    """Exit 2, one line on stderr naming the fix, one JSON object on stdout, nothing stored."""
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    for word in words:
        assert word in lines[0]
    assert json.loads(done.stdout)["error"]
    assert not (Path(env["DSSTAR_STORAGE"]) / "runs").exists()
    return lines[0]


def run(sales, *extra: str, env: dict | None = None, **options) -> subprocess.CompletedProcess:
    return dsstar(
        "run", "--data", str(sales), "--question", QUESTION, "--json", *extra, env=env, **options
    )


def without(*names: str) -> dict:
    return {k: v for k, v in os.environ.items() if k not in names}


def test_no_model(env, llm, sales):
    done = run(sales, env=without("DSSTAR_MODEL"))
    refused(done, env, "No model is configured", "--model", "OPENAI_API_KEY", "--api-base")
    assert llm.requests == []


def test_missing_key_for_the_models_provider(env, llm, sales):
    done = run(sales, env=without("DSSTAR_API_KEY", "DSSTAR_API_BASE", "OPENAI_API_KEY"))
    refused(done, env, "openai/gpt-4o-mini", "OPENAI_API_KEY", "DSSTAR_API_KEY")
    other = run(
        sales, "--model", "anthropic/claude-sonnet-4-5",
        env=without("DSSTAR_API_KEY", "DSSTAR_API_BASE", "ANTHROPIC_API_KEY"),
    )  # fmt: skip
    refused(other, env, "ANTHROPIC_API_KEY")
    assert llm.requests == []


def test_dsstar_api_key_counts_for_any_provider(monkeypatch):
    for name in ("OPENAI_API_KEY", "DSSTAR_API_KEY", "DSSTAR_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        check_keys(Settings(model="openai/gpt-4o"))
    check_keys(Settings(model="openai/gpt-4o", api_key="sk-anything"))
    check_keys(Settings(model="ollama/qwen2.5-coder"))  # a local server at its default address


def test_a_rejected_key_is_refused_before_any_stored_run(env, llm, sales):
    llm.require_key("sk-the-right-one")  # the env's DSSTAR_API_KEY is another
    started = time.monotonic()
    done = run(sales)
    refused(done, env, "rejected the key", "DSSTAR_API_KEY")
    assert time.monotonic() - started < 60  # the process; the check itself: see below
    assert llm.requests == []  # no completion was asked


def test_a_model_litellm_cannot_route_is_refused(env, llm, sales):
    done = run(sales, "--model", "gpt-4o-typo")
    refused(done, env, "litellm cannot route the model 'gpt-4o-typo'", "provider/model")
    assert llm.requests == []


def test_an_unreachable_api_base_is_refused(env, llm, sales):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = run(sales, "--api-base", f"http://127.0.0.1:{port}/v1")
    refused(done, env, "cannot reach --api-base", f"127.0.0.1:{port}")


def test_a_server_that_connects_but_answers_slowly_is_let_through(caplog):
    # A loaded model server (or machine) may take longer than the probe's few seconds to
    # list its models: it is there, so the run goes on, with a warning; once the probe's
    # read timeout refused such a run with "cannot reach" (exit 2).
    with socket.socket() as sock:  # listening: the kernel takes the connection, nobody answers
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with caplog.at_level("WARNING", logger="dsstar.model.reachability"):
            check_models(["openai/m"], f"http://127.0.0.1:{port}/v1", None)
    assert f"127.0.0.1:{port}/v1 took over 3 s to answer (ReadTimeout)" in caplog.text
    assert "was not checked" in caplog.text


def test_bench_run_checks_the_model_once_before_any_task(env, llm, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task_id": "1", "question": "How many rules?", "answer": ""}\n')
    (tmp_path / "context").mkdir()
    (tmp_path / "context" / "fees.json").write_text("[]")
    done = dsstar(
        "bench", "run", "--suite", "dabstep", "--tasks", str(tasks), "--data",
        str(tmp_path / "context"), "--out", str(tmp_path / "out"), "--model", "gpt-4o-typo",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "litellm cannot route the model 'gpt-4o-typo'" in done.stderr
    assert not (tmp_path / "out").exists() and llm.requests == []


def test_the_model_checks_take_seconds(llm, monkeypatch):
    import dsstar.model.llm  # imported first: its seconds are not the checks'

    dsstar.model.llm.provider_of("openai/gpt-4o")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm.require_key("sk-right")
    cases = [
        ("gpt-4o-typo", None, "sk-right", "cannot route"),
        ("openai/m", f"http://127.0.0.1:{port}/v1", None, "cannot reach"),
        ("openai/m", llm.base_url, "sk-bad", "rejected"),
    ]
    for model, api_base, key, said in cases:
        started = time.monotonic()
        with pytest.raises(ConfigError, match=said):
            check_models([model], api_base, key)
        assert time.monotonic() - started < 5
    check_models(["openai/m"], llm.base_url, "sk-right")


def test_a_key_rejected_at_the_first_call_fails_at_once_without_retries(env, llm, sales):
    # The models list takes the key but completions do not (a key without chat access).
    llm.fallback(lambda req: Error(401, "invalid api key"))
    done = run(sales)
    # The preflight passed, so this is a run that failed (exit 1), stored and resumable.
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and "DSSTAR_API_KEY" in lines[-1]
    assert lines[0].startswith("run ")  # the run id first, the error last
    # Between them only progress lines (stderr is not a terminal): no traceback, no retries.
    assert all(" · " in line for line in lines[1:-1]), lines
    result = json.loads(done.stdout)
    assert result["status"] == "failed" and "DSSTAR_API_KEY" in result["error"]
    assert all(r["status"] == 401 for r in llm.requests)
    assert len(llm.requests) == len([p for p in sales.iterdir() if p.is_file()])  # no retry


@pytest.mark.parametrize("status", [400, 404])
def test_bad_requests_are_never_retried(env, llm, sales, status):
    llm.fallback(lambda req: Error(status, "no such thing"))
    done = run(sales)
    assert done.returncode == 1, done.stderr  # a run that failed, stored
    assert json.loads(done.stdout)["status"] == "failed"
    assert len(llm.requests) == len([p for p in sales.iterdir() if p.is_file()])


def test_empty_data_root(env, llm, tmp_path):
    empty = tmp_path / "empty"
    (empty / ".hidden").mkdir(parents=True)
    (empty / ".hidden" / "x.csv").write_text("a\n1\n")  # hidden files are not data
    refused(run(empty), env, "holds no data files")
    refused(run(tmp_path / "missing"), env, "no such file or folder")
    assert llm.requests == []


def test_unreadable_data_root(env, llm, tmp_path):
    # Root reads everything: the CLI runs without the capabilities that override file
    # permissions, over a folder that belongs to another user.
    folder = tmp_path / "private"
    folder.mkdir()
    (folder / "orders.csv").write_text("a\n1\n")
    os.chown(folder, 65534, 65534)
    folder.chmod(0o700)
    caps = "-dac_override,-dac_read_search"
    argv = ["setpriv", "--bounding-set", caps, "--inh-caps", caps, "--", sys.executable]
    done = subprocess.run(
        [*argv, "-m", "dsstar", "run", "--data", str(folder), "-q", QUESTION, "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    refused(done, env, "not readable", "permissions")


def test_unwritable_storage(env, llm, sales, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = run(sales, "--storage", str(blocker / "storage"))
    refused(done, env, "cannot write to storage", "--storage")
    assert llm.requests == []


def test_no_usable_isolation(env, llm, sales, tmp_path):
    bare = {**os.environ, "DSSTAR_SANDBOX": "bwrap", "PATH": str(tmp_path)}  # no bwrap on it
    refused(run(sales, env=bare), env, "bubblewrap", "DSSTAR_SANDBOX")
    assert llm.requests == []
