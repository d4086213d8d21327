"""Script execution as a Prefect task, cached per run, label and code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.context import TaskRunContext

from dsstar.execution.sandbox import Limits, run_script
from dsstar.settings import default
from tasks.keys import digest, key_part
from tasks.slots import slot

__all__ = ["execute"]


def _cache_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    files = params.get("files")
    code = digest(params["code"]) if files is None else digest(params["code"], files)
    return "exec-{}-{}-{}".format(key_part(params["run_id"]), key_part(params["label"]), code)


@task(
    name="execute",
    task_run_name="{label}",
    cache_key_fn=_cache_key,
    persist_result=True,
    result_serializer="json",
)
def execute(
    label: str,
    code: str,
    run_id: str,
    data_dir: str,
    limits: Limits,
    sandbox: str,
    python: str | None = None,
    work_dir: str | None = None,
    max_parallel: int = 1,
    slot_wait: float = default("slot_wait"),
    files: list[str] | None = None,
) -> dict[str, Any]:
    """Run `code` in the sandbox with the data folder mounted read-only at `data/` (only
    `files` of it, when given), in the interpreter `python` (None: the worker's own). At most
    `max_parallel` scripts run at once; a slot is waited for `slot_wait` seconds at most."""
    with slot("exec", max_parallel, run_id, slot_wait):
        result = run_script(
            code,
            data_dir=Path(data_dir),
            limits=limits,
            mode=sandbox,
            work_root=Path(work_dir) if work_dir else None,
            files=files,
            python=python,
        )
    return result.to_dict()
