"""`dsstar alerts` and the `--notify` option of `dsstar serve`: the nightly questions' alerts
through Prefect notification blocks. The automations themselves are made by `flows`
(flows/alerts.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from dsstar.cli._app import app, err, fail_usage
from dsstar.errors import DSStarError, UsageError

NotifyOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--notify",
        metavar="BLOCK",
        help="Send the nightly alerts (answer changed, question failed, data contract broken)"
        " through this Prefect notification block, named block-type/name (e.g."
        " slack-webhook/team) or by its name alone. Repeat for several blocks. Needs"
        " PREFECT_API_URL: the block and the alert automations live on that server.",
    ),
]


def check_notify_server(notify: list[str] | None) -> None:
    """Alerts need a lasting server: the blocks are there, and a temporary server (no
    PREFECT_API_URL) would take the automations with it when the command ends."""
    if not notify:
        return
    from flows import api_configured

    if not api_configured():
        raise UsageError(
            "--notify needs a Prefect server that lasts, where the notification blocks are:"
            " set PREFECT_API_URL (e.g. prefect server start, then export"
            " PREFECT_API_URL=http://127.0.0.1:4200/api)"
        )


def set_up_alerts(notify: list[str]) -> None:
    """Create or update the alert automations to send through `notify`; exit 2 naming the
    block when one does not exist."""
    from flows import ensure_alerts

    try:
        names = ensure_alerts(notify)
    except DSStarError as exc:
        fail_usage(str(exc))
    blocks = ", ".join(notify)
    for name in names:
        err.print(f"alert automation {name!r} sends through {blocks}", highlight=False)


@app.command()
def alerts(notify: NotifyOpt = None) -> None:
    """Create or update the nightly questions' alerts on the Prefect server (PREFECT_API_URL),
    for deployments served elsewhere (prefect deploy with deployments/prefect.yaml and a
    worker): the same automations `dsstar serve --notify` sets up.

    Three Prefect automations, each sending through every block given: a nightly answer that
    changed (old and new answer), a nightly question whose flow run failed (the error), a
    file that broke its data contract (the failed expectations). Each message names the
    question and links to its flow run in the Prefect UI. Running the command again updates
    them by name, never duplicates them. See docs/alerts.md.

    Example: dsstar alerts --notify slack-webhook/team --notify email/oncall
    """
    try:
        check_notify_server(notify)
        if not notify:
            raise UsageError("name at least one notification block with --notify BLOCK")
    except DSStarError as exc:
        fail_usage(str(exc))
    from flows import prefect_api

    with prefect_api():
        set_up_alerts(notify or [])
