"""Tables of a data file as pandas frames, read with a row bound, in a canonical form.

A contract compares what a file holds today with what it held when it was first analyzed.
Columns are normalised to four kinds (number, bool, datetime, text) so that harmless dtype
drift (an integer column that gains a missing value and turns float, pandas' object vs str)
is not mistaken for a type change, while a number column that starts holding text is."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dsstar.data.formats import NamesWhere, by_name, resolve

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAX_ROWS",
    "TABULAR_FORMATS",
    "Table",
    "TableSkipped",
    "canonical",
    "csv_tables",
    "excel_tables",
    "json_tables",
    "jsonl_tables",
    "parquet_tables",
    "read_tables",
    "sqlite_tables",
    "tsv_tables",
]

MAX_ROWS = 200_000  # rows read per table: bounds time and memory on big files
MAX_JSON_BYTES = 64 << 20  # JSON is parsed whole; bigger files get no contract
# pandas spends time per column, whatever the row count: a one-line CSV of 'x,' repeated
# (2 million columns) kept a run busy for minutes. Files beyond these bounds get no contract.
MAX_COLUMNS = 2000
MAX_HEADER_BYTES = 1 << 20  # the first line of a CSV, where its columns are named
MAX_VALUE_BYTES = 16 << 20  # one SQLite value (a generated zeroblob(4e8) is refused)
MAX_TABLES = 200  # tables of one database


class TableSkipped(Exception):
    """The file is beyond a bound of what is read in the dsstar process; the text says which."""


# The formats with a table reader, as registered (`dsstar.data.formats`): each names its
# reader among the `*_tables` functions below, or a user's format brings its own.
TABULAR_FORMATS = NamesWhere(lambda fmt: fmt.tables is not None)


@dataclass
class Table:
    """One table of a file: `name` is the sheet or database table (None for flat files)."""

    name: str | None
    frame: pd.DataFrame
    truncated: bool  # more rows exist than were read


def read_tables(path: Path, fmt: str, max_rows: int = MAX_ROWS) -> list[Table]:
    """The file's tables (canonical frames), or [] when the format holds no table.
    Raises what pandas raises on a malformed file; callers turn that into a failure."""
    known = by_name(fmt)
    if known is None or known.tables is None:
        return []
    reader = resolve(known.tables)
    tables = []
    for name, frame in reader(path, max_rows + 1):
        truncated = len(frame) > max_rows
        tables.append(Table(name, canonical(frame.head(max_rows)), truncated))
    return tables


def canonical(frame: pd.DataFrame) -> pd.DataFrame:
    """Every column as float64, bool, datetime64 or str (missing values stay missing)."""
    import pandas as pd  # here, not above: commands that only read stored contracts skip it

    out = {}
    for column in frame.columns:
        series = frame[column]
        if pd.api.types.is_bool_dtype(series):
            out[str(column)] = series.astype(bool) if not series.isna().any() else series
        elif pd.api.types.is_numeric_dtype(series):
            out[str(column)] = pd.to_numeric(series, errors="coerce").astype("float64")
        elif pd.api.types.is_datetime64_any_dtype(series):
            out[str(column)] = series
        else:
            text = series.map(lambda v: v if v is None or isinstance(v, str) else _text(v))
            out[str(column)] = text.astype("str")
    return pd.DataFrame(out, index=frame.index)


def _text(value: object) -> object:
    if isinstance(value, float) and value != value:  # NaN stays missing
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def csv_tables(path: Path, rows: int, sep: str = ",") -> list[tuple[str | None, pd.DataFrame]]:
    import pandas as pd

    with open(path, "rb") as handle:
        head = handle.readline(MAX_HEADER_BYTES + 1)
    if len(head) > MAX_HEADER_BYTES:
        raise TableSkipped(f"its first line is longer than {MAX_HEADER_BYTES:,} bytes")
    _check_columns(head.count(sep.encode()) + 1)
    return [(None, pd.read_csv(path, sep=sep, nrows=rows, encoding_errors="replace"))]


def tsv_tables(path: Path, rows: int) -> list[tuple[str | None, pd.DataFrame]]:
    return csv_tables(path, rows, sep="\t")


def excel_tables(path: Path, rows: int) -> list[tuple[str | None, pd.DataFrame]]:
    import pandas as pd

    sheets = pd.read_excel(path, sheet_name=None, nrows=rows)
    return [(str(name), frame) for name, frame in sheets.items()]


def parquet_tables(path: Path, rows: int) -> list[tuple[str | None, pd.DataFrame]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(path)
    _check_columns(len(handle.schema_arrow))
    batches = []
    for batch in handle.iter_batches(batch_size=min(rows, 65_536)):
        batches.append(batch)
        if sum(len(b) for b in batches) >= rows:
            break
    table = pa.Table.from_batches(batches, schema=handle.schema_arrow)
    return [(None, table.to_pandas().head(rows))]


def json_tables(path: Path, rows: int) -> list[tuple[str | None, pd.DataFrame]]:
    """Only a list of flat-ish records is a table; any other JSON shape gets no contract."""
    import pandas as pd

    if path.stat().st_size > MAX_JSON_BYTES:
        return []
    data = json.loads(path.read_bytes())
    if not isinstance(data, list) or not data or not all(isinstance(r, dict) for r in data):
        return []
    return [(None, pd.DataFrame.from_records(data[:rows]))]


def jsonl_tables(path: Path, rows: int) -> list[tuple[str | None, pd.DataFrame]]:
    import pandas as pd

    return [(None, pd.read_json(path, lines=True, nrows=rows))]


def sqlite_tables(path: Path, rows: int) -> list[tuple[str | None, pd.DataFrame]]:
    import pandas as pd

    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        # A value bigger than this raises "string or blob too big" instead of being built.
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        names = [
            r[0]
            for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        ]
        if len(names) > MAX_TABLES:
            raise TableSkipped(f"it holds more than {MAX_TABLES} tables")
        quoted = ['"' + n.replace('"', '""') + '"' for n in names]
        for q in quoted:  # table_xinfo lists generated columns too
            _check_columns(len(con.execute(f"PRAGMA table_xinfo({q})").fetchall()))
        try:
            return [
                (name, pd.read_sql_query(f"SELECT * FROM {q} LIMIT {int(rows)}", con))  # noqa: S608
                for name, q in zip(names, quoted, strict=True)
            ]
        except Exception as exc:  # pandas wraps sqlite3.DataError in its DatabaseError
            if "too big" in str(exc):
                raise TableSkipped(f"a value is larger than {MAX_VALUE_BYTES:,} bytes") from exc
            raise


def _check_columns(count: int) -> None:
    if count > MAX_COLUMNS:
        raise TableSkipped(f"it has {count:,} columns (more than {MAX_COLUMNS:,})")
