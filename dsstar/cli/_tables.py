"""Tables that read well anywhere: boxed on a terminal, one line per row when piped.

`runs list` and `history` print through `print_table`. On a terminal the table is rich's
when it fits the window unwrapped, else one small box per row. Piped (cron, CI, a log file)
a boxed table at 80 columns folds a question into 6-character slivers and a run into 10
lines, so the default there is `plain`: columns separated by two spaces, padded to their
widest cell, one row per line, never cut.
`--format csv` and `--format json` are for scripts.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any

import typer

from dsstar.cli._app import console
from dsstar.cli._output import shown

__all__ = ["Format", "FormatOpt", "print_table", "resolve_format"]


class Format(StrEnum):
    table = "table"
    plain = "plain"
    csv = "csv"
    json = "json"


FormatOpt = Annotated[
    Format | None,
    typer.Option(
        "--format",
        help="table (boxed, fitted to the terminal), plain (one line per row, columns aligned,"
        " nothing cut), csv or json. Default: table on a terminal, plain when piped.",
        case_sensitive=False,
        show_default=False,
    ),
]


def resolve_format(chosen: Format | None, as_json: bool = False) -> Format:
    """The format to print in: --json wins, then --format, then what suits stdout."""
    if as_json:
        return Format.json
    if chosen is not None:
        return chosen
    return Format.table if sys.stdout.isatty() else Format.plain


def print_table(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: Format, *, keep: Sequence[str] = ()
) -> None:
    """Print `rows` (cells as values; None shows as "-") under `columns` as a table, plain
    lines or CSV (JSON is each command's own document). `keep`: columns a boxed table never
    wraps (ids that are copied into other commands)."""
    cells = [[_cell(value) for value in row] for row in rows]
    if fmt is Format.table:
        _print_boxed(columns, cells, keep)
    elif fmt is Format.csv:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([["" if v is None else shown(v) for v in row] for row in rows])
        sys.stdout.write(buffer.getvalue())
    else:
        sys.stdout.write(_plain(columns, cells))


def _print_boxed(columns: Sequence[str], cells: list[list[str]], keep: Sequence[str]) -> None:
    """One boxed table when it fits the terminal's width unwrapped; else one small box per
    row, a field a line, so that no column is squeezed to a word a line."""
    from rich.measure import Measurement
    from rich.table import Table

    out = console()
    table = Table(*columns)
    for name in keep:
        table.columns[list(columns).index(name)].no_wrap = True
    for row in cells:
        table.add_row(*row)
    if Measurement.get(out, out.options.update_width(1 << 16), table).maximum <= out.width:
        out.print(table)
        return
    for row in cells:
        record = Table(show_header=False)
        record.add_column(style="bold", no_wrap=True)
        record.add_column(overflow="fold")
        for name, value in zip(columns, row, strict=True):
            record.add_row(name, value)
        out.print(record)


def _cell(value: Any) -> str:
    """A cell as one line of safe text: None is "-", newlines become spaces."""
    if value is None or value == "":
        return "-"
    return " ".join(shown(value).split()) or "-"


def _plain(columns: Sequence[str], cells: list[list[str]]) -> str:
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip() + "\n"

    return line(columns) + "".join(line(row) for row in cells)
