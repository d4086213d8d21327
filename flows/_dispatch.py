"""A nightly batch spread over a work pool: each question as its own flow run of a ds-star
deployment, so that every worker polling the pool takes its share, then waited for.

Each question's flow run is created with an idempotency key made of the batch's run id and
the question's, so a retried (or crashed and restarted) batch finds the flow runs it made
before instead of starting each question twice. A question's flow run that failed is
retried in place, as the UI's Retry button does; one that finished is not run again.

A Crashed flow run is not the end while dsstar's crash-retry automation exists on the server
(`dsstar workers setup`, flows/workers.py): the automation schedules it again and another
worker resumes it. Without that automation, or when nothing moves it for `CRASH_GRACE_S`,
Crashed counts as failed.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from prefect import get_client
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import run_deployment
from prefect.states import Scheduled

from dsstar.errors import UsageError
from dsstar.storage import Store
from dsstar.views.report import finished_result

__all__ = ["CRASH_GRACE_S", "dispatch_questions"]

CRASH_GRACE_S = 300.0  # a crash retry starts within seconds; past this, nothing will
POLL_S = 2.0


def dispatch_questions(
    deployment: str, forms: list[Any], tags: list[str], store: Store
) -> list[dict[str, Any]]:
    """Run each RunForm of `forms` (each with its run id) as a flow run of `deployment`
    (`flow/deployment`), tagged `tags`; wait for them all and return their results in order:
    the run's result from storage, or `{"status": "failed", "error": ...}`."""
    from flows.workers import crash_retry_enabled

    check_deployment(deployment)
    retried = crash_retry_enabled()
    runs: dict[int, UUID] = {}
    results: dict[int, dict[str, Any]] = {}
    for n, form in enumerate(forms):
        finished = finished_result(store, form.run_id)
        if finished is not None:  # a retried batch: answered before
            results[n] = finished
            continue
        runs[n] = submit(deployment, form, tags, retried)
    for n, state_message in wait(runs, retried).items():
        run_id = forms[n].run_id
        results[n] = finished_result(store, run_id) or {
            "run_id": run_id,
            "status": "failed",
            "error": state_message,
        }
        results[n]["flow_run_id"] = str(runs[n])
    return [results[n] for n in range(len(forms))]


def check_deployment(name: str) -> None:
    """Only a deployment of the ds-star flow answers a question (UsageError otherwise)."""
    with get_client(sync_client=True) as client:
        try:
            deployment = client.read_deployment_by_name(name)
            flow = client.read_flow(deployment.flow_id)
        except Exception as exc:  # ObjectNotFound, or a malformed name
            raise UsageError(f"question_deployment {name!r}: no such deployment ({exc})") from exc
    if flow.name != "ds-star":
        raise UsageError(
            f"question_deployment {name!r} runs the flow {flow.name!r}, not ds-star:"
            " name a deployment of flows.ds_star:ds_star, e.g. ds-star/on-demand"
        )


def submit(deployment: str, form: Any, tags: list[str], crash_retried: bool) -> UUID:
    """Create the question's flow run (or find the one made by an earlier attempt of the
    batch); one that ended without an answer is scheduled again, unless it crashed and the
    crash-retry automation schedules it already."""
    flow_run = run_deployment(
        deployment,
        parameters=form.parameters(),
        timeout=0,  # return at once: the batch waits for all of them together
        tags=tags,
        idempotency_key=f"dsstar-question-{form.run_id}",
    )
    state = flow_run.state
    if state is not None and has_ended(flow_run, crash_retried) and not state.is_completed():
        with get_client(sync_client=True) as client:
            client.set_flow_run_state(
                flow_run.id, Scheduled(name="AwaitingRetry", message="retried batch"), force=True
            )
    return flow_run.id


def wait(runs: dict[int, UUID], crash_retried: bool) -> dict[int, str | None]:
    """Poll the flow runs until each has ended; returns their last state's message."""
    left, ended = dict(runs), {}
    with get_client(sync_client=True) as client:
        while left:
            for n, flow_run_id in list(left.items()):
                flow_run = client.read_flow_run(flow_run_id)
                if has_ended(flow_run, crash_retried):
                    ended[n] = flow_run.state.message if flow_run.state else None
                    del left[n]
            if left:
                time.sleep(POLL_S)
    return ended


def has_ended(flow_run: FlowRun, crash_retried: bool) -> bool:
    """Whether the flow run will not run again: a final state, but a Crashed one only when
    no automation retries it, or none has for CRASH_GRACE_S."""
    state = flow_run.state
    if state is None or not state.is_final():
        return False
    if not state.is_crashed() or not crash_retried:
        return True
    return (datetime.now(UTC) - state.timestamp).total_seconds() > CRASH_GRACE_S
