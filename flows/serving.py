"""Serving the deployments from one process (`dsstar serve`), and stopping it cleanly: a
question on demand, the nightly batch, a report on demand and, given a report's question,
a nightly report.

Every deployment refuses a form Prefect's server could store but not read back
(`flows._forms.form_deployment`), and the runner repairs such a flow run when one is there
anyway (`flows._unreadable`): one bad flow run never stops it.

Prefect's `serve` handles SIGTERM by calling the runner's sync `stop()` from inside its own
event loop, where that returns a coroutine nobody awaits ("coroutine 'Runner.astop' was never
awaited") and exits at once. Here SIGTERM and SIGINT ask the loop to stop the runner; the
runner then leaves its context, which pauses the deployments' schedules, and `serve_deployments`
returns so that the command can say so.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
from prefect import get_client
from prefect.client.schemas.actions import DeploymentUpdate
from prefect.client.schemas.objects import FlowRun, State
from prefect.runner import Runner
from prefect.schedules import Cron

from dsstar.inputs.form import run_id_in
from dsstar.settings import Settings
from flows._forms import form_deployment
from flows._settle import exit_cause
from flows._states import resume_hint
from flows._unreadable import repair_unreadable
from flows.ds_star import derived_run_id, ds_star
from flows.nightly import ds_star_nightly
from flows.report import ds_star_report
from tasks.slots import ensure_limit, ensure_rate, server_url

__all__ = ["serve_deployments", "share_limits"]


def share_limits(settings: Settings) -> list[str] | None:
    """On a shared server, create (or reset) the global limits all its runs share, and say
    which; None on this command's own temporary server, whose runs keep to their own bounds
    (see tasks.slots)."""
    if server_url() is None:
        return None
    said = []
    for kind, size in (("exec", settings.max_parallel), ("llm", settings.llm_concurrency)):
        said.append(f"global concurrency limit {ensure_limit(kind, size, reset=True)}: {size}")
    if settings.llm_rpm:
        rate = ensure_rate(settings.llm_rpm, reset=True)
        said.append(f"global rate limit {rate}: {settings.llm_rpm} LLM requests per minute")
    return said


class _Runner(Runner):
    """A Runner whose SIGTERM (and SIGINT) stop it from inside its own event loop, and that
    one flow run Prefect's server cannot read back never stops (`flows._unreadable`), and
    that says in dsstar's words why a question's or a report's run crashed and how to
    continue it."""

    questions: UUID | None = None  # the ds-star deployment's id
    reports: frozenset[UUID] = frozenset()  # the ds-star-report deployments' ids

    async def _propose_crashed_state(self, flow_run: FlowRun, message: str) -> State | None:
        if flow_run.deployment_id == self.questions or flow_run.deployment_id in self.reports:
            run_id = run_id_in(flow_run.parameters) or derived_run_id(flow_run)
            cause = exit_cause(message)
            message = f"its process {cause}; {resume_hint(run_id)}, or Retry"
        return await super()._propose_crashed_state(flow_run, message)

    def handle_sigterm(self, *args: Any, **kwargs: Any) -> None:
        loop = self._loop
        if loop is None or not self.started:  # not serving yet: nothing to unwind
            raise SystemExit(0)
        # A signal handler runs between two steps of the loop: schedule the stop there.
        loop.call_soon_threadsafe(lambda: loop.create_task(self.astop()))

    async def __aenter__(self) -> _Runner:
        entered = await super().__aenter__()
        await self._repair(newest=1000)  # one left from before this process: its restart heals
        poller = self._scheduled_run_poller
        poll, last = poller._get_scheduled_flow_runs, [time.monotonic()]

        async def polled() -> list[Any]:
            try:
                runs = await poll()
            except httpx.HTTPStatusError as exc:
                # Prefect's poll loop stops serving after three failed polls in a row.
                if exc.response.status_code < 500 or not await self._repair(scheduled=True):
                    raise
                runs = await poll()
            if time.monotonic() - last[0] > _CHECK_NEWEST_S:  # the run list, kept answering
                last[0] = time.monotonic()
                await self._repair(newest=_NEWEST)
            return runs

        poller._get_scheduled_flow_runs = polled  # type: ignore[method-assign]
        return entered

    async def _repair(self, scheduled: bool = False, newest: int = 1000) -> list[UUID]:
        """Make the unreadable flow runs readable: the scheduled runs of these deployments,
        or the `newest` of the server. A failure here is said, never raised."""
        chosen: dict[str, Any] = {"newest": newest}
        if scheduled:
            ids = self._deployment_registry.get_deployment_ids()
            chosen = {"deployment_ids": ids, "state_types": ["SCHEDULED"]}
        try:
            return await repair_unreadable(self._client, say=self._logger.warning, **chosen)
        except Exception as exc:  # the server busy or gone: the poll says so itself
            self._logger.warning("could not look for unreadable flow runs: %s", exc)
            return []


_CHECK_NEWEST_S = 60.0  # how often the newest flow runs are checked for unreadable ones
_NEWEST = 50  # those the run list shows first


def _served_from_here(deployment_id: UUID) -> None:
    """Record that the deployment's code is where this process runs ("."), as Prefect does
    when it creates a served deployment. When it updates one of the same name it leaves the
    path as it was: one made by `prefect deploy` for a work pool has none, and every run this
    process started for it would crash looking for the flow's code under "None"."""
    with get_client(sync_client=True) as client:
        client.update_deployment(deployment_id, DeploymentUpdate(path="."))


def serve_deployments(
    questions_file: Path,
    cron: str,
    timezone: str,
    limit: int,
    report: dict[str, Any] | None = None,
) -> None:
    """Serve ds-star/on-demand, ds-star-nightly/nightly and ds-star-report/report-on-demand
    (and, given `report`'s question, data and guidelines, ds-star-report/report-nightly on
    the same schedule) until SIGTERM or SIGINT; returns once the runner has stopped and
    paused the deployments' schedules."""
    on_demand = form_deployment(
        ds_star,
        name="on-demand",
        description="Answer one question about a folder or bucket of data files.",
        tags=["dsstar"],
    )
    nightly = form_deployment(
        ds_star_nightly,
        name="nightly",
        description="Answer every question of the nightly question set.",
        schedules=[Cron(cron, timezone=timezone, slug="nightly")],
        parameters={"questions_file": str(questions_file)},
        tags=["dsstar"],
    )
    reports = [form_deployment(
        ds_star_report,
        name="report-on-demand",
        description="Answer an open question about a folder or bucket of data files with a"
        " report.",
        tags=["dsstar", "report"],
    )]  # fmt: skip
    if report:
        reports.append(form_deployment(
            ds_star_report,
            name="report-nightly",
            description="Answer the same open question with a report every night.",
            schedules=[Cron(cron, timezone=timezone, slug="report-nightly")],
            parameters=report,
            tags=["dsstar", "report"],
        ))  # fmt: skip
    runner = _Runner(pause_on_shutdown=True, limit=limit)
    runner.questions = runner.add_deployment(on_demand)
    runner.reports = frozenset(runner.add_deployment(deployment) for deployment in reports)
    for deployment_id in (runner.questions, runner.add_deployment(nightly), *runner.reports):
        _served_from_here(deployment_id)
    if threading.current_thread() is threading.main_thread():
        # Ctrl-C the same way as SIGTERM (start() installs the SIGTERM handler itself).
        signal.signal(signal.SIGINT, runner.handle_sigterm)
    asyncio.run(runner.start())
