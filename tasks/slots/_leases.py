"""The server side of a slot: Prefect's global concurrency API, called directly; leases that
are renewed while held, handed from one block of a process to the next, recorded with
their holder, and given back on every way out.

Why a lease cannot outlive its holder for long:
- it is granted for `LEASE_S` (60 s, the server's minimum) and renewed every `RENEW_S`
  while this process holds it, so the server's repossessor frees the slot of a process
  that died within about a minute of its last renewal;
- each lease is recorded with its holder's pid (`_holders`); a run that finds a limit full
  first gives back the slots of recorded holders that are gone, at once;
- a lease the server forgot while we held it (a restarted server with in-memory lease
  storage) no longer counts against us: the renewal finds out and takes our slot back off
  the count;
- at exit, normal or on SIGINT/SIGTERM, every lease still held is given back.

A fan-out over a lake asks for a slot thousands of times. Taking and giving back a slot are
two writes to the server's database each; on a SQLite-backed server those writes contend
with the task-run recorder and the server stalls (measured: pauses of 60 s, its busy
timeout, a few times per hundred files). So a finished block parks its lease for a moment,
and the next block of this process takes it over without asking the server. Parked and
in-use leases together never outnumber the process's own semaphore.
"""

from __future__ import annotations

import atexit
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsstar import progress
from dsstar.errors import SlotWaitError
from dsstar.events import SlotWait
from dsstar.execution import stopping
from tasks.slots import _holders
from tasks.slots._api import BUSY_RETRIES as _BUSY_RETRIES
from tasks.slots._api import get, post

__all__ = [
    "LEASE_S",
    "Lease",
    "acquire",
    "free_gone",
    "get",
    "park",
    "post",
    "release_all",
    "reuse",
    "take",
]

log = logging.getLogger(__name__)

_lock = threading.Lock()

LEASE_S = 60.0  # the shortest lease the server grants
RENEW_S = 15.0
_IDLE_S = 0.5
_REUSE_S = 15.0
NOTICE_S = 10.0  # a wait longer than this is shown, with who holds the slots
_SWEEP_S = 2.0  # how often a waiting run looks for slots held by processes that are gone


@dataclass(eq=False)  # a lease is itself: compared by identity
class Lease:
    """A slot of a global limit held by this process."""

    id: str | None  # None: the server has no such limit (or its API failed): nothing to free
    name: str = ""
    records: Path | None = None  # the folder of its holder record
    holder: _holders.Holder | None = None
    reusable_until: float = 0.0  # time.monotonic() after which no block may start under it
    parked: float = 0.0
    renewed: float = field(default_factory=time.monotonic)
    # Renewal and release of one lease never overlap: a renewal that found a just-released
    # lease gone would take its slot off the count a second time.
    busy: threading.Lock = field(default_factory=threading.Lock)


_held: dict[str, Lease] = {}  # lease id -> lease, in use or parked
_parked: dict[str, list[Lease]] = {}
_wake = threading.Condition(_lock)
_keeper: threading.Thread | None = None


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
        _release(lease)
    return found


def park(lease: Lease) -> None:
    """Keep a lease whose block ended for the next block of this process (or the keeper)."""
    if lease.id is None:
        return
    lease.parked = time.monotonic()
    with _lock:
        _parked.setdefault(lease.name, []).append(lease)
        _wake.notify()


def _start_keeper() -> None:
    global _keeper
    with _lock:
        if _keeper is not None:
            return
        _keeper = threading.Thread(target=_keep, name="dsstar-leases", daemon=True)
        _keeper.start()
    atexit.register(release_all)
    # A stop exits without atexit. Last: the server frees a lease left behind when it expires.
    stopping.at_stop(lambda signum: release_all(tries=3), last=True)


def _keep() -> None:
    """Give parked leases back once they sat idle, and renew the held ones (a daemon)."""
    while True:
        now = time.monotonic()
        with _lock:
            due = []
            for name, leases in _parked.items():
                keep = []
                for lease in leases:
                    idle = now - lease.parked >= _IDLE_S or now >= lease.reusable_until
                    (due if idle else keep).append(lease)
                _parked[name] = keep
            renew = [
                lease
                for lease in _held.values()
                if now - lease.renewed >= RENEW_S and lease not in due
            ]
            if not due and not renew:
                _wake.wait(_IDLE_S / 2)
                continue
        for lease in due:
            _release(lease)
        for lease in renew:
            _renew(lease)


def _renew(lease: Lease) -> None:
    with lease.busy:
        if lease.id is not None and lease.id in _held:
            _renew_held(lease, lease.id)


def _renew_held(lease: Lease, lease_id: str) -> None:
    started = time.monotonic()
    renewed, lease.renewed = lease.renewed, started  # tried now: next try in RENEW_S
    known = _known(lease_id)
    if known and lease.holder is not None and lease.records is not None:
        lease.holder.renewed = time.time()  # so a run that finds us dead can tell lost leases
        _holders.write(lease.records, lease.holder)
    if known is not False:
        return
    # The server no longer knows the lease. Renewed in time, it cannot have expired: the
    # server lost it (a restart with in-memory lease storage) and our slot is still
    # counted, with nothing left to free it. Take it off the count ourselves.
    if started - renewed < LEASE_S - RENEW_S:
        _decrement(lease.name)
    _forget(lease)
    lease.id = None


def _known(lease_id: str) -> bool | None:
    """Renew the lease; whether the server still knows it (None: could not tell)."""
    import httpx

    try:
        post(f"/v2/concurrency_limits/leases/{lease_id}/renew", {"lease_duration": LEASE_S})
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code in (404, 410):  # 410 Gone: expired, revoked or lost
            return False
        log.warning("could not renew concurrency lease %s: %s", lease_id, exc)
        return None
    except httpx.HTTPError as exc:  # a server restarting: try again at the next round
        log.warning("could not renew concurrency lease %s: %s", lease_id, exc)
        return None
    return True


def release_all(tries: int = _BUSY_RETRIES) -> None:
    """Give every lease this process holds back to the server now (at exit: normal exit,
    SIGINT or SIGTERM). In-use leases too: their blocks are not coming back."""
    with _lock:
        leases = list(_held.values())
        _parked.clear()
    for lease in leases:
        _release(lease, tries)


def acquire(name: str, records: Path, run_id: str, wait_s: float) -> Lease:
    """A lease on one slot of the global limit `name`, waiting while it is full (see
    `take`), recorded with this process as its holder."""
    response = take(name, "concurrency", records=records, wait_s=wait_s)
    body = response.json() if response is not None else {}
    lease_id = body.get("lease_id") if body.get("limits") else None  # no limit: no lease
    lease = Lease(lease_id, name, records, reusable_until=time.monotonic() + _REUSE_S)
    if lease_id is not None:
        lease.holder = _holders.me(name, lease_id, run_id)
        _holders.write(records, lease.holder)
        with _lock:
            _held[lease_id] = lease
        _start_keeper()
    return lease


def take(name: str, mode: str, *, records: Path | None = None, wait_s: float | None = None) -> Any:
    """Occupy one slot of the global limit `name` ("concurrency" with a lease, or
    "rate_limit", whose slots decay on their own), waiting while it is full. None when the
    server's limit API cannot be used.

    While it waits, slots of recorded holders that are gone are given back; after
    `NOTICE_S` the wait is shown with who holds the slots; after `wait_s` it fails."""
    import httpx

    body: dict[str, Any] = {"names": [name], "slots": 1, "mode": mode}
    path = "/v2/concurrency_limits/increment"
    if mode == "concurrency":
        path, body["lease_duration"] = path + "-with-lease", LEASE_S
    started, swept, noticed = time.monotonic(), 0.0, 0.0
    while True:
        try:
            return post(path, body)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 423:  # 423 Locked: the limit is full for now
                return _unlimited(name, exc)
            retry_after = float(exc.response.headers.get("Retry-After") or 0.05)
        except httpx.HTTPError as exc:  # timeouts, a server restarting
            return _unlimited(name, exc)
        now = time.monotonic()
        if records is not None and now - swept >= _SWEEP_S:
            swept = now
            free_gone(records, name)
        if wait_s is not None and now - started > wait_s:
            raise SlotWaitError(
                f"no {name} slot came free within {wait_s:g} s ({holding(name, records)})."
                " `dsstar limits` lists what holds them and frees the slots of runs that are"
                " gone; `dsstar limits --reset` frees them all (DSSTAR_SLOT_WAIT sets the"
                " bound)."
            )
        if now - started >= NOTICE_S and now - noticed >= 30:
            noticed = now
            detail = holding(name, records)
            log.warning("waiting for a %s slot (%s)", name, detail)
            progress.emit(SlotWait(name, detail, waited=now - started))
        time.sleep(min(retry_after, 0.25) * random.uniform(0.5, 1.0))  # polling is cheap


def holding(name: str, records: Path | None) -> str:
    """`2/2 held: run X pid N, ...`: the limit's count and the holders recorded here."""
    limit = get(f"/v2/concurrency_limits/{name}") or {}
    count = f"{limit.get('active_slots', '?')}/{limit.get('limit', '?')} held"
    holders = _holders.read(records, name) if records is not None else []
    known = ", ".join(holder.describe() for holder in holders[:5])
    more = f", {len(holders) - 5} more" if len(holders) > 5 else ""
    return f"{count}: {known}{more}" if known else f"{count}, by no run of this machine"


def free_gone(records: Path, name: str | None = None) -> list[_holders.Holder]:
    """Give back the slots of recorded holders (of `name`, or of every limit) whose process
    is gone; returns them. A record is claimed by renaming it, so two runs that find the
    same dead holder free its slot once."""
    freed = []
    for holder in _holders.read(records, name):
        if holder.alive() is not False:
            continue
        claimed = records / f"{holder.lease_id}.json.freeing"
        try:
            (records / f"{holder.lease_id}.json").rename(claimed)
        except OSError:
            continue  # another run got there first
        _free_lease_of(holder)
        claimed.unlink(missing_ok=True)
        freed.append(holder)
    return freed


def _free_lease_of(holder: _holders.Holder) -> None:
    known = _known(holder.lease_id)
    if known:
        post("/v2/concurrency_limits/decrement-with-lease", {"lease_id": holder.lease_id})
    elif known is False and time.time() - holder.renewed < LEASE_S - RENEW_S:
        _decrement(holder.limit)  # counted, but the server lost its lease (see _renew)


def _decrement(name: str) -> None:
    try:
        post("/v2/concurrency_limits/decrement", {"names": [name], "slots": 1})
    except Exception as exc:  # noqa: BLE001 - freeing is best effort; `dsstar limits` remains
        log.warning("could not take a lost lease of %s off its count: %s", name, exc)


def _unlimited(name: str, exc: Exception) -> None:
    # The local bound still holds; a hiccup of the server's limit API must not fail a run.
    log.warning("global concurrency limit %s unavailable (%s); local bound only", name, exc)
    return None


def _forget(lease: Lease, *, record: bool = True) -> None:
    """Stop holding (and renewing) `lease`; its holder record goes too unless `record` is
    False (a lease the server may still count: a later run frees it by the record)."""
    with _lock:
        _held.pop(lease.id or "", None)
    if record and lease.records is not None and lease.id is not None:
        _holders.forget(lease.records, lease.id)


def _release(lease: Lease, tries: int = _BUSY_RETRIES) -> None:
    with lease.busy:
        if lease.id is not None and lease.id in _held:
            _release_held(lease, lease.id, tries)


def _release_held(lease: Lease, lease_id: str, tries: int) -> None:
    try:
        post("/v2/concurrency_limits/decrement-with-lease", {"lease_id": lease_id}, tries)
    except Exception as exc:  # noqa: BLE001 - the server frees it when the lease expires
        log.warning("could not release concurrency lease %s: %s", lease_id, exc)
        _forget(lease, record=False)
        return
    _forget(lease)
