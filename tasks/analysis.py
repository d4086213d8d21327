"""File analysis as a Prefect task, cached by file content so unchanged files are analyzed once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.context import TaskRunContext

from dsstar import agents
from dsstar.profiler import ProfileLimits, profile_files

from ._common import digest
from .agents import AgentCalls, RunSpec

__all__ = ["analyze_file"]


def _request(file: dict[str, Any]) -> list[dict[str, str]]:
    return agents.analyzer.render(path=f"data/{file['path']}", format=file["format"])


def _cache_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    # Content, path, prompt and models, but not the run: every run over an unchanged file
    # reuses the description written the first time.
    file, spec = params["file"], params["spec"]
    models = {name: spec["llm"][name] for name in ("analyzer", "debugger", "summarizer")}
    return "analysis-{}-{}".format(
        file["sha256"][:24], digest(file["path"], _request(file), models, spec["limits"])
    )


def _profile(path: str, spec: dict[str, Any]) -> str:
    """The built-in profiler's description, read inside the sandbox like any script."""
    limits = ProfileLimits(memory_mb=spec["limits"]["memory_mb"], workers=1)
    work_root = Path(spec["work_dir"]) if spec["work_dir"] else None
    texts = profile_files(
        Path(spec["data_dir"]), [path], limits=limits, mode=spec["sandbox"], work_root=work_root
    )
    return texts[path]


@task(
    name="analyze",
    task_run_name="analyze {file[path]}",
    cache_key_fn=_cache_key,
    persist_result=True,
    result_serializer="json",
)
def analyze_file(file: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Have the analyzer describe one file, repairing its script from tracebacks alone. When
    every attempt fails, the built-in profiler's description stands in, marked as such."""
    calls = AgentCalls(RunSpec(**spec))
    sandbox_path = f"data/{file['path']}"
    code = agents.analyzer.parse(calls.ask("analyzer", f"analyzer {file['path']}", _request(file)))
    script = calls.run_with_repair(
        f"analysis {file['path']}",
        code,
        lambda code, error: agents.debugger.render_analyzer(
            path=sandbox_path, code=code, error=error
        ),
    )
    output = script.result.output.strip()
    ok = script.result.ok and bool(output)
    description = output if ok else _profile(file["path"], spec)
    return {
        **file,
        "description": description,
        "source": "analyzer" if ok else "profiler",
        "error": None if ok else agents.clip(script.result.output, 2000),
        "script": script.code,
        "attempts": script.attempts,
        "calls": calls.calls,
        "run_id": spec["run_id"],
    }
