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

import atexit
import logging
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LIMIT_NAMES",
    "RATE_NAME",
    "ensure_limit",
    "ensure_rate",
    "pace",
    "release_parked",
    "server_url",
    "slot",
]

log = logging.getLogger(__name__)

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


def _ensure_once(url: str, kind: str, size: int) -> str:
    name = LIMIT_NAMES[kind]
    with _lock:
        if (url, name) in _ensured:
            return name
    with _ensuring:  # one creation request, not one per thread of the first wave
        with _lock:
            if (url, name) in _ensured:
                return name
        ensure_limit(kind, size)
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
    with _lock:
        known = (url, RATE_NAME) in _ensured
    if not known:
        ensure_rate(rpm)
        with _lock:
            _ensured.add((url, RATE_NAME))
    _take(RATE_NAME, "rate_limit")


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
        name = _ensure_once(url, kind, size)
        lease = _reuse(name, lease_s) or _Lease(_acquire(name, lease_s), time.monotonic())
        try:
            yield
        finally:
            _park(name, lease)


# -- leases handed from one block to the next ------------------------------------------------
#
# A fan-out over a lake asks for a slot thousands of times. Taking and giving back a slot
# are two writes to the server's database each; on a SQLite-backed server those writes
# contend with the task-run recorder and the server stalls (measured: pauses of 60 s, its
# busy timeout, a few times per hundred files). So a finished block parks its lease for a
# moment, and the next block of this process takes it over without asking the server.
# The server still counts every slot this process holds: parked and in-use leases together
# never outnumber the local semaphore. A parked lease goes back to the server after
# `_IDLE_S` unused, and a lease is not handed on once it is `_REUSE_S` old, so other runs
# of the server get their turn and a lease never outlives its time-to-live.

_IDLE_S = 0.5
_REUSE_S = 15.0


@dataclass
class _Lease:
    id: str | None  # None: the server has no such limit (or its API failed): nothing to free
    taken: float  # time.monotonic() when the server granted it
    parked: float = 0.0


_parked: dict[str, list[_Lease]] = {}
_wake = threading.Condition(_lock)
_reaper: threading.Thread | None = None


def _reusable(lease: _Lease, lease_s: float, now: float) -> bool:
    return now - lease.taken < min(_REUSE_S, lease_s / 4)


def _reuse(name: str, lease_s: float) -> _Lease | None:
    """A parked lease of `name` young enough for one more block, if any."""
    now = time.monotonic()
    with _lock:
        leases = _parked.get(name, [])
        for i in range(len(leases) - 1, -1, -1):
            if _reusable(leases[i], lease_s, now):
                return leases.pop(i)
    return None


def _park(name: str, lease: _Lease) -> None:
    global _reaper
    if lease.id is None:
        return
    lease.parked = time.monotonic()
    with _lock:
        _parked.setdefault(name, []).append(lease)
        if _reaper is None:
            _reaper = threading.Thread(target=_reap, name="dsstar-leases", daemon=True)
            _reaper.start()
        _wake.notify()


def _due(now: float) -> list[_Lease]:
    """Take out the parked leases to give back now (caller holds `_lock`)."""
    due = []
    for name, leases in _parked.items():
        keep = []
        for lease in leases:
            stale = now - lease.parked >= _IDLE_S or now - lease.taken >= _REUSE_S
            (due if stale else keep).append(lease)
        _parked[name] = keep
    return due


def _reap() -> None:
    """Give parked leases back to the server once they sat idle (a daemon thread)."""
    while True:
        with _lock:
            due = _due(time.monotonic())
            if not due:
                _wake.wait(_IDLE_S / 2)
                continue
        for lease in due:
            _release(lease.id)


def release_parked() -> None:
    """Give every parked lease back to the server now (at the end of a fan-out or process)."""
    with _lock:
        due = [lease for leases in _parked.values() for lease in leases]
        _parked.clear()
    for lease in due:
        _release(lease.id)


atexit.register(release_parked)


# One kept-alive client per process: a slot costs two small requests, not a new connection
# and an event loop as prefect.concurrency's context manager does (measured: 4x the wall
# time of a 100-file describe on 2 cores).
_client: Any = None


def _shared_client() -> Any:
    global _client
    with _lock:
        if _client is None:
            from prefect import get_client

            _client = get_client(sync_client=True)
            _client.__enter__()
        return _client


_BUSY_RETRIES = 100  # about 25 s of short waits before a slot request gives up


def _post(path: str, body: dict[str, Any]) -> Any:
    """POST to the server's concurrency API, retried here within milliseconds while the
    server is busy (503) or unreachable for a moment; other errors are raised at once.

    Prefect's client would wait about 2 s before each retry of a 503 (even with retries
    turned off), and a SQLite-backed server answers 503 whenever another write holds the
    database, which happens to most slot requests of a busy run. So the request goes out
    through the client's connection and credentials, but not its retry loop."""
    import httpx

    delay = 0.005
    for attempt in range(_BUSY_RETRIES):
        transport = _shared_client()._client  # Prefect's httpx client: base URL, auth headers
        try:
            request = transport.build_request("POST", path, json=body)
            response = httpx.Client.send(transport, request)
            response.raise_for_status()
            return response
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 503 or attempt == _BUSY_RETRIES - 1:
                raise
        except httpx.TransportError:
            if attempt == _BUSY_RETRIES - 1:
                raise
        time.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, 0.25)
    raise AssertionError("unreachable")


def _acquire(name: str, lease_s: float) -> str | None:
    """A lease on one slot of the global limit `name`, waiting while it is full."""
    response = _take(name, "concurrency", lease_s)
    if response is None:
        return None
    body = response.json()
    return body.get("lease_id") if body.get("limits") else None  # no limit: no lease


def _take(name: str, mode: str, lease_s: float | None = None) -> Any:
    """Occupy one slot of the global limit `name` ("concurrency" with a lease, or
    "rate_limit", whose slots decay on their own), waiting while it is full. None when the
    server's limit API cannot be used."""
    import httpx

    wait = 0.05
    while True:
        try:
            body = {"names": [name], "slots": 1, "mode": mode}
            if lease_s is None:
                response = _post("/v2/concurrency_limits/increment", body)
            else:
                body["lease_duration"] = lease_s
                response = _post("/v2/concurrency_limits/increment-with-lease", body)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 423:  # 423 Locked: the limit is full for now
                return _unlimited(name, exc)
            retry_after = float(exc.response.headers.get("Retry-After") or wait)
            time.sleep(min(retry_after, 0.25) * random.uniform(0.5, 1.0))  # polling is cheap
            continue
        except httpx.HTTPError as exc:  # timeouts, a server restarting
            return _unlimited(name, exc)
        return response


def _unlimited(name: str, exc: Exception) -> None:
    # The local bound still holds; a hiccup of the server's limit API must not fail a run.
    log.warning("global concurrency limit %s unavailable (%s); local bound only", name, exc)
    return None


def _release(lease: str | None) -> None:
    if lease is None:
        return
    try:
        _post("/v2/concurrency_limits/decrement-with-lease", {"lease_id": str(lease)})
    except Exception as exc:  # an expired lease was already freed by the server
        log.warning("could not release concurrency lease %s: %s", lease, exc)
