"""What a run pays for and what it waits for, asked one after another (the default) and asked
ahead (`--ask-ahead`): model calls, tokens and discarded replies per task, on the DA-Code slice
and the retail example, the retail run's wall time with every model call taking a fixed
delay, and the seconds the DA-Code tasks' scripts run (the final script is not run again when
it is the last round's own; the re-run it saves is measured).

Against the scripted OpenAI-compatible server (tests/fake_llm.py), counting requests as it
receives them (by their X-DSStar-Agent and X-DSStar-Run headers), a started Prefect server and
the flows in this process:

- DA-Code slice (shared/bench/dacode, or --dacode): `ds_star_bench` over its tasks, each
  answered with the replies of tests/dacode_replies/ (a plan, a script, a verifier's Yes; the
  final script is the round's script), the router answering "Add Step" when it is asked. Per
  task: calls by agent, tokens (run.json), replies discarded (`unused` of the rounds'
  verdict.json), and for the default run the seconds of its scripts in the sandbox: the
  rounds', the final one's, and the final script run again as the final step did before it
  kept the round's run ("re-run saved").
- Retail (examples/sales, the README's question): the recorded replies of
  examples/sales-replies.yaml, served by call label, each after --delay seconds (the analyzer
  at once; a first run fills the catalog); round 00 is judged not sufficient, round 01
  sufficient. Wall time of the whole run in both modes.

Prints tables and totals, not asserted; the load average before and after.

    .venv/bin/python benchmarks/ask_ahead.py [--delay 2] [--task-ids ID,ID] [--parallel 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]

from shared_data import DACODE  # noqa: E402

SALES = REPO / "examples" / "sales"
SALES_REPLIES = REPO / "examples" / "sales-replies.yaml"
QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
GUIDELINES = "Answer as '<region name>, <manager name>'."
EXEC_TIMEOUT = 300.0  # the slice's competition task fits for a minute and more on a busy host


class Executions:
    """The seconds of every script the flows run in this process, by run id and label (read
    from the execute task's parameters): `tasks.execute.run_script`, timed."""

    def __init__(self) -> None:
        self.seconds: dict[str, dict[str, float]] = defaultdict(dict)
        self._lock = threading.Lock()

    def __enter__(self) -> Executions:
        from prefect.context import TaskRunContext

        import tasks.execute as execute

        self._module, original = execute, execute.run_script

        def timed(code: str, **kwargs: Any) -> Any:
            result = original(code, **kwargs)
            context = TaskRunContext.get()  # an execute task's; a file's analysis calls
            params = context.parameters if context is not None else {}  # it inside its own
            if {"run_id", "label"} <= set(params):
                with self._lock:
                    self.seconds[params["run_id"]][params["label"]] = result.duration_s
            return result

        self._original, execute.run_script = original, timed
        return self

    def __exit__(self, *exc: object) -> None:
        self._module.run_script = self._original


def task_figures(llm: Any, storage: Path, run_id: str) -> dict[str, Any]:
    """Calls the server received for `run_id` by agent, its tokens and discarded replies."""
    sent = Counter(r["agent"] for r in llm.requests if r.get("run") == run_id)
    folder = storage / "runs" / run_id
    record = json.loads((folder / "run.json").read_text())
    unused = [
        u["label"]
        for verdict in sorted(folder.glob("rounds/*/verdict.json"))
        for u in json.loads(verdict.read_text()).get("unused", [])
    ]
    return {
        "status": record.get("status"),
        "calls": sum(sent.values()),
        "by_agent": dict(sent),
        "tokens": (record.get("input_tokens") or 0) + (record.get("output_tokens") or 0),
        "unused": unused,
        "final_reused": bool(record.get("final_reused_run")),
    }


def dacode_run(llm: Any, work: Path, ids: list[str], ahead: bool, parallel: int) -> dict:
    """The slice through `ds_star_bench`; per task figures, and its scripts' seconds."""
    from test_bench_dacode_run import read_replies, script_slice

    from dsstar.bench import TaskSource, get, select
    from flows import own_bench, task_dicts
    from flows.bench import task_run_id

    llm.reset()
    script_slice(llm, read_replies())
    llm.default("router", lambda req: "The plan holds; the next step is the output.\n\nAdd Step")
    tasks = select(get("dacode").tasks(TaskSource(root=DACODE)), ids or None, None)
    bench_id = f"calls-{'ahead' if ahead else 'default'}-{time.time_ns()}"
    with Executions() as executions:
        own_bench()(suite="dacode", tasks=task_dicts(tasks), bench_id=bench_id,
                    out=str(work / bench_id), parallel=parallel,
                    options={"ask_ahead": ahead, "exec_timeout": EXEC_TIMEOUT})  # fmt: skip
    storage = Path(os.environ["DSSTAR_STORAGE"])
    rows = {}
    for task in tasks:
        run_id = task_run_id(bench_id, task.task_id)
        rows[task.task_id] = task_figures(llm, storage, run_id) | {
            "run_id": run_id,
            "seconds": executions.seconds.get(run_id, {}),
            "data": task.params()["data"],
        }
    analysis = sum(1 for r in llm.requests if r["agent"] == "analyzer")  # the files' analyses
    return {"tasks": rows, "analysis_calls": analysis}


def rerun_final(storage: Path, row: dict[str, Any]) -> float:
    """Seconds of the task's final script run again in the sandbox, as the final step ran it
    before it kept the round's run."""
    from dsstar.execution.sandbox import Limits, run_script

    code = (storage / "runs" / row["run_id"] / "final" / "solution.py").read_text()
    result = run_script(code, data_dir=Path(row["data"]), limits=Limits(timeout_s=EXEC_TIMEOUT))
    return result.duration_s


def retail_run(llm: Any, ahead: bool, delay: float) -> dict[str, Any]:
    """The README's question answered with the recorded replies, each after `delay`."""
    import yaml

    from dsstar.model.recorded import call_label
    from flows.ds_star import own_flow

    ds_star = own_flow(None)  # the person running this chose its data, as with the CLI
    replies = yaml.safe_load(SALES_REPLIES.read_text())
    llm.reset()
    llm.fallback(lambda req: replies[call_label(req["headers"].get("x-dsstar-call", ""))])

    def slow(request: dict) -> None:
        if request["agent"] != "analyzer":
            time.sleep(delay)

    llm.intercept(slow)
    run_id = f"retail-{'ahead' if ahead else 'default'}-{time.time_ns()}"
    started = time.perf_counter()
    ds_star(question=QUESTION, data=str(SALES), guidelines=GUIDELINES, run_id=run_id,
            reuse=False, ask_ahead=ahead)  # fmt: skip
    wall = time.perf_counter() - started
    figures = task_figures(llm, Path(os.environ["DSSTAR_STORAGE"]), run_id)
    return figures | {"wall": wall, "loop_calls": figures["calls"] - figures["by_agent"].get(
        "analyzer", 0)}  # fmt: skip


def print_dacode(default: dict, ahead: dict, reruns: dict[str, float]) -> None:
    print("\n== DA-Code slice: model calls per task (the server's count), tokens, discarded ==")
    print(f"{'task':22} {'calls':>11} {'tokens':>15} {'discarded':>11}  status")
    print(f"{'':22} {'dflt ahead':>11} {'dflt  ahead':>15} {'dflt ahead':>11}")
    sums = Counter()
    for task_id, one in default["tasks"].items():
        two = ahead["tasks"][task_id]
        print(f"{task_id:22} {one['calls']:>5} {two['calls']:>5} {one['tokens']:>7,} "
              f"{two['tokens']:>7,} {len(one['unused']):>5} {len(two['unused']):>5}  "
              f"{one['status']}/{two['status']}")  # fmt: skip
        sums.update(calls=one["calls"], calls_ahead=two["calls"], tokens=one["tokens"],
                    tokens_ahead=two["tokens"], unused=len(one["unused"]),
                    unused_ahead=len(two["unused"]))  # fmt: skip
    n = len(default["tasks"])
    print(f"{'all ' + str(n) + ' tasks':22} {sums['calls']:>5} {sums['calls_ahead']:>5} "
          f"{sums['tokens']:>7,} {sums['tokens_ahead']:>7,} {sums['unused']:>5} "
          f"{sums['unused_ahead']:>5}")  # fmt: skip
    print(f"per task: calls {sums['calls'] / n:.1f} / {sums['calls_ahead'] / n:.1f}, tokens"
          f" {sums['tokens'] / n:,.0f} / {sums['tokens_ahead'] / n:,.0f}; discarded"
          f" {sums['unused']} / {sums['unused_ahead']} of {sums['calls']} / {sums['calls_ahead']}"
          f" calls; the files' analyses, apart: {default['analysis_calls']} /"
          f" {ahead['analysis_calls']} calls (the second run reads the catalog)")  # fmt: skip
    ahead_agents = Counter()
    for row in ahead["tasks"].values():
        ahead_agents.update(row["by_agent"])
    default_agents = Counter()
    for row in default["tasks"].values():
        default_agents.update(row["by_agent"])
    print(f"by agent: default {dict(sorted(default_agents.items()))}")
    print(f"          ahead   {dict(sorted(ahead_agents.items()))}")

    print("\n== DA-Code slice: seconds of script execution per task (default run) ==")
    print(f"{'task':22} {'rounds':>7} {'final':>7} {'now':>7} {'re-run saved':>13} {'before':>7}")
    total_now = total_before = 0.0
    for task_id, row in default["tasks"].items():
        rounds = sum(s for label, s in row["seconds"].items() if not label.startswith("final"))
        final = sum(s for label, s in row["seconds"].items() if label.startswith("final"))
        saved = reruns.get(task_id, 0.0)
        now, before = rounds + final, rounds + final + saved
        total_now, total_before = total_now + now, total_before + before
        shown = f"{saved:13.1f}" if task_id in reruns else f"{'(ran)':>13}"
        print(f"{task_id:22} {rounds:7.1f} {final:7.1f} {now:7.1f} {shown} {before:7.1f}")
    print(
        f"{'all':22} {'':7} {'':7} {total_now:7.1f} {'':13} {total_before:7.1f}"
        f"  (after / before: {total_now / max(total_before, 1e-9):.2f})"
    )


def print_retail(delay: float, default: list[dict], ahead: list[dict]) -> None:
    print(f"\n== retail example (examples/sales), every model call {delay:g} s ==")
    walls = {}
    for name, runs in (("default  ", default), ("ask ahead", ahead)):
        run = runs[0]  # the same calls and tokens in every repeat
        agents = {k: v for k, v in sorted(run["by_agent"].items()) if k != "analyzer"}
        walls[name] = statistics.median(r["wall"] for r in runs)
        each = " ".join(f"{r['wall']:.1f}" for r in runs)
        print(f"{name}: {run['status']}, {run['loop_calls']} calls {agents},"
              f" tokens {run['tokens']:,}, discarded {run['unused']}; wall (s) {each},"
              f" median {walls[name]:.1f}")  # fmt: skip
    one, two = default[0], ahead[0]
    print(f"ask ahead: {two['loop_calls'] - one['loop_calls']:+d} calls,"
          f" {two['tokens'] - one['tokens']:+,} tokens,"
          f" {walls['ask ahead'] - walls['default  ']:+.1f} s (median)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=2.0, help="seconds per model call (retail)")
    parser.add_argument("--task-ids", default="", help="DA-Code tasks (default: the slice)")
    parser.add_argument("--parallel", type=int, default=2, help="DA-Code tasks run at once")
    parser.add_argument("--repeat", type=int, default=3, help="retail runs per mode (median)")
    parser.add_argument("--dacode", type=Path, default=DACODE, help="the DA-Code slice's folder")
    args = parser.parse_args()
    globals()["DACODE"] = args.dacode
    print("load average before:", " ".join(f"{x:.2f}" for x in os.getloadavg()),
          f"({os.cpu_count()} CPUs)")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="dsstar-ask-ahead-"))
    (work / "prefect").mkdir()
    from round_overhead import start_prefect

    server = start_prefect(work / "prefect")
    from fake_llm import FakeLLM

    ids = [i for i in args.task_ids.split(",") if i]
    try:
        with FakeLLM() as llm:
            os.environ.update(
                DSSTAR_MODEL="openai/gpt-4o-mini", DSSTAR_API_BASE=llm.base_url,
                DSSTAR_API_KEY="sk-calls", DSSTAR_STORAGE=str(work / "storage"),
                DSSTAR_DATABASE_URL=f"sqlite:///{work / 'ledger.db'}",
                DSSTAR_WORK_DIR=str(work), DSSTAR_EXEC_TIMEOUT=str(EXEC_TIMEOUT),
            )  # fmt: skip
            retail_run(llm, False, 0.0)  # warm-up: the first flow run, the catalog filled
            retail = {False: [], True: []}
            for _ in range(args.repeat):  # interleaved: the machine's load falls on both
                for ahead in (False, True):
                    retail[ahead].append(retail_run(llm, ahead, args.delay))
            default = dacode_run(llm, work, ids, False, args.parallel)
            ahead = dacode_run(llm, work, ids, True, args.parallel)
            storage = Path(os.environ["DSSTAR_STORAGE"])
            reused = {k: row for k, row in default["tasks"].items() if row["final_reused"]}
            reruns = {task_id: rerun_final(storage, row) for task_id, row in reused.items()}
            print_retail(args.delay, retail[False], retail[True])
            print_dacode(default, ahead, reruns)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    print("\nload average after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
