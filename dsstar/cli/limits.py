"""`dsstar limits`: the shared concurrency limits, what holds them, and freeing them."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.text import Text

from dsstar.cli._app import JsonOpt, app, console, err, prefect_quietly
from dsstar.cli._output import json_line, shown

_UNSHARED = (
    "No shared Prefect server (PREFECT_API_URL is unset): each run keeps to its own"
    " --max-parallel and --llm-concurrency and holds no shared slot."
)


@app.command()
def limits(
    reset: Annotated[
        bool,
        typer.Option(
            "--reset",
            help="Free every slot of every dsstar limit, held or not. Runs that hold one now"
            " keep running, so for a while more may run at once than the limit allows.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """List the shared concurrency limits (dsstar-llm, dsstar-exec, dsstar-llm-rpm) of the
    Prefect API in use, and the run and process that holds each slot, as recorded on this
    machine. Slots held by processes that are gone are given back.

    Only a shared server (PREFECT_API_URL) has such limits in use: without one, each run
    keeps to its own --max-parallel and --llm-concurrency and holds no shared slot, and this
    says so without starting a server (--json still reports, and --reset frees, the counts
    kept in this user's Prefect database)."""
    prefect_quietly(False)
    from flows import api_configured, inspect_slots, prefect_api

    out = console()
    if not api_configured() and not (reset or as_json):  # nothing shared: no temporary server
        out.print(Text(_UNSHARED))
        return
    with prefect_api():
        state = inspect_slots(reset=reset)
    if as_json:
        sys.stdout.write(json_line(state))
        return
    if reset:
        err.print(Text("warning: every slot was freed; runs holding one keep running", "yellow"))
    if not state["shared"]:
        out.print(Text(_UNSHARED))
    for freed in state["freed"]:
        out.print(Text(f"freed a {freed['limit']} slot of {freed['description']}"))
    if not state["limits"] and state["shared"]:
        out.print(Text("no dsstar limits on this server"))
    for row in state["limits"]:
        out.print(Text(f"{row['name']}: {row['active']}/{row['limit']} held"))
        for holder in row["holders"]:
            out.print(Text(f"  {shown(holder['description'])}"))
        unknown = row["active"] - len(row["holders"])
        if unknown > 0 and row["name"] != "dsstar-llm-rpm":
            out.print(
                Text(
                    f"  {unknown} by holders not recorded on this machine (another machine,"
                    " or a run of an older dsstar); their leases expire on the server, or"
                    " `dsstar limits --reset` frees them"
                )
            )
