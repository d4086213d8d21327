"""Several workers, one job: what brings a run back when the machine running it dies.

A worker killed with its machine reports nothing: its flow runs stay Running on the server.
Two Prefect automations, created or updated by name (`dsstar workers setup`), make such a
run finish elsewhere:

- `dsstar: run lost its worker`: a flow run of a dsstar deployment (tag `dsstar`) that sent
  a heartbeat and then neither another one nor a final state within the timeout is marked
  Crashed. The flow runs send heartbeats when their worker sets
  PREFECT_FLOWS_HEARTBEAT_FREQUENCY (30 s at least), which the timeout must exceed.
- `dsstar: crashed run retried`: a Crashed flow run of a dsstar deployment is scheduled
  again (AwaitingRetry, as the UI's Retry button does). Any worker of the pool picks it up;
  the ds-star flow resumes its run id from stored work (finished LLM calls and executions
  come from the cache in storage, which every worker shares), taking over the claim of the
  attempt that died (dsstar.records.claim). A run that crashed more than
  DSSTAR_MAX_CRASH_RETRIES times fails at its start instead (`check_crash_loop`): a run that
  kills every worker it lands on (memory, a hostile script) is not retried forever.

The server must run its triggers and actions services (on by default).
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from prefect import get_client
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

from dsstar.errors import CrashLoop, UsageError
from flows._states import FINAL_STATE_NAMES
from flows.alerts import upsert_automations

__all__ = [
    "HEARTBEAT_MIN_S",
    "LOST_WORKER",
    "RETRY_CRASHED",
    "check_crash_loop",
    "crash_retry_enabled",
    "ensure_worker_recovery",
]

LOST_WORKER = "dsstar: run lost its worker"
RETRY_CRASHED = "dsstar: crashed run retried"
DEPLOYMENT_TAG = "dsstar"  # every dsstar deployment's tag (prefect.yaml, `dsstar serve`)
HEARTBEAT_MIN_S = 30  # Prefect's shortest flow-run heartbeat interval

_OF_DSSTAR = {
    "prefect.resource.role": "tag",
    "prefect.resource.id": f"prefect.tag.{DEPLOYMENT_TAG}",
}
# Event names are state names: a verified run ends in a Completed state named Verified, a
# run over its budget in a Failed state named OverBudget.
_ENDED = {f"prefect.flow-run.{name}" for name in FINAL_STATE_NAMES}


def recovery_automations(heartbeat_timeout_s: float) -> list[AutomationCore]:
    """The two automations: mark silent runs Crashed, then schedule Crashed runs again."""
    lost = AutomationCore(
        name=LOST_WORKER,
        description="A dsstar flow run that stopped sending heartbeats is marked Crashed.",
        trigger=EventTrigger(
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", *_ENDED},
            match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related=_OF_DSSTAR,  # type: ignore[arg-type]  # a dict is validated
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=heartbeat_timeout_s),
        ),
        actions=[
            ChangeFlowRunState(
                state=StateType.CRASHED,
                message=f"no heartbeat for {heartbeat_timeout_s:g} s: its worker is gone",
            )
        ],
    )
    retry = AutomationCore(
        name=RETRY_CRASHED,
        description="A crashed dsstar flow run is scheduled again; another worker resumes it.",
        trigger=EventTrigger(
            expect={"prefect.flow-run.Crashed"},
            match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related=_OF_DSSTAR,  # type: ignore[arg-type]
            posture=Posture.Reactive,
            threshold=1,
        ),
        actions=[
            ChangeFlowRunState(
                state=StateType.SCHEDULED,
                name="AwaitingRetry",
                message="retried after a crash: resumes from its stored work",
                force=True,  # Crashed is final: only a forced change reopens it
            )
        ],
    )
    return [lost, retry]


def ensure_worker_recovery(heartbeat_timeout_s: float) -> list[str]:
    """Create, or update by name, the two recovery automations; returns their names."""
    if heartbeat_timeout_s <= HEARTBEAT_MIN_S:
        raise UsageError(
            f"--heartbeat-timeout {heartbeat_timeout_s:g}: must exceed the flow runs' heartbeat"
            f" interval (PREFECT_FLOWS_HEARTBEAT_FREQUENCY, {HEARTBEAT_MIN_S} s at least)"
        )
    wanted = recovery_automations(heartbeat_timeout_s)
    upsert_automations(wanted)
    return [automation.name for automation in wanted]


def crash_retry_enabled() -> bool:
    """Whether the server retries crashed dsstar runs (its automation exists and is on)."""
    with get_client(sync_client=True) as client:
        return any(a.enabled for a in client.read_automations_by_name(RETRY_CRASHED))


def check_crash_loop(flow_run_id: UUID, max_crash_retries: int) -> None:
    """Refuse to resume a flow run that crashed more than `max_crash_retries` times. Each
    Crashed state in its history is one crash: a resume by the retry automation, the UI's
    Retry button or a restarted worker keeps the flow run, while `dsstar resume` starts a new
    one, so a person may still resume the run on purpose."""
    with get_client(sync_client=True) as client:
        states = client.read_flow_run_states(flow_run_id)
    crashes = [state for state in states if state.type == StateType.CRASHED]
    if len(crashes) > max_crash_retries:
        last = crashes[-1].message or "no reason given"
        raise CrashLoop(
            f"this flow run crashed {len(crashes)} times (last: {last}), more than"
            f" DSSTAR_MAX_CRASH_RETRIES={max_crash_retries}: it is not resumed again. Find what"
            " ends its worker (memory, a script), then continue with `dsstar resume RUN_ID`"
        )
