"""`dsstar bench run` and `dsstar bench score`: accuracy, cost and tokens on DABStep,
KramaBench and DA-Code (each suite a module of dsstar.bench that registers itself)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from dsstar.cli._app import (
    EXIT_FAILED,
    EXIT_OK,
    JsonOpt,
    app,
    err,
    error_line,
    fail_usage,
    load_settings,
    settings_flags,
)
from dsstar.cli._output import json_line
from dsstar.cli.run import CAP_FLAGS
from dsstar.errors import DSStarError, UsageError
from dsstar.events import BenchStarted, BenchTaskDone, Event, LLMReplied

__all__ = ["bench"]

bench = typer.Typer(
    help="Benchmarks: run DABStep, KramaBench or DA-Code tasks with DS-STAR, or score answers.",
    no_args_is_help=True,
)
app.add_typer(bench, name="bench")

# The settings `dsstar bench run` has a flag for: the model, its server, the storage and
# every cap `dsstar run` has a flag for; each task's run takes them.
BENCH_FLAGS = ("model", "api_base", "storage", *CAP_FLAGS)

SuiteOpt = Annotated[
    str, typer.Option("--suite", help="dabstep, dabstep-research, kramabench or dacode.")
]


@bench.command("run")
@settings_flags(*BENCH_FLAGS)
def run(
    suite: SuiteOpt,
    flags: dict[str, Any],
    tasks: Annotated[
        Path | None,
        typer.Option(
            help="DABStep: tasks JSONL (task_id, question, guidelines, level). DABStep-Research:"
            " tasks JSONL (task_id, category, question, guidelines, checklist), e.g."
            " benchmarks/dabstep_research/tasks.jsonl."
        ),
    ] = None,
    data: Annotated[
        Path | None, typer.Option(help="DABStep, DABStep-Research: the context folder.")
    ] = None,
    truth: Annotated[
        Path | None, typer.Option(help="DABStep: answers JSONL (task_id, answer).")
    ] = None,
    root: Annotated[
        Path | None,
        typer.Option(
            help="KramaBench: the repository root (workload/, data/). DA-Code: a folder with "
            "tasks.jsonl, eval.jsonl, source/ and gold/, or the repository's da_code/."
        ),
    ] = None,
    domain: Annotated[str | None, typer.Option(help="KramaBench: the domain, e.g. legal.")] = None,
    out: Annotated[
        Path,
        typer.Option(help="Output folder; the same folder again resumes the benchmark."),
    ] = Path("bench-out"),
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N tasks.")] = None,
    task_ids: Annotated[
        list[str] | None,
        typer.Option(
            "--tasks-ids", "--task-ids", help="Only these task ids (repeatable or comma-separated)."
        ),
    ] = None,
    parallel: Annotated[int, typer.Option(min=1, help="Tasks run at the same time.")] = 1,
    agent_model: Annotated[
        list[str] | None, typer.Option(help="Per-agent model, AGENT=MODEL; repeatable.")
    ] = None,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
) -> None:
    """Answer a benchmark's tasks with DS-STAR (one run each), then score and report.

    Writes OUT/submission.jsonl (DABStep's format), OUT/scores.json and OUT/report.md; DA-Code
    also OUT/answers/TASK_ID/ (the files each run delivered, DA-Code's output layout). Running
    the same command again skips finished tasks and resumes failed ones.

    DABStep-Research answers each task with a report (as `dsstar report` does) and the model
    grades it against the task's checklist, content and format from 1 to 5; it prints the
    grades, cost and seconds per category.

    Example: dsstar bench run --suite kramabench --root KramaBench --domain legal --limit 5

    Example: dsstar bench run --suite dabstep-research --tasks
    benchmarks/dabstep_research/tasks.jsonl --data DABstep/data/context
    """
    from dsstar.cli._app import prefect_quietly
    from dsstar.cli.run import _agent_models

    prefect_quietly(verbose)
    try:
        overrides = {**flags, "agent_models": _agent_models(agent_model)}
        settings = load_settings(**overrides)
        from dsstar.bench import TaskSource
        from dsstar.inputs.preflight import check_isolation, check_reachable
        from dsstar.inputs.spec import require_model

        # The tasks first: a wrong folder is told before any model is asked.
        source = TaskSource(tasks=tasks, data=data, truth=truth, root=root, domain=domain)
        chosen = _tasks(suite, source, task_ids, limit)
        require_model(settings)
        check_isolation(settings)
        from flows import start_prefect_api

        # Without PREFECT_API_URL, the temporary server `dsstar run` uses (ready within 90 s,
        # ended with this command), started now: its start overlaps the model's check.
        start_prefect_api()
        # A typo'd model or a bad key: once, not once per task.
        check_reachable(settings)
        bench_id = _bench_id(out)
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    from flows import own_bench, prefect_api, task_dicts

    named = {"model", "storage", "max_rounds"}
    options = {k: v for k, v in overrides.items() if v is not None and k not in named}
    try:
        with prefect_api(), _BenchProgress(enabled=not as_json):
            # The person at the terminal chose these settings: no worker policy judges them.
            result = own_bench()(
                parallel=parallel, suite=suite, tasks=task_dicts(chosen), bench_id=bench_id,
                out=str(out), model=settings.model, storage=settings.storage,
                max_rounds=settings.max_rounds, options=options,
            )  # fmt: skip
    except Exception as exc:  # e.g. the Prefect API unreachable: told, not a traceback
        _stopped(exc, out, as_json, verbose)
    _report_bench(result, as_json)
    raise typer.Exit(EXIT_FAILED if result["failed"] else EXIT_OK)


@bench.command("score")
def score_command(
    suite: SuiteOpt,
    answers: Annotated[
        Path,
        typer.Option(
            help="JSONL with task_id and agent_answer; DA-Code: a folder per task id (its files, "
            "chart data under dabench/)."
        ),
    ],
    truth: Annotated[
        Path,
        typer.Option(
            help="JSONL of task_id, answer (+ answer_type for KramaBench; a workload .json "
            "works); DA-Code: the folder with eval.jsonl and gold/ (or da_code/)."
        ),
    ],
    judge: Annotated[
        bool,
        typer.Option(
            help="KramaBench: the configured model judges approximate strings (else text"
            " overlap). DABStep-Research: it grades the reports (else they score 0)."
        ),
    ] = True,
    model: Annotated[
        str | None, typer.Option(help="Model of the judge (env: DSSTAR_MODEL).")
    ] = None,
    api_base: Annotated[
        str | None, typer.Option(help="Model server URL (DSSTAR_API_BASE).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Score a submission offline with the suite's official rules; nothing is run.

    --json prints {"tasks": [{"task_id", "score", ...}], "summary": {...}}; DABStep's summary
    has easy, hard and all (accuracy in percent); DA-Code's all, by_category, by_task and
    by_hardness.

    Example: dsstar bench score --suite dabstep --answers submission.jsonl --truth truth.jsonl

    Example: dsstar bench score --suite dacode --answers output/ --truth da_code/ --json
    """
    from dsstar.bench import get, score_files

    try:
        settings = load_settings(model=model, api_base=api_base)
        grader = None
        if get(suite).uses_judge and judge and (settings.model or settings.agent_models):
            grader = get(suite).judge(settings, None)
        result = score_files(suite, answers, truth, grader)
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    if as_json:
        sys.stdout.write(json_line(result))
    else:
        for row in result["tasks"]:
            print(_score_line(row))
        err.print(json.dumps(result["summary"], indent=2), highlight=False)
    raise typer.Exit(EXIT_OK)


def _score_line(row: dict[str, Any]) -> str:
    """A task's score, its corrected score where it has one, and why when it is 0."""
    from dsstar.bench.registry import why_zero

    fields = [str(row["task_id"]), f"{row['score']:.3f}"]
    if row.get("corrected_score") is not None:
        fields.append(f"corrected {row['corrected_score']:.3f}")
    if row["score"] == 0:
        fields.append(f"why: {why_zero(row)}")
    return "\t".join(fields)


def _tasks(suite: str, source: Any, ids: list[str] | None, limit: int | None) -> list:
    from dsstar.bench import get, select

    chosen = select(get(suite).tasks(source), ids, limit)
    if not chosen:
        raise UsageError("no tasks to run")
    return chosen


def _bench_id(out: Path) -> str:
    """The benchmark's id, kept in OUT/bench.json: the same folder resumes the same runs."""
    from dsstar.storage import new_run_id

    marker = out / "bench.json"
    if marker.is_file():
        return json.loads(marker.read_text())["bench_id"]
    out.mkdir(parents=True, exist_ok=True)
    bench_id = f"{new_run_id()}-bench"
    marker.write_text(json.dumps({"bench_id": bench_id}) + "\n")
    return bench_id


def _stopped(exc: Exception, out: Path, as_json: bool, verbose: bool) -> NoReturn:
    """A benchmark that stopped before its report: one line (JSON too under --json), and how
    to go on; the tasks that finished are kept in OUT and are not run again."""
    from dsstar.execution.failure import exception_line

    if verbose:
        err.print_exception()
    message = (
        f"the benchmark stopped: {exception_line(exc)}; the same command again resumes it"
        f" from {out}"
    )
    err.print(error_line(message))
    if as_json:
        sys.stdout.write(json_line({"error": message, "out": str(out)}))
    raise typer.Exit(EXIT_FAILED)


def _report_bench(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json_line(result))
        return
    summary = result.get("summary") or {}
    overall = summary.get("all", {}).get("score")
    err.print(
        f"{result['tasks']} tasks · {result['failed']} failed · score "
        f"{'n/a' if overall is None else f'{overall:.2f} %'} · cost ${result['cost_usd']:.4f}",
        highlight=False,
    )
    if "content" in summary.get("all", {}):  # graded reports
        line = _graded_line("all", summary["all"])
        err.print(line, highlight=False, markup=False, soft_wrap=True)
    for key, groups in summary.items():  # by_category, by_hardness, by_level...
        if not (key.startswith("by_") and isinstance(groups, dict)):
            continue
        if any("content" in group for group in groups.values()):  # graded reports: a line each
            err.print(f"{key.removeprefix('by_')}:", highlight=False)
            for name, group in groups.items():
                line = f"  {_graded_line(name, group)}"  # one line, however narrow the terminal
                err.print(line, highlight=False, markup=False, soft_wrap=True)
            continue
        parts = [f"{name} {group['score']:.1f} % ({group['tasks']})"
                 for name, group in groups.items()]  # fmt: skip
        err.print(f"{key.removeprefix('by_')}: " + " · ".join(parts), highlight=False)
    for name in ("submission", "scores", "report"):
        print(result[name])


def _graded_line(name: str, group: dict[str, Any]) -> str:
    """A group of graded reports: tasks, score, mean grades, cost and seconds."""

    def grade(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1f}"

    return (
        f"{name}: {group['tasks']} task(s) · score {group['score']:.1f} % · content"
        f" {grade(group.get('content'))}/5 · format {grade(group.get('format'))}/5 · cost"
        f" ${group.get('cost_usd') or 0.0:.4f} · {group.get('seconds') or 0.0:.0f} s"
    )


class _BenchProgress:
    """A rich progress bar: tasks done/total, accuracy so far, cost so far, ETA."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.scores: list[float] = []
        self.cost = 0.0
        self.started = time.monotonic()

    def __enter__(self) -> _BenchProgress:
        if not self.enabled:
            return self
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,  # fmt: skip
            TimeRemainingColumn,
        )

        from dsstar import progress

        self.bar = Progress(
            TextColumn("[bold]bench[/bold]"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[accuracy]} · ${task.fields[cost]:.4f}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=err, transient=False,
        )  # fmt: skip
        self.bar.__enter__()
        self.task = self.bar.add_task("bench", total=None, accuracy="accuracy n/a", cost=0.0)
        self.stop = progress.listen(self._on_event)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.stop()
            self.bar.__exit__(None, None, None)

    def _on_event(self, event: Event) -> None:
        match event:
            case BenchStarted(total=total, done=done):
                # Tasks finished by an earlier call count as done but not toward the ETA's pace.
                self.bar.reset(self.task, total=total, completed=done)
            case LLMReplied(cost_usd=cost):
                self.cost += cost or 0.0
            case BenchTaskDone(score=score, cost_usd=cost, skipped=skipped):
                if skipped:
                    self.cost += cost
                if score is not None:
                    self.scores.append(score)
                accuracy = (f"accuracy {100 * sum(self.scores) / len(self.scores):.1f} %"
                            if self.scores else "accuracy n/a")  # fmt: skip
                self.bar.update(self.task, advance=0 if skipped else 1, accuracy=accuracy)
            case _:
                return
        self.bar.update(self.task, cost=self.cost)
