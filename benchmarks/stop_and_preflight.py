"""How fast the CLI refuses what cannot work, and how fast it stops on SIGINT/SIGTERM.

Runs the real `dsstar` command in subprocesses against the scripted model server of the tests
(tests/fake_llm.py) and Prefect's temporary server (no PREFECT_API_URL), and prints:
- the wall time of each preflight refusal (exit 2);
- the time from the signal to the exit of `dsstar run` (signal while the model thinks) and of
  `dsstar describe` (signal while the analyzer thinks), with the exit code.

    python benchmarks/stop_and_preflight.py
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fake_llm import Error, FakeLLM  # noqa: E402
from scenarios import describe_script, two_rounds  # noqa: E402

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"


def environment(root: Path, llm: FakeLLM) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSSTAR_", "PREFECT_API"))}
    env.update(
        DSSTAR_MODEL="openai/gpt-4o-mini", DSSTAR_API_BASE=llm.base_url, DSSTAR_API_KEY="sk-x",
        DSSTAR_STORAGE=str(root / "storage"), DSSTAR_WORK_DIR=str(root / "work"),
        DSSTAR_DATABASE_URL=f"sqlite:///{root / 'ledger.db'}", PREFECT_HOME=str(root / "prefect"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false", LITELLM_LOCAL_MODEL_COST_MAP="True",
        PYTHONPATH=str(REPO),
    )  # fmt: skip
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "dsstar", *args], env=env, cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def preflight_cases(root: Path, env: dict[str, str]) -> None:
    empty = root / "empty"
    empty.mkdir()
    blocker = root / "a-file"
    blocker.write_text("")
    sales = str(REPO / "examples" / "sales")
    no_key = {k: v for k, v in env.items() if k not in {"DSSTAR_API_KEY", "DSSTAR_API_BASE"}}
    no_key.pop("OPENAI_API_KEY", None)
    cases = {
        "no model": ({k: v for k, v in env.items() if k != "DSSTAR_MODEL"}, sales, []),
        "missing key": (no_key, sales, []),
        "empty data root": (env, str(empty), []),
        "unwritable storage": (env, sales, ["--storage", str(blocker / "x")]),
        "no isolation": ({**env, "DSSTAR_SANDBOX": "bwrap", "PATH": str(empty)}, sales, []),
    }
    print("preflight refusal (exit code, seconds):")
    for name, (case_env, data, extra) in cases.items():
        started = time.monotonic()
        proc = cli(case_env, "run", "--data", data, "--question", QUESTION, *extra)
        proc.communicate()
        print(f"  {name:20s} exit {proc.returncode}  {time.monotonic() - started:5.2f} s")


def stop_case(env: dict[str, str], llm: FakeLLM, args: list[str], agent: str, signum: int) -> None:
    llm.reset()
    two_rounds(llm)
    storage = tempfile.mkdtemp(prefix="storage-", dir=Path(env["DSSTAR_WORK_DIR"]).parent)
    proc = cli({**env, "DSSTAR_STORAGE": storage}, *args)  # no cached analyses
    sent: list[float] = []

    def slow(request):
        if request["agent"] == agent and not sent:
            sent.append(time.monotonic())
            os.kill(proc.pid, signum)
            time.sleep(30)  # the model would answer much later
            return Error(503, "gone")
        return describe_script(request) if request["agent"] == "analyzer" else None

    llm.intercept(slow)
    output: list[tuple[str, str]] = []
    threading.Thread(target=lambda: output.append(proc.communicate()), daemon=True).start()
    proc.wait()
    took = time.monotonic() - sent[0] if sent else float("nan")
    name = signal.Signals(signum).name
    print(f"  {args[0]:8s} {name:7s} exit {proc.returncode}  {took:5.2f} s after the signal")
    time.sleep(0.5)
    if not sent and output:
        print("    " + output[0][1].strip()[-400:])


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="dsstar-bench-stop-"))
    try:
        with FakeLLM() as llm:
            env = environment(root, llm)
            (root / "work").mkdir()
            if "--stop-only" not in sys.argv:
                preflight_cases(root, env)
            print("stop (signal while the model thinks):")
            sales = str(REPO / "examples" / "sales")
            run = ["run", "--data", sales, "--question", QUESTION, "--json"]
            for signum in (signal.SIGINT, signal.SIGTERM):
                stop_case(env, llm, run, "coder", signum)
                stop_case(env, llm, ["describe", "--data", sales, "--json"], "analyzer", signum)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
