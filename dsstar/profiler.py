"""LLM-free profiler: a concise plain-text description of one data file.

Used by ``dsstar describe --offline`` and as a reference for a good file description:
what an analyst needs to write code against the file."""

from __future__ import annotations

import codecs
import csv
import importlib.util
import io
import json
import sqlite3
import tarfile
import warnings
import zipfile
from collections import Counter
from itertools import islice
from pathlib import Path

import pandas as pd

__all__ = ["FORMATS", "MAX_ROWS", "detect_format", "profile_file"]

FORMATS: dict[str, str] = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".md": "markdown",
    ".markdown": "markdown",
    ".xlsx": "excel",
    ".xlsm": "excel",
    ".xls": "excel",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".sqlite": "sqlite",
    ".sqlite3": "sqlite",
    ".db": "sqlite",
    ".txt": "text",
    ".log": "text",
    ".html": "html",
    ".htm": "html",
    ".zip": "archive",
    ".tar": "archive",
    ".tar.gz": "archive",
    ".tgz": "archive",
}
MAX_ROWS = 200_000  # rows read for statistics; bounds time and memory on big tables
_LABELS = {
    "csv": "CSV",
    "tsv": "TSV",
    "json": "JSON",
    "jsonl": "JSON Lines",
    "excel": "Excel",
    "parquet": "Parquet",
    "sqlite": "SQLite",
    "archive": "archive",
    "html": "HTML",
}
_TRUNCATED = "\n... (truncated)"


def detect_format(path: str) -> str:
    """Format name from the suffix (case-insensitive), else by sniffing the first 4 KB."""
    name = Path(path).name.lower()
    for suffix in sorted(FORMATS, key=len, reverse=True):  # longest first: .tar.gz before .gz
        if name.endswith(suffix):
            return FORMATS[suffix]
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return "unknown"
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "archive"
    return "binary" if _pick_encoding(head) == "latin-1" or b"\x00" in head else "text"


def profile_file(path: Path, display_name: str | None = None, max_chars: int = 6000) -> str:
    """Describe ``path``; parse errors are reported in the text, only a missing path raises."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    fmt = detect_format(str(path))
    size = path.stat().st_size
    lines = [f"File: {display_name or path.name} (format: {fmt}, size: {_human(size)})"]
    describer = _DESCRIBERS.get(fmt, _describe_binary)
    if path.is_dir() or size == 0:
        lines.append("This is a directory, not a file." if path.is_dir() else "The file is empty.")
    else:
        try:
            with warnings.catch_warnings():  # pandas/openpyxl warnings would only add noise
                warnings.simplefilter("ignore")
                lines += describer(path, fmt)
        except Exception as exc:  # never raise: the error itself is the description
            lines.append(f"could not parse as {_LABELS.get(fmt, fmt)}: {type(exc).__name__}: {exc}")
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[: max(0, max_chars - len(_TRUNCATED))] + _TRUNCATED
    return text


def _human(size: int) -> str:
    """Human-readable byte count that keeps the exact value."""
    for unit, factor in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f} {unit} ({size:,} bytes)"
    return f"{size} bytes"


def _count_lines(path: Path) -> int:
    """Count newline-terminated lines in binary chunks, without decoding or parsing."""
    count, last = 0, b"\n"
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            count, last = count + chunk.count(b"\n"), chunk[-1:]
    return count + (last != b"\n")


def _pick_encoding(head: bytes) -> str:
    """utf-8 (BOM-aware) when the sample decodes, else latin-1, which accepts any byte."""
    try:  # final=False forgives a multi-byte character cut at the end of the sample
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return "latin-1"
    return "utf-8-sig" if head.startswith(codecs.BOM_UTF8) else "utf-8"


def _short(value: object, width: int = 40) -> str:
    text = str(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _describe_frame(df: pd.DataFrame, total_rows: int | None = None) -> list[str]:
    """Rows, columns, per-column dtype/nulls/uniques/examples (or min/max), first 3 rows."""
    shown = (
        f"rows: {len(df):,}"
        if total_rows in (None, len(df))
        else (f"rows: {total_rows:,} (statistics use the first {len(df):,})")
    )
    out = [f"{shown}, columns: {df.shape[1]}", "columns:"]
    for i, name in enumerate(df.columns):
        s = df.iloc[:, i]  # positional: duplicate column names would return a frame
        try:
            uniques = s.dropna().unique()
        except TypeError:  # unhashable cells (lists/dicts from JSON): compare their text
            uniques = s.dropna().astype(str).unique()
        info = f"  - {name} ({s.dtype}): nulls={int(s.isna().sum())}, unique={len(uniques)}"
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if (numeric or pd.api.types.is_datetime64_any_dtype(s)) and len(uniques):
            info += f", min={s.min()}, max={s.max()}"
        else:
            info += f", examples={[_short(v) for v in uniques[:3]]}"
        out.append(info)
    if df.empty:
        return out
    return out + ["first 3 rows:", df.head(3).to_string(max_cols=30, max_colwidth=30)]


def _csv_layout(sample: str, fmt: str) -> tuple[str, int, str]:
    """Delimiter, physical lines before the header, and the skipped title text.

    The delimiter is the candidate giving the most records with the same field count;
    title rows above the header are records with fewer fields than that mode.
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
    reader = csv.reader(io.StringIO(sample), delimiter=delim)
    skipped, before = [], 0
    for row in reader:  # line_num tracks physical lines, so quoted newlines are handled
        if width and len(row) >= width:  # title rows are shorter than the header
            break
        skipped += [" ".join(row)] if row else []
        before = reader.line_num
    return delim, (before if width else 0), " | ".join(skipped)


def _describe_csv(path: Path, fmt: str) -> list[str]:
    """Sniff encoding, delimiter and header position, then profile the first MAX_ROWS rows."""
    with open(path, "rb") as fh:
        head = fh.read(256 * 1024)
    encoding = _pick_encoding(head)
    delim, skip, title = _csv_layout(head.decode(encoding, errors="replace"), fmt)
    kw = {
        "sep": delim,
        "encoding": encoding,
        "skiprows": skip,
        "nrows": MAX_ROWS,
        "low_memory": False,
    }
    out = []
    while True:  # terminates: latin-1 decodes any byte, and bad lines are skipped only once
        try:
            df = pd.read_csv(path, **kw)
            break
        except UnicodeDecodeError:  # a non-utf-8 byte past the sniffed sample
            kw["encoding"] = "latin-1"
        except pd.errors.ParserError as exc:  # ragged rows: profile the well-formed ones
            if "on_bad_lines" in kw:
                raise
            out.append(f"note: malformed lines skipped ({_short(str(exc).strip(), 100)})")
            kw["on_bad_lines"] = "skip"
    out.insert(0, f"encoding: {kw['encoding']}, delimiter: {delim!r}")
    if skip:
        out.append(
            f"note: header is not on the first line; skipped {skip} line(s) above it"
            f" (title: {_short(title, 80)!r}); use skiprows={skip}"
        )
    total = None
    if len(df) == MAX_ROWS:  # only pay for a line count when the file may be longer
        total = max(len(df), _count_lines(path) - skip - 1)
        out.append(f"note: file has ~{total:,} data rows; statistics use the first {MAX_ROWS:,}")
    return out + _describe_frame(df, total)


def _describe_excel(path: Path, fmt: str) -> list[str]:
    """One table summary per sheet."""
    sheets = pd.read_excel(path, sheet_name=None, nrows=MAX_ROWS)
    out = [f"sheets ({len(sheets)}): {', '.join(map(str, sheets))}"]
    for name, df in sheets.items():
        out += [f"## sheet {name!r}", *_describe_frame(df)]
    return out


def _describe_parquet(path: Path, fmt: str) -> list[str]:
    """Row count from metadata; statistics from the first batch only."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    total = pf.metadata.num_rows
    batch = next(pf.iter_batches(batch_size=MAX_ROWS), None)
    df = batch.to_pandas() if batch is not None else pf.schema_arrow.empty_table().to_pandas()
    return [f"row groups: {pf.num_row_groups}", *_describe_frame(df, total)]


def _describe_sqlite(path: Path, fmt: str) -> list[str]:
    """Tables and views with declared columns (PRAGMA), row counts and sample statistics."""
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)  # never modify it
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type IN "
                "('table', 'view') AND name NOT LIKE 'sqlite_%'"
            )
        ]
        out = [f"tables ({len(names)}): {', '.join(names)}"]
        for name in names:
            quoted = '"' + name.replace('"', '""') + '"'
            cols = con.execute(f"PRAGMA table_info({quoted})").fetchall()
            count = con.execute(f"SELECT COUNT(*) FROM {quoted}").fetchone()[0]
            df = pd.read_sql_query(f"SELECT * FROM {quoted} LIMIT {MAX_ROWS}", con)
            out += [
                f"## table {name!r} ({count:,} rows)",
                "declared columns: " + ", ".join(f"{c[1]} {c[2] or '?'}" for c in cols),
                *_describe_frame(df, count),
            ]
        return out
    finally:
        con.close()


def _json_type(value: object) -> str:
    """Type name; containers add their length, lists the type of their first item."""
    if isinstance(value, list):
        inner = f"[{type(value[0]).__name__}]" if value else ""
        return f"list{inner} ({len(value)} items)"
    return f"dict ({len(value)} keys)" if isinstance(value, dict) else type(value).__name__


def _json_outline(value: object, depth: int = 0, pad: str = "  ") -> list[str]:
    """Keys with value types (and lengths), nested to depth 3; lists show their first item."""
    if depth >= 3 or not value or not isinstance(value, (list, dict)):
        return []
    if isinstance(value, list):
        return _json_outline(value[0], depth + 1, pad)
    out = []
    for key, item in list(value.items())[:40]:  # cap keys: wide objects would flood the text
        out += [f"{pad}{key}: {_json_type(item)}", *_json_outline(item, depth + 1, pad + "  ")]
    return out


def _describe_json(path: Path, fmt: str) -> list[str]:
    """Top-level type, key outline, and a table summary for a list of records."""
    raw = path.read_bytes()
    data = json.loads(raw.decode(_pick_encoding(raw)))
    out = [f"top-level type: {_json_type(data)}"]
    out += (
        ["structure:", *_json_outline(data)]
        if isinstance(data, (list, dict))
        else [f"value: {_short(data, 200)}"]
    )
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data[:100]):
        out += [
            "as a table of records:",
            *_describe_frame(pd.json_normalize(data[:MAX_ROWS], max_level=1), len(data)),
        ]
    return out


def _describe_jsonl(path: Path, fmt: str) -> list[str]:
    """Record count, keys with frequency, and a table summary of the first MAX_ROWS records."""
    records, count, bad = [], 0, 0
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in filter(str.strip, fh):
            count += 1
            if len(records) < MAX_ROWS:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    bad += 1
    keys = Counter(k for r in records if isinstance(r, dict) for k in r)
    out = [
        f"records: {count:,}" + (f" ({bad} unparseable lines)" if bad else ""),
        "keys: " + (", ".join(f"{k} ({n})" for k, n in keys.most_common(50)) or "none"),
    ]
    dicts = [r for r in records if isinstance(r, dict)]
    return out + (_describe_frame(pd.DataFrame(dicts), count - bad) if dicts else [])


def _describe_text(path: Path, fmt: str) -> list[str]:
    """Line count, markdown headings and the first lines, from the first 1 MB of text."""
    with open(path, "rb") as fh:
        head = fh.read(1 << 20)
    text = head.decode(_pick_encoding(head), errors="replace")
    lines = text.splitlines()
    out = [f"lines: {_count_lines(path):,}"]
    if fmt == "markdown":
        heads = [ln for ln in lines if ln.startswith("#")][:30]
        out += ["headings:", *(f"  {h}" for h in heads)] if heads else ["headings: none"]
    return out + ["first lines:", *(f"  {_short(ln, 200)}" for ln in lines[:10])]


def _describe_html(path: Path, fmt: str) -> list[str]:
    """Tables via pandas.read_html when a parser is installed, else the text view."""
    tables, note = [], "no HTML parser (lxml or bs4) installed"
    if any(importlib.util.find_spec(m) for m in ("lxml", "bs4")):
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                tables = pd.read_html(fh)
        except (ValueError, ImportError) as exc:  # no <table>, or bs4 without html5lib
            note = f"no tables parsed ({exc})"
    out = [f"html tables: {len(tables)}"]
    for i, df in enumerate(tables[:10]):
        out += [f"## table {i}", *_describe_frame(df)]
    return out if tables else [f"{note}; text view:", *_describe_text(path, "text")]


def _describe_archive(path: Path, fmt: str) -> list[str]:
    """Member names and sizes, read from the index only (nothing is extracted)."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            members = [(i.filename, i.file_size) for i in zf.infolist()]
    else:
        with tarfile.open(path) as tf:
            members = [(m.name, m.size) for m in tf.getmembers()]
    out = [f"members: {len(members)}"]
    out += [f"  {name} ({_human(size)})" for name, size in members[:100]]
    return out + ([f"  ... and {len(members) - 100} more"] if len(members) > 100 else [])


def _describe_binary(path: Path, fmt: str) -> list[str]:
    """Unrecognised content: show the leading bytes so a human can identify it."""
    with open(path, "rb") as fh:
        return [f"binary or unrecognised content; first bytes: {fh.read(32).hex(' ')}"]


_DESCRIBERS = {
    "csv": _describe_csv,
    "tsv": _describe_csv,
    "excel": _describe_excel,
    "parquet": _describe_parquet,
    "sqlite": _describe_sqlite,
    "json": _describe_json,
    "jsonl": _describe_jsonl,
    "markdown": _describe_text,
    "text": _describe_text,
    "html": _describe_html,
    "archive": _describe_archive,
}
