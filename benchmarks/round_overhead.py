"""What dsstar's machinery costs per round, next to a plain loop doing the same work, and how
long the CLI takes to send its first LLM request.

One run does both, against the same scripted OpenAI-compatible server (tests/fake_llm.py,
instant replies) and a started Prefect server:

- dsstar: the ds-star flow over examples/sales for --rounds rounds (verifier "No" until the
  last), with Prefect tasks, storage, ledger, artifacts and the sandbox;
- plain: the very same HTTP requests (replayed bodies, the same server) and the same round
  scripts run with `subprocess` and the same python, in a folder where data/ holds the files.

Then `dsstar run` is started as a subprocess with PREFECT_API_URL set to the started server,
and the time from its start to the server's first request is printed, with import times.

    .venv/bin/python benchmarks/round_overhead.py [--rounds 8]

(benchmarks/overhead.py measures whole runs and the commands' start instead.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SALES = REPO / "examples" / "sales"
QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]


def start_prefect(home: Path) -> subprocess.Popen:
    """`prefect server start` on a free port (benchmarks/overhead.py starts it); this
    process's PREFECT_API_URL points at it once it answers."""
    from overhead import start_prefect as start

    os.environ.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_LOGGING_LEVEL="WARNING",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    proc, os.environ["PREFECT_API_URL"] = start(home)
    return proc


def scripted(llm, rounds: int) -> None:
    """Verifier No until the last round; each round's script loads and aggregates the orders."""
    from scenarios import FINAL_ONLY_ANSWER, LOAD, describe_script, fence

    llm.reset()
    llm.default("analyzer", describe_script)
    llm.default("planner", lambda req: "Compute revenue per region from the orders.")
    llm.default("coder", lambda req: fence(LOAD))
    verdicts = iter(["No"] * (rounds - 1) + ["Yes"])
    llm.default("verifier", lambda req: next(verdicts, "Yes"))
    llm.default("router", lambda req: "Add Step")
    llm.default("finalyzer", lambda req: fence(FINAL_ONLY_ANSWER))


def dsstar_rounds(llm, rounds: int, work: Path) -> tuple[list[float], dict]:
    """Per-round seconds of the ds-star flow (rounds 01.. : route, plan, code, run, verify)."""
    from flows.ds_star import own_flow

    ds_star = own_flow(None)  # the person running this chose its data, as with the CLI

    scripted(llm, rounds)
    run_id = f"overhead-{int(time.time())}"
    result = ds_star(question=QUESTION, data=str(SALES), max_rounds=rounds, run_id=run_id,
                     options={"reuse": False})  # fmt: skip
    record = json.loads((work / "storage" / "runs" / run_id / "run.json").read_text())
    return [row["seconds"] for row in record["round_table"][1:]], result


def plain_rounds(
    llm, rounds: int, work: Path, run_requests: list[dict]
) -> tuple[list[float], list[float]]:
    """The same requests (bodies and headers) and scripts, in a plain loop. Returns the
    seconds of each round and of its HTTP calls alone."""
    import httpx

    from dsstar.algorithm.agents import extract_code

    loop = [r for r in run_requests if r["agent"] not in ("analyzer", "finalyzer")][3:]
    chunks = [loop[i : i + 4] for i in range(0, len(loop), 4)]  # router, planner, coder, verifier
    folder = Path(tempfile.mkdtemp(prefix="plain-", dir=work))
    (folder / "data").symlink_to(SALES)
    scripted(llm, rounds)
    seconds, http = [], []
    with httpx.Client(base_url=llm.base_url, timeout=60) as client:
        for chunk in chunks:
            started = time.perf_counter()
            code = None
            for request in chunk:
                headers = {k: v for k, v in request["headers"].items()
                           if k.startswith("x-dsstar") or k == "authorization"}  # fmt: skip
                reply = client.post("/chat/completions", json=request["body"], headers=headers)
                text = reply.json()["choices"][0]["message"]["content"]
                code = extract_code(text) if request["agent"] == "coder" else code
            http.append(time.perf_counter() - started)
            script = folder / "round.py"
            script.write_text(code or "")
            subprocess.run([sys.executable, str(script)], cwd=folder, capture_output=True,
                           timeout=120, check=True)  # fmt: skip
            seconds.append(time.perf_counter() - started)
    return seconds, http


def exec_cost(code: str, reps: int = 5) -> tuple[float, float]:
    """Mean seconds of one script: through dsstar's sandbox, and as a plain subprocess."""
    from dsstar.execution.sandbox import Limits, run_script

    sandboxed, plain = [], []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "data").symlink_to(SALES)
        (Path(tmp) / "s.py").write_text(code)
        for _ in range(reps):
            started = time.perf_counter()
            run_script(code, data_dir=SALES, limits=Limits(timeout_s=60, memory_mb=4096,
                                                           output_bytes=100_000))  # fmt: skip
            sandboxed.append(time.perf_counter() - started)
            started = time.perf_counter()
            subprocess.run([sys.executable, "s.py"], cwd=tmp, capture_output=True, check=True)
            plain.append(time.perf_counter() - started)
    return statistics.mean(sandboxed), statistics.mean(plain)


def first_request(llm, work: Path) -> float:
    """Seconds from starting `dsstar run` to the scripted server's first request."""
    scripted(llm, 1)
    seen: list[float] = []
    llm.intercept(lambda req: seen.append(time.time()) or None)
    env = os.environ | {"PYTHONPATH": str(REPO)}
    started = time.time()
    subprocess.run([sys.executable, "-m", "dsstar", "run", "--data", str(SALES), "--question",
                    QUESTION, "--json", "--no-reuse"], env=env, capture_output=True,
                   timeout=600, cwd=work)  # fmt: skip
    llm.intercept(None)
    return seen[0] - started if seen else float("nan")


def import_seconds(module: str) -> float:
    env = os.environ | {"PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], env=env, check=True, cwd=REPO)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="rounds per run (default 6)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each kind (default 2)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dsstar-overhead-"))
    (work / "prefect").mkdir()
    server = start_prefect(work / "prefect")
    from fake_llm import FakeLLM

    try:
        with FakeLLM() as llm:
            os.environ.update(
                DSSTAR_MODEL="openai/gpt-4o-mini", DSSTAR_API_BASE=llm.base_url,
                DSSTAR_API_KEY="sk-overhead", DSSTAR_STORAGE=str(work / "storage"),
                DSSTAR_DATABASE_URL=f"sqlite:///{work / 'ledger.db'}",
                DSSTAR_WORK_DIR=str(work), DSSTAR_EXEC_TIMEOUT="60",
            )  # fmt: skip
            dsstar_rounds(llm, 2, work)  # warm-up: first flow run, imports, analysis cache
            ds, plain, http = [], [], []
            for _ in range(args.repeat):  # alternated, so a change in the machine's load
                more, _ = dsstar_rounds(llm, args.rounds, work)  # hits both alike
                requests = list(llm.requests)
                ds += more
                rounds, calls_s = plain_rounds(llm, args.rounds, work, requests)
                plain, http = plain + rounds, http + calls_s
            from scenarios import LOAD

            sandboxed, subprocess_s = exec_cost(LOAD)
            calls = [r for r in requests if r["agent"] != "analyzer"]
            first = first_request(llm, work)
    finally:
        server.terminate()
        server.wait(timeout=30)
    d, p = statistics.median(ds), statistics.median(plain)
    print(f"rounds measured: {len(ds)} dsstar, {len(plain)} plain (4 LLM calls + 1 script each)")
    print("dsstar per round (s):", " ".join(f"{s:.3f}" for s in ds))
    print("plain  per round (s):", " ".join(f"{s:.3f}" for s in plain))
    print(f"median round: dsstar {d * 1000:.0f} ms, plain {p * 1000:.0f} ms, ratio {d / p:.2f}"
          " (target <= 0.8)")  # fmt: skip
    print(f"one script: sandbox (run_script) {sandboxed * 1000:.0f} ms, plain subprocess "
          f"{subprocess_s * 1000:.0f} ms")  # fmt: skip
    h = statistics.median(http)
    other = d - sandboxed - h
    print(
        f"dsstar round ~ script in sandbox {sandboxed * 1000:.0f} ms + 4 HTTP calls {h * 1000:.0f}"
        f" ms + the rest (Prefect tasks, storage, ledger, artifacts) {other * 1000:.0f} ms"
    )
    print(f"LLM requests in the measured run: {len(calls)}")
    print(f"CLI start -> first LLM request: {first:.2f} s (target <= 5 s, PREFECT_API_URL set)")
    for module in ("dsstar.cli", "litellm", "prefect", "flows.ds_star"):
        print(f"  python -c 'import {module}': {import_seconds(module):.2f} s")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
