"""Step 1 of the algorithm as Prefect tasks: every file of the data root described by the
analyzer, concurrently and within bounds; the catalog skips files described before."""

from __future__ import annotations

import itertools
import threading
from dataclasses import asdict
from typing import Any

from dsstar import progress
from dsstar.algorithm.analysis import config_key
from dsstar.data.catalog import Catalog
from dsstar.data.sources import DataFile, DataSource
from dsstar.execution import scratch
from dsstar.model.llm import preload
from dsstar.runs.spec import RunSpec, archive_limits
from dsstar.runs.storage import Store
from dsstar.settings import Settings
from tasks.analysis import analysis_task

__all__ = ["analyze_files", "open_data"]


def open_data(data: str, settings: Settings, tag: str = "data") -> DataSource:
    """The data root as a read-only view (downloaded first when it is remote), in a temporary
    folder removed by `scratch.release(tag)`, or when the process ends."""
    return DataSource(
        data,
        scratch.new_dir(settings.work_dir, tag),
        archive_limits(settings),
        archive_cache=scratch.archive_cache(settings.work_dir),
    )


def analyze_files(
    spec: RunSpec, source: DataSource, fresh: set[str] = frozenset()
) -> list[dict[str, Any]]:
    """Describe every file, in parallel; files the catalog already knows (same content, path,
    prompt and models) are not analyzed again, and get no task of their own. Files in
    `fresh` are analyzed again whatever the caches hold."""
    catalog = Catalog(Store(spec.storage), source.url)
    files = catalog.files(source)  # hashes only new or changed files
    wanted = {f.path: (f.sha256, config_key(asdict(f), spec)) for f in files if f.path not in fresh}
    results = catalog.analyses(wanted)
    misses = [f for f in files if f.path not in results]
    if misses:
        preload()  # litellm's import overlaps the first analyses' task runs
    progress.emit("stage", name="analyze", total=len(files), cached=len(results))
    analyze = analysis_task(spec)
    for record in _bounded(analyze, misses, asdict(spec), _window(spec), fresh):
        results[record["path"]] = record
    return [results[f.path] for f in files]


def _window(spec: RunSpec) -> int:
    """Analyses submitted at once: enough to keep every script slot and LLM slot busy, and
    no more, so a lake of thousands of files never means thousands of threads."""
    return spec.max_parallel + spec.llm_concurrency


def _bounded(
    analyze: Any, files: list[DataFile], spec: dict[str, Any], window: int, fresh: set[str]
) -> Any:
    """Submit one analysis task per file, at most `window` pending at a time; yields the
    records in file order. Progress counts finished analyses as they finish."""
    free = threading.Semaphore(window)
    done = itertools.count(1)

    def finished(_: Any) -> None:
        free.release()
        progress.emit("analyzed", done=next(done), total=len(files))

    futures = []
    for file in files:
        free.acquire()
        task = analyze.with_options(refresh_cache=True) if file.path in fresh else analyze
        future = task.submit(asdict(file), spec)
        future.add_done_callback(finished)
        futures.append(future)
    for future in futures:
        yield future.result()
