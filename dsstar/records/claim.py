"""One run id, one run: a run claims its id in the store before it writes anything.

    runs/<run_id>/claims/000001.json    the first attempt under the id
    runs/<run_id>/claims/000002.json    a resume, after the first one ended or died

Each claim is created only if its key is free, in one step (`Store.create_json`: O_EXCL on
a local folder, a conditional PUT on S3), so of two runs starting under one id at the same
moment exactly one gets the claim; the other is refused with `RunIdInUse` and writes
nothing. A claim is released when its run ends; one whose process is gone (same host: the
pid is dead; another host: no heartbeat for `state.STALE_AFTER_S`) may be followed by the next
number, which is how a crashed run is resumed. A run that finished with an answer, or was
stopped by a person, is never run again under its id: what it stored stays as it is.

A claim held by an earlier attempt of the same flow run is taken over at once on another
host: the orchestrator runs one attempt of a flow run at a time, so when the flow run starts
again (retried after its worker died, see docs/workers.md) the earlier attempt is known to be
over, though its claim was never released and its host cannot be asked. On this host its
process is asked: `dsstar resume` continues the run's flow run too, and two of them at once
must not both run it. Another flow run, or a command, under the same id is still refused
while the holder may live.

A run id continues only its own run (`identity.py`): a claim asked for with another
question, data or settings than the stored run's is refused, before anything is written.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dsstar import keys
from dsstar.errors import RunIdInUse
from dsstar.execution.scratch import owner
from dsstar.records.identity import RunIdentity, refuse_other_run
from dsstar.records.state import FINISHED, liveness
from dsstar.storage import Store

__all__ = ["Claim", "claim_run"]


@dataclass
class Claim:
    """This process's claim on a run id; `release` it when the run ends."""

    store: Store
    key: str
    record: dict[str, Any]
    # The claim of an earlier attempt that was never released (its process died, or it is
    # an earlier attempt of this flow run), which this one follows: its flow run, if any,
    # still says Running and is to be marked as crashed.
    replaced: dict[str, Any] | None = None

    def release(self) -> None:
        """Mark the claim released (only if it is still ours), so a resume may follow."""
        try:
            current = self.store.read_json(self.key)
        except FileNotFoundError:
            return
        if current.get("token") == self.record["token"] and not current.get("released_at"):
            self.store.write_json(self.key, {**current, "released_at": _now()})


def claim_run(
    store: Store,
    run_id: str,
    flow_run_id: str | None = None,
    identity: RunIdentity | None = None,
) -> Claim:
    """Claim `run_id` in `store` for this process, or raise RunIdInUse saying who holds it
    (a live run), that it has finished, or (given the `identity` of the run to start) that
    the stored run is another one."""
    record = _refuse_stored(store, run_id, identity)
    claims = [n for n in store.listdir(keys.claims_folder(run_id)) if n.endswith(".json")]
    number, held = 1, None
    if claims:
        last = int(max(claims).split(".", 1)[0])
        number = last + 1
        held = _read(store, keys.claim(run_id, last))
        retried = _same_flow_run(held or {}, flow_run_id)  # its earlier attempt is over
        if held and not held.get("released_at") and _live(held, record, retried):
            raise _in_use(run_id, held)
    mine = {
        **owner(),
        "token": secrets.token_hex(8),
        "flow_run_id": flow_run_id,
        "claimed_at": _now(),
    }
    key = keys.claim(run_id, number)
    if not store.create_json(key, mine):  # another run took this number a moment ago
        raise _in_use(run_id, _read(store, key) or {})
    replaced = held if held and not held.get("released_at") else None
    claim = Claim(store, key, mine, replaced)
    try:  # a run that held the id a moment ago may have finished, or stored its question
        _refuse_stored(store, run_id, identity)
    except RunIdInUse:
        claim.release()
        raise
    return claim


def _refuse_stored(store: Store, run_id: str, identity: RunIdentity | None) -> dict[str, Any]:
    """The stored run.json of `run_id` ({} if none); refused when the run has finished, or
    is not the one `identity` asks for."""
    record = _read(store, keys.run_record(run_id)) or {}
    if record.get("status") in FINISHED:
        raise RunIdInUse(
            f"run {run_id} has finished ({record['status']}) under"
            f" {store.uri(keys.run_folder(run_id))}; a"
            " finished run is never overwritten: choose another run id"
        )
    refuse_other_run(run_id, record, identity)
    return record


def _in_use(run_id: str, held: dict[str, Any]) -> RunIdInUse:
    return RunIdInUse(
        f"run {run_id} is in use by pid {held.get('pid')} on {held.get('host')}"
        f" (flow run {held.get('flow_run_id')}, since {held.get('claimed_at')}):"
        " choose another run id, or wait for it to end and resume it"
    )


def _same_flow_run(held: dict[str, Any], flow_run_id: str | None) -> bool:
    """Whether the claim was made by an earlier attempt of this very flow run."""
    return flow_run_id is not None and held.get("flow_run_id") == flow_run_id


def _live(held: dict[str, Any], record: dict[str, Any], retried: bool) -> bool:
    """Whether the claim's process may still run: judged like a running run.json, with the
    run's own heartbeat when it has one. An earlier attempt of the same flow run counts as
    over unless its process is seen alive here: two `dsstar resume` of one run continue the
    same flow run, and only one of them may run it."""
    beat = record.get("heartbeat_at") if record.get("pid") == held.get("pid") else None
    state = liveness({"status": "running", **held, "heartbeat_at": beat or held["claimed_at"]})
    return state == "alive" or (state == "unknown" and not retried)


def _read(store: Store, key: str) -> dict[str, Any] | None:
    try:
        value = store.read_json(key)
    except FileNotFoundError:
        return None
    return value if isinstance(value, dict) else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
