"""What the task modules share: result storage, cache-key hashing and the retry condition."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from functools import cache
from typing import TYPE_CHECKING, Any

from dsstar.errors import LLMTransientError, StorageError
from dsstar.locations import is_remote, local_path
from dsstar.settings import Settings

if TYPE_CHECKING:  # imported where a block is made: `digest` serves commands without Prefect
    from prefect.filesystems import WritableFileSystem

__all__ = [
    "artifact_key",
    "current_settings",
    "digest",
    "is_storage_error",
    "is_transient",
    "key_part",
    "result_storage",
]


@cache
def result_storage(storage_url: str) -> WritableFileSystem:
    """Prefect's persisted task results live beside the run artifacts, under `cache/`, so a
    retry on any machine that sees the same storage finds the finished work."""
    from prefect.settings import PREFECT_API_URL

    return _saved_result_storage(storage_url, PREFECT_API_URL.value())


@functools.lru_cache(maxsize=32)
def _saved_result_storage(storage_url: str, api_url: str | None) -> WritableFileSystem:
    """The block, saved once per process and Prefect API (each save is a database write)."""
    from prefect.filesystems import LocalFileSystem, RemoteFileSystem

    base = f"{storage_url.rstrip('/')}/cache"
    if is_remote(base):
        block: WritableFileSystem = RemoteFileSystem(basepath=base)
    else:
        block = LocalFileSystem(basepath=str(local_path(base)))
    # Prefect wants result storage saved server-side; the name is derived from the URL so
    # every run (and every machine) over the same storage shares one block. No credentials
    # are stored in it: s3fs reads them from the environment where the task runs.
    block.save(f"dsstar-cache-{digest(base)}", overwrite=True)
    return block


def current_settings() -> Settings:
    """The settings of the environment as it is now. Building them parses every DSSTAR_*
    variable (about 3 ms); tasks that run once per LLM call or script reuse the object
    built for the same environment."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.upper().startswith("DSSTAR_")))
    return _settings_for(env)


@functools.lru_cache(maxsize=8)
def _settings_for(env: tuple[tuple[str, str], ...]) -> Settings:
    return Settings()


def digest(*parts: Any) -> str:
    """A short stable hash of JSON-safe values."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def key_part(text: str) -> str:
    """`text` made safe for a cache key (cache keys are file names in result storage); long
    texts keep a hash of the whole, so two labels never collide by truncation."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")
    return safe if len(safe) <= 80 else f"{safe[:60]}-{digest(text)}"


def artifact_key(text: str) -> str:
    """`text` as a Prefect artifact key: lowercase letters, digits and dashes only."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


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
