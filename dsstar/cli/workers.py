"""`dsstar workers`: prepare a shared Prefect server for several workers on several machines
(docs/workers.md). The automations themselves are made by `flows` (flows/workers.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from dsstar.cli._app import LLMConcurrencyOpt, MaxParallelOpt, app, err, fail_usage, load_settings
from dsstar.errors import DSStarError, UsageError


@app.command()
def workers(
    heartbeat_timeout: Annotated[
        float,
        typer.Option(
            min=10,
            help="Seconds without a heartbeat after which a dsstar flow run counts as lost with"
            " its process or machine: marked Crashed, then, a deployment's run, retried on"
            " another worker. Runs beat every third of it, at most every 30 s.",
        ),
    ] = 90.0,
    max_parallel: MaxParallelOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
) -> None:
    """Set up the Prefect server (PREFECT_API_URL) for several workers sharing one job: the
    global concurrency limits every worker's runs share (dsstar-exec, dsstar-llm, and
    dsstar-llm-rpm with DSSTAR_LLM_RPM), created or reset to these values, and two
    automations, created or updated by name: a dsstar flow run whose heartbeats stop is
    marked Crashed, and a crashed run of a dsstar deployment is scheduled again, so that
    another worker resumes it from its stored work. It also closes the run form of each
    dsstar deployment `prefect deploy` made (no parameter outside the form is stored; run it
    again after each `prefect deploy`). Running it again changes nothing but the values
    given. See docs/workers.md.

    Example: dsstar workers --heartbeat-timeout 90 --llm-concurrency 8
    """
    from flows import api_configured

    try:
        settings = load_settings(max_parallel=max_parallel, llm_concurrency=llm_concurrency)
        if not api_configured():
            raise UsageError(
                "dsstar workers sets up a server that lasts, which the workers share: set"
                " PREFECT_API_URL (e.g. http://prefect.internal:4200/api)"
            )
    except DSStarError as exc:
        fail_usage(str(exc))
    from flows import close_forms, ensure_worker_recovery, prefect_api, share_limits

    with prefect_api():
        try:
            names = ensure_worker_recovery(heartbeat_timeout)
        except DSStarError as exc:
            fail_usage(str(exc))
        for line in [*(share_limits(settings) or []), *close_forms()]:
            err.print(line, highlight=False)
    for name in names:
        err.print(f"automation {name!r} (heartbeat timeout {heartbeat_timeout:g} s)",
                  highlight=False)  # fmt: skip
