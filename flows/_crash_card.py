"""The card of a run whose process died: it cannot write its own, so whoever settles its flow
run (marks it Crashed, or finds it marked so) writes it, from what the run stored.

`publish_crash_card` is the one call, from flows/_settle.py: the run (`record`: its run.json,
or as much of it as the settler knows), why it is known to be gone, and optionally its
storage (else the one `record` names), whose run.json the card is written from. The card
(`dsstar.views.cards.ending_card` of `crashed_record`) says why, the round and step it
stopped at, what it spent (counted from the replies its storage kept, the file analysis
included: run.json's totals are those of its last round), where it is stored and how to
continue it; it is written once per crash, on the flow run of `record`.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from prefect import get_client

from dsstar import keys
from dsstar.model.replies import Replies
from dsstar.storage import Store
from dsstar.views.cards import crashed_record
from tasks.cache_keys import artifact_key
from tasks.cards import published
from tasks.record import publish_ending

__all__ = ["publish_crash_card"]

_log = logging.getLogger("dsstar.flows")


def publish_crash_card(record: dict[str, Any], reason: str, storage: str | None = None) -> bool:
    """Give the Crashed flow run of `record` (run.json of a run whose process is gone) the
    card of a crashed run, unless it has had one since it crashed. `reason`: why the process
    is known to be gone. Returns whether a card was written. Never raises: a card is a view,
    and the flow run may live on another Prefect server, or none."""
    flow_run_id, run_id = record.get("flow_run_id"), str(record.get("run_id") or "")
    if not flow_run_id or not run_id:
        return False
    try:
        with get_client(sync_client=True) as client:
            flow_run = client.read_flow_run(UUID(str(flow_run_id)))
        state = flow_run.state
        key = artifact_key(f"{run_id}-answer")
        if not (state and state.is_crashed()) or published(key, flow_run.id, since=state.timestamp):
            return False
        store = Store(storage or (record.get("settings") or {})["storage"])
        stored = {**_stored(store, run_id, record), "flow_run_id": str(flow_run_id)}
        crashed = crashed_record(stored, reason, Replies(store, run_id).received())
        publish_ending(
            run_id, crashed, store.uri(keys.run_folder(run_id)),
            retry=flow_run.deployment_id is not None, flow_run_id=flow_run.id,
        )  # fmt: skip
    except Exception as exc:
        _log.debug("no card for the crashed flow run %s: %s", flow_run_id, exc)
        return False
    return True


def _stored(store: Store, run_id: str, record: dict[str, Any]) -> dict[str, Any]:
    """The run.json of `run_id` as stored (what it did, spent, and where it stopped); the
    settler's `record` when it cannot be read."""
    try:
        return store.read_json(keys.run_record(run_id))
    except Exception as exc:  # deleted, unreadable storage: the card says what is known
        _log.debug("run.json of %s not read for its card: %s", run_id, exc)
        return record
