"""Whether `dsstar bench run` starts without PREFECT_API_URL on a machine whose cores are busy.

Runs `stress --cpu N` (Debian's stress) beside the real command, which then starts its own
temporary Prefect server, as `dsstar run` does, and answers one task of the DA-Code slice with
the scripted model of the tests (tests/fake_llm.py). Prints, for each try, the exit code and
the seconds the command took, and how many of the tries started.

    python benchmarks/busy_start.py [--tries 3] [--cpus 2]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fake_llm import FakeLLM  # noqa: E402
from shared_data import DACODE  # noqa: E402
from test_bench_dacode_run import read_replies, script_slice  # noqa: E402


def environment(root: Path, llm: FakeLLM) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSSTAR_", "PREFECT_"))}
    env.update(
        DSSTAR_MODEL="openai/gpt-4o-mini", DSSTAR_API_BASE=llm.base_url, DSSTAR_API_KEY="sk-x",
        DSSTAR_STORAGE=str(root / "storage"), DSSTAR_WORK_DIR=str(root / "work"),
        DSSTAR_DATABASE_URL=f"sqlite:///{root / 'ledger.db'}", PREFECT_HOME=str(root / "prefect"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false", LITELLM_LOCAL_MODEL_COST_MAP="True",
        PYTHONPATH=str(REPO),
    )  # fmt: skip
    return env


def one_try(n: int, cpus: int) -> tuple[int, float, str]:
    with tempfile.TemporaryDirectory(prefix="dsstar-busy-start-") as folder, FakeLLM() as llm:
        root = Path(folder)
        script_slice(llm, read_replies())
        argv = [sys.executable, "-m", "dsstar", "bench", "run", "--suite", "dacode",
                "--root", str(DACODE), "--task-ids", "di-text-001",
                "--out", str(root / "bench"), "--json"]  # fmt: skip
        busy = subprocess.Popen(["stress", "--cpu", str(cpus)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        started = time.monotonic()
        try:
            done = subprocess.run(argv, env=environment(root, llm), cwd=REPO, text=True,
                                  capture_output=True, timeout=1800)  # fmt: skip
        finally:
            os.killpg(busy.pid, signal.SIGKILL)  # stress and the workers it forked
            busy.wait()
        seconds = time.monotonic() - started
        try:
            score = json.loads(done.stdout)["summary"]["all"]["score"]
            said = f"score {score}"
        except (ValueError, KeyError):
            said = done.stderr.strip().splitlines()[-1:] or ["no output"]
            said = said[0][:160]
        return done.returncode, seconds, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=2, help="busy processes beside it")
    args = parser.parse_args()
    print(f"bench run without PREFECT_API_URL, stress --cpu {args.cpus} beside it:")
    started = 0
    for n in range(1, args.tries + 1):
        code, seconds, said = one_try(n, args.cpus)
        started += code == 0
        print(f"  try {n}: exit {code} in {seconds:.0f} s ({said})", flush=True)
    print(f"started and answered: {started} of {args.tries}")


if __name__ == "__main__":
    main()
