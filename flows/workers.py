"""What ends a run whose process died unseen, and what brings a worker's run back.

A process killed with SIGKILL, or with its machine, reports nothing: its flow run would stay
Running. Every ds-star flow run against a server that lasts sends the event
`dsstar.run.heartbeat` (flows/_alive.py), and two Prefect automations, created or updated
by name, act on what stops:

- `dsstar: silent run crashed`: a ds-star flow run (any: started by the CLI, Python, `dsstar
  serve` or a worker) that sent a heartbeat and then neither another one nor any other event
  of its own (a final state) within the timeout is marked Crashed. A run creates it on its
  start where the server has none (`ensure_silent_run_watch`); `dsstar workers` sets its
  timeout.
- `dsstar: crashed run retried` (`dsstar workers` only): a Crashed flow run of a dsstar
  deployment (tag `dsstar`) is scheduled again (AwaitingRetry, as the UI's Retry button
  does). Any worker of the pool picks it up; the ds-star flow resumes its run id from stored
  work (finished LLM calls and executions come from the cache in storage, which every worker
  shares), taking over the claim of the attempt that died (dsstar.records.claim). A run that
  crashed more than DSSTAR_MAX_CRASH_RETRIES times fails at its start instead
  (`check_crash_loop`): a run that kills every worker it lands on (memory, a hostile script)
  is not retried forever.

The server must run its triggers and actions services (on by default).
"""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from prefect import get_client
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState
from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

from dsstar.errors import CrashLoop
from flows.alerts import upsert_automations

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "HEARTBEAT_EVENT",
    "RETRY_CRASHED",
    "SILENT_RUN",
    "check_crash_loop",
    "crash_retry_enabled",
    "ensure_worker_recovery",
    "silent_run_automation",
]

SILENT_RUN = "dsstar: silent run crashed"
RETRY_CRASHED = "dsstar: crashed run retried"
# What earlier versions called the first automation: it watched deployments' runs only, by
# Prefect's own heartbeats. It is removed where the new one is written.
_FORMER = ("dsstar: run lost its worker",)
HEARTBEAT_EVENT = "dsstar.run.heartbeat"
DEFAULT_TIMEOUT_S = 90.0
DEPLOYMENT_TAG = "dsstar"  # every dsstar deployment's tag (prefect.yaml, `dsstar serve`)
FLOW_NAME = "ds-star"

_OF_DSSTAR = {
    "prefect.resource.role": "tag",
    "prefect.resource.id": f"prefect.tag.{DEPLOYMENT_TAG}",
}
# The flow of the run: carried by its heartbeats and by every state the server records.
_OF_DS_STAR_FLOW = {"prefect.resource.role": "flow", "prefect.resource.name": FLOW_NAME}


def silent_run_automation(timeout_s: float) -> AutomationCore:
    """Mark Crashed a ds-star flow run whose heartbeats stopped for `timeout_s` seconds.
    Any event of the flow run (a heartbeat, a state: its end, whatever it is named) within
    the timeout keeps it alive. Prefect renders no template in a state's message, so it names
    the command by the flow run's name, whose first word is the run id unless a person named
    the run in the run form (then its log names the id)."""
    return AutomationCore(
        name=SILENT_RUN,
        description="A ds-star flow run that stopped sending heartbeats is marked Crashed.",
        trigger=EventTrigger(
            after={HEARTBEAT_EVENT},
            expect={HEARTBEAT_EVENT, "prefect.flow-run.*"},
            match={"prefect.resource.id": "prefect.flow-run.*"},
            match_related=_OF_DS_STAR_FLOW,  # type: ignore[arg-type]  # a dict is validated
            for_each={"prefect.resource.id"},
            posture=Posture.Proactive,
            threshold=1,
            within=timedelta(seconds=timeout_s),
        ),
        actions=[
            ChangeFlowRunState(
                state=StateType.CRASHED,
                message=f"no heartbeat for {timeout_s:g} s: the process running it died unseen"
                " (killed, out of memory, or its machine stopped); continue with: dsstar"
                " resume RUN_ID, the run id being the first word of this flow run's name (for a"
                " run named in the run form: the id its log names, `run ID: question`), or"
                " Retry a deployment's run",
            )
        ],
    )


def retry_automation() -> AutomationCore:
    """Schedule a crashed run of a dsstar deployment again: another worker resumes it."""
    return AutomationCore(
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


def ensure_worker_recovery(heartbeat_timeout_s: float) -> list[str]:
    """Create, or update by name, the two recovery automations; returns their names."""
    wanted = [silent_run_automation(heartbeat_timeout_s), retry_automation()]
    upsert_automations(wanted)
    drop_former()
    return [automation.name for automation in wanted]


def drop_former() -> None:
    """Remove the automations earlier versions made in place of `silent_run_automation`."""
    with get_client(sync_client=True) as client:
        for name in _FORMER:
            for automation in client.read_automations_by_name(name):
                client.delete_automation(automation.id)


def crash_retry_enabled() -> bool:
    """Whether the server retries crashed dsstar runs (its automation exists and is on)."""
    with get_client(sync_client=True) as client:
        return any(a.enabled for a in client.read_automations_by_name(RETRY_CRASHED))


def check_crash_loop(flow_run_id: UUID, max_crash_retries: int, run_id: str) -> None:
    """Refuse to resume a flow run that crashed more than `max_crash_retries` times. Each
    Crashed state in its history is one crash. Asked of a flow run a worker starts (the retry
    automation, the UI's Retry button, a restarted worker); `dsstar resume`, a person's
    choice, continues the same flow run without asking."""
    with get_client(sync_client=True) as client:
        states = client.read_flow_run_states(flow_run_id)
    crashes = [state for state in states if state.type == StateType.CRASHED]
    if len(crashes) > max_crash_retries:
        last = crashes[-1].message or "no reason given"
        raise CrashLoop(
            f"this flow run crashed {len(crashes)} times (last: {last}), more than"
            f" DSSTAR_MAX_CRASH_RETRIES={max_crash_retries}: it is not resumed again. Find what"
            f" ends its worker (memory, a script), then continue with: dsstar resume {run_id}"
        )
