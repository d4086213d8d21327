"""The analysis stage alone: describe every file of a data root (`dsstar describe`)."""

from __future__ import annotations

from typing import Any

from prefect import flow
from pydantic import ValidationError

from dsstar.algorithm.analysis import describe_records
from dsstar.errors import UsageError
from dsstar.inputs.form import RunOptions, explain
from dsstar.inputs.spec import data_source, require_model, run_spec
from dsstar.settings import Settings
from dsstar.storage import Store, new_run_id
from flows._analysis import analyze_files
from flows._runners import build_task_runner, default_task_runner

__all__ = ["describe", "describe_files"]


@flow(name="ds-star-describe", task_runner=default_task_runner())
def describe(data: str, options: RunOptions | None = None) -> list[dict[str, Any]]:
    """Analyze every file under `data` with the analyzer agent. The descriptions land in the
    same content-keyed cache that runs use, so a later run over these files reuses them.
    `options` are run settings (by name, or grouped as the run form groups them), checked as
    a run form's: a secret or the worker's policy is refused (the flow run's parameters are
    recorded), so is a name that is none."""
    try:
        settings = (options or RunOptions()).settings()
    except ValidationError as exc:
        raise UsageError(explain(exc)) from exc
    require_model(settings)
    source = data_source(data, settings)
    spec = run_spec(
        settings, f"describe-{new_run_id()}", Store(settings.storage).url, source.mount_dir
    )
    return describe_records(analyze_files(spec, source), source)


def describe_files(data: str, options: dict[str, Any], settings: Settings) -> list[dict[str, Any]]:
    """Run the describe flow in this process, with the task runner `settings` chooses."""
    return describe.with_options(task_runner=build_task_runner(settings))(
        data=data, options=options
    )
