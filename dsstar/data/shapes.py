"""Shapes: files that one analyzer script can describe, grouped by what the profiler sees.

A lake often holds one table split over many files (one CSV per day, per station, per
partition folder). Two files share a shape when they have the same format, sit in the same
folder once digit runs are masked (`year=2023/` ~ `year=2024/`, `day_01/` ~ `day_02/`), and
have the same schema signature in their offline profiles: the column names in order, the
nested key paths, the sheets and tables. Formats without a schema (Markdown, text, logs) have
an empty signature; a structured file whose profile names no structure (it could not be read)
shares its shape with no other file.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import PurePosixPath

__all__ = ["UNSTRUCTURED", "column_names", "group_by_shape", "schema_signature", "shape_key"]

# Formats whose profile shows text, not a schema: any two of them in a folder share a shape.
UNSTRUCTURED = frozenset({"markdown", "text", "log", "html", "pdf", "xml", "yaml"})

# Column lines of the offline profile ("  - name (dtype): ...").
_COLUMN = re.compile(r"^\s*-\s+(.+?)\s+\((?:[^()]*)\)\s*:", re.MULTILINE)
# Other structure the profiler names: JSON key paths ("  items[].id: int e.g. 3"), sheets,
# tables and their declared columns, JSON Lines keys (their counts dropped).
_STRUCTURE = re.compile(
    r"^(?:\s{2}([\w$@\-\[\]. ]+): (?:int|float|str|bool|NoneType|list|dict)\b.*"
    r"|(sheets \(\d+\): .*|## sheet .*|## table .*|tables \(\d+\): .*|declared columns: .*))$",
    re.MULTILINE,
)
_JSONL_KEYS = re.compile(r"^keys: (.*)$", re.MULTILINE)
# pandas names headerless columns "Unnamed: 3": such names say nothing about a file's schema.
_PLACEHOLDER = re.compile(r"^(unnamed: ?\d+|\d+|)$")


def column_names(profile: str) -> frozenset[str]:
    """The column names an offline profile lists, lower-cased, placeholders left out."""
    names = {m.strip().lower() for m in _COLUMN.findall(profile)}
    return frozenset(n for n in names if not _PLACEHOLDER.match(n))


def schema_signature(profile: str) -> str:
    """The structure an offline profile names, as one string: columns in order, key paths,
    sheets, tables. Values, counts and statistics are left out, so two parts of one table
    have the same signature."""
    parts = [f"col {m.strip().lower()}" for m in _COLUMN.findall(profile)]
    for path, other in _STRUCTURE.findall(profile):
        parts.append(f"key {path.strip()}" if path else re.sub(r"\(\d[\d,]* rows\)", "", other))
    for keys in _JSONL_KEYS.findall(profile):
        parts.append("keys " + re.sub(r" \(\d+\)", "", keys))
    return "\n".join(parts)


def shape_key(path: str, file_format: str, profile: str) -> tuple[str, ...]:
    """What two files must share to share a shape (see the module's docstring)."""
    folder = re.sub(r"\d+", "#", str(PurePosixPath(path).parent).lower())
    signature = schema_signature(profile)
    if not signature and file_format not in UNSTRUCTURED:
        return ("alone", path)  # nothing known about its structure: it shares with no file
    return ("shape", folder, file_format, signature)


def group_by_shape(files: Iterable[tuple[str, str, str]]) -> list[list[str]]:
    """The paths of `files` ((path, format, profile) each) grouped by shape, each group in
    the order given, groups in the order of their first member."""
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for path, file_format, profile in files:
        groups[shape_key(path, file_format, profile)].append(path)
    return list(groups.values())
