"""Rounds at the speed of the model: what a refinement round waits for when every model call
takes seconds, through dsstar (its round's verifier, router and planner asked at once, and
one after another) and through a plain loop making the same calls in turn.

One run, against the scripted OpenAI-compatible server (tests/fake_llm.py) answering every
call of the rounds after a fixed delay (the analyzer at once: analysis is not measured), a
started Prefect server, and the retail question over examples/sales for --rounds refinement
rounds: verifier "No" until the last; router "Add Step", except "Step 2 is wrong!" in round 02
(a backtrack); every round's script loads and aggregates the orders. For each delay:

- dsstar, ask_ahead on, then off: the ds-star flow in this process, per-round seconds
  from its run.json (round NN: from round NN-1 recorded to round NN recorded);
- plain: the very requests of the sequential run (bodies and headers, replayed with httpx in
  order: router, planner, coder, verifier) and the same round script run with `subprocess`.

Prints per-round wall time, model calls and tokens for each, the targets (a refinement round
<= 2 x delay + its script + 0.5 s, against 4 x delay plain; extra calls <= 2 per run + 1 per
backtrack) and the load average before and after.

    .venv/bin/python benchmarks/rounds_at_model_speed.py [--delays 1 3] [--rounds 4]
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SALES = REPO / "examples" / "sales"
QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]
BACKTRACK_ROUND = 2  # the router of round 01 says "Step 2 is wrong!", opening round 02


def scripted(llm: Any, rounds: int, delay: float) -> None:
    """The rounds' replies, each after `delay` seconds (see the module)."""
    from scenarios import FINAL_ONLY_ANSWER, LOAD, describe_script, fence

    llm.reset()
    llm.default("analyzer", describe_script)
    llm.default("planner", lambda req: "Compute revenue per region from the orders.")
    llm.default("coder", lambda req: fence(LOAD))
    verdicts = iter(["No"] * rounds + ["Yes"])
    llm.default("verifier", lambda req: next(verdicts, "Yes"))
    routes = iter(["Step 2 is wrong!" if n == BACKTRACK_ROUND else "Add Step"
                   for n in range(1, rounds + 2)])  # fmt: skip
    llm.default("router", lambda req: next(routes, "Add Step"))
    llm.default("finalyzer", lambda req: fence(FINAL_ONLY_ANSWER))

    def slow(request: dict) -> None:
        request["arrived"] = time.monotonic()
        if request["agent"] != "analyzer":
            time.sleep(delay)

    llm.intercept(slow)


def dsstar_run(llm: Any, rounds: int, delay: float, parallel: bool, work: Path) -> dict:
    """One run of the ds-star flow; its per-round seconds, routes, calls and tokens."""
    from flows.ds_star import own_flow

    ds_star = own_flow(None)  # the person running this chose its data, as with the CLI

    scripted(llm, rounds, delay)
    run_id = f"speed-{'together' if parallel else 'in-turn'}-{delay:g}s-{time.time_ns()}"
    started = time.perf_counter()
    result = ds_star(question=QUESTION, data=str(SALES), max_rounds=rounds + 1, run_id=run_id,
                     options={"reuse": False, "ask_ahead": parallel})  # fmt: skip
    wall = time.perf_counter() - started
    record = json.loads((work / "storage" / "runs" / run_id / "run.json").read_text())
    loop = [r for r in llm.requests if r["agent"] != "analyzer"]
    return {
        "rounds": [row["seconds"] for row in record["round_table"]],
        "routes": [row["route"] for row in record["round_table"]],
        "status": result["status"],
        "calls": len(loop),
        "by_agent": {a: sum(r["agent"] == a for r in loop) for a in ("verifier", "router",
                                                                     "planner", "coder")},
        "tokens": result["input_tokens"] + result["output_tokens"],
        "wall": wall,
        "requests": list(llm.requests),
    }  # fmt: skip


def plain_run(llm: Any, rounds: int, delay: float, requests: list[dict], work: Path) -> dict:
    """The sequential run's requests replayed in turn with its round scripts (see the module)."""
    import httpx

    from dsstar.algorithm.agents import extract_code

    loop = [r for r in requests if r["agent"] not in ("analyzer", "finalyzer")]
    chunks = [loop[:3]] + [loop[i : i + 4] for i in range(3, len(loop), 4)]
    folder = Path(tempfile.mkdtemp(prefix="plain-", dir=work))
    (folder / "data").symlink_to(SALES)
    scripted(llm, rounds, delay)
    seconds, tokens, calls = [], 0, 0
    with httpx.Client(base_url=llm.base_url, timeout=120) as client:
        for chunk in chunks:
            started = time.perf_counter()
            code = None
            for request in chunk:
                headers = {k: v for k, v in request["headers"].items()
                           if k.startswith("x-dsstar") or k == "authorization"}  # fmt: skip
                reply = client.post("/chat/completions", json=request["body"], headers=headers)
                body = reply.json()
                tokens += body["usage"]["total_tokens"]
                calls += 1
                text = body["choices"][0]["message"]["content"]
                code = extract_code(text) if request["agent"] == "coder" else code
            script = folder / "round.py"
            script.write_text(code or "")
            subprocess.run([sys.executable, str(script)], cwd=folder, capture_output=True,
                           timeout=120, check=True)  # fmt: skip
            seconds.append(time.perf_counter() - started)
    return {"rounds": seconds, "calls": calls, "tokens": tokens}


def script_seconds(reps: int = 3) -> float:
    """Median seconds of one round's script through dsstar's sandbox."""
    from scenarios import LOAD

    from dsstar.execution.sandbox import Limits, run_script

    took = []
    for _ in range(reps):
        started = time.perf_counter()
        run_script(LOAD, data_dir=SALES, limits=Limits(timeout_s=60, memory_mb=4096,
                                                       output_bytes=100_000))  # fmt: skip
        took.append(time.perf_counter() - started)
    return statistics.median(took)


def report(delay: float, together: dict, in_turn: dict, plain: dict, script: float) -> None:
    line = " ".join
    print(f"\n== model delay {delay:g} s per call ==")
    print("round routes (dsstar):", line(str(r or "-") for r in together["routes"]))
    for name, run in (("dsstar together", together), ("dsstar in turn ", in_turn),
                      ("plain loop     ", plain)):  # fmt: skip
        print(f"{name} per round (s):", line(f"{s:6.2f}" for s in run["rounds"]))
    print(f"{'':15} model calls: together {together['calls']}, in turn {in_turn['calls']}"
          f" (rounds and finalyzer), plain {plain['calls']} (rounds)")  # fmt: skip
    print(f"{'':15} by agent: together {together['by_agent']}, in turn {in_turn['by_agent']}")
    print(f"{'':15} tokens: together {together['tokens']:,}, in turn {in_turn['tokens']:,},"
          f" plain {plain['tokens']:,} (plain: without the finalyzer)")  # fmt: skip
    # Refinement rounds that only add a step (the backtrack round asks its planner again).
    adding = [n for n, r in enumerate(together["routes"]) if r == "Add Step"]
    t = statistics.median(together["rounds"][n] for n in adding)
    s = statistics.median(in_turn["rounds"][n] for n in adding)
    p = statistics.median(plain["rounds"][n] for n in adding)
    target = 2 * delay + script + 0.5
    print(f"median Add Step round: together {t:.2f} s, in turn {s:.2f} s, plain {p:.2f} s;"
          f" together/plain {t / p:.2f}, together/in turn {t / s:.2f}")  # fmt: skip
    print(f"target: together <= 2 x {delay:g} + script {script:.2f} + 0.5 = {target:.2f} s:"
          f" {'met' if t <= target else 'NOT met'} ({t:.2f} s); plain ~ 4 x delay + script ="
          f" {4 * delay + script:.2f} s")  # fmt: skip
    extra = together["calls"] - in_turn["calls"]
    backtracks = sum(1 for r in together["routes"] if r and r.startswith("Step"))
    print(
        f"extra calls: {extra} (target <= 2 per run + 1 per backtrack = {2 + backtracks});"
        f" whole runs: together {together['wall']:.1f} s, in turn {in_turn['wall']:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delays", type=float, nargs="+", default=[1.0, 3.0],
                        help="seconds each model call takes (default 1 3)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=4, help="refinement rounds (default 4)")
    args = parser.parse_args()
    print("load average before:", " ".join(f"{x:.2f}" for x in os.getloadavg()),
          f"({os.cpu_count()} CPUs)")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="dsstar-speed-"))
    (work / "prefect").mkdir()
    from round_overhead import start_prefect

    server = start_prefect(work / "prefect")
    from fake_llm import FakeLLM

    try:
        with FakeLLM() as llm:
            os.environ.update(
                DSSTAR_MODEL="openai/gpt-4o-mini", DSSTAR_API_BASE=llm.base_url,
                DSSTAR_API_KEY="sk-speed", DSSTAR_STORAGE=str(work / "storage"),
                DSSTAR_DATABASE_URL=f"sqlite:///{work / 'ledger.db'}",
                DSSTAR_WORK_DIR=str(work), DSSTAR_EXEC_TIMEOUT="60",
            )  # fmt: skip
            dsstar_run(llm, 1, 0.0, True, work)  # warm-up: first flow run, the analyses cached
            script = script_seconds()
            for delay in args.delays:
                together = dsstar_run(llm, args.rounds, delay, True, work)
                in_turn = dsstar_run(llm, args.rounds, delay, False, work)
                plain = plain_run(llm, args.rounds, delay, in_turn["requests"], work)
                report(delay, together, in_turn, plain, script)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    print("\nload average after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
