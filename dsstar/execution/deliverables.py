"""What the files a script wrote hold, in words an agent (or a person) can read: a table's
shape, columns and first rows; a chart's description: the reader agent's, made from the saved
image when its model can see images (`dsstar.algorithm.calls`, 'reading'), else the one the
script's figure hook reported (see sandbox/prelude.py: said to be so wherever it is shown,
since the script could have written it). And media types, by name.

A table's preview is not read here: the bounded table reader reads it when the script has run
(`dsstar.data.previews`), and the output carries it ('preview'), or the reason it was skipped.
"""

from __future__ import annotations

import mimetypes
from pathlib import PurePosixPath
from typing import Any

__all__ = [
    "CHART_SOURCE",
    "READING_SOURCE",
    "TABLE_SUFFIXES",
    "chart_text",
    "inline_image_type",
    "media_type",
    "outputs_text",
    "table_text",
]

TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".xlsx", ".xls")


# Suffixes the standard library's mimetypes does not know, or knows differently per system.
_MEDIA_TYPES = {
    ".csv": "text/csv",
    ".parquet": "application/vnd.apache.parquet",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".json": "application/json",
    ".npy": "application/x-npy",
    ".pkl": "application/octet-stream",
    ".md": "text/markdown",
}
# The images a card or a report shows inline (as a data: URL dsstar encodes): pixels only,
# never an SVG or HTML page, which are untrusted documents.
_INLINE_IMAGES = (".png", ".jpg", ".jpeg")


def media_type(name: str) -> str:
    """The media type of a file, by its suffix (application/octet-stream when unknown)."""
    suffix = PurePosixPath(name).suffix.lower()
    return _MEDIA_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def inline_image_type(name: str) -> str | None:
    """The media type under which a file may be shown inline as an image, or None."""
    return media_type(name) if PurePosixPath(name).suffix.lower() in _INLINE_IMAGES else None


# Where a chart's description comes from, said wherever it is shown: it is the script's word.
CHART_SOURCE = (
    "as the script's figure hook reported it (read off the matplotlib figure in the script's"
    " own process, which could have written it too; the image itself is not read)"
)


# Where a reading comes from: dsstar's reader looked at the image the script saved.
READING_SOURCE = "as the reader agent described it from the saved image"


def chart_text(chart: dict[str, Any], most_values: int = 24) -> str:
    """A chart's description in lines, after where it comes from (CHART_SOURCE): type,
    title, axis labels, legend, ticks, series."""
    lines = [
        f"chart description {CHART_SOURCE}:",
        f"chart type: {chart.get('type')}; title: {chart.get('graph_title')!r}",
        f"x axis label: {chart.get('x_label')!r}; y axis label: {chart.get('y_label')!r}",
    ]
    if chart.get("labels") or chart.get("legend_title"):
        lines.append(f"legend {chart.get('legend_title')!r}: {chart.get('labels')}")
    lines.append(f"x tick labels: {_short(chart.get('xtick_labels') or [], most_values)}")
    names = chart.get("series_labels") or []
    for i, values in enumerate(chart.get("series") or []):
        label = names[i] if i < len(names) else f"series {i + 1}"
        colour = (chart.get("color") or [])[i : i + 1]
        lines.append(
            f"series {label!r} {colour[0] if colour else ''}: {_short(values, most_values)}"
        )
    return "\n".join(lines)


def _short(values: list[Any], most: int) -> str:
    shown = [round(v, 6) if isinstance(v, float) else v for v in values[:most]]
    more = f" ... ({len(values)} values)" if len(values) > most else ""
    return f"{shown}{more}"


def outputs_text(outputs: list[dict[str, Any]], rows: int = 5) -> str:
    """What each file a script wrote holds (ExecResult.outputs): one block per file, a
    table's from its preview (its first `rows` rows), or why its preview was skipped."""
    blocks = []
    for item in outputs:
        block = f"{item['name']} ({item['bytes']:,} bytes)"
        chart, preview, reading = item.get("chart"), item.get("preview"), item.get("reading")
        if isinstance(reading, str) and reading:
            block += f"\nchart {READING_SOURCE}:\n{reading}"
        elif isinstance(chart, dict):
            block += "\n" + chart_text(chart)
        elif isinstance(preview, dict) and preview.get("skipped"):
            block += f"\npreview skipped: {preview['skipped']}"
        elif isinstance(preview, dict) and preview.get("shape"):
            block += table_text(preview, rows)
        blocks.append(block)
    return "\n\n".join(blocks)


def table_text(preview: dict[str, Any], rows: int = 5) -> str:
    """A table's preview in lines: its shape, its columns, its first `rows` rows."""
    known, width = preview["shape"]
    columns = preview.get("columns") or []
    more = f" (the first {len(columns)})" if len(columns) < width else ""
    text = f"\ntable: {known} rows x {width} columns\ncolumns{more}: {columns}\nfirst rows:"
    return text + "".join(f"\n{row}" for row in (preview.get("head") or [])[:rows])
