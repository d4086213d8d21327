"""Who holds a slot of a shared limit: one small record per lease, on this machine.

The Prefect server counts a limit's slots and knows its leases, but not which process holds
one. So each process that takes a lease writes a record beside the user's Prefect home
(pid, the pid's start time, host, run id, lease id, when it was last renewed) and removes it
when it gives the lease back. A record whose process is gone proves its slot is free: a
waiting run, or `dsstar limits`, gives that slot back at once instead of waiting for the
lease to expire. Holders on other machines leave no record here; their leases expire on the
server (they are renewed while held).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from dsstar.execution.scratch import owner, owner_alive

__all__ = ["Holder", "folder", "forget", "me", "read", "write"]


@dataclass
class Holder:
    """One lease held by one process."""

    limit: str
    lease_id: str
    run_id: str
    pid: int
    started: int  # the pid's start time: a recycled pid names another process
    host: str
    since: float
    renewed: float

    def alive(self) -> bool | None:
        """True or False when this machine can tell; None for a holder on another host."""
        return owner_alive(self.host, self.pid, self.started)

    def describe(self) -> str:
        gone = " (gone)" if self.alive() is False else ""
        where = "" if self.host == owner()["host"] else f"@{self.host}"
        return f"run {self.run_id or '?'} pid {self.pid}{where}{gone}"


def me(limit: str, lease_id: str, run_id: str) -> Holder:
    """A record of this process holding `lease_id` of `limit`."""
    now, me = time.time(), owner()
    return Holder(
        limit, lease_id, run_id, int(me["pid"]), int(me["pid_started"]), str(me["host"]), now, now
    )


def folder(home: Path, api_url: str) -> Path:
    """Where the records of the server at `api_url` live."""
    return home / "dsstar-slots" / hashlib.sha256(api_url.encode()).hexdigest()[:16]


def write(where: Path, holder: Holder) -> None:
    """Record (or re-record) `holder`; replaced whole, so a reader never sees half of it."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{holder.lease_id}.json"
    temp = path.with_suffix(f".{os.getpid()}.tmp")
    temp.write_text(json.dumps(asdict(holder)))
    os.replace(temp, path)


def forget(where: Path, lease_id: str) -> None:
    """Remove the record of `lease_id` (gone already is fine)."""
    (where / f"{lease_id}.json").unlink(missing_ok=True)


def read(where: Path, limit: str | None = None) -> list[Holder]:
    """The records of `limit` (or of every limit), oldest first. Unreadable ones are
    skipped: a record is a hint for freeing slots early, never needed for correctness."""
    holders = []
    for path in where.glob("*.json") if where.is_dir() else []:
        try:
            holder = Holder(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if limit is None or holder.limit == limit:
            holders.append(holder)
    return sorted(holders, key=lambda h: h.since)
