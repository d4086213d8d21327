"""What the task modules share: result storage and the retry conditions."""

from __future__ import annotations

import functools
from functools import cache
from typing import Any

from prefect.filesystems import LocalFileSystem, RemoteFileSystem, WritableFileSystem

from dsstar.errors import LLMTransientError, StorageError
from dsstar.keys import CACHE
from dsstar.locations import is_remote, local_path
from tasks.cache_keys import digest

__all__ = ["is_storage_error", "is_transient", "result_storage"]


@cache
def result_storage(storage_url: str) -> WritableFileSystem:
    """Prefect's persisted task results live beside the run artifacts, under `cache/`, so a
    retry on any machine that sees the same storage finds the finished work."""
    from prefect.settings import PREFECT_API_URL

    return _saved_result_storage(storage_url, PREFECT_API_URL.value())


@functools.lru_cache(maxsize=32)
def _saved_result_storage(storage_url: str, api_url: str | None) -> WritableFileSystem:
    """The block, saved once per process and Prefect API (each save is a database write)."""
    base = f"{storage_url.rstrip('/')}/{CACHE}"
    if is_remote(base):
        block: WritableFileSystem = RemoteFileSystem(basepath=base)
    else:
        block = LocalFileSystem(basepath=str(local_path(base)))
    # Prefect wants result storage saved server-side; the name is derived from the URL so
    # every run (and every machine) over the same storage shares one block. No credentials
    # are stored in it: s3fs reads them from the environment where the task runs.
    block.save(f"dsstar-cache-{digest(base)}", overwrite=True)
    return block


def _failure(state: Any) -> BaseException | None:
    try:
        state.result()
    except BaseException as exc:  # the state re-raises whatever the task raised
        return exc
    return None


def is_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Retry condition for LLM calls: rate limits, timeouts, 5xx; never auth or bad requests."""
    return isinstance(_failure(state), LLMTransientError)


def is_storage_error(task: Any, task_run: Any, state: Any) -> bool:
    """Retry condition for artifact writes: only storage failures are worth another try."""
    return isinstance(_failure(state), StorageError)
