"""How a data lake is read safely: the root opened once (`root`), listing through it
(`walk`), archive expansion (`archives`) and the read-only view generated scripts see as
`data/` (`view`)."""

from __future__ import annotations

from dsstar.data.lake.archives import ArchiveError, ArchiveLimits, expand_cached
from dsstar.data.lake.root import DataRoot
from dsstar.data.lake.view import build_view
from dsstar.data.lake.walk import Skipped, walk

__all__ = [
    "ArchiveError",
    "ArchiveLimits",
    "DataRoot",
    "Skipped",
    "build_view",
    "expand_cached",
    "walk",
]
