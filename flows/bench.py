"""A benchmark run: every task of a suite as one ds-star run, the domain's files analyzed once
for all of them, then the answers scored and reported.

Resumable: a task whose run already answered (verified, max_rounds, accepted, not_applicable)
is read back from storage, not run again; a failed or interrupted one is run again under the
same run id, so the flow's cache hands back every LLM reply and execution it had already
finished.
"""

from __future__ import annotations

import contextvars
import functools
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from prefect import Flow, flow

from dsstar import progress
from dsstar.algorithm.verdict import ANSWERED
from dsstar.bench import BenchTask, agent_totals, get, score, table_rows, write_outputs
from dsstar.bench.report import render_report, usage_of
from dsstar.errors import DSStarError
from dsstar.events import BenchStarted, BenchTaskDone
from dsstar.inputs.form import SECRET_FIELDS, RunForm, RunOptions
from dsstar.inputs.questions import Question
from dsstar.inputs.trust import check_data_location, check_form
from dsstar.keys import final_object, in_run, run_record
from dsstar.records.ledger import Ledger
from dsstar.settings import Settings, default
from dsstar.storage import Store
from dsstar.views.report import agent_usage
from flows.ds_star import completed_result, own_flow
from flows.nightly import share_analyses
from flows.report import own_report_flow
from tasks.cache_keys import artifact_key
from tasks.cards import publish_markdown, publish_table

__all__ = ["ds_star_bench", "own_bench", "task_dicts", "task_run_id"]

FINISHED = ANSWERED  # a run with an answer (Not Applicable included) is not run again
ORCHESTRATION_RETRIES = 2


def answer(
    run: Flow,
    run_id: str,
    question: dict[str, str],
    settings: dict[str, Any],
    report: bool = False,
) -> dict[str, Any]:
    """One task as its own (sub)flow run of `run` (`ds_star`, or `own_flow`'s; with `report`,
    a ds-star-report flow's: the question answered with a report); a failed run is reported,
    not raised.

    Not wrapped in a Prefect task on purpose: the LLM calls and executions nested in a task
    belong to its transaction, and when the run fails their cache records are rolled back
    with it, so a resumed task would ask everything again. A failure outside dsstar (the
    Prefect API busy, a 503 from its database) is tried again, resuming the same run."""
    parameters = _parameters(run_id, question, settings, report)
    error: BaseException | None = None
    for attempt in range(ORCHESTRATION_RETRIES + 1):
        try:
            state = run(**parameters, return_state=True)
        except Exception as exc:  # the flow run could not even be created or reported
            error = exc
        else:
            try:  # an answer, or a run that ended failed, over budget or stopped
                return completed_result(state, settings.get("storage"), run_id)
            except Exception as exc:  # the flow run ended with an error
                error = exc
        if isinstance(error, DSStarError):
            break  # a dsstar failure (model, storage, data) would fail the same way again
        time.sleep(2 * (attempt + 1))
    return {"run_id": run_id, "status": "failed", "error": f"{type(error).__name__}: {error}"}


def _parameters(
    run_id: str, question: dict[str, str], settings: dict[str, Any], report: bool
) -> dict[str, Any]:
    """The parameters of one task's flow run: a run form's, or a report form's."""
    if not report:
        return RunForm.for_question(question, run_id, settings).parameters()
    from dsstar.inputs.form import OPTION_FIELDS
    from dsstar.inputs.report import ReportForm, report_parameters

    chosen = {k: v for k, v in settings.items() if k in OPTION_FIELDS and v is not None}
    return report_parameters(ReportForm(**question, run_id=run_id, **chosen))


def task_run_id(bench_id: str, task_id: str) -> str:
    """The run id of one task of a benchmark run: the same at every call, so runs resume."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in task_id)
    return f"{bench_id}-{safe}"[:100]


_BENCH = {"name": "ds-star-bench", "flow_run_name": "bench {bench_id}"}


@flow(**_BENCH)
def ds_star_bench(
    suite: str,
    tasks: list[dict[str, Any]],
    bench_id: str,
    out: str,
    model: str | None = None,
    storage: str | None = None,
    max_rounds: int = default("max_rounds"),
    options: RunOptions | None = None,
    parallel: int = 1,
) -> dict[str, Any]:
    """Run a benchmark's tasks with DS-STAR and write submission.jsonl, scores.json, report.md.

    Args:
        suite: A registered suite (dsstar.bench.registry): "dabstep", "dabstep-research",
            "kramabench" or "dacode"; it picks the scoring rules, what a run hands to them,
            and whether a task is answered with a report (dabstep-research).
        tasks: The tasks (BenchTask fields), truth included where known.
        bench_id: Prefix of the tasks' run ids; the same id resumes the same runs.
        out: Folder for the three output files.
        model: litellm model for every agent (default: DSSTAR_MODEL).
        storage: Where runs are stored (default: DSSTAR_STORAGE).
        max_rounds: Most rounds per task.
        options: Any other run setting, typed as in the ds-star run form (reuse is off
            unless set here).
        parallel: Tasks run at the same time.
    """
    # Parameters from the Prefect API: this worker's own environment judges what they choose,
    # as the ds-star flow judges a form.
    given = (suite, tasks, bench_id, out, model, storage, max_rounds, options, parallel)
    return _bench(Settings(), *given)


def own_bench() -> Flow:
    """`ds_star_bench` for the benchmark this process's user chose (`dsstar bench run`): its
    tasks' forms are theirs, and no worker's policy judges them. Only a caller in this
    process makes one: no parameter says "trusted"."""

    @functools.wraps(ds_star_bench.fn)
    def own(**params: Any) -> dict[str, Any]:
        return _bench(None, **params)

    return flow(**_BENCH)(own)


def _bench(
    policy: Settings | None,
    suite: str,
    tasks: list[dict[str, Any]],
    bench_id: str,
    out: str,
    model: str | None,
    storage: str | None,
    max_rounds: int,
    options: RunOptions | None,
    parallel: int,
) -> dict[str, Any]:
    """The body of ds-star-bench, its settings and each task's form judged by `policy` (None:
    its caller's own)."""
    chosen = {"model": model, "storage": storage, "max_rounds": max_rounds, "reuse": False}
    chosen |= options.chosen() if options else {}
    chosen = {k: v for k, v in chosen.items() if v is not None}
    check_form(chosen, policy)  # before a model is asked or a file read
    settings = Settings(**chosen)
    store = Store(settings.storage)
    ledger = Ledger(settings.database_url, store.url)
    specs = [BenchTask(**task) for task in tasks]
    rules = get(suite)
    run = own_report_flow(policy) if rules.reports else own_flow(policy)
    judge = _judge(suite, settings, Path(out))
    outcomes: dict[str, dict[str, Any]] = {}
    pending = []
    for task in specs:
        record = _stored(store, task_run_id(bench_id, task.task_id))
        if record and record.get("status") in FINISHED:
            outcomes[task.task_id] = _outcome(task, record, store, ledger) | {
                "collected": rules.collect(task, record, store, Path(out))
            }
        else:
            pending.append(task)
    progress.emit(BenchStarted(total=len(specs), done=len(outcomes)))
    for task in specs:
        if task.task_id in outcomes:
            _announce(suite, task, outcomes[task.task_id], judge, skipped=True)

    analysis_calls: list[dict[str, Any]] = []
    if pending:  # only a task that still runs needs the descriptions
        questions = [Question(**task.params()) for task in pending]
        for question in questions:  # read by the shared analysis, before the tasks' own check
            check_data_location(question.data, policy)
        analysis_calls, _ = share_analyses(questions, settings, f"{bench_id}-analysis")
    shared = settings.model_dump(mode="json", exclude=SECRET_FIELDS)
    with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="bench") as pool:
        # Each thread runs in a copy of this flow's context: the runs are its subflows.
        futures = {
            pool.submit(contextvars.copy_context().run, answer, run,
                        task_run_id(bench_id, task.task_id), task.params(), shared,
                        rules.reports): task
            for task in pending
        }  # fmt: skip
        for future in as_completed(futures):
            task = futures[future]
            try:
                returned = future.result()
            except Exception as exc:  # e.g. the Prefect API went away mid-run
                returned = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            record = _stored(store, task_run_id(bench_id, task.task_id)) or {}
            if returned.get("status") == "failed":  # its run.json says why, when it got that far
                record = record | {"status": "failed"}
                record.setdefault("error", returned.get("error"))
            outcomes[task.task_id] = _outcome(task, record, store, ledger) | {
                "collected": rules.collect(task, record, store, Path(out))
            }
            _announce(suite, task, outcomes[task.task_id], judge, skipped=False)

    ordered = [outcomes[task.task_id] for task in specs]
    return _publish(suite, bench_id, Path(out), specs, ordered, analysis_calls, judge)


def _judge(suite: str, settings: Settings, out: Path) -> Any:
    if not get(suite).uses_judge or not (settings.model or settings.agent_models):
        return None
    return get(suite).judge(settings, out / "judgements.json")


def _stored(store: Store, run_id: str) -> dict[str, Any] | None:
    try:
        return store.read_json(run_record(run_id))
    except (FileNotFoundError, DSStarError):
        return None


def _seconds(record: dict[str, Any]) -> float:
    try:
        started = datetime.fromisoformat(record["started_at"])
        return (datetime.fromisoformat(record["finished_at"]) - started).total_seconds()
    except (KeyError, TypeError, ValueError):
        return 0.0


def _outcome(
    task: BenchTask, record: dict[str, Any], store: Store, ledger: Ledger
) -> dict[str, Any]:
    """What the report needs of one task's run, from its run.json and the ledger."""
    run_id = record.get("run_id") or ""
    # A report's calls are its own and its sub-runs' (each a run of its own).
    run_ids = [run_id] + [str(s.get("run_id")) for s in record.get("sub_runs") or []]
    agents: dict[str, dict[str, Any]] = {}
    try:
        calls = [call for one in run_ids if one for call in ledger.calls(one)]
        for usage in agent_usage(calls):
            agents[usage.pop("agent")] = usage | {"cost_usd": usage["cost_usd"] or 0.0}
    except DSStarError:
        pass  # the ledger is down: the report shows totals from run.json only
    solution = None
    if record.get("status") in FINISHED:
        try:
            solution = store.read_text(in_run(run_id, final_object("solution.py")))
        except (FileNotFoundError, DSStarError):
            pass
    keys = ("run_id", "status", "answer", "error", "rounds", "llm_calls", "input_tokens",
            "output_tokens", "cost_usd", "plan")  # fmt: skip
    return {"task_id": task.task_id, **{k: record.get(k) for k in keys}, "run_id": run_id,
            "status": record.get("status") or "failed", "seconds": _seconds(record),
            "solution": solution, "agents": agents}  # fmt: skip


def _answer_record(outcome: dict[str, Any]) -> dict[str, Any]:
    """What the scorer reads of a task's run: its answer, its cost and seconds, and what the
    suite collected."""
    return {"task_id": outcome["task_id"], "agent_answer": outcome.get("answer"),
            "cost_usd": outcome.get("cost_usd"), "seconds": outcome.get("seconds"),
            **(outcome.get("collected") or {})}  # fmt: skip


def _task_score(suite: str, task: BenchTask, outcome: dict[str, Any], judge: Any) -> float | None:
    if task.truth is None:
        return None
    answers = [_answer_record(outcome)]
    return score(suite, answers, [task.truth], judge)["tasks"][0]["score"]


def _announce(suite: str, task: BenchTask, outcome: dict, judge: Any, skipped: bool) -> None:
    progress.emit(
        BenchTaskDone(
            task_id=task.task_id,
            status=outcome["status"],
            score=_task_score(suite, task, outcome, judge),
            cost_usd=outcome.get("cost_usd") or 0.0,
            skipped=skipped,
        )
    )


def _publish(
    suite: str,
    bench_id: str,
    out: Path,
    specs: list[BenchTask],
    outcomes: list[dict[str, Any]],
    analysis_calls: list[dict[str, Any]],
    judge: Any,
) -> dict[str, Any]:
    """Score, write the three files, and show the table and the report in the Prefect UI."""
    truths = [task.truth for task in specs if task.truth is not None]
    answers = [_answer_record(o) for o in outcomes]
    scores = score(suite, answers, truths, judge) if truths else None
    if judge is not None:
        judge.save()
    agents = agent_totals(outcomes, analysis_calls + (judge.calls if judge else []))
    shared = usage_of(analysis_calls)
    title = f"{suite} benchmark {bench_id}"
    paths = write_outputs(out, title, outcomes, scores, agents, shared)
    rows = table_rows(outcomes, scores)
    publish_table(artifact_key(f"{bench_id}-bench"), rows, f"{title}: one row per task")
    report = render_report(title, outcomes, scores, agents, shared)
    publish_markdown(artifact_key(f"{bench_id}-report"), report, f"{title}: the report")
    failed = sum(o["status"] == "failed" for o in outcomes)
    return {
        "bench_id": bench_id,
        "tasks": len(outcomes),
        "failed": failed,
        "summary": scores["summary"] if scores else None,
        "cost_usd": round(
            sum(o.get("cost_usd") or 0.0 for o in outcomes) + shared["cost_usd"], 6
        ),  # fmt: skip
        "llm_calls": sum(row["calls"] for row in agents.values()),
        "analysis": shared,
        "agents": agents,
        **paths,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def task_dicts(tasks: list[BenchTask]) -> list[dict[str, Any]]:
    """Tasks as flow parameters."""
    return [asdict(task) for task in tasks]
