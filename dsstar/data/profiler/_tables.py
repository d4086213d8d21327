"""Tabular formats: CSV/TSV, Excel, Parquet, SQLite and DuckDB databases."""

from __future__ import annotations

import csv
import io
import re
import sqlite3
from collections import Counter
from itertools import islice
from pathlib import Path

import pandas as pd

from dsstar.data.profiler._base import (
    MAX_ROWS,
    Budget,
    count_lines,
    describe_frame,
    pick_encoding,
    read_head,
    short,
)

__all__ = [
    "describe_csv",
    "describe_duckdb",
    "describe_excel",
    "describe_parquet",
    "describe_sqlite",
]

_MAX_TITLE_ROWS = 20  # more rows than this above a header: read the file from its first line
_DECIMAL_COMMA = re.compile(r"^-?\d{1,3}(\.\d{3})*,\d+$|^-?\d+,\d+$")


def _csv_layout(sample: str, fmt: str) -> tuple[str, int, str]:
    """Delimiter, physical lines before the header, and the skipped title text.

    The delimiter is the candidate giving the most records with the same field count;
    title rows above the header are records with fewer fields than that mode, or with at
    most one filled cell (a spreadsheet export pads a title to the full width: "Title,,,").
    """
    candidates = ["\t", ",", ";", "|"] if fmt == "tsv" else [",", ";", "\t", "|"]
    best = (-1, 0, ",")
    for delim in candidates:
        rows = islice(csv.reader(io.StringIO(sample), delimiter=delim), 50)
        counts = Counter(len(r) for r in rows if r)
        width, freq = counts.most_common(1)[0] if counts else (0, 0)
        if width > 1 and (freq, width) > best[:2]:
            best = (freq, width, delim)
    _, width, delim = best
    if not width:
        return delim, 0, ""
    for padded_titles in (True, False):  # a header of one filled cell: the plain rule
        reader = csv.reader(io.StringIO(sample), delimiter=delim)
        skipped, before = [], 0
        for row in islice(reader, _MAX_TITLE_ROWS + 1):  # line_num counts physical lines
            filled = sum(bool(cell.strip()) for cell in row)
            if len(row) >= width and (filled > 1 or not padded_titles):
                return delim, before, " | ".join(skipped)
            skipped += [" ".join(c for c in row if c.strip())] if filled else []
            before = reader.line_num
    return delim, 0, ""


def _decimal_comma(sample: str, delim: str, skip: int) -> bool:
    """True when numbers are written 3,14 (only possible when ',' is not the delimiter)."""
    if delim == ",":
        return False
    rows = list(islice(csv.reader(io.StringIO(sample), delimiter=delim), skip + 1, skip + 51))
    cells = [c.strip() for r in rows for c in r if c.strip()]
    hits = sum(bool(_DECIMAL_COMMA.match(c)) for c in cells)
    return hits > 0 and hits >= len([c for c in cells if "," in c]) * 0.8


def describe_csv(path: Path, fmt: str) -> list[str]:
    """Sniff encoding, delimiter, decimal mark and header position, then profile the first
    MAX_ROWS rows of at most the per-file byte bound."""
    data = read_head(path)
    encoding = pick_encoding(data[: 256 * 1024])
    sample = data[: 256 * 1024].decode(encoding, errors="replace")
    delim, skip, title = _csv_layout(sample, fmt)
    decimal = "," if _decimal_comma(sample, delim, skip) else "."
    kw = {"sep": delim, "skiprows": skip, "nrows": MAX_ROWS, "decimal": decimal}
    if decimal == ",":
        kw["thousands"] = "."
    out = []
    text = data.decode(encoding, errors="replace")
    cut = len(data) < path.stat().st_size
    if cut:  # cut at the last full line inside the bound
        text = text[: text.rfind("\n") + 1]
        out.append(f"note: only the first {len(data):,} bytes were read (per-file bound)")
    while True:  # terminates: bad lines are skipped only once
        try:
            df = pd.read_csv(io.StringIO(text), low_memory=False, **kw)
            break
        except pd.errors.ParserError as exc:  # ragged rows: profile the well-formed ones
            if "on_bad_lines" in kw:
                raise
            out.append(f"note: malformed lines skipped ({short(str(exc).strip(), 100)})")
            kw["on_bad_lines"] = "skip"
    out.insert(0, f"encoding: {encoding}, delimiter: {delim!r}")
    if decimal == ",":
        out.append("note: decimal comma (use decimal=',', thousands='.')")
    if skip:
        out.insert(0, f"title: {short(title, 200)}")
        out.append(
            f"note: header is not on the first line; skipped {skip} line(s) above it;"
            f" use skiprows={skip}"
        )
    total = None
    if len(df) == MAX_ROWS or cut:
        lines = count_lines(path)
        total = max(len(df), lines - skip - 1) if lines is not None else None
        shown = f"~{total:,}" if total is not None else "more than"
        out.append(f"note: file has {shown} data rows; statistics use the first {len(df):,}")
    return out + describe_frame(df, total)


def describe_excel(path: Path, fmt: str) -> list[str]:
    """One table summary per sheet (every sheet)."""
    if path.stat().st_size > Budget.max_bytes:
        raise ValueError(f"workbook larger than the per-file bound ({Budget.max_bytes:,} bytes)")
    sheets = pd.read_excel(path, sheet_name=None, nrows=MAX_ROWS)
    out = [f"sheets ({len(sheets)}): {', '.join(map(str, sheets))}"]
    for name, df in sheets.items():
        out += [f"## sheet {name!r}", *describe_frame(df)]
    return out


def describe_parquet(path: Path, fmt: str) -> list[str]:
    """Row count and schema from metadata; statistics from the first batch only."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    total = pf.metadata.num_rows
    batch = next(pf.iter_batches(batch_size=MAX_ROWS), None)
    df = batch.to_pandas() if batch is not None else pf.schema_arrow.empty_table().to_pandas()
    return [f"row groups: {pf.num_row_groups}", *describe_frame(df, total)]


def describe_sqlite(path: Path, fmt: str) -> list[str]:
    """Tables and views with declared columns (PRAGMA), row counts and sample statistics."""
    # immutable: the file sits on a read-only mount, so no lock or journal can be made
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    con = sqlite3.connect(uri, uri=True)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type IN "
                "('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        out = [f"tables ({len(names)}): {', '.join(names)}", "query with: sqlite3 or duckdb"]
        for name in names[:30]:
            quoted = '"' + name.replace('"', '""') + '"'
            cols = con.execute(f"PRAGMA table_info({quoted})").fetchall()
            count = con.execute(f"SELECT COUNT(*) FROM {quoted}").fetchone()[0]
            df = pd.read_sql_query(f"SELECT * FROM {quoted} LIMIT {MAX_ROWS}", con)
            out += [
                f"## table {name!r} ({count:,} rows)",
                "declared columns: " + ", ".join(f"{c[1]} {c[2] or '?'}" for c in cols),
                *describe_frame(df, count),
            ]
        return out
    finally:
        con.close()


def describe_duckdb(path: Path, fmt: str) -> list[str]:
    """Tables and views of a DuckDB database: schema, column types and row counts."""
    import duckdb

    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables()"
            " UNION ALL SELECT schema_name, view_name FROM duckdb_views() WHERE NOT internal"
            " ORDER BY 1, 2"
        ).fetchall()
        names = [f"{s}.{t}" if s != "main" else t for s, t in tables]
        out = [f"tables ({len(names)}): {', '.join(names)}", "query with: duckdb.connect(path)"]
        for (schema, table), name in list(zip(tables, names, strict=True))[:30]:
            quoted = ".".join('"' + part.replace('"', '""') + '"' for part in (schema, table))
            count = con.execute(f"SELECT COUNT(*) FROM {quoted}").fetchone()[0]
            types = con.execute(f"DESCRIBE {quoted}").fetchall()
            df = con.execute(f"SELECT * FROM {quoted} LIMIT {MAX_ROWS}").df()
            out += [
                f"## table {name!r} ({count:,} rows)",
                "declared columns: " + ", ".join(f"{c[0]} {c[1]}" for c in types),
                *describe_frame(df, count),
            ]
        return out
    finally:
        con.close()
