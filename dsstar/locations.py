"""Where data and artifacts live: a local path, a `file://` URL, or an fsspec URL such as
`s3://bucket/prefix`. Every module asks this one about a location, so a path and a URL are told
apart the same way everywhere (data roots, storage, result storage, question sets)."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["is_remote", "local_path", "normalize_location"]

# A scheme (RFC 3986) and "://", after any fsspec chain (simplecache::s3://...). A local path
# may hold "://" further on (/tmp/a://b) and is still a path.
_URL = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*::)*[A-Za-z][A-Za-z0-9+.-]*://")


def is_remote(location: str) -> bool:
    """True for a URL that fsspec opens (s3://, gs://, memory://, chained ones, ...); False
    for a local path or a file:// URL."""
    match = _URL.match(location)
    return bool(match) and match.group(0).lower() != "file://"


def local_path(location: str) -> Path:
    """The local path of a location that is not remote: `file://` dropped, `~` expanded, not
    resolved (a root that is itself a link stays as the user named it)."""
    if is_remote(location):
        raise ValueError(f"{location} is a remote URL, not a local path")
    if location[:7].lower() == "file://":
        location = location[7:]
    return Path(location).expanduser()


def normalize_location(location: str) -> str:
    """One spelling per location, so runs resumed from another directory find their data and
    the same root always gets the same key: local paths become absolute and resolved, URLs
    lose trailing slashes."""
    if is_remote(location):
        return location.rstrip("/")
    return str(local_path(location).resolve())
