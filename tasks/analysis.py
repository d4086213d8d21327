"""File analysis as a Prefect task, cached by file content so unchanged files are analyzed once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.context import TaskRunContext
from prefect.runtime import task_run

from dsstar import agents
from dsstar.catalog import save_analysis
from dsstar.profiler import ProfileLimits, profile_files
from dsstar.repair import run_with_repair
from dsstar.storage import Store
from dsstar.text import clean

from ._analysis_key import analyzer_request as _request
from ._analysis_key import config_key
from .agents import RunSpec, TaskCalls

__all__ = ["analyze_file", "config_key"]


def _cache_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    file, spec = params["file"], params["spec"]
    return "analysis-{}-{}".format(file["sha256"][:24], config_key(file, spec))


def _profile(path: str, spec: dict[str, Any]) -> str:
    """The built-in profiler's description, read inside the sandbox like any script."""
    limits = ProfileLimits(memory_mb=spec["limits"]["memory_mb"], workers=1)
    work_root = Path(spec["work_dir"]) if spec["work_dir"] else None
    texts = profile_files(
        Path(spec["data_dir"]), [path], limits=limits, mode=spec["sandbox"], work_root=work_root
    )
    return texts[path]


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
    """Have the analyzer describe one file, repairing its script from tracebacks alone. When
    every attempt fails, the built-in profiler's description stands in, marked as such."""
    # The analysis task is the unit of caching and retry: its LLM call and scripts run
    # inline, not as task runs of their own (a lake of 1,560 files means 3,120 fewer).
    # An analyzer prints a description; any chart it saves is not kept.
    run_spec = RunSpec(**{**spec, "limits": {**spec["limits"], "figures": 0}})
    calls = TaskCalls(run_spec, inline=True)
    sandbox_path = f"data/{file['path']}"
    code = agents.analyzer.parse(calls.ask("analyzer", f"analyzer {file['path']}", _request(file)))
    script = run_with_repair(
        calls,
        f"analysis {file['path']}",
        code,
        lambda code, error: agents.debugger.render_analyzer(
            path=sandbox_path, code=code, error=error
        ),
        run_spec.budget,
    )
    output = script.result.output.strip()
    ok = script.result.ok and bool(output)
    description = output if ok else _profile(file["path"], spec)
    record = {
        **file,
        "description": description,
        "source": "analyzer" if ok else "profiler",
        "error": None if ok else agents.clip(script.result.output, 2000),
        "script": script.code,
        "attempts": script.attempts,
        "calls": calls.calls,
        "run_id": spec["run_id"],
    }
    # Into the catalog at once: a run stopped half-way keeps every finished description.
    save_analysis(Store(spec["storage"]), file["sha256"], config_key(file, spec), record)
    return record
