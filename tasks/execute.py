"""Script execution as a Prefect task, cached per run, label and code. Its cached result
carries no file: the tables it wrote are previewed (in the bounded table reader), the files
the run keeps are stored once under its folder, and the result refers to them
(`dsstar.records.files`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.context import TaskRunContext

from dsstar.algorithm.repair import keeps_files
from dsstar.data.previews import with_previews
from dsstar.execution.sandbox import Limits, run_script
from dsstar.records.files import store_outputs
from dsstar.settings import default
from dsstar.storage import Store
from tasks.cache_keys import digest, key_part
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
    storage: str | None = None,
) -> dict[str, Any]:
    """Run `code` in the sandbox with the data folder mounted read-only at `data/` (only
    `files` of it, when given), in the interpreter `python` (None: the worker's own). At most
    `max_parallel` scripts run at once; a slot is waited for `slot_wait` seconds at most.
    The files it wrote are previewed, and stored under the run's folder in `storage` (None:
    kept in the result, as the sandbox returned them)."""
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
    result = with_previews(result, Path(work_dir) if work_dir else None)
    if storage is not None:
        everything = keeps_files(label, result.stdout)  # else its figures only
        result = store_outputs(result, Store(storage), run_id, everything=everything)
    return result.to_dict()
