"""The per-process bounds, the global limits that a shared server adds, and `inspect` for
`dsstar limits` (see the package's docstring)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tasks.slots import _holders
from tasks.slots._leases import acquire, park, reuse, take

__all__ = [
    "LIMIT_NAMES",
    "PRIVATE_API_ENV",
    "RATE_NAME",
    "holder_records",
    "ensure_limit",
    "ensure_rate",
    "pace",
    "server_url",
    "slot",
]

LIMIT_NAMES = {"llm": "dsstar-llm", "exec": "dsstar-exec"}
RATE_NAME = "dsstar-llm-rpm"
# Set by a command to the URL of the temporary server it started for itself.
PRIVATE_API_ENV = "DSSTAR_PRIVATE_API_URL"

_lock = threading.Lock()
_semaphores: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_ensured: set[tuple[str, str]] = set()
_ensuring = threading.Lock()
_next_start: dict[int, float] = {}  # requests per minute -> when the next local request may start


def server_url() -> str | None:
    """The shared Prefect API whose global limits runs take part in; None for Prefect's
    in-process server and for this command's own temporary one."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url or None
    return None if url and url == os.environ.get(PRIVATE_API_ENV) else url


def holder_records(url: str) -> Path:
    """The folder of this machine's holder records for the server at `url`."""
    from prefect.settings import get_current_settings

    return _holders.folder(Path(get_current_settings().home), url)


def _semaphore(kind: str, size: int) -> threading.BoundedSemaphore:
    with _lock:
        key = (kind, size)
        if key not in _semaphores:
            _semaphores[key] = threading.BoundedSemaphore(size)
        return _semaphores[key]


def ensure_limit(kind: str, size: int, *, reset: bool = False) -> str:
    """Make sure the server has the global limit of `kind` ("llm" or "exec"); returns its
    name. A missing limit is created with `size`; `reset` also sets an existing one to it."""
    from prefect import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    name = LIMIT_NAMES[kind]
    with get_client(sync_client=True) as client:
        if reset:
            client.upsert_global_concurrency_limit_by_name(name, size)
            return name
        try:
            client.read_global_concurrency_limit_by_name(name)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(
                    GlobalConcurrencyLimitCreate(name=name, limit=size)
                )
            except ObjectAlreadyExists:
                pass  # another run created it first: theirs is as good
    return name


def _ensure_once(url: str, name: str, create: Callable[[], object]) -> str:
    """Call `create` for the limit `name` of the server at `url` once per process: one
    creation request, not one per thread of the first wave."""
    with _lock:
        if (url, name) in _ensured:
            return name
    with _ensuring:
        with _lock:
            if (url, name) in _ensured:
                return name
        create()
        with _lock:
            _ensured.add((url, name))
    return name


def ensure_rate(rpm: int, *, reset: bool = False) -> str:
    """Make sure the server has the rate limit of `rpm` LLM requests per minute; returns its
    name. Bursts are capped at one second's worth; slots come back at rpm/60 per second."""
    from prefect import get_client
    from prefect.client.schemas.actions import (
        GlobalConcurrencyLimitCreate,
        GlobalConcurrencyLimitUpdate,
    )
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    burst, decay = max(1, rpm // 60), rpm / 60
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(RATE_NAME)
            if reset:
                update = GlobalConcurrencyLimitUpdate(limit=burst, slot_decay_per_second=decay)
                client.update_global_concurrency_limit(RATE_NAME, update)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(
                    GlobalConcurrencyLimitCreate(
                        name=RATE_NAME, limit=burst, slot_decay_per_second=decay
                    )
                )
            except ObjectAlreadyExists:
                pass  # another run created it first
    return RATE_NAME


def pace(rpm: int | None) -> None:
    """Wait until one more LLM request may start under `rpm` requests per minute: the
    server's shared rate limit, or (without a server) an even spacing in this process."""
    if not rpm:
        return
    url = server_url()
    if not url:
        with _lock:
            now = time.monotonic()
            start = max(now, _next_start.get(rpm, now))
            _next_start[rpm] = start + 60 / rpm
        time.sleep(start - now)
        return
    take(_ensure_once(url, RATE_NAME, lambda: ensure_rate(rpm)), "rate_limit")


@contextmanager
def slot(kind: str, size: int, run_id: str = "", wait_s: float | None = None) -> Iterator[None]:
    """Hold one of `size` slots of `kind` in this process and, under a shared Prefect
    server, one slot of the server's global limit, for the duration of the block. Waiting
    longer than `wait_s` for the server's slot raises SlotWaitError."""
    with _semaphore(kind, size):
        url = server_url()
        if not url:
            yield
            return
        # The local slot is taken first, so a lone run never waits on the server's polling.
        name = _ensure_once(url, LIMIT_NAMES[kind], lambda: ensure_limit(kind, size))
        lease = reuse(name) or acquire(name, holder_records(url), run_id, wait_s)
        try:
            yield
        finally:
            park(lease)


def inspect(*, free: bool = True, reset: bool = False) -> dict[str, object]:
    """The shared limits of the Prefect API in use, what holds each slot, and what was
    freed: slots of recorded holders that are gone (`free`), or every slot (`reset`)."""
    from prefect import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitUpdate
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import get_current_settings

    from tasks.slots._leases import free_gone

    url = get_current_settings().api.url or ""
    records = holder_records(url)
    freed = free_gone(records) if free and not reset else []
    rows = []
    with get_client(sync_client=True) as client:
        for name in (*LIMIT_NAMES.values(), RATE_NAME):
            try:
                limit = client.read_global_concurrency_limit_by_name(name)
            except ObjectNotFound:
                continue
            if reset and limit.active_slots:
                update = GlobalConcurrencyLimitUpdate(active_slots=0)
                client.update_global_concurrency_limit(name, update)
                limit.active_slots = 0
            holders = [] if reset else _holders.read(records, name)
            rows.append(
                {
                    "name": name,
                    "limit": limit.limit,
                    "active": limit.active_slots,
                    "holders": [
                        {**vars(h), "alive": h.alive(), "description": h.describe()}
                        for h in holders
                    ],
                }
            )
    if reset:
        for path in records.glob("*.json"):
            path.unlink(missing_ok=True)
    return {
        "api": url,
        "shared": server_url() is not None,
        "limits": rows,
        "freed": [{**vars(h), "description": h.describe()} for h in freed],
        "reset": reset,
    }
