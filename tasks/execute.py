"""Script execution as a Prefect task, cached per run, label and code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.context import TaskRunContext

from dsstar.sandbox import Limits, run_script

from ._common import current_settings, digest, key_part
from .limits import slot

__all__ = ["execute"]


def _cache_key(context: TaskRunContext, params: dict[str, Any]) -> str:
    return "exec-{}-{}-{}".format(
        key_part(params["run_id"]), key_part(params["label"]), digest(params["code"])
    )


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
    limits: dict[str, Any],
    sandbox: str,
    work_dir: str | None = None,
    max_parallel: int | None = None,
) -> dict[str, Any]:
    """Run `code` in the sandbox with the data folder mounted read-only at `data/`. At most
    `max_parallel` scripts (default: DSSTAR_MAX_PARALLEL) run at once."""
    settings = current_settings()
    with slot("exec", max_parallel or settings.max_parallel, run_id, settings.slot_wait):
        result = run_script(
            code,
            data_dir=Path(data_dir),
            limits=Limits(**limits),
            mode=sandbox,
            work_root=Path(work_dir) if work_dir else None,
        )
    return result.to_dict()
