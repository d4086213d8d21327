"""A ds-star flow run's signs of life, so that it ends in a true state however its process
ends, with nobody watching.

On a Prefect server that lasts (not a command's temporary one, which dies with it), while a
run works:

- a thread sends the event `dsstar.run.heartbeat` for its flow run, every third of the
  timeout of the server's automation `dsstar: silent run crashed` (flows/workers.py), at most
  every 30 s; the automation marks the flow run Crashed when they stop without a final state
  (the process or its machine died). The run makes the automation where the server has none
  (once per process and server), so every run on the server is covered, whoever started it;
- the process's watcher (flows/_watcher.py) knows of the run, and settles it (flows/_settle.py)
  the moment the process dies without a word, task runs included.

dsstar sends heartbeats of its own rather than relying on Prefect's (PREFECT_FLOWS_HEARTBEAT_
FREQUENCY, every 180 s by default and never below 30 s): their pace then follows the timeout
wherever the run runs, a worker whose environment does not set Prefect's included.
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prefect import get_client
from prefect.context import FlowRunContext
from prefect.events import emit_event
from prefect.events.schemas.automations import Automation

from dsstar.execution.scratch import owner
from flows import _story as story
from flows._settle import crash_task_runs
from flows._watcher import unwatch, watch
from flows.alerts import upsert_automations
from flows.workers import (
    DEFAULT_TIMEOUT_S,
    HEARTBEAT_EVENT,
    SILENT_RUN,
    drop_former,
    silent_run_automation,
)
from tasks.slots import server_url

__all__ = ["MOST_BEAT_S", "kept_alive", "silent_run_timeout"]

MOST_BEAT_S = 30.0
_log = logging.getLogger("dsstar.flows")
_timeouts: dict[str, float] = {}  # by API URL: the silent-run timeout found or set there
_lock = threading.Lock()


@contextmanager
def kept_alive(run_id: str, storage: str, wanted_timeout: float | None) -> Iterator[None]:
    """While the block runs, this flow run sends heartbeats and this process's watcher knows
    of it; after it, the flow run reports its own end. A block cut short by a signal crashes
    the task runs it leaves running (calls in other threads, which the stopping process
    drops). Nothing on a temporary server, or outside a flow run."""
    context = FlowRunContext.get()
    url = server_url()
    if context is None or context.flow_run is None or url is None:
        yield
        return
    try:
        timeout = silent_run_timeout(url, wanted_timeout)
    except Exception as exc:  # e.g. an API key without rights over automations
        story.say("the automation %r could not be checked: %s", SILENT_RUN, exc,
                  level=logging.WARNING)  # fmt: skip
        timeout = DEFAULT_TIMEOUT_S
    flow_run = context.flow_run
    beat = _Heartbeat(context, every=min(timeout / 3, MOST_BEAT_S))
    me = owner()
    watch(
        {
            "flow_run_id": str(flow_run.id),
            "run_id": run_id,
            "storage": storage,
            "attempt": flow_run.run_count,
            "api": url,
            "pid": me["pid"],
            "host": me["host"],
        }
    )
    try:
        yield
    except Exception:
        raise
    except BaseException:  # a signal: calls in other threads are dropped, never to end
        crash_task_runs(flow_run.id, flow_run.run_count, "its run was stopped by a signal")
        raise
    finally:
        beat.stop()
        unwatch(str(flow_run.id))


def silent_run_timeout(url: str, wanted: float | None) -> float:
    """The timeout of the automation that marks silent runs Crashed on the server at `url`:
    made there (with `wanted`, else the default) when missing or written by an earlier
    version, and changed to `wanted` when given and different. Asked of the server once per
    process (while `wanted` stays the same)."""
    with _lock:
        known = _timeouts.get(url)
        if known is not None and wanted in (None, known):
            return known
        with get_client(sync_client=True) as client:
            found = client.read_automations_by_name(SILENT_RUN)
        current = _timeout(found[0]) if found else None
        timeout = wanted or current or DEFAULT_TIMEOUT_S
        if current is None or timeout != current or not _as_made(found[0], current):
            upsert_automations([silent_run_automation(timeout)])
            drop_former()
        _timeouts[url] = timeout
        return timeout


def _timeout(automation: Automation) -> float | None:
    within = getattr(automation.trigger, "within", None)
    return within.total_seconds() if within else None


def _as_made(automation: Automation, timeout: float) -> bool:
    """Whether the automation is the one this version makes (a person may have turned it
    off: that stays so)."""
    wanted = silent_run_automation(timeout)
    return automation.trigger.model_dump(exclude={"id"}) == wanted.trigger.model_dump(
        exclude={"id"}
    ) and [a.model_dump() for a in automation.actions] == [a.model_dump() for a in wanted.actions]


class _Heartbeat:
    """A daemon thread that sends the flow run's heartbeat now, then every `every` s."""

    def __init__(self, context: FlowRunContext, every: float) -> None:
        flow_run = context.flow_run
        assert flow_run is not None
        self.every = every
        self.resource = {
            "prefect.resource.id": f"prefect.flow-run.{flow_run.id}",
            "prefect.resource.name": flow_run.name,
        }
        self.related: list[dict[str, Any]] = [
            {
                "prefect.resource.id": f"prefect.flow.{flow_run.flow_id}",
                "prefect.resource.role": "flow",
                "prefect.resource.name": context.flow.name,
            }
        ]
        self.stopped = threading.Event()
        # The thread sees this one's settings (the Prefect API URL), as Prefect's own does.
        run = contextvars.copy_context().run
        self.thread = threading.Thread(
            target=run, args=(self._beat,), daemon=True, name=f"dsstar-heartbeat-{os.getpid()}"
        )
        self.thread.start()

    def _beat(self) -> None:
        while True:
            try:
                emit_event(HEARTBEAT_EVENT, resource=self.resource, related=self.related)
            except Exception:  # a beat lost is one beat: the next may go through
                _log.debug("heartbeat not sent", exc_info=True)
            if self.stopped.wait(self.every):
                return

    def stop(self) -> None:
        """No more beats (the flow run reports its end next, or its process is going)."""
        self.stopped.set()
        self.thread.join(timeout=2)
