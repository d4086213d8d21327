"""Recall of a benchmark's `data_sources` (KramaBench style) in a ranking of sources.

A data source is a file path (`dir/a.csv`, `a.csv`) or a folder (`dir/`, `dir/*.csv`,
`all csv in dir/`), matched case-insensitively against the end of the lake's paths. A file
counts as found when it is in the top-K, directly or as a member of a folder source; a folder
counts as found when any file under it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["covered_paths", "found", "normalize_source"]

_LEAD = re.compile(r"^all \w+(?: files)? in ", re.IGNORECASE)


def normalize_source(name: str) -> str:
    """Lower-cased path; folders (and globs over a folder) end with '/'."""
    text = _LEAD.sub("", name.strip()).strip().lower()
    head, _, last = text.rpartition("/")
    if "*" in last:  # "dir/*.csv" names the folder's files
        return f"{head}/" if head else "./"
    return text


def covered_paths(members: Iterable[Iterable[str]]) -> set[str]:
    """Lower-cased file paths of the given sources' members."""
    return {path.lower() for group in members for path in group}


def found(source: str, covered: set[str]) -> bool:
    """Whether the data source `source` is among the covered file paths."""
    name = normalize_source(source)
    if name == "./":
        return bool(covered)
    if name.endswith("/"):
        return any(p.startswith(name) or f"/{name}" in p for p in covered)
    return any(p == name or p.endswith(f"/{name}") for p in covered)
