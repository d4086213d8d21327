"""LLM-free profiler: a concise plain-text description of each data file.

Used by `dsstar describe --offline`, by the retrieval index and as the fallback description
when the analyzer's script fails. `profile_file` reads in this process (for trusted files
and tests); `profile_files` reads inside the sandbox, as generated code does."""

from __future__ import annotations

from ._base import MAX_ROWS
from ._core import profile_file
from ._detect import ARCHIVE_KINDS, FORMATS, archive_kind, detect_format
from .isolated import ProfileLimits, profile_files, script_source

__all__ = [
    "ARCHIVE_KINDS",
    "FORMATS",
    "MAX_ROWS",
    "ProfileLimits",
    "archive_kind",
    "detect_format",
    "profile_file",
    "profile_files",
    "script_source",
]
