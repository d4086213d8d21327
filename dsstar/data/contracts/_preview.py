"""A preview of a table a script wrote: its shape, columns and first rows, read in the bounded
reader (`_bounded`), never in the dsstar process.

What a file says of itself is read before its rows: a Parquet file's metadata (its row count,
and the uncompressed size of the row group its first rows lie in) and an Excel workbook's zip
directory (the size of each part once decompressed, and where each sheet states its
dimension). A file whose first rows would take more than `decoded_max` bytes to decode, or an
Excel file that openpyxl would have to parse whole past a bound first, is not parsed:
`TableSkipped` says why. Only the first rows are parsed; a CSV's rows are counted by its
lines, an Excel sheet's from its stated dimension (None when it states none).
"""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from dsstar.data.contracts._read import MAX_COLUMNS, TableSkipped, csv_tables
from dsstar.execution.deliverables import TABLE_SUFFIXES

__all__ = ["COLUMNS_SHOWN", "read_preview"]

COLUMNS_SHOWN = 100  # columns of a wide table shown in its preview (its shape tells them all)
_CELL = 60  # characters of one cell shown


def read_preview(path: Path, name: str, rows: int, decoded_max: int) -> dict[str, Any]:
    """{'shape': [rows or None, columns], 'columns': [...], 'head': [[cells]]} of the table
    at `path`, a CSV, TSV, Parquet or Excel file as its `name` says. Raises TableSkipped past
    a bound, and what the parser raises on a file that does not read as a table."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ValueError(f"{suffix or 'no suffix'}: not a table")
    if suffix == ".parquet":
        total, head = _parquet(path, rows, decoded_max)
    elif suffix in (".xlsx", ".xls"):
        total, head = _excel(path, rows, decoded_max)
    else:
        head = csv_tables(path, rows, sep="\t" if suffix == ".tsv" else ",")[0][1]
        total = _lines(path) - 1  # the header
    columns = [str(c) for c in head.columns]
    shown = head.iloc[:rows, :COLUMNS_SHOWN]
    return {
        "shape": [None if total is None else int(total), len(columns)],
        "columns": columns[:COLUMNS_SHOWN],
        "head": [[_cell(v) for v in row] for row in shown.itertuples(index=False)],
    }


def _parquet(path: Path, rows: int, decoded_max: int) -> tuple[int, Any]:
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(path)
    meta = handle.metadata
    if meta.num_columns > MAX_COLUMNS:
        raise TableSkipped(f"it has {meta.num_columns:,} columns (more than {MAX_COLUMNS:,})")
    # Pages are decoded whole: the row groups the first rows lie in are what reading costs.
    # A page of zeros compresses a thousandfold; the metadata states its size uncompressed.
    decoded, covered = 0, 0
    for index in range(meta.num_row_groups):
        group = meta.row_group(index)
        decoded += group.total_byte_size
        covered += group.num_rows
        if covered >= rows:
            break
    if decoded > decoded_max:
        raise TableSkipped(
            f"its first rows lie in {decoded:,} bytes of uncompressed pages (as its metadata"
            f" states), more than {decoded_max:,}"
        )
    first = next(handle.iter_batches(batch_size=rows), None)
    table = first if first is not None else handle.schema_arrow.empty_table()
    return meta.num_rows, table.to_pandas()


def _excel(path: Path, rows: int, decoded_max: int) -> tuple[int | None, Any]:
    import pandas as pd

    if zipfile.is_zipfile(path):  # .xlsx: XML parts in a zip, each inflated as it is read
        _check_parts(path, decoded_max)
        total = _sheet_rows(path)
    else:
        total = None
    return total, pd.read_excel(path, nrows=rows)  # openpyxl streams: the first rows only


# What openpyxl parses whole before the first row: every part but the sheets (the shared
# strings, the styles), and each sheet that states no dimension near its start (it reads the
# whole sheet to find one). It parses a few MB a second.
_PARSED_WHOLE_MAX = 16 << 20
_HEAD = 64 << 10  # of a sheet's XML, where its dimension is stated


def _check_parts(path: Path, decoded_max: int) -> None:
    """TableSkipped when the workbook's parts inflate (as its zip directory states, which
    bounds what is inflated) past `decoded_max`, or what is parsed whole past its bound."""
    with zipfile.ZipFile(path) as book:
        parts = book.infolist()
        inflated = sum(part.file_size for part in parts)
        if inflated > decoded_max:
            raise TableSkipped(
                f"its parts decompress to {inflated:,} bytes (as its zip directory states),"
                f" more than {decoded_max:,}"
            )
        whole = sum(part.file_size for part in parts if not _sized_sheet(book, part))
    if whole > _PARSED_WHOLE_MAX:
        raise TableSkipped(
            f"{whole:,} bytes of its XML would be parsed whole before its first row (shared"
            f" strings, styles, sheets that state no dimension), more than {_PARSED_WHOLE_MAX:,}"
        )


def _sized_sheet(book: zipfile.ZipFile, part: zipfile.ZipInfo) -> bool:
    """Whether `part` is a sheet whose dimension is stated before its rows, near its start."""
    if not part.filename.startswith("xl/worksheets/") or part.filename.count("/") != 2:
        return False
    with book.open(part) as sheet:
        head = sheet.read(_HEAD)
    dimension, rows = head.find(b"<dimension"), head.find(b"<sheetData")
    return dimension >= 0 and (rows < 0 or dimension < rows)


def _sheet_rows(path: Path) -> int | None:
    """The rows under the header of the first sheet, as its dimension states them."""
    import openpyxl

    book = openpyxl.load_workbook(path, read_only=True, data_only=True, keep_links=False)
    try:
        sheet = book.worksheets[0]
        columns = sheet.max_column or 0
        if columns > MAX_COLUMNS:
            raise TableSkipped(f"it has {columns:,} columns (more than {MAX_COLUMNS:,})")
        return max(sheet.max_row - 1, 0) if sheet.max_row else None
    finally:
        book.close()


def _lines(path: Path) -> int:
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count + (last != b"\n")


def _cell(value: Any) -> Any:
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # a numpy scalar
        try:
            value = value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, int | float | bool) or value is None:
        return None if isinstance(value, float) and value != value else value
    text = str(value)
    return text if len(text) <= _CELL else text[: _CELL - 1] + "…"
