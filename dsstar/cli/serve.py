"""`dsstar serve`: both deployments from one process."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._app import (
    app,
    err,
)


@app.command()
def serve(
    questions_file: Annotated[
        str, typer.Option(help="Question set (YAML) the nightly deployment answers.")
    ] = "deployments/questions.yaml",
    cron: Annotated[str, typer.Option(help="When the nightly batch runs (cron).")] = "0 2 * * *",
    timezone: Annotated[str, typer.Option(help="Time zone of --cron, e.g. Europe/Paris.")] = "UTC",
    limit: Annotated[int, typer.Option(help="Most flow runs executed at once.")] = 4,
) -> None:
    """Serve the deployments ds-star/on-demand and ds-star-nightly/nightly from this process.

    Runs triggered from the Prefect UI (a form with question, data, model, rounds...) and the
    nightly schedule execute here. Needs PREFECT_API_URL (e.g. `prefect server start`).

    Example: dsstar serve --cron "0 2 * * *" --timezone Europe/Paris
    """
    from prefect import serve as prefect_serve
    from prefect.schedules import Cron

    from flows.ds_star import ds_star
    from flows.nightly import ds_star_nightly

    on_demand = ds_star.to_deployment(
        name="on-demand",
        description="Answer one question about a folder or bucket of data files.",
        tags=["dsstar"],
    )
    nightly = ds_star_nightly.to_deployment(
        name="nightly",
        description="Answer every question of the nightly question set.",
        schedules=[Cron(cron, timezone=timezone, slug="nightly")],
        parameters={"questions_file": str(Path(questions_file).resolve())},
        tags=["dsstar"],
    )
    err.print(f"serving ds-star/on-demand and ds-star-nightly/nightly ({cron}, {timezone})")
    prefect_serve(on_demand, nightly, limit=limit)
