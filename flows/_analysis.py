"""Step 1 of the algorithm as Prefect tasks: every file of the data root described by the
analyzer, concurrently and within bounds; the catalog skips files described before."""

from __future__ import annotations

import itertools
import threading
from dataclasses import asdict
from typing import Any

from dsstar import progress
from dsstar.algorithm.analysis import known_analyses
from dsstar.data.sources import DataFile, DataSource
from dsstar.errors import OverBudget
from dsstar.model.ceiling import Meter, meter
from dsstar.model.llm import preload
from dsstar.runs.spec import RunSpec
from tasks.analysis import analysis_task

__all__ = ["analyze_files"]


def analyze_files(
    spec: RunSpec, source: DataSource, fresh: set[str] = frozenset()
) -> list[dict[str, Any]]:
    """Describe every file, in parallel; files the catalog already knows (same content, path,
    prompt and models) are not analyzed again, and get no task of their own. Files in
    `fresh` are analyzed again whatever the caches hold."""
    files, results, misses = known_analyses(spec, source, fresh)
    if misses:
        preload()  # litellm's import overlaps the first analyses' task runs
    progress.emit("stage", name="analyze", total=len(files), cached=len(results))
    analyze = analysis_task(spec)
    spent, stops = meter(spec.run_id), []
    for record in _bounded(analyze, misses, asdict(spec), _window(spec), fresh, spent):
        if isinstance(record, OverBudget):
            stops.append(record)
            continue
        if record["run_id"] == spec.run_id:  # read back from Prefect's cache on a resume
            for call in record["calls"]:
                spent.charge(call)
        results[record["path"]] = record
    if stops or len(results) < len(files):  # the ceiling was reached: the rest never started
        stop = stops[0] if stops else OverBudget("the ceiling was reached before every file")
        stop.analyses = [results[f.path] for f in files if f.path in results]  # kept
        raise stop
    return [results[f.path] for f in files]


def _window(spec: RunSpec) -> int:
    """Analyses submitted at once: enough to keep every script slot and LLM slot busy, and
    no more, so a lake of thousands of files never means thousands of threads."""
    return spec.max_parallel + spec.llm_concurrency


def _bounded(
    analyze: Any,
    files: list[DataFile],
    spec: dict[str, Any],
    window: int,
    fresh: set[str],
    spent: Meter,
) -> Any:
    """Submit one analysis task per file, at most `window` pending at a time; yields the
    records in file order, or the OverBudget an analysis stopped with (no analysis starts
    after one). Progress counts finished analyses as they finish."""
    free = threading.Semaphore(window)
    done = itertools.count(1)

    def finished(_: Any) -> None:
        free.release()
        progress.emit("analyzed", done=next(done), total=len(files))

    futures = []
    for file in files:
        free.acquire()
        if spent.stopped:  # a call was refused at the ceiling: no further file is started
            break
        task = analyze.with_options(refresh_cache=True) if file.path in fresh else analyze
        future = task.submit(asdict(file), spec)
        future.add_done_callback(finished)
        futures.append(future)
    for future in futures:
        try:
            yield future.result()
        except OverBudget as exc:
            yield exc
