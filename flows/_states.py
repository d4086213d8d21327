"""The Prefect state a ds-star flow run ends in, and Crashed for a run whose process died.

What the UI, automations and dashboards see follows the run's outcome (`status` in
run.json): an answer is Completed, named for how it was answered (Verified, MaxRounds,
Accepted, NotApplicable); `failed` is Failed with its reason; `over_budget` is Failed under
its own name (OverBudget) with what was spent; a person's stop is Cancelled.
Each of these states carries the run's result (`dsstar run --json`) as its data (in a
`RunEnded` error for Failed and Cancelled, which calling the flow raises), so the CLI, the
nightly batch and the benchmark read it from any of them. A Failed state's message ends
with the command that continues the run; the UI's Retry on a deployment's Failed run
schedules the same flow run again, which resumes the same run id (see docs/operations.md).

A run whose process was killed reports nothing: flows/_alive.py, _watcher.py and _settle.py
end its flow run all the same.
"""

from __future__ import annotations

from typing import Any

from prefect.client.schemas.objects import State
from prefect.states import Cancelled, Completed, Crashed, Failed

from dsstar.algorithm.verdict import ANSWERED, Status
from dsstar.errors import RunEnded
from dsstar.execution.failure import exception_line
from dsstar.text import log_text

__all__ = [
    "ANSWERED_STATES",
    "OVER_BUDGET_STATE",
    "failed_state",
    "final_state",
    "interrupted_state",
    "one_line",
    "resume_hint",
]

OVER_BUDGET_STATE = "OverBudget"  # a Failed state's name: resumable with a higher ceiling
# A Completed state's name says how the run answered, so the UI's run list tells a verified
# answer from one the rounds ran out on.
ANSWERED_STATES = {
    Status.VERIFIED: "Verified",
    Status.MAX_ROUNDS: "MaxRounds",
    Status.ACCEPTED: "Accepted",
    Status.NOT_APPLICABLE: "NotApplicable",
    Status.REPORTED: "Reported",  # a report's (flows/report.py)
}

_MOST = 500  # a state message is one line of at most this many characters


def one_line(text: str | None, fallback: str) -> str:
    """The first non-empty line of `text`, bounded, valid UTF-8 (Prefect sends it as JSON).
    Plain text (`log_text`): the UI shows a state message as it is, but Prefect's own log line
    "Finished in state Failed('...')" carries it to the Logs tab."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    line = lines[0] if lines else fallback
    return log_text(line if len(line) <= _MOST else line[: _MOST - 3] + "...")


def final_state(result: dict[str, Any]) -> State:
    """What the ds-star flow returns for a run that ended with `result`: a state that says
    what happened and carries it (Completed, named for the outcome, for an answer)."""
    status = result["status"]
    if status in ANSWERED:
        rounds = result.get("rounds") or 0
        message = f"{status} after {rounds} round{'' if rounds == 1 else 's'}"
        if status == Status.REPORTED:  # a report's "plan" is its sub-questions
            message = f"reported from {len(result.get('plan') or [])} sub-questions"
        return Completed(name=ANSWERED_STATES[status], message=message, data=result)
    if status == Status.STOPPED:
        rounds = result.get("rounds") or 0
        message = f"stopped by a person after round {rounds - 1:02d}" if rounds else "stopped"
        return Cancelled(message=message, data=RunEnded(message, result))
    if status == Status.OVER_BUDGET:
        message = one_line(result.get("error"), "over budget")
        return Failed(name=OVER_BUDGET_STATE, message=message, data=RunEnded(message, result))
    message = one_line(result.get("error"), f"the run ended {status}")
    message = f"{message}; {resume_hint(result['run_id'])}"
    return Failed(message=message, data=RunEnded(message, result))


def failed_state(run_id: str, exc: Exception) -> State:
    """The Failed state of a run that stopped on `exc`, after it was stored: its reason and
    how to continue it. Calling the flow raises `exc`, as if the flow had raised it."""
    message = one_line(exception_line(exc), type(exc).__name__)
    if "dsstar resume" not in message:
        message = f"{message}; {resume_hint(run_id)}"
    return Failed(message=message, data=exc)


def interrupted_state(run_id: str, reason: str | None, exc: BaseException) -> State:
    """The Crashed state of a run this command's own stop interrupted (SIGINT, SIGTERM:
    run.json says `interrupted`): which signal, and how to continue. Calling the flow raises
    `exc`, so the command still stops."""
    message = f"{one_line(reason, 'interrupted')}; {resume_hint(run_id)}"
    return Crashed(message=message, data=exc)


def resume_hint(run_id: str) -> str:
    """The command that continues a run, as state messages end with it."""
    return f"continue with: dsstar resume {run_id}"
