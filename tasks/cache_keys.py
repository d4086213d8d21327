"""Names that Prefect keeps: cache keys (file names in result storage) and artifact keys."""

from __future__ import annotations

import re

from dsstar.text import digest

__all__ = ["artifact_key", "digest", "key_part"]


def key_part(text: str) -> str:
    """`text` made safe for a cache key (cache keys are file names in result storage); long
    texts keep a hash of the whole, so two labels never collide by truncation."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")
    return safe if len(safe) <= 80 else f"{safe[:60]}-{digest(text)}"


def artifact_key(text: str) -> str:
    """`text` as a Prefect artifact key: lowercase letters, digits and dashes only."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
