"""Shared helpers of the profiler: sizes, encodings, bounded reads and table summaries.

Every module of this package except `isolated` is self-contained (standard library, pandas
and optional readers only): their sources are joined into the script that profiles files
inside the sandbox, where the dsstar package cannot be imported."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

import pandas as pd

from dsstar.data.profiler._detect import wide_encoding

__all__ = [
    "MAX_ROWS",
    "Budget",
    "count_lines",
    "describe_frame",
    "human",
    "pick_encoding",
    "read_head",
    "short",
]

MAX_ROWS = 200_000  # rows read for statistics; bounds time and memory on big tables


class Budget:
    """Per-file bounds: the most bytes any reader takes from one file."""

    max_bytes: int = 64 << 20


def human(size: int) -> str:
    """Human-readable byte count that keeps the exact value."""
    for unit, factor in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f} {unit} ({size:,} bytes)"
    return f"{size} bytes"


def read_head(path: Path, limit: int | None = None) -> bytes:
    """At most `limit` (default: the per-file byte bound) leading bytes of `path`."""
    with open(path, "rb") as fh:
        return fh.read(Budget.max_bytes if limit is None else limit)


def count_lines(path: Path) -> int | None:
    """Newline-terminated lines, counted in binary chunks; None past the byte bound."""
    count, last, seen = 0, b"\n", 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            seen += len(chunk)
            if seen > 4 * Budget.max_bytes:
                return None
            count, last = count + chunk.count(b"\n"), chunk[-1:]
    return count + (last != b"\n")


def pick_encoding(head: bytes) -> str:
    """UTF-16 or UTF-32 when the sample is written in one, utf-8 (BOM-aware) when it
    decodes, else charset-normalizer's best guess, else latin-1, which accepts any byte."""
    wide = wide_encoding(head)
    if wide:
        return wide
    try:  # final=False forgives a multi-byte character cut at the end of the sample
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return _guess_encoding(head)
    return "utf-8-sig" if head.startswith(codecs.BOM_UTF8) else "utf-8"


def _guess_encoding(head: bytes) -> str:
    try:
        from charset_normalizer import from_bytes
    except ImportError:
        return "latin-1"
    matches = from_bytes(head[: 256 * 1024])
    best = matches.best()
    if best is None:
        return "latin-1"
    # Short samples fit many code pages equally well; the usual Western one wins a tie.
    tied = any(m.encoding == "cp1252" and m.chaos <= best.chaos for m in matches)
    name = "cp1252" if tied or _reads_alike(head, best.encoding) else best.encoding
    try:
        codecs.lookup(name)
    except LookupError:
        return "latin-1"
    return name


def _reads_alike(head: bytes, encoding: str) -> bool:
    try:
        return head.decode("cp1252") == head.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return False


def short(value: object, width: int = 40) -> str:
    """`value` as text of at most `width` characters."""
    text = str(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def describe_frame(df: pd.DataFrame, total_rows: int | None = None) -> list[str]:
    """Rows, columns, per-column dtype/nulls/uniques/examples (or min/max), first 3 rows."""
    shown = (
        f"rows: {len(df):,}"
        if total_rows in (None, len(df))
        else (f"rows: {total_rows:,} (statistics use the first {len(df):,})")
    )
    out = [f"{shown}, columns: {df.shape[1]}", "columns:"]
    for i, name in enumerate(df.columns[:200]):
        out.append(_describe_column(name, df.iloc[:, i]))  # positional: names may repeat
    if df.shape[1] > 200:
        out.append(f"  ... and {df.shape[1] - 200} more columns")
    if df.empty:
        return out
    return out + ["first 3 rows:", df.head(3).to_string(max_cols=30, max_colwidth=30)]


def _describe_column(name: object, s: pd.Series) -> str:
    try:
        uniques = s.dropna().unique()
    except TypeError:  # unhashable cells (lists/dicts from JSON): compare their text
        uniques = s.dropna().astype(str).unique()
    info = f"  - {name} ({s.dtype}): nulls={int(s.isna().sum())}, unique={len(uniques)}"
    numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
    if (numeric or pd.api.types.is_datetime64_any_dtype(s)) and len(uniques):
        info += f", min={s.min()}, max={s.max()}"
    else:
        info += f", examples={[short(v) for v in uniques[:3]]}"
    span = _year_span(name, s, uniques)
    if span:
        info += f", years {span[0]}-{span[1]}" if span[0] != span[1] else f", year {span[0]}"
    return info


# A column named for time ("Year", "report_date", "Period", "month") whose values are years,
# dates (year first, or month/day first: 9/22/2002) or yyyymm/yyyymmdd numbers states the
# years it covers: the examples show only the first values, and a question about 2007 must
# find the table whose rows run 2001-2024.
_TIME_NAME = re.compile(r"year|yr\b|date|period|season|month|time|day", re.IGNORECASE)
_YEARISH = re.compile(
    r"^((?:1[7-9]|20)\d\d)(?:[-/.]?(?:0[1-9]|1[0-2])(?:[-/.]?\d\d)?)?(?:[ T].*)?$"
)


_DAY_FIRST = re.compile(r"^\d{1,2}[-/.]\d{1,2}[-/.]((?:1[7-9]|20)\d\d)(?:[ T].*)?$")  # 9/22/2002


def _year_span(name: object, s: pd.Series, uniques: object) -> tuple[int, int] | None:
    """(first, last) year of a time column, or None: at least 80% of its distinct values
    must read as a year, a date or a yyyymm(dd) number."""
    if pd.api.types.is_datetime64_any_dtype(s):
        values = s.dropna()
        return (values.min().year, values.max().year) if len(values) else None
    if not _TIME_NAME.search(str(name)) or pd.api.types.is_bool_dtype(s):
        return None
    texts = [str(v).strip().removesuffix(".0") for v in list(uniques)[:5000]]
    years = [int(m.group(1)) for m in map(_YEARISH.match, texts) if m] or [
        int(m.group(1)) for m in map(_DAY_FIRST.match, texts) if m
    ]
    if not years or len(years) < 0.8 * len(texts):
        return None
    return min(years), max(years)
