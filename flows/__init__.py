"""The Prefect job: flows that put the core to work, and the one face the CLI uses.

    run_question        one question: the ds-star flow, run in this process
    run_report          an open question: the ds-star-report flow, run in this process
    describe_files      step 1 alone over a data root: the ds-star-describe flow
    ds_star_bench       a benchmark suite (with task_dicts): the ds-star-bench flow; its
                        tasks' forms judged by the worker's policy, or with own_bench by none
                        (the suite its caller chose: `dsstar bench run`)
    serve_deployments   `dsstar serve`: both deployments from one process (with share_limits)
    inspect_slots       the shared concurrency limits and who holds their slots
    prefect_api         the Prefect API a command talks to (with open_api_warning, and
                        start_prefect_api, which starts a temporary one early)
    answer_in_terminal  human guidance asked at the terminal instead of the Prefect UI
    run_console         what a run started from Python shows on the console (dsstar.ask)
    ensure_alerts       the nightly alerts' automations, created or updated by name (with
                        find_notification_blocks, ALERT_NAMES, api_configured)
    ensure_worker_recovery  the automations that retry a run whose worker died elsewhere
    close_forms         the run forms of the deployments `prefect deploy` made, closed: no
                        parameter outside the form is stored
    settle_run          the flow run of a run whose process is gone, ended as run.json says
                        (Crashed with how to continue, Completed when it was answered)

Modules whose names start with `_` are this package's own; nothing else imports them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names below are, for readers and tools
    from flows._forms import close_forms
    from flows._guidance import answer_in_terminal
    from flows._settle import settle as settle_run
    from flows.alerts import ALERT_NAMES, ensure_alerts, find_notification_blocks
    from flows.api_server import api_configured, open_api_warning, prefect_api
    from flows.api_server import start_early as start_prefect_api
    from flows.bench import ds_star_bench, own_bench, task_dicts
    from flows.console import run_console
    from flows.describe import describe_files
    from flows.ds_star import run_question
    from flows.report import run_report
    from flows.serving import serve_deployments, share_limits
    from flows.workers import ensure_worker_recovery
    from tasks.slots import inspect as inspect_slots

# Each name is imported when first used: a command loads only the flows it runs (loading
# them all costs about half a second of the CLI's start).
_HOMES = {
    "answer_in_terminal": ("flows._guidance", "answer_in_terminal"),
    "close_forms": ("flows._forms", "close_forms"),
    "ds_star_bench": ("flows.bench", "ds_star_bench"),
    "own_bench": ("flows.bench", "own_bench"),
    "task_dicts": ("flows.bench", "task_dicts"),
    "describe_files": ("flows.describe", "describe_files"),
    "run_question": ("flows.ds_star", "run_question"),
    "run_report": ("flows.report", "run_report"),
    "run_console": ("flows.console", "run_console"),
    "open_api_warning": ("flows.api_server", "open_api_warning"),
    "prefect_api": ("flows.api_server", "prefect_api"),
    "start_prefect_api": ("flows.api_server", "start_early"),
    "serve_deployments": ("flows.serving", "serve_deployments"),
    "share_limits": ("flows.serving", "share_limits"),
    "inspect_slots": ("tasks.slots", "inspect"),
    "api_configured": ("flows.api_server", "api_configured"),
    "ALERT_NAMES": ("flows.alerts", "ALERT_NAMES"),
    "ensure_alerts": ("flows.alerts", "ensure_alerts"),
    "find_notification_blocks": ("flows.alerts", "find_notification_blocks"),
    "ensure_worker_recovery": ("flows.workers", "ensure_worker_recovery"),
    "settle_run": ("flows._settle", "settle"),
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'flows' has no attribute {name!r}")
    module, attribute = _HOMES[name]
    return getattr(importlib.import_module(module), attribute)


__all__ = [
    "ALERT_NAMES",
    "api_configured",
    "close_forms",
    "ensure_alerts",
    "ensure_worker_recovery",
    "find_notification_blocks",
    "answer_in_terminal",
    "describe_files",
    "ds_star_bench",
    "inspect_slots",
    "open_api_warning",
    "own_bench",
    "prefect_api",
    "run_console",
    "run_question",
    "run_report",
    "serve_deployments",
    "settle_run",
    "share_limits",
    "start_prefect_api",
    "task_dicts",
]
