"""Sources: a file, or a folder's set of like files that counts as one source.

Lakes often hold one table split across many files (one CSV per state, per day, per sensor).
Ranking them one by one lets the split table fill the top-K. Like files are grouped instead:
same folder, same format, and either the same column names (from the profile) or the same
name once digits are masked (`omni2-wu001-2013.csv` ~ `omni2-wu002-2014.csv`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import PurePosixPath

from dsstar.data.shapes import column_names

__all__ = ["MIN_MEMBERS", "Source", "group_sources"]

MIN_MEMBERS = 5  # fewer like files are listed one by one: they cost little room in the top-K
_SIMILAR = 0.6  # Jaccard similarity of column-name sets that makes two files alike


@dataclass(frozen=True)
class Source:
    """What retrieval ranks: one file (`members == (path,)`), or a folder of like files
    whose `path` ends with '/'."""

    path: str
    members: tuple[str, ...]

    @property
    def is_group(self) -> bool:
        return self.path.endswith("/")


def _name_shape(path: str) -> str:
    """File name with digit runs masked, format kept: `day-2024-01-02.log` -> `day-#-#-#.log`."""
    return re.sub(r"\d+", "#", PurePosixPath(path).name.lower())


def _alike(a: tuple[str, frozenset[str]], b: tuple[str, frozenset[str]]) -> bool:
    (shape_a, cols_a), (shape_b, cols_b) = a, b
    if cols_a and cols_b:
        return len(cols_a & cols_b) / len(cols_a | cols_b) >= _SIMILAR
    return shape_a == shape_b and "#" in shape_a


def group_sources(documents: dict[str, str], min_members: int = MIN_MEMBERS) -> list[Source]:
    """Every document key as exactly one source, sorted by path.

    In each folder, files of one format are clustered by likeness (first file of a cluster is
    its reference); the largest cluster of at least `min_members` files becomes the folder's
    source, named `folder/`. Other files stay sources of their own.
    """
    by_folder: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(documents):
        parent = str(PurePosixPath(path).parent)
        suffix = PurePosixPath(path).suffix.lower()
        by_folder[(parent, suffix)].append(path)
    best: dict[str, list[str]] = {}  # folder -> its largest like cluster
    for (parent, _), paths in by_folder.items():
        if len(paths) < min_members:
            continue
        for cluster in _clusters(paths, documents):
            if len(cluster) >= min_members and len(cluster) > len(best.get(parent, [])):
                best[parent] = cluster
    grouped = {path for cluster in best.values() for path in cluster}
    sources = [Source(path, (path,)) for path in documents if path not in grouped]
    for parent, cluster in best.items():
        folder = "" if parent == "." else parent + "/"
        sources.append(Source(folder or "./", tuple(cluster)))
    return sorted(sources, key=lambda s: s.path)


def _clusters(paths: list[str], documents: dict[str, str]) -> list[list[str]]:
    clusters: list[tuple[tuple[str, frozenset[str]], list[str]]] = []
    for path in paths:
        key = (_name_shape(path), column_names(documents[path]))
        for reference, members in clusters:
            if _alike(reference, key):
                members.append(path)
                break
        else:
            clusters.append((key, [path]))
    return [members for _, members in clusters]
