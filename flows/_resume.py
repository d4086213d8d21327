"""A stored run continued in its own flow run: `dsstar resume RUN_ID` (and `dsstar run`, or
`dsstar.ask`, given the id of a stored run) runs the run's earlier flow run again, as the
UI's Retry does for a deployment's run. Its run count goes up and its state history shows
every attempt; the server holds one flow run per run.

A new flow run is made instead when there is no earlier one to take up: the run was never
stored, ran on a command's temporary server (gone with it), on another server, finished with
an answer, or may still be running (then its claim refuses the new attempt).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from prefect import get_client
from prefect.client.schemas.objects import FlowRun

from dsstar.errors import DSStarError
from dsstar.inputs.form import run_id_in
from dsstar.keys import run_record
from dsstar.records.state import FINISHED, liveness
from dsstar.settings import Settings
from dsstar.storage import Store
from flows._settle import settle
from tasks.slots import server_url

__all__ = ["derived_run_id", "earlier_flow_run", "take_up"]


def earlier_flow_run(settings: Settings, run_id: str) -> FlowRun | None:
    """The flow run the stored run `run_id` ran in, when this one continues it: settled
    first (an attempt whose process died unseen is Crashed, its task runs too)."""
    if server_url() is None:  # a temporary server: the earlier one went with its command
        return None
    try:
        record = Store(settings.storage).read_json(run_record(run_id))
    except (FileNotFoundError, DSStarError):
        return None
    if record.get("status") in FINISHED or not record.get("flow_run_id"):
        return None
    if liveness(record) not in (None, "stale"):  # alive, or unknown: the claim decides
        return None
    try:
        with get_client(sync_client=True) as client:
            flow_run = client.read_flow_run(UUID(str(record["flow_run_id"])))
    except Exception:  # not on this server (ObjectNotFound), or unreachable
        return None
    if run_id != (run_id_in(flow_run.parameters) or derived_run_id(flow_run)):
        return None  # the id names another run there: never continued in it
    if flow_run.state is not None and flow_run.state.is_completed():
        return None
    where = f"pid {record.get('pid')} on {record.get('host')}"
    settle(record, f"its process ({where}) is gone; found by the run that continues it")
    with get_client(sync_client=True) as client:
        return client.read_flow_run(flow_run.id)


def derived_run_id(run: FlowRun) -> str:
    """The run id of a flow run whose parameters name none: its creation time and id."""
    return f"{run.created:%Y%m%d-%H%M%S}-{str(run.id)[:6]}"


def take_up(flow_run: FlowRun, parameters: dict[str, Any]) -> None:
    """Record the parameters the next attempt runs with (a resume may change the model or a
    ceiling), so that the UI shows them and a later Retry keeps them."""
    if flow_run.parameters != parameters:
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run.id, parameters=parameters)
