"""File analysis (step 1, `dsstar.algorithm.analysis`) as a Prefect task, cached by file
content so that unchanged files are analyzed once."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.context import TaskRunContext
from prefect.runtime import task_run

from dsstar.algorithm import analysis, likeness
from dsstar.algorithm.spec import RunSpec
from dsstar.text import clean
from tasks._common import is_transient, result_storage
from tasks.agents import TaskCalls

__all__ = ["analysis_task", "analyze_file", "describe_members"]


def _cache_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    file, spec = params["file"], RunSpec.from_dict(params["spec"])
    return "analysis-{}-{}".format(file["sha256"][:24], analysis.config_key(file, spec))


def _run_name() -> str:
    # A file name that is not valid UTF-8 would make Prefect drop the task run's events.
    return "analyze " + clean(task_run.parameters["file"]["path"])


@task(
    name="analyze",
    task_run_name=_run_name,
    cache_key_fn=_cache_key,
    persist_result=True,
    result_serializer="json",
)
def analyze_file(file: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Describe one file and keep its description in the catalog."""
    run_spec = RunSpec.from_dict(spec).without_outputs()
    # This task is the unit of caching and retry: its LLM calls and scripts run inline, not
    # as task runs of their own (a lake of 1,560 files means 3,120 fewer).
    calls = TaskCalls(run_spec, inline=True)
    record = {**analysis.analyze_file(calls, file, run_spec), "calls": calls.replies}
    analysis.keep(record, RunSpec.from_dict(spec))
    return record


def _members_run_name() -> str:
    files = task_run.parameters["files"]
    return f"describe {len(files)} like files of " + clean(task_run.parameters["origin"]["path"])


@task(name="describe like files", task_run_name=_members_run_name)
def describe_members(
    files: list[dict[str, Any]],
    origin: dict[str, Any],
    columns: list[str],
    spec: dict[str, Any],
) -> list[dict[str, Any] | None]:
    """Describe like files with `origin`'s script, no model call, and keep each description
    in the catalog. None for a file the script does not fit: it needs its own analysis.
    `columns`: the column names of their shape, which the origin's shares."""
    run_spec = RunSpec.from_dict(spec).without_outputs()
    calls = TaskCalls(run_spec, inline=True)
    records = likeness.describe_members(calls, files, origin, run_spec, columns)
    for record in records:
        if record is not None:
            record["calls"] = []
            analysis.keep(record, RunSpec.from_dict(spec))
    return records


def analysis_task(spec: RunSpec) -> Any:
    """`analyze_file` with the run's result storage and retries: its LLM calls run inline,
    so a transient error of the model retries the whole analysis."""
    return analyze_file.with_options(
        result_storage=result_storage(spec.storage),
        retries=spec.llm_retries,
        retry_delay_seconds=spec.retry_delays or 0,
        retry_condition_fn=is_transient,
    )
