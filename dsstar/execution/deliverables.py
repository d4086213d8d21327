"""What the files a script wrote hold, in words an agent (or a person) can read: a table's
shape, columns and first rows; a chart's type, title, axis labels, legend and plotted series
(the description the script's figure hook reported, see sandbox/prelude.py: said to be so
wherever it is shown, since the script could have written it). And which files a question
asks for, by name.

Tables are read bounded: the first rows only, the row count from the file's own metadata
(Parquet) or its lines (CSV); a file too large is named, not read.
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import PurePosixPath
from typing import Any

__all__ = [
    "CHART_SOURCE",
    "TABLE_SUFFIXES",
    "asked_files",
    "chart_text",
    "outputs_text",
    "table_preview",
]

TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".xlsx", ".xls")
_READ_MAX = 64 << 20  # a table larger than this is not opened for a preview
_CELL = 60  # characters of one cell shown
# A file name with a suffix a script would write: result.csv, revenue.png, out/model.pkl.
_NAMED = re.compile(r"(?<![\w/.-])((?:[\w-]+/)?[\w.-]*\w\.(?:csv|tsv|parquet|xlsx|xls|json|png"
                    r"|jpe?g|svg|pdf|html|txt|md|npy|pkl|joblib|sqlite|db))\b", re.I)  # fmt: skip


def asked_files(*texts: str) -> list[str]:
    """The file names a question or its guidelines mention, in order, once each."""
    found: list[str] = []
    for text in texts:
        for name in _NAMED.findall(text or ""):
            if name not in found and not name.startswith("data/"):
                found.append(name)
    return found


def table_preview(name: str, data: bytes, rows: int = 5) -> dict[str, Any] | None:
    """{'shape': [rows, columns], 'columns': [...], 'head': [[cells]]} of a CSV, TSV, Parquet
    or Excel file (shape[0] is None when unknown); None for another file, or one that does not
    read as a table."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in TABLE_SUFFIXES or len(data) > _READ_MAX:
        return None
    import pandas as pd

    try:
        if suffix in (".csv", ".tsv"):
            sep = "\t" if suffix == ".tsv" else ","
            head = pd.read_csv(io.BytesIO(data), sep=sep, nrows=rows)
            total = len(pd.read_csv(io.BytesIO(data), sep=sep, usecols=[0]))
        elif suffix == ".parquet":
            import pyarrow.parquet as pq

            file = pq.ParquetFile(io.BytesIO(data))
            total = file.metadata.num_rows
            head = next(file.iter_batches(batch_size=rows), None)
            head = (
                head.to_pandas()
                if head is not None
                else file.schema_arrow.empty_table().to_pandas()
            )
        else:
            frame = pd.read_excel(io.BytesIO(data))
            head, total = frame.head(rows), len(frame)
    except Exception:  # noqa: BLE001 - a file that does not read as a table is just a file
        return None
    return {
        "shape": [int(total), int(head.shape[1])],
        "columns": [str(c) for c in head.columns],
        "head": [[_cell(v) for v in row] for row in head.head(rows).itertuples(index=False)],
    }


def _cell(value: Any) -> Any:
    if isinstance(value, (int, float, bool)) or value is None:
        return None if isinstance(value, float) and value != value else value
    text = str(value)
    return text if len(text) <= _CELL else text[: _CELL - 1] + "…"


# Where a chart's description comes from, said wherever it is shown: it is the script's word.
CHART_SOURCE = (
    "as the script's figure hook reported it (read off the matplotlib figure in the script's"
    " own process, which could have written it too; the image itself is not read)"
)


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
    """What each file a script wrote holds (ExecResult.outputs): one block per file."""
    blocks = []
    for item in outputs:
        block = f"{item['name']} ({item['bytes']:,} bytes)"
        chart = item.get("chart")
        table = table_preview(item["name"], base64.b64decode(item.get("data") or ""), rows)
        if isinstance(chart, dict):
            block += "\n" + chart_text(chart)
        elif table is not None:
            known = table["shape"][0]
            block += f"\ntable: {known} rows x {table['shape'][1]} columns"
            block += f"\ncolumns: {table['columns']}\nfirst rows:"
            block += "".join(f"\n{row}" for row in table["head"])
        blocks.append(block)
    return "\n\n".join(blocks)
