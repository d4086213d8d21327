"""Keeping the storage's cache/ bounded: Prefect's persisted task results (finished model
calls, script runs, analyses) are what a resumed run reads back instead of repeating them,
and nothing else reads them. Those older than `cache_max_age_days` go, and the oldest beyond
`cache_max_mb`.

A run prunes when it starts (`prune_when_due`), at most once a day per storage: one small
read (cache/.pruned.json) is all a run start costs otherwise. `dsstar runs prune-cache`
prunes at once, with other bounds if it is given them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dsstar import keys
from dsstar.errors import StorageError
from dsstar.storage import Entry, Store

__all__ = ["EVERY", "Pruned", "prune_cache", "prune_when_due"]

EVERY = timedelta(days=1)  # how often a run start prunes one storage's cache/


@dataclass(frozen=True)
class Pruned:
    """What pruning deleted (`removed` results, `freed` bytes) and what cache/ still holds."""

    removed: int
    freed: int
    kept: int
    held: int

    def to_dict(self) -> dict[str, int]:
        return {"removed": self.removed, "freed": self.freed, "kept": self.kept,
                "held": self.held}  # fmt: skip


def prune_cache(
    store: Store,
    max_age_days: float,
    max_mb: float | None,
    now: datetime | None = None,
    dry_run: bool = False,
) -> Pruned:
    """Delete the results in cache/ older than `max_age_days` (0: none for its age), then the
    oldest while the rest hold more than `max_mb` (None: no bound). With `dry_run`, only say
    what would go."""
    now = now or datetime.now(UTC)
    entries = sorted(
        (e for e in store.entries(keys.CACHE) if not e.name.startswith(".")),
        key=lambda e: e.modified,
        reverse=True,  # newest first: kept first
    )
    cutoff = now - timedelta(days=max_age_days) if max_age_days else None
    budget = None if max_mb is None else int(max_mb * (1 << 20))
    kept: list[Entry] = []
    doomed: list[Entry] = []
    held = 0
    for entry in entries:
        old = cutoff is not None and entry.modified < cutoff
        if old or (budget is not None and held + entry.size > budget):
            doomed.append(entry)
        else:
            kept.append(entry)
            held += entry.size
    if doomed and not dry_run:
        store.remove([keys.cache_entry(e.name) for e in doomed])
    return Pruned(len(doomed), sum(e.size for e in doomed), len(kept), held)


def prune_when_due(
    store: Store, max_age_days: float, max_mb: float | None, now: datetime | None = None
) -> Pruned | None:
    """`prune_cache` when this storage's cache/ was last pruned `EVERY` ago or longer (or
    never); None when it was not due, or there are no bounds. The time is noted before the
    work, so that runs starting together do not all prune."""
    if not max_age_days and max_mb is None:
        return None
    now = now or datetime.now(UTC)
    try:
        last = datetime.fromisoformat(store.read_json(keys.CACHE_PRUNED)["at"])
        if last.tzinfo is not None and now - last < EVERY:
            return None
    except (FileNotFoundError, StorageError, KeyError, TypeError, ValueError):
        pass  # never pruned, or a note no one can read: prune now
    store.write_json(keys.CACHE_PRUNED, {"at": now.isoformat(timespec="seconds")})
    return prune_cache(store, max_age_days, max_mb, now)
