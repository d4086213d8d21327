"""What a stored run's status says of it: finished for good, or running, and then whether its
process still lives. The claim on a run id, the list of runs and a run's result all judge a
run by it, so it sits below them.

A running run records its host, pid and process start time in run.json, and a heartbeat
(`heartbeat_at`) at every round. On the same host the pid answers whether it runs; on another
host a heartbeat older than STALE_AFTER_S counts as gone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from dsstar.algorithm.verdict import ANSWERED, Status
from dsstar.execution.scratch import owner_alive

__all__ = ["FINISHED", "STALE_AFTER_S", "liveness"]

# A run that finished with an answer, or was stopped by a person, is never run again.
FINISHED = frozenset({*ANSWERED, Status.STOPPED})

STALE_AFTER_S = 2 * 3600


def liveness(record: dict[str, Any]) -> str | None:
    """For a run stored as "running": "alive", "stale" (its process is gone) or "unknown"
    (another host, recent heartbeat). None for runs in any other status."""
    if record.get("status") != "running":
        return None
    alive = owner_alive(record.get("host"), record.get("pid"), record.get("pid_started"))
    if alive is not None:
        return "alive" if alive else "stale"
    beat = record.get("heartbeat_at") or record.get("started_at")
    try:
        age = (datetime.now(UTC) - datetime.fromisoformat(beat)).total_seconds()
    except (TypeError, ValueError):
        return "stale"  # a run.json without any time: written by a process long gone
    return "stale" if age > STALE_AFTER_S else "unknown"
