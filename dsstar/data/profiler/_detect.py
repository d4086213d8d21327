"""What a file is, from its content first and its name second.

A JSON document named `.csv` is JSON; a SQLite database named `.bin` is SQLite. The name
decides only among text formats the content cannot tell apart (CSV, TSV, Markdown, logs)."""

from __future__ import annotations

import codecs
import json
import os
import stat
import unicodedata
import zipfile
from pathlib import Path

__all__ = ["ARCHIVE_KINDS", "FORMATS", "archive_kind", "detect_format", "wide_encoding"]

FORMATS: dict[str, str] = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".json": "json",
    ".geojson": "json",
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
    ".duckdb": "duckdb",
    ".pdf": "pdf",
    ".txt": "text",
    ".log": "log",
    ".xml": "text",
    ".html": "html",
    ".htm": "html",
    ".zip": "archive",
    ".tar": "archive",
    ".tar.gz": "archive",
    ".tgz": "archive",
    ".tar.bz2": "archive",
    ".tar.xz": "archive",
    ".gz": "archive",
    ".bz2": "archive",
    ".xz": "archive",
}
ARCHIVE_KINDS = ("zip", "tar", "gz", "bz2", "xz")
_TEXT_BY_NAME = {"csv", "tsv", "markdown", "text", "log", "html", "json", "jsonl"}


def _by_name(name: str) -> str | None:
    name = name.lower()
    for suffix in sorted(FORMATS, key=len, reverse=True):  # longest first: .tar.gz before .gz
        if name.endswith(suffix):
            return FORMATS[suffix]
    return None


def _head(path: str, size: int = 8192) -> bytes | None:
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
    head = _head(path, 1024) if head is None else head
    if not head:
        return None
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
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


_ZIP_ENTRIES = 100_000  # more than any office file holds; a zip's directory is loaded whole


def _small_zip(path: str) -> bool:
    """Whether the zip's end record declares few enough entries to load its directory."""
    try:
        with open(path, "rb") as handle:
            end = zipfile._EndRecData(handle)
    except (OSError, AttributeError):
        return False
    return bool(end) and end[zipfile._ECD_ENTRIES_TOTAL] <= _ZIP_ENTRIES


def _is_office(path: str) -> bool:
    if not _small_zip(path):
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return "[Content_Types].xml" in zf.namelist()
    except (OSError, zipfile.BadZipFile):
        return False


def _binary_format(path: str, head: bytes) -> str | None:
    """Formats recognised by their magic bytes."""
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    if head[8:12] == b"DUCK":
        return "duckdb"
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"%PDF"):
        return "pdf"
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return "excel"  # the legacy OLE2 .xls container
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "excel" if _is_office(path) and _zip_has(path, "xl/") else "archive"
    return "archive" if archive_kind(path, head) else None


def _zip_has(path: str, prefix: str) -> bool:
    if not _small_zip(path):
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return any(n.startswith(prefix) for n in zf.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


_CONTROL_BYTES = bytes([*range(9), *range(14, 32)])  # control bytes that text rarely holds


# UTF-32 first: its little-endian BOM begins with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32", "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32", "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16", "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16", "utf-16-be"),
)
_NOT_TEXT = {"Cc", "Cf", "Cn", "Co", "Cs"}  # controls, format marks, unassigned, private use


def wide_encoding(head: bytes) -> str | None:
    """The UTF-16 or UTF-32 codec `head` is written in, told by its BOM or, without one, by
    its zero bytes, when a strict decode yields plain text; None for anything else."""
    for bom, name, codec in _BOMS:
        if head.startswith(bom):
            return name if _plain_text(head[len(bom) :], codec) else None
    if b"\x00" not in head[:4096]:
        return None
    for codec in ("utf-32-le", "utf-32-be", "utf-16-le", "utf-16-be"):
        if _plain_text(head, codec):
            return codec
    return None


def _plain_text(data: bytes, codec: str) -> bool:
    try:  # final=False forgives a character cut at the end of the sample
        text = codecs.getincrementaldecoder(codec)().decode(data[:4096], final=False)
    except UnicodeDecodeError:
        return False
    odd = sum(unicodedata.category(c) in _NOT_TEXT and c not in "\t\n\r" for c in text)
    return odd <= len(text) * 0.02


def _looks_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    sample = head[:4096]
    controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return controls > len(sample) * 0.1


def _json_kind(text: str, named: str | None) -> str | None:
    """'json' or 'jsonl' when the text is JSON, judged from the leading lines."""
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped.startswith(("{", "[")):
        return None
    lines = [ln for ln in stripped.splitlines()[:5] if ln.strip()]
    complete = [ln for ln in lines[:-1] if _parses(ln)] if len(lines) > 2 else []
    if named == "jsonl" or (len(complete) == len(lines) - 1 >= 2 and lines[0].startswith("{")):
        return "jsonl"
    return "json"


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def detect_format(path: str) -> str:
    """The format of `path`: magic bytes and content first, then the name. A path that is
    not a readable regular file gets its format from the name alone."""
    named = _by_name(Path(path).name)
    head = _head(path)
    if head is None:
        return named or "unknown"
    if not head:
        return named or "text"
    found = _binary_format(path, head)
    if found:
        return found
    if named and named not in _TEXT_BY_NAME:  # damaged binary format: its reader says why
        return named
    wide = wide_encoding(head)
    if wide is None and _looks_binary(head):
        return "binary"
    text = head.decode(wide or "utf-8", errors="replace")
    json_kind = _json_kind(text, named)
    if json_kind:
        return json_kind
    lowered = text.lstrip("\ufeff \t\r\n")[:200].lower()
    if lowered.startswith(("<!doctype html", "<html")):
        return "html"
    return "text" if named in (None, "json", "jsonl") else named
