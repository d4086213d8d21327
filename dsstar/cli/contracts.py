"""`dsstar contracts show|validate|accept`: the data contracts users own."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from dsstar.cli._app import (
    EXIT_FAILED,
    JsonOpt,
    StorageOpt,
    app,
    check_data,
    console,
    err,
    fail_usage,
    load_settings,
)
from dsstar.cli._output import heading
from dsstar.errors import DSStarError

contracts_app = typer.Typer(
    help="Data contracts: one Great Expectations suite per tabular file, made when the file is"
    " first analyzed and checked before a stored solution is reused.",
    no_args_is_help=True,
)
app.add_typer(contracts_app, name="contracts")

DataArg = Annotated[
    str, typer.Argument(help="Folder, single file or URL of the data root.", metavar="DATA")
]


def _open(data: str, storage: str | None) -> tuple[Any, str, Any]:
    """The store, the normalized data location and the opened data source."""
    from dsstar.data.sources import DataSource
    from dsstar.locations import normalize_location
    from dsstar.storage import Store

    settings = load_settings(storage=storage)
    check_data(data)
    cache = (settings.work_dir or Path(tempfile.gettempdir())) / "dsstar-cache"
    return Store(settings.storage), normalize_location(data), DataSource(data, cache)


@contracts_app.command()
def show(data: DataArg, storage: StorageOpt = None, as_json: JsonOpt = False) -> None:
    """Print the stored contract (GX suite JSON) of every file under DATA.

    Example: dsstar contracts show examples/sales
    """
    from dsstar.data.contracts import stored_contracts
    from dsstar.keys import contract
    from dsstar.locations import normalize_location
    from dsstar.storage import Store

    try:
        settings = load_settings(storage=storage)
        store, location = Store(settings.storage), normalize_location(data)
        documents = stored_contracts(store, location)
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    for document in documents:
        document["uri"] = store.uri(contract(location, str(document.get("path"))))
    if as_json:
        sys.stdout.write(json.dumps({"data": location, "contracts": documents}) + "\n")
        return
    if not documents:
        err.print(f"no contracts stored for {location}")
    out = console()
    for document in documents:
        heading(out, f"{document.get('path')} ({document['uri']})")
        out.print_json(json.dumps(document.get("tables")))


@contracts_app.command()
def validate(
    data: DataArg,
    storage: StorageOpt = None,
    data_docs: Annotated[
        bool, typer.Option("--data-docs", help="Also write an HTML report to storage.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check the current data against its contracts; exit 1 when any expectation fails,
    with one line per failed expectation. Files without a contract are left alone; with no
    contract at all it says there is nothing to check (and exits 0).

    Example: dsstar contracts validate examples/sales --data-docs
    """
    from dsstar.data.contracts import check_data_root, render_html
    from dsstar.keys import contracts_docs

    try:
        store, location, source = _open(data, storage)
        report = check_data_root(store, location, source.mount_dir, source.files(), create=False)
        if data_docs:  # GX's own Data Docs, plus a one-page summary of this check
            from dsstar.data.contracts import build_data_docs

            report["data_docs"] = build_data_docs(
                store, location, source.mount_dir, source.files(), contracts_docs(location, "gx")
            )
            report["summary"] = store.write_text(
                contracts_docs(location, "summary.html"), render_html(location, report)
            )
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    if as_json:
        sys.stdout.write(json.dumps(report, default=str) + "\n")
    else:
        if not report["checked"]:  # exit 0 with no output read as "all passed": say so
            err.print(
                f"nothing to check: no contracts stored for {location} under {store.url};"
                f" a run's analysis makes them, or: dsstar contracts accept {data}"
            )
        for failure in report["failed"]:
            observed = json.dumps(failure["observed"], default=str)
            print(f"FAILED {failure['path']}: {failure['expectation']} observed {observed}")
        for item in report["files"]:
            err.print(f"{item['status']:9} {item['path']} ({item['seconds']} s)")
        if data_docs:
            for label in ("data_docs", "summary"):
                shown = report.get(label) or "(no contracts to render)"
                err.print(f"{label}: {shown}")
    if report["failed"]:
        raise typer.Exit(EXIT_FAILED)


@contracts_app.command()
def accept(
    data: DataArg,
    storage: StorageOpt = None,
    path: Annotated[
        list[str] | None, typer.Option("--path", help="Only this file (relative); repeatable.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Adopt the current data's profile as the new contract of every tabular file (or of the
    --path files), replacing what is stored, edits included.

    Example: dsstar contracts accept examples/sales --path orders_2024.csv
    """
    from dsstar.data.contracts import accept_file
    from dsstar.keys import contract

    try:
        store, location, source = _open(data, storage)
        files = [f for f in source.files() if not path or f.path in set(path)]
        if path and len(files) < len(set(path)):
            known = {f.path for f in files}
            raise DSStarError(f"no such file under {location}: {sorted(set(path) - known)}")
        accepted = [f.path for f in files if accept_file(store, location, source.mount_dir, f)]
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    uris = [store.uri(contract(location, p)) for p in accepted]
    if as_json:
        sys.stdout.write(json.dumps({"accepted": accepted, "uris": uris}) + "\n")
        return
    for p, uri in zip(accepted, uris, strict=True):
        print(f"accepted {p} -> {uri}")
