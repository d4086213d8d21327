"""Step 1 of the algorithm as Prefect tasks: every file of the data root described,
concurrently and within bounds. The catalog skips files described before; of like files
(`dsstar.algorithm.likeness`) the analyzer is asked about one, and its script describes the
others with no model call."""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

from dsstar import progress
from dsstar.algorithm.analysis import analysis_plan, known_analyses
from dsstar.algorithm.likeness import Plan, batch_size, shares_script
from dsstar.algorithm.spec import RunSpec
from dsstar.data.sources import DataFile, DataSource
from dsstar.errors import OverBudget
from dsstar.events import AnalysisStarted, FileAnalyzed, Unprofiled
from dsstar.model.ceiling import meter
from dsstar.model.llm import preload
from tasks.analysis import analysis_task, describe_members

__all__ = ["analyze_files"]


def analyze_files(
    spec: RunSpec, source: DataSource, fresh: set[str] = frozenset()
) -> list[dict[str, Any]]:
    """Describe every file, in parallel; files the catalog already knows (same content, path,
    prompt and models) are not analyzed again, and get no task of their own. Files in
    `fresh` are analyzed again whatever the caches hold. First the analyzer describes one
    file of each shape, then their scripts describe the like files, then the analyzer
    describes the like files those scripts did not fit. A call refused at the run's
    ceiling stops the analysis: no analyzer task starts after it, and the finished ones
    are kept on the OverBudget raised."""
    files, results, misses = known_analyses(spec, source, fresh)
    if misses:
        preload()  # litellm's import overlaps the profiling and the first analyses
    progress.emit(AnalysisStarted(total=len(files), cached=len(results)))
    plan = analysis_plan(spec, source, files, results, misses)
    if plan.unprofiled:  # each is analyzed alone: said, never billed silently
        progress.emit(Unprofiled(plan.unprofiled))
    window, spec_dict = _window(spec), spec.to_dict()
    done = _Counter(len(misses))
    analyze = analysis_task(spec)
    spent, stops = meter(spec.run_id), []

    def analyzer(file: DataFile) -> Any:
        task = analyze.with_options(refresh_cache=True) if file.path in fresh else analyze
        return task.submit(asdict(file), spec_dict)

    def take(records: Iterator[Any]) -> None:
        for record in records:
            if isinstance(record, OverBudget):
                stops.append(record)
                continue
            if record["run_id"] == spec.run_id:  # read back from Prefect's cache on a resume
                for call in record["calls"]:
                    spent.charge(call)
            results[record["path"]] = record

    take(_bounded(analyzer, plan.analyze, window, done, stopped=lambda: spent.stopped))
    batches, alone = _batches(plan, results, spec)

    def members(batch: tuple[list[DataFile], dict[str, Any]]) -> Any:
        files, origin = batch
        columns = plan.columns.get(origin["path"], [])
        return describe_members.submit([asdict(f) for f in files], origin, columns, spec_dict)

    ran = _bounded(members, batches, window, done, size=lambda batch: len(batch[0]))
    for (batch_files, _), records in zip(batches, ran, strict=True):
        for file, record in zip(batch_files, records, strict=True):
            if record is None:
                alone.append(file)
                done.total += 1  # counted once more when the analyzer describes it
            else:
                results[file.path] = record
    take(_bounded(analyzer, alone, window, done, stopped=lambda: spent.stopped))
    if stops or len(results) < len(files):  # the ceiling was reached: the rest never started
        stop = stops[0] if stops else OverBudget("the ceiling was reached before every file")
        stop.analyses = [_noted(results[f.path], plan) for f in files if f.path in results]
        raise stop
    return [_noted(results[f.path], plan) for f in files]


def _noted(record: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """`record`, with why its file's offline profile failed when it did (`profile_error`)."""
    reason = plan.unprofiled.get(record["path"])
    return record if reason is None else {**record, "profile_error": reason}


def _batches(
    plan: Plan, results: dict[str, dict[str, Any]], spec: RunSpec
) -> tuple[list[tuple[list[DataFile], dict[str, Any]]], list[DataFile]]:
    """The like files in batches (`batch_size`) with the record whose script describes
    them; and the files whose like file's analysis left no script to share."""
    by_origin: dict[str, list[DataFile]] = defaultdict(list)
    alone = []
    for file, origin in plan.members:
        if shares_script(results.get(origin)):
            by_origin[origin].append(file)
        else:
            alone.append(file)
    batches = []
    for origin, files in by_origin.items():
        size = batch_size(results[origin], spec)
        batches += [(files[i : i + size], results[origin]) for i in range(0, len(files), size)]
    return batches, alone


def _window(spec: RunSpec) -> int:
    """Tasks submitted at once: enough to keep every script slot and LLM slot busy, and
    no more, so a lake of thousands of files never means thousands of threads."""
    return spec.max_parallel + spec.llm_concurrency


class _Counter:
    """Finished descriptions of this analysis, for progress."""

    def __init__(self, total: int) -> None:
        self.total, self._next = total, itertools.count(1)

    def step(self, count: int = 1) -> None:
        for _ in range(count):
            progress.emit(FileAnalyzed(done=next(self._next), total=self.total))


def _bounded(
    submit: Callable[[Any], Any],
    items: list[Any],
    window: int,
    done: _Counter,
    size: Callable[[Any], int] = lambda _: 1,
    stopped: Callable[[], bool] = lambda: False,
) -> Iterator[Any]:
    """`submit` each item as a task, at most `window` pending at a time; yields the results
    in item order, or the OverBudget a task stopped with (none is submitted once `stopped`
    says so). Progress counts `size(item)` files per finished task."""
    free = threading.Semaphore(window)

    def finished(count: int) -> None:
        free.release()
        done.step(count)

    futures = []
    for item in items:
        free.acquire()
        if stopped():  # a call was refused at the ceiling: nothing further starts
            break
        future = submit(item)
        count = size(item)
        future.add_done_callback(lambda _, count=count: finished(count))
        futures.append(future)
    for future in futures:
        try:
            yield future.result()
        except OverBudget as exc:
            yield exc
