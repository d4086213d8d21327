"""What a command can answer from the catalog alone, without a Prefect server or a flow run.

Nothing here imports Prefect: starting a temporary server and a flow run costs seconds, while
`dsstar describe` of files described before is a few reads from storage. The describe flow
and the ds-star flow list the files and look them up the same way (`known_analyses`)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from dsstar.tasks._analysis_key import config_key
from dsstar.tasks.agents import RunSpec

from dsstar import scratch
from dsstar.catalog import Catalog
from dsstar.data import DataFile, DataSource, archive_limits
from dsstar.settings import Settings
from dsstar.storage import Store

__all__ = ["cached_descriptions", "describe_records", "known_analyses", "open_data"]


def open_data(data: str, settings: Settings, tag: str = "data") -> DataSource:
    """The data root as a read-only view (downloaded first when it is remote), in a temporary
    folder removed by `scratch.release(tag)`, or when the process ends."""
    return DataSource(
        data,
        scratch.new_dir(settings.work_dir, tag),
        archive_limits(settings),
        archive_cache=scratch.archive_cache(settings.work_dir),
    )


def known_analyses(
    spec: RunSpec, source: DataSource, fresh: set[str] = frozenset()
) -> tuple[list[DataFile], dict[str, dict[str, Any]], list[DataFile]]:
    """Every file of `source`, the analyzer records the catalog holds for them (same content,
    path, prompt and models) by path, and the files still to analyze. Files in `fresh` count
    as unknown."""
    catalog = Catalog(Store(spec.storage), source.url)
    files = catalog.files(source)  # hashes only new or changed files
    spec_dict = asdict(spec)
    wanted = {
        f.path: (f.sha256, config_key(asdict(f), spec_dict)) for f in files if f.path not in fresh
    }
    found = catalog.analyses(wanted)
    return files, found, [f for f in files if f.path not in found]


def describe_records(analyses: list[dict[str, Any]], source: DataSource) -> list[dict[str, Any]]:
    """What `describe` returns: one record per file, then the entries left out of the view."""
    described = [
        {k: item[k] for k in ("path", "format", "description", "source", "error")}
        for item in analyses
    ]
    return described + [r | {"source": "skipped"} for r in source.skipped_records()]


def cached_descriptions(data: str, settings: Settings) -> list[dict[str, Any]] | None:
    """`describe`'s answer when the catalog knows every file under `data`; None when some
    file still needs the analyzer (the describe flow then analyzes those)."""
    source = open_data(data, settings)
    try:
        spec = RunSpec.from_settings(
            settings, "describe", Store(settings.storage).url, source.mount_dir
        )
        files, found, missing = known_analyses(spec, source)
        return None if missing else describe_records([found[f.path] for f in files], source)
    finally:
        source.close()
