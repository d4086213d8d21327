"""The formats dsstar knows out of the box, each defined once: its extensions, how its content
is recognised, its profiler, its contract reader, and whether it is documentation.

A user's format is added the same way, with `register` (see `dsstar.data.formats`). Profilers
and readers are named by "module:function" so that registering imports no pandas. Like the
registry, this module is self-contained: it is joined into the sandboxed profiling script."""

from __future__ import annotations

import json
import os
import stat
import zipfile

from dsstar.data.formats._registry import Format, register

__all__ = ["ARCHIVE_KINDS", "archive_kind", "leading_bytes"]

ARCHIVE_KINDS = ("zip", "tar", "gz", "bz2", "xz")
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_ZIP_ENTRIES = 100_000  # more than any office file holds; a zip's directory is loaded whole
_TABLES = "dsstar.data.profiler._tables"
_DOCS = "dsstar.data.profiler._docs"
_READ = "dsstar.data.contracts._read"


def leading_bytes(path: str, size: int = 8192) -> bytes | None:
    """The leading bytes of a regular file; None for anything else (never opens a FIFO)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return None


def archive_kind(path: str, head: bytes | None = None) -> str | None:
    """'zip', 'tar', 'gz', 'bz2' or 'xz' when the content is such an archive or stream.
    Office files (xlsx, docx) are zips but not archives: they are read as documents."""
    head = leading_bytes(path, 1024) if head is None else head
    if not head:
        return None
    if head.startswith(_ZIP_MAGIC):
        return None if _is_office(path) else "zip"
    if head.startswith(b"\x1f\x8b"):
        return "gz"
    if head.startswith(b"BZh"):
        return "bz2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if len(head) > 262 and head[257:262] == b"ustar":
        return "tar"
    return None


def _small_zip(path: str) -> bool:
    """Whether the zip's end record declares few enough entries to load its directory."""
    try:
        with open(path, "rb") as handle:
            end = zipfile._EndRecData(handle)
    except (OSError, AttributeError):
        return False
    return bool(end) and end[zipfile._ECD_ENTRIES_TOTAL] <= _ZIP_ENTRIES


def _zip_names(path: str) -> list[str]:
    if not _small_zip(path):
        return []
    try:
        with zipfile.ZipFile(path) as zf:
            return zf.namelist()
    except (OSError, zipfile.BadZipFile):
        return []


def _is_office(path: str) -> bool:
    return "[Content_Types].xml" in _zip_names(path)


def _is_workbook(path: str, head: bytes) -> bool:
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return True  # the legacy OLE2 .xls container
    return head.startswith(_ZIP_MAGIC) and _is_office(path) and _has_sheets(path)


def _has_sheets(path: str) -> bool:
    return any(name.startswith("xl/") for name in _zip_names(path))


def _is_archive(path: str, head: bytes) -> bool:
    # Any other zip (a .docx too) is an archive: it is expanded, or described as one.
    return head.startswith(_ZIP_MAGIC) or archive_kind(path, head) is not None


def _json_start(text: str) -> str | None:
    stripped = text.lstrip("\ufeff \t\r\n")
    return stripped if stripped.startswith(("{", "[")) else None


def _is_json_lines(text: str, named: str | None) -> bool:
    """JSON Lines when so named, or when the leading complete lines each parse as an object."""
    stripped = _json_start(text)
    if stripped is None:
        return False
    lines = [ln for ln in stripped.splitlines()[:5] if ln.strip()]
    complete = [ln for ln in lines[:-1] if _parses(ln)] if len(lines) > 2 else []
    return named == "jsonl" or (len(complete) == len(lines) - 1 >= 2 and lines[0].startswith("{"))


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _is_html(text: str, named: str | None) -> bool:
    return text.lstrip("\ufeff \t\r\n")[:200].lower().startswith(("<!doctype html", "<html"))


# The order is detection's: magic bytes are tried sqlite first, archives last; text sniffs
# JSON Lines before JSON.
for _format in (
    Format("sqlite", (".sqlite", ".sqlite3", ".db"), "SQLite",
           magic=lambda path, head: head.startswith(b"SQLite format 3\x00"),
           profile=f"{_TABLES}:describe_sqlite", tables=f"{_READ}:sqlite_tables"),
    Format("duckdb", (".duckdb",), "DuckDB", magic=lambda path, head: head[8:12] == b"DUCK",
           profile=f"{_TABLES}:describe_duckdb"),
    Format("parquet", (".parquet", ".pq"), "Parquet",
           magic=lambda path, head: head.startswith(b"PAR1"),
           profile=f"{_TABLES}:describe_parquet", tables=f"{_READ}:parquet_tables"),
    Format("pdf", (".pdf",), "PDF", magic=lambda path, head: head.startswith(b"%PDF"),
           profile=f"{_DOCS}:describe_pdf"),
    Format("excel", (".xlsx", ".xlsm", ".xls"), "Excel", magic=_is_workbook,
           profile=f"{_TABLES}:describe_excel", tables=f"{_READ}:excel_tables"),
    Format("archive", (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".gz", ".bz2",
                       ".xz"), "archive", magic=_is_archive, profile=f"{_DOCS}:describe_archive"),
    Format("csv", (".csv",), "CSV", text=True, profile=f"{_TABLES}:describe_csv",
           tables=f"{_READ}:csv_tables"),
    Format("tsv", (".tsv", ".tab"), "TSV", text=True, profile=f"{_TABLES}:describe_csv",
           tables=f"{_READ}:tsv_tables"),
    Format("jsonl", (".jsonl", ".ndjson"), "JSON Lines", sniff=_is_json_lines, text=True,
           needs_sniff=True, profile=f"{_DOCS}:describe_jsonl", tables=f"{_READ}:jsonl_tables"),
    Format("json", (".json", ".geojson"), "JSON", text=True, needs_sniff=True,
           sniff=lambda text, named: _json_start(text) is not None,
           profile=f"{_DOCS}:describe_json", tables=f"{_READ}:json_tables"),
    Format("html", (".html", ".htm"), "HTML", sniff=_is_html, text=True,
           profile=f"{_DOCS}:describe_html", document=True),
    Format("markdown", (".md", ".markdown"), text=True, profile=f"{_DOCS}:describe_text",
           document=True),
    Format("text", (".txt", ".xml"), text=True, profile=f"{_DOCS}:describe_text", document=True),
    Format("log", (".log",), text=True, profile=f"{_DOCS}:describe_text"),
):  # fmt: skip
    register(_format)
