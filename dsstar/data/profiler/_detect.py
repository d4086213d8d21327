"""What a file is, from its content first and its name second.

A JSON document named `.csv` is JSON; a SQLite database named `.bin` is SQLite. The name
decides only among text formats the content cannot tell apart (CSV, TSV, Markdown, logs).
The formats themselves, and their content tests, are the registry's (`dsstar.data.formats`)."""

from __future__ import annotations

import codecs
import unicodedata
from pathlib import Path

from dsstar.data.formats import (
    ARCHIVE_KINDS,
    ExtensionMap,
    archive_kind,
    for_file_name,
    formats,
    leading_bytes,
)

__all__ = ["ARCHIVE_KINDS", "FORMATS", "archive_kind", "detect_format", "wide_encoding"]

FORMATS = ExtensionMap()  # extension -> format name, as registered

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


def detect_format(path: str) -> str:
    """The format of `path`: magic bytes and content first, then the name. A path that is
    not a readable regular file gets its format from the name alone."""
    named = for_file_name(Path(path).name)
    head = leading_bytes(path)
    if head is None:
        return named.name if named else "unknown"
    if not head:
        return named.name if named else "text"
    known = formats()
    for fmt in known:
        if fmt.magic is not None and fmt.magic(path, head):
            return fmt.name
    if named and not named.text:  # damaged binary format: its reader says why
        return named.name
    wide = wide_encoding(head)
    if wide is None and _looks_binary(head):
        return "binary"
    text = head.decode(wide or "utf-8", errors="replace")
    for fmt in known:
        if fmt.sniff is not None and fmt.sniff(text, named.name if named else None):
            return fmt.name
    return named.name if named and not named.needs_sniff else "text"
