"""How much runs at once: LLM requests in flight and scripts running.

Every process keeps its own bound (a semaphore per kind and size), so one run never exceeds
its `--llm-concurrency` and `--max-parallel`, whatever the lake size. Under a Prefect server
(PREFECT_API_URL set) every slot is also taken from a global concurrency limit, `dsstar-llm`
or `dsstar-exec`, so that all the runs of that server share one budget. `dsstar serve`
creates (or resets) those limits; a run creates one with its own value when it is missing,
and otherwise leaves the server's value alone (it can be changed in the Prefect UI).

With DSSTAR_LLM_RPM, LLM requests are also paced: at most that many start per minute,
shared the same way through a rate limit `dsstar-llm-rpm` (a global limit whose slots decay
at RPM/60 per second), or kept in the process without a server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ._leases import Lease, acquire, park, reuse, take

__all__ = [
    "LIMIT_NAMES",
    "RATE_NAME",
    "ensure_limit",
    "ensure_rate",
    "pace",
    "server_url",
    "slot",
]

LIMIT_NAMES = {"llm": "dsstar-llm", "exec": "dsstar-exec"}
RATE_NAME = "dsstar-llm-rpm"

_lock = threading.Lock()
_semaphores: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_ensured: set[tuple[str, str]] = set()
_ensuring = threading.Lock()
_next_start: dict[int, float] = {}  # requests per minute -> when the next local request may start


def server_url() -> str | None:
    """The Prefect API in use, or None for the ephemeral (in-process) server."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url or None


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
def slot(kind: str, size: int, lease_s: float) -> Iterator[None]:
    """Hold one of `size` slots of `kind` in this process and, under a Prefect server, one
    slot of the server's global limit, for the duration of the block. The server's slot is
    leased for `lease_s` seconds (longer than the block can last), so the slots of a process
    that dies come back on their own."""
    with _semaphore(kind, size):
        url = server_url()
        if not url:
            yield
            return
        # The local slot is taken first, so a lone run never waits on the server's polling.
        name = _ensure_once(url, LIMIT_NAMES[kind], lambda: ensure_limit(kind, size))
        lease = reuse(name) or Lease.granted(acquire(name, lease_s), lease_s)
        try:
            yield
        finally:
            park(name, lease)
