"""Step 2 of the algorithm: the files the agents see, as `FileInfo` (path in the sandbox and
description), the top-K of them by relevance to the question when there are more than K."""

from __future__ import annotations

import logging
from typing import Any

from . import agents
from .agents import FileInfo
from .errors import LLMError
from .retrieval import Hit, Similarity, rank_sources

__all__ = ["retrieve"]

log = logging.getLogger(__name__)


def retrieve(
    question: str,
    files: list[dict[str, Any]],
    top_k: int,
    max_chars: int,
    similarity: Similarity | None = None,
) -> list[FileInfo]:
    """The top-K sources (all files when there are at most K), as agents see them.

    A folder of like files counts as one source and is shown once: its member list and
    the description of its first member."""
    if len(files) <= top_k:
        return [
            FileInfo(path=f"data/{f['path']}", description=agents.clip(f["description"], max_chars))
            for f in files
        ]
    described = {f["path"]: f["description"] or "" for f in files}
    try:
        hits = rank_sources(question, described, similarity=similarity)[:top_k]
    except LLMError as exc:  # embeddings only refine the ranking: BM25 alone still works
        log.warning("embedding server failed, ranking with BM25 alone: %s", exc)
        hits = rank_sources(question, described)[:top_k]
    return [
        FileInfo(
            path=f"data/{h.path}", description=agents.clip(_source_text(h, described), max_chars)
        )
        for h in hits
    ]


def _source_text(hit: Hit, described: dict[str, str]) -> str:
    if not hit.path.endswith("/"):
        return described[hit.path]
    names = ", ".join(m.removeprefix(hit.path) for m in hit.members)
    first = hit.members[0]
    return (
        f"Folder of {len(hit.members)} like files (same format and layout): {names}\n"
        f"Description of {first}, as an example of the layout:\n{described[first]}"
    )
