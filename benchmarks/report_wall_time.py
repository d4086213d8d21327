"""A report's wall time at the speed of the model: does running the sub-questions at once pay?

One report of the ds-star-report flow in this process, against the scripted OpenAI-compatible
server (tests/fake_llm.py) answering every call after a fixed delay (1.5 s by default), a
started Prefect server, and the report scenario of the tests over examples/sales
(tests/report_scenario.py): 5 sub-questions, then 1 refinement pass that adds up to 3 more
(two, one of which fails), the writer after each pass.

Prints the report's wall time, each sub-run's (its child flow run's start to end, from the
Prefect API), the longest, the report's own calls (decomposer, writer, critic) at the model's
delay, and the ratio

    report wall time / (longest sub-run + the report's own calls x delay)

whose target is at most 2 (the sub-questions of a pass run at once; done one after another
the ratio would grow with their number). Also prints the same for a report whose sub-questions
run one after another (DSSTAR_LLM_CONCURRENCY is not changed: one pass's sub-runs are simply
asked one at a time), for comparison with --sequential, and the load average before and after.

    .venv/bin/python benchmarks/report_wall_time.py [--delay 1.5] [--sequential]
        [--prefect-database postgresql+asyncpg://postgres@127.0.0.1:PORT/prefect]

The server's database matters: on SQLite (a new server's default, and a command's temporary
server) every write takes its single lock, and the sub-runs of a pass, each creating its flow
run and task runs at the same moment, start one after another; PostgreSQL, which
docs/operations.md asks of a server that serves several runs at once, starts them together.
The timeline printed after the ratio shows when each sub-run started and ended.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SALES = REPO / "examples" / "sales"
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]
OWN_AGENTS = ("decomposer", "writer", "critic")


def scripted(llm: Any, delay: float) -> None:
    """The report scenario's replies, each after `delay` seconds."""
    import report_scenario

    llm.reset()
    report_scenario.script(llm)
    # The router is asked beside each verdict (rounds ask at once), as a real model is.
    llm.default("router", lambda request: "Add Step")

    def slow(request: dict) -> None:
        time.sleep(delay)

    llm.intercept(slow)


def one_report(llm: Any, delay: float, work: Path, sequential: bool) -> dict[str, Any]:
    """One report; its wall time, its sub-runs' and its own calls."""
    import report_scenario
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

    from flows.report import own_report_flow

    scripted(llm, delay)
    run_id = f"wall-{'seq' if sequential else 'par'}-{delay:g}s-{time.time_ns()}"
    flow = own_report_flow(None)  # this benchmark's own report: no worker policy judges it
    started, clock, epoch = time.perf_counter(), time.monotonic(), time.time()
    if sequential:
        with _one_at_a_time():
            result = flow(question=report_scenario.QUESTION, data=str(SALES), run_id=run_id,
                          sub_questions=5, refinements=1, follow_ups=3)  # fmt: skip
    else:
        result = flow(question=report_scenario.QUESTION, data=str(SALES), run_id=run_id,
                      sub_questions=5, refinements=1, follow_ups=3)  # fmt: skip
    wall = time.perf_counter() - started
    record = json.loads((work / "storage" / "runs" / run_id / "run.json").read_text())
    with get_client(sync_client=True) as client:
        children = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[result["flow_run_id"]])
            )
        )
    subs = {c.name: (c.end_time - c.start_time).total_seconds() for c in children
            if c.start_time and c.end_time}  # fmt: skip
    own = [r for r in llm.requests if r["agent"] in OWN_AGENTS]
    # When each part ran, in seconds from the report's start: the report's own replies (the
    # analysis' too) and each sub-run's child flow run.
    timeline = [(r["at"] - clock, r["agent"]) for r in llm.requests
                if r["agent"] in {*OWN_AGENTS, "analyzer"}]  # fmt: skip
    for child in children:
        name = child.name.split(" · ")[0].rsplit("-", 1)[-1]  # its run id ends -qNN
        if child.start_time:
            timeline.append((child.start_time.timestamp() - epoch, f"sub-run {name} starts"))
        if child.end_time:
            timeline.append((child.end_time.timestamp() - epoch, f"sub-run {name} ends"))
    return {
        "status": result["status"],
        "wall": wall,
        "subs": subs,
        "sub_runs": len(record["sub_runs"]),
        "own_calls": len(own),
        "calls": len(llm.requests),
        "timeline": sorted(timeline),
    }


class _one_at_a_time:
    """The report's passes with their sub-questions asked one after another (for comparison):
    ReportRuntime.answer given one sub-question at a time."""

    def __enter__(self) -> None:
        from flows._report import ReportRuntime

        self.answer = ReportRuntime.answer
        original = self.answer

        def in_turn(runtime: Any, subs: list) -> list:
            return [answer for sub in subs for answer in original(runtime, [sub])]

        ReportRuntime.answer = in_turn  # type: ignore[method-assign]

    def __exit__(self, *exc: object) -> None:
        from flows._report import ReportRuntime

        ReportRuntime.answer = self.answer  # type: ignore[method-assign]


def report(name: str, run: dict[str, Any], delay: float) -> float:
    """Print one report's figures; returns its ratio."""
    longest = max(run["subs"].values())
    bound = longest + run["own_calls"] * delay
    ratio = run["wall"] / bound
    print(f"\n== {name}: model delay {delay:g} s per call ==")
    print(f"status {run['status']}, {run['sub_runs']} sub-questions ({len(run['subs'])} child"
          f" flow runs), {run['calls']} model calls, {run['own_calls']} of them the report's"
          " own (decomposer, writer, critic)")  # fmt: skip
    print("sub-runs (s):", " ".join(f"{s:.1f}" for s in sorted(run["subs"].values())))
    print(f"report wall time {run['wall']:.1f} s; longest sub-run {longest:.1f} s + own calls"
          f" {run['own_calls']} x {delay:g} s = {bound:.1f} s")  # fmt: skip
    print(f"ratio {ratio:.2f} (target <= 2: {'met' if ratio <= 2 else 'NOT met'})")
    print("timeline (s from the report's start; replies when sent):")
    for at, what in run["timeline"]:
        print(f"  {at:6.1f}  {what}")
    print(f"  {run['wall']:6.1f}  the report ends")
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=1.5, help="seconds per model call")
    parser.add_argument("--sequential", action="store_true",
                        help="also run the sub-questions one after another")  # fmt: skip
    parser.add_argument(
        "--prefect-database",
        metavar="URL",
        help="The Prefect server's database, e.g. postgresql+asyncpg://user@host:5432/prefect"
        " (an empty database); default: SQLite in the work folder.",
    )
    args = parser.parse_args()
    if args.prefect_database:
        os.environ["PREFECT_API_DATABASE_CONNECTION_URL"] = args.prefect_database
    url = os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL", "")
    database = "PostgreSQL" if url.startswith("postgresql") else "SQLite"
    print(f"the Prefect server's database: {database}")
    print("load average before:", " ".join(f"{x:.2f}" for x in os.getloadavg()),
          f"({os.cpu_count()} CPUs)")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="dsstar-report-wall-"))
    (work / "prefect").mkdir()
    from round_overhead import start_prefect

    server = start_prefect(work / "prefect")
    from fake_llm import FakeLLM

    try:
        with FakeLLM() as llm:
            os.environ.update(
                DSSTAR_MODEL="openai/gpt-4o-mini", DSSTAR_API_BASE=llm.base_url,
                DSSTAR_API_KEY="sk-wall", DSSTAR_STORAGE=str(work / "storage"),
                DSSTAR_DATABASE_URL=f"sqlite:///{work / 'ledger.db'}",
                DSSTAR_WORK_DIR=str(work), DSSTAR_EXEC_TIMEOUT="60",
                DSSTAR_MAX_DEBUG_ATTEMPTS="0",  # the failing sub-question fails at once
                DSSTAR_REUSE="false",  # every sub-question answered anew, not reused
            )  # fmt: skip
            one_report(llm, 0.0, work, sequential=False)  # warm-up: the analyses cached
            report("sub-questions at once", one_report(llm, args.delay, work, False), args.delay)
            if args.sequential:
                run = one_report(llm, args.delay, work, True)
                report("sub-questions one after another", run, args.delay)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    print("\nload average after:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
