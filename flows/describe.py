"""The analysis stage alone: describe every file of a data root (`dsstar describe`)."""

from __future__ import annotations

from typing import Any

from dsstar.tasks.agents import RunSpec
from prefect import flow

from dsstar.llm import require_model
from dsstar.settings import Settings
from dsstar.storage import Store, new_run_id

from ._analysis import analyze_files, open_data
from ._runners import default_task_runner
from .cached import describe_records

__all__ = ["describe"]


@flow(name="ds-star-describe", task_runner=default_task_runner())
def describe(data: str, options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Analyze every file under `data` with the analyzer agent. The descriptions land in the
    same content-keyed cache that runs use, so a later run over these files reuses them."""
    settings = Settings(**(options or {}))
    require_model(settings)
    source = open_data(data, settings)
    spec = RunSpec.from_settings(
        settings, f"describe-{new_run_id()}", Store(settings.storage).url, source.mount_dir
    )
    return describe_records(analyze_files(spec, source), source)
