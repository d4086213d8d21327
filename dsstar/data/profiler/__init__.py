"""LLM-free profiler: a concise plain-text description of each data file.

Used by `dsstar describe --offline`, by the retrieval index and as the fallback description
when the analyzer's script fails. `profile_file` reads in this process (for trusted files
and tests); `profile_files` reads inside the sandbox, as generated code does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsstar.data.formats import definition_sources
from dsstar.data.profiler import _detect
from dsstar.data.profiler._detect import ARCHIVE_KINDS, FORMATS, archive_kind, detect_format
from dsstar.data.profiler.isolated import (
    KILLED_OUTSIDE,
    ProfileLimits,
    failure,
    library_source,
    profile_files,
    script_source,
    transient,
)

__all__ = [
    "ARCHIVE_KINDS",
    "FORMATS",
    "KILLED_OUTSIDE",
    "MAX_ROWS",
    "ProfileLimits",
    "archive_kind",
    "detect_format",
    "detector_sources",
    "failure",
    "library_source",
    "profile_file",
    "profile_files",
    "script_source",
    "transient",
]


def detector_sources() -> list[str]:
    """The sources that decide a file's format (the detector and every format's definition):
    the catalog fingerprints them, so that a changed detector detects every file afresh."""
    return [Path(_detect.__file__).read_text(encoding="utf-8"), *definition_sources()]


def __getattr__(name: str) -> Any:
    # The readers import pandas (about 0.8 s): only profiling in this process needs them,
    # not listing a lake, detecting formats or reading cached profiles.
    if name == "MAX_ROWS":
        from dsstar.data.profiler._base import MAX_ROWS

        return MAX_ROWS
    if name == "profile_file":
        from dsstar.data.profiler._core import profile_file

        return profile_file
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
