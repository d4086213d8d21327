"""The server side of a slot: Prefect's global concurrency API, called directly, and leases
handed from one block of a process to the next.

A fan-out over a lake asks for a slot thousands of times. Taking and giving back a slot are
two writes to the server's database each; on a SQLite-backed server those writes contend
with the task-run recorder and the server stalls (measured: pauses of 60 s, its busy
timeout, a few times per hundred files). So a finished block parks its lease for a moment,
and the next block of this process takes it over without asking the server. The server
still counts every slot this process holds: parked and in-use leases together never
outnumber the process's own semaphore. A parked lease goes back to the server after
`_IDLE_S` unused, and a lease is not handed on once it is `_REUSE_S` old, so other runs of
the server get their turn and a lease never outlives its time-to-live.
"""

from __future__ import annotations

import atexit
import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["Lease", "acquire", "park", "post", "release_parked", "reuse", "take"]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_BUSY_RETRIES = 100  # about 25 s of short waits before a slot request gives up

_IDLE_S = 0.5
_REUSE_S = 15.0


@dataclass
class Lease:
    """A slot of a global limit held by this process."""

    id: str | None  # None: the server has no such limit (or its API failed): nothing to free
    reusable_until: float  # time.monotonic() after which no block may start under it
    parked: float = 0.0

    @classmethod
    def granted(cls, id: str | None, lease_s: float) -> Lease:
        """A lease the server just granted for `lease_s` seconds. It is handed on for a
        quarter of that at most, so a block started under it ends before it expires."""
        return cls(id, time.monotonic() + min(_REUSE_S, lease_s / 4))


_parked: dict[str, list[Lease]] = {}
_wake = threading.Condition(_lock)
_reaper: threading.Thread | None = None


def reuse(name: str) -> Lease | None:
    """A parked lease of `name` young enough for one more block, if any. Parked leases too
    old for that are given back first, so that this process never holds more of the
    server's slots than blocks it can run at once."""
    now = time.monotonic()
    with _lock:
        leases = _parked.get(name, [])
        fresh = [lease for lease in leases if now < lease.reusable_until]
        stale = [lease for lease in leases if now >= lease.reusable_until]
        found = fresh.pop() if fresh else None
        _parked[name] = fresh
    for lease in stale:
        _release(lease.id)
    return found


def park(name: str, lease: Lease) -> None:
    """Keep a lease whose block ended for the next block of this process (or the reaper)."""
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


def _due(now: float) -> list[Lease]:
    """Take out the parked leases to give back now (caller holds `_lock`)."""
    due = []
    for name, leases in _parked.items():
        keep = []
        for lease in leases:
            stale = now - lease.parked >= _IDLE_S or now >= lease.reusable_until
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


def release_parked(tries: int = _BUSY_RETRIES) -> None:
    """Give every parked lease back to the server now. At exit it has one try each, so a
    server that is gone does not hold the exit up: an unreturned lease expires on its own."""
    with _lock:
        due = [lease for leases in _parked.values() for lease in leases]
        _parked.clear()
    for lease in due:
        _release(lease.id, tries)


atexit.register(release_parked, 1)


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


def post(path: str, body: dict[str, Any], tries: int = _BUSY_RETRIES) -> Any:
    """POST to the server's concurrency API, retried here within milliseconds while the
    server is busy (503) or unreachable for a moment; other errors are raised at once.

    Prefect's client would wait about 2 s before each retry of a 503 (even with retries
    turned off), and a SQLite-backed server answers 503 whenever another write holds the
    database, which happens to most slot requests of a busy run. So the request goes out
    through the client's connection and credentials, but not its retry loop."""
    import httpx

    delay = 0.005
    for attempt in range(tries):
        transport = _shared_client()._client  # Prefect's httpx client: base URL, auth headers
        try:
            request = transport.build_request("POST", path, json=body)
            response = httpx.Client.send(transport, request)
            response.raise_for_status()
            return response
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 503 or attempt == tries - 1:
                raise
        except httpx.TransportError:
            if attempt == tries - 1:
                raise
        time.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, 0.25)
    raise AssertionError("unreachable")


def acquire(name: str, lease_s: float) -> str | None:
    """A lease on one slot of the global limit `name`, waiting while it is full."""
    response = take(name, "concurrency", lease_s)
    if response is None:
        return None
    body = response.json()
    return body.get("lease_id") if body.get("limits") else None  # no limit: no lease


def take(name: str, mode: str, lease_s: float | None = None) -> Any:
    """Occupy one slot of the global limit `name` ("concurrency" with a lease, or
    "rate_limit", whose slots decay on their own), waiting while it is full. None when the
    server's limit API cannot be used."""
    import httpx

    wait = 0.05
    while True:
        try:
            body = {"names": [name], "slots": 1, "mode": mode}
            if lease_s is None:
                response = post("/v2/concurrency_limits/increment", body)
            else:
                body["lease_duration"] = lease_s
                response = post("/v2/concurrency_limits/increment-with-lease", body)
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


def _release(lease: str | None, tries: int = _BUSY_RETRIES) -> None:
    if lease is None:
        return
    try:
        post("/v2/concurrency_limits/decrement-with-lease", {"lease_id": str(lease)}, tries)
    except Exception as exc:  # an expired lease was already freed by the server
        log.warning("could not release concurrency lease %s: %s", lease, exc)
