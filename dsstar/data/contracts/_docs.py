"""Great Expectations Data Docs for a data root, built in a throwaway ephemeral context.

Each table's stored suite is validated by a GX Checkpoint whose UpdateDataDocsAction renders
the suite and the validation result into the context's temporary docs site; the site's text
files (HTML, CSS, JS, SVG) are then copied into the storage. Fonts and bitmaps are left out:
the pages fall back to system fonts."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from dsstar.data.contracts._book import FileLike, load_contract
from dsstar.data.contracts._build import suite_name
from dsstar.data.contracts._read import read_tables
from dsstar.data.contracts._validate import load_suite
from dsstar.storage import Store

__all__ = ["build_data_docs"]

_TEXT = {".html", ".css", ".js", ".svg", ".json"}


def build_data_docs(
    store: Store, location: str, root: Path, files: list[FileLike], prefix: str
) -> str | None:
    """Render GX Data Docs for every file with a contract into `prefix/` in the storage.
    Returns the URI of the site's index.html, or None when no file has a contract."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_pandas("dsstar")
    rendered = 0
    for file in files:
        document = load_contract(store, location, file.path)
        if document is None:
            continue
        try:
            tables = {t.name: t for t in read_tables(root / file.path, file.format)}
        except Exception:  # unreadable today: `validate` reports it; nothing to render
            continue
        for entry in document.get("tables") or []:
            if entry.get("table") in tables:
                frame = tables[entry["table"]].frame
                name = suite_name(file.path, entry.get("table"))
                _render(gx, context, source, name, load_suite(entry["suite"]), frame, rendered)
                rendered += 1
    if not rendered:
        return None
    site = Path(context.get_docs_sites_urls()[0]["site_url"].removeprefix("file://")).parent
    for path in sorted(site.rglob("*")):
        if path.is_file() and path.suffix in _TEXT:
            key = f"{prefix}/{path.relative_to(site).as_posix()}"
            store.write_text(key, path.read_text(encoding="utf-8", errors="replace"))
    shutil.rmtree(site, ignore_errors=True)
    return store.uri(f"{prefix}/index.html")


def _render(gx: Any, context: Any, source: Any, name: str, suite: Any, frame: Any, n: int) -> None:
    batch = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("whole")
    suite = context.suites.add(suite)
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"validate-{n}", data=batch, suite=suite)
    )
    checkpoint = context.checkpoints.add(
        gx.Checkpoint(
            name=f"checkpoint-{n}",
            validation_definitions=[definition],
            actions=[gx.checkpoint.UpdateDataDocsAction(name="data-docs")],
        )
    )
    checkpoint.run(batch_parameters={"dataframe": frame})
