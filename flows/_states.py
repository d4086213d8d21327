"""The Prefect state a ds-star flow run ends in, and Crashed for a run whose process died.

What the UI, automations and dashboards see follows the run's outcome (`status` in
run.json): an answer is Completed, named for how it was answered (Verified, MaxRounds,
Accepted, NotApplicable); `failed` is Failed with its reason; `over_budget` is Failed under
its own name (OverBudget) with what was spent; a person's stop is Cancelled.
Each of these states carries the run's result (`dsstar run --json`) as its data (in a
`RunEnded` error for Failed and Cancelled, which calling the flow raises), so the CLI, the
nightly batch and the benchmark read it from any of them. The UI's Retry on a Failed
run schedules the same flow run again, which resumes the same run id (see docs/operations.md).

A run whose process was killed reports nothing: its flow run would stay Running forever.
`mark_crashed` is called wherever dsstar learns that a run's process is gone (`dsstar runs
list`, and a run that takes over the claim of a dead one), through `report_crashed`, which
also gives the flow run the card of a crashed run (flows/_crash_card.py); the heartbeat
automation of flows/workers.py covers runs of a deployment.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from prefect import get_client
from prefect.client.schemas.objects import State
from prefect.states import Cancelled, Completed, Crashed, Failed

from dsstar import keys
from dsstar.algorithm.verdict import ANSWERED, Status
from dsstar.errors import RunEnded
from dsstar.storage import Store
from dsstar.text import clean
from flows._crash_card import publish_crash_card

__all__ = [
    "ANSWERED_STATES",
    "FINAL_STATE_NAMES",
    "OVER_BUDGET_STATE",
    "final_state",
    "mark_crashed",
    "one_line",
    "report_crashed",
]

OVER_BUDGET_STATE = "OverBudget"  # a Failed state's name: resumable with a higher ceiling
# A Completed state's name says how the run answered, so the UI's run list tells a verified
# answer from one the rounds ran out on.
ANSWERED_STATES = {
    Status.VERIFIED: "Verified",
    Status.MAX_ROUNDS: "MaxRounds",
    Status.ACCEPTED: "Accepted",
    Status.NOT_APPLICABLE: "NotApplicable",
}
# Every name the final state of a dsstar flow run may have. Prefect names a flow run's state
# events by them (`prefect.flow-run.Verified`): an automation that waits for runs to end
# expects them all.
FINAL_STATE_NAMES = (
    *ANSWERED_STATES.values(), "Completed", "Failed", OVER_BUDGET_STATE, "Cancelled", "Crashed",
)  # fmt: skip

_log = logging.getLogger("dsstar.flows")
_MOST = 500  # a state message is one line of at most this many characters


def one_line(text: str | None, fallback: str) -> str:
    """The first non-empty line of `text`, bounded, valid UTF-8 (Prefect sends it as JSON)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    line = lines[0] if lines else fallback
    return clean(line if len(line) <= _MOST else line[: _MOST - 3] + "...")


def final_state(result: dict[str, Any]) -> dict[str, Any] | State:
    """What the ds-star flow returns for a run that ended with `result`: the result itself
    (Completed) for an answer, else a state that says what happened and carries it."""
    status = result["status"]
    if status in ANSWERED:
        rounds = result.get("rounds") or 0
        message = f"{status} after {rounds} round{'' if rounds == 1 else 's'}"
        return Completed(name=ANSWERED_STATES[status], message=message, data=result)
    if status == Status.STOPPED:
        rounds = result.get("rounds") or 0
        message = f"stopped by a person after round {rounds - 1:02d}" if rounds else "stopped"
        return Cancelled(message=message, data=RunEnded(message, result))
    if status == Status.OVER_BUDGET:
        message = one_line(result.get("error"), "over budget")
        return Failed(name=OVER_BUDGET_STATE, message=message, data=RunEnded(message, result))
    message = one_line(result.get("error"), f"the run ended {status}")
    return Failed(message=message, data=RunEnded(message, result))


def report_crashed(flow_run_id: str | UUID, reason: str, storage: str, run_id: str) -> bool:
    """`mark_crashed`, and the crashed run's card on its flow run (flows/_crash_card.py),
    from its run.json: when marked here, or when the flow run is Crashed already without a
    card since. Returns whether it was marked. Never raises, as `mark_crashed`."""
    marked = mark_crashed(flow_run_id, reason)
    try:
        record = Store(storage).read_json(keys.run_record(run_id))
    except Exception as exc:  # no run.json to tell the card: the flow run stays as marked
        _log.debug("no card for the crashed run %s: %s", run_id, exc)
        return marked
    publish_crash_card({**record, "flow_run_id": str(flow_run_id)}, reason, storage)
    return marked


def mark_crashed(flow_run_id: str | UUID, reason: str) -> bool:
    """Set the flow run Crashed with `reason`, when it still says it runs (Pending or
    Running): its process is known to be gone. Returns whether it was marked. Never raises:
    the flow run may live on another Prefect server (a command's temporary one), or none."""
    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(UUID(str(flow_run_id))).state
            if state is None or state.is_final() or state.is_scheduled():
                return False
            result = client.set_flow_run_state(
                UUID(str(flow_run_id)), Crashed(message=one_line(reason, "its process is gone"))
            )
    except Exception as exc:  # unreachable API, unknown flow run: the run stays as it was
        _log.debug("flow run %s not marked Crashed: %s", flow_run_id, exc)
        return False
    return result.status.value == "ACCEPT"
