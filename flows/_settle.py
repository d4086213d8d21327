"""A run whose process is gone, settled in Prefect: its flow run in the state its stored
run.json says, and no task run of that attempt left Running.

Whoever learns that a run's process is gone settles it: the watcher of that process
(flows/_watcher.py) the moment it dies, `dsstar runs list|show` when they find the run stale,
`dsstar resume` before it continues the flow run, and a run that takes over the claim of a
dead one. The heartbeat automation (flows/workers.py) marks a silent flow run Crashed when
nothing else did, but it cannot reach task runs; the next of these does.

A run whose answer was stored ends Completed (named for its outcome, as the flow names it),
whoever marked it Crashed before: the answer is what the run stands for, and `runs show` says
so too. A run left Crashed gets the card of a crashed run (flows/_crash_card.py), once per
crash, from whoever settles it first: it cannot write its own.
"""

from __future__ import annotations

import logging
import re
import signal
from typing import Any
from uuid import UUID

from prefect import get_client
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
    TaskRunFilter,
    TaskRunFilterState,
    TaskRunFilterStateType,
)
from prefect.client.schemas.objects import FlowRun, State, StateType
from prefect.states import Cancelled, Completed, Crashed, Failed

from dsstar.algorithm.verdict import ANSWERED, Status
from flows._crash_card import publish_crash_card
from flows._states import ANSWERED_STATES, OVER_BUDGET_STATE, one_line, resume_hint

__all__ = [
    "crash_earlier_attempts",
    "crash_task_runs",
    "ended_state",
    "exit_cause",
    "settle",
]

_log = logging.getLogger("dsstar.flows")
_UNFINISHED = [
    StateType.SCHEDULED,
    StateType.PENDING,
    StateType.RUNNING,
    StateType.PAUSED,
    StateType.CANCELLING,
]


def exit_cause(message: str) -> str:
    """What ended a process, from Prefect's report of its exit ("... exited with non-zero
    status code -9."): the signal that killed it, by name, else its exit code."""
    found = re.search(r"status code (-?\d+)", message)
    if found is None:
        return "ended without reporting"
    code = int(found.group(1))
    signum = -code if code < 0 else code - 128 if code > 128 else None
    if signum == signal.SIGKILL:
        return "was killed by SIGKILL (kill -9, or the kernel when out of memory)"
    try:
        return f"was killed by {signal.Signals(signum).name}" if signum else f"exited {code}"
    except ValueError:  # no such signal: the code as it is
        return f"exited {code}"


def ended_state(record: dict[str, Any], cause: str, next_step: str | None = None) -> State:
    """The state of a flow run whose process is gone, by its stored `record` (run.json):
    what the run stored of its end, else Crashed for `cause` (why it is known to be gone).
    The message ends with `next_step`, by default the command that continues the run."""
    status, run_id = record.get("status"), str(record.get("run_id"))
    error = one_line(record.get("error"), f"the run ended {status}")
    next_step = next_step or resume_hint(run_id)
    if status in ANSWERED:
        message = f"answered ({status}); its process ended before it said so"
        return Completed(name=ANSWERED_STATES[status], message=message)
    if status == Status.STOPPED:
        return Cancelled(message="stopped by a person")
    if status == Status.OVER_BUDGET:
        return Failed(name=OVER_BUDGET_STATE, message=error)
    if status == Status.FAILED:
        return Failed(message=f"{error}; {next_step}")
    if status == Status.INTERRUPTED:  # a signal dsstar caught: run.json names it
        return Crashed(message=f"{error}; {next_step}")
    return Crashed(message=f"{one_line(cause, 'its process is gone')}; {next_step}")


def settle(
    record: dict[str, Any],
    cause: str,
    attempt: int | None = None,
    next_step: str | None = None,
    storage: str | None = None,
) -> None:
    """Settle the flow run of `record` (run.json of a run whose process is gone): end it in
    `ended_state` unless it ended already (a Crashed one becomes Completed when the answer was
    stored), crash the task runs its dead attempt left running, and give it the card of a
    crashed run when it is left Crashed without one since (written from the run.json in
    `storage`, by default the storage `record` names). `attempt`: the flow run's run count
    when that process ran it; a flow run another attempt took up since (a retry) keeps its
    state. Never raises: the flow run may live on another Prefect server (a command's
    temporary one), or none."""
    flow_run_id = record.get("flow_run_id")
    if not flow_run_id:
        return
    try:
        with get_client(sync_client=True) as client:
            flow_run = client.read_flow_run(UUID(str(flow_run_id)))
            taken_up = attempt is not None and flow_run.run_count > attempt  # by a retry
            if not taken_up:
                _end(client, flow_run, ended_state(record, cause, next_step))
            _crash_task_runs(
                client,
                flow_run.id,
                attempt or flow_run.run_count,
                "its flow run's process died while it ran",
            )
    except Exception as exc:  # unreachable API, unknown flow run: it stays as it was
        _log.debug("flow run %s not settled: %s", flow_run_id, exc)
        return
    if not taken_up:  # why it crashed: run.json's reason for a stop dsstar caught (a signal)
        why = record.get("error") if record.get("status") == Status.INTERRUPTED else None
        publish_crash_card(record, str(why or cause), storage)


def crash_earlier_attempts(flow_run_id: str | UUID, run_count: int) -> None:
    """At the start of attempt `run_count` of a flow run: crash the task runs an earlier
    attempt left running (its process died; no one else may have said so). Never raises."""
    crash_task_runs(
        flow_run_id,
        run_count - 1,
        "left running by an earlier attempt of its flow run, whose process died",
    )


def crash_task_runs(flow_run_id: str | UUID, attempt: int, message: str) -> None:
    """Crash the unfinished task runs of `flow_run_id` made by `attempt` or before (their
    process is gone, or going: they will never report an end). Never raises."""
    try:
        with get_client(sync_client=True) as client:
            _crash_task_runs(client, UUID(str(flow_run_id)), attempt, message)
    except Exception as exc:
        _log.debug("task runs of flow run %s not settled: %s", flow_run_id, exc)


def _end(client: Any, flow_run: FlowRun, state: State) -> None:
    current = flow_run.state
    if current is None or current.is_scheduled():  # a retry is on its way: it runs again
        return
    if current.is_final() and not (current.is_crashed() and state.is_completed()):
        return
    client.set_flow_run_state(flow_run.id, state)


def _crash_task_runs(client: Any, flow_run_id: UUID, attempt: int, message: str) -> None:
    """Crash every unfinished task run of `flow_run_id` made by `attempt` or before."""
    left = client.read_task_runs(
        flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
        task_run_filter=TaskRunFilter(
            state=TaskRunFilterState(type=TaskRunFilterStateType(any_=_UNFINISHED))
        ),
    )
    for task_run in left:
        if (task_run.flow_run_run_count or 0) <= attempt:
            client.set_task_run_state(task_run.id, Crashed(message=message), force=True)
