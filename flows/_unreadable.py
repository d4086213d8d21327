"""Flow runs that Prefect's server stores but cannot read back, found and made readable.

Prefect's server stores a flow run's parameters, job variables and state data as JSON of any
depth, but its answers go through pydantic's serializer, which stops at about 255 levels. A
flow run holding a value nested deeper (a 699-byte request suffices) is stored, then every
answer that would include it fails with a 500: the request that created it, the run list
(`/flow_runs/filter`), a worker's poll for scheduled runs; `dsstar serve` stopped after three
such polls, and again after each restart. dsstar's deployments refuse such a form before
Prefect stores it (`flows._forms.closed_schema`), but a client may turn that check off for
its flow run, or create one without a deployment.

`repair_unreadable` finds such flow runs by their ids alone (the UI's history endpoint
answers without parameters), narrowing down the lists that fail to be read, and makes each
readable again: its parameters and (while it is Scheduled) job variables cleared, its state
set to Failed saying why; a run still unreadable after that is deleted. `dsstar serve` calls
it when its poll fails, at its start and once a minute for the newest runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from uuid import UUID

import httpx
from prefect.client.orchestration import PrefectClient
from prefect.states import Failed

__all__ = ["REPAIRED", "repair_unreadable"]

REPAIRED = (
    "dsstar: this flow run could not be read back from Prefect's server (a parameter, job"
    " variable or state nested deeper than its answers go), which failed the run list and the"
    " workers' polls. Its parameters and job variables were cleared and it was not run:"
    " create it again with a valid form."
)
_CHUNK = 200  # flow runs read back in one request while narrowing down


async def repair_unreadable(
    client: PrefectClient,
    *,
    deployment_ids: Iterable[UUID] = (),
    state_types: Iterable[str] = (),
    newest: int = 1000,
    say: Callable[[str], Any] = print,
) -> list[UUID]:
    """Find the flow runs among the `newest` (by expected start, latest first; of those
    deployments and in those states, when given) that the server cannot read back, make
    each readable again and return their ids."""
    ids = await _run_ids(client, list(deployment_ids), list(state_types), newest)
    broken = [i for chunk in _chunks(ids, _CHUNK) for i in await _unreadable(client, chunk)]
    for flow_run_id in broken:
        await _repair(client, flow_run_id, say)
    return broken


async def _run_ids(
    client: PrefectClient, deployment_ids: list[UUID], state_types: list[str], newest: int
) -> list[UUID]:
    body: dict[str, Any] = {"sort": "EXPECTED_START_TIME_DESC", "limit": min(newest, 1000)}
    if deployment_ids:
        body["deployments"] = {"id": {"any_": [str(i) for i in deployment_ids]}}
    if state_types:
        body["flow_runs"] = {"state": {"type": {"any_": state_types}}}
    answer = await client.request("POST", "/ui/flow_runs/history", json=body)
    return [UUID(row["id"]) for row in answer.json()]


def _chunks(ids: list[UUID], size: int) -> list[list[UUID]]:
    return [ids[n : n + size] for n in range(0, len(ids), size)]


async def _unreadable(client: PrefectClient, ids: list[UUID]) -> list[UUID]:
    """The flow runs of `ids` that cannot be read back: a list that reads is fine, a list
    that fails is halved until the ones that fail alone are found."""
    if not ids or await _readable(client, ids):
        return []
    if len(ids) == 1:
        return ids
    half = len(ids) // 2
    return await _unreadable(client, ids[:half]) + await _unreadable(client, ids[half:])


async def _readable(client: PrefectClient, ids: list[UUID]) -> bool:
    body = {"flow_runs": {"id": {"any_": [str(i) for i in ids]}}, "limit": len(ids)}
    try:
        await client.request("POST", "/flow_runs/filter", json=body)
    except httpx.HTTPStatusError as exc:
        if exc.response.status_code < 500:
            raise
        return False
    return True


async def _repair(client: PrefectClient, flow_run_id: UUID, say: Callable[[str], Any]) -> None:
    # Cleared first, each on its own: Prefect's server changes the state only of a flow run
    # it can read, and takes job variables only from a run still Scheduled.
    await _tried(client.update_flow_run(flow_run_id, parameters={}))
    await _tried(client.update_flow_run(flow_run_id, job_variables={}))
    failed = await _tried(
        client.set_flow_run_state(flow_run_id, Failed(message=REPAIRED), force=True)
    )
    if failed and await _readable(client, [flow_run_id]):
        say(f"flow run {flow_run_id} could not be read back: cleared and marked Failed")
    else:  # the deep value is where nothing clears it (its context, an earlier state)
        await client.delete_flow_run(flow_run_id)
        say(f"flow run {flow_run_id} could not be read back, even cleared: deleted")


async def _tried(call: Awaitable[Any]) -> bool:
    """Whether the server did what `call` asks (False: it answered with an error)."""
    try:
        await call
    except httpx.HTTPStatusError:
        return False
    return True
