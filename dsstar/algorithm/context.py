"""Step 2 of the algorithm: the files the agents see, as `FileInfo` (path in the sandbox and
description), the top-K of them by relevance to the question when there are more than K, and
within the prompt's token budget (`fit_context`; documentation files whole: see `budget`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dsstar.algorithm import agents
from dsstar.algorithm.agents import FileInfo
from dsstar.algorithm.context_budget import Fitted, fit
from dsstar.data.retrieval import Hit, Similarity, rank_sources
from dsstar.errors import LLMError
from dsstar.settings import default

__all__ = ["Retrieval", "fit_context", "retrieve"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Retrieval:
    """Step 2's bounds (the settings of the same names; built by `dsstar.inputs.spec`)."""

    top_k: int = default("top_k")  # most sources shown
    max_description_chars: int = default("max_description_chars")  # of one description
    max_document_chars: int = default("max_document_chars")  # of a documentation file, whole
    context_tokens: int = default("context_tokens")  # all of them together, in a prompt


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
    limit = {f["path"]: f.get("shown_chars") or max_chars for f in files}  # documents: whole
    if len(files) <= top_k:
        return [
            FileInfo(f"data/{f['path']}", agents.clip(f["description"], limit[f["path"]]))
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
            f"data/{h.path}", agents.clip(_source_text(h, described), limit.get(h.path, max_chars))
        )
        for h in hits
    ]


def fit_context(
    question: str, files: list[FileInfo], budget_tokens: int, count: Callable[[str], int]
) -> Fitted:
    """`files` within `budget_tokens` (see `budget.fit`), the room shared by relevance to the
    question (BM25); the files stay in their order, so every prompt of a run opens alike."""
    described = {f.path: f.description for f in files}
    order = [h.path for h in rank_sources(question, described, group=False)]
    ranked = sorted(files, key=lambda f: order.index(f.path) if f.path in order else len(order))
    fitted = fit(ranked, budget_tokens, count)
    by_path = {f.path: f for f in fitted.files}
    return Fitted([by_path[f.path] for f in files], fitted.left_out)


def _source_text(hit: Hit, described: dict[str, str]) -> str:
    if not hit.path.endswith("/"):
        return described[hit.path]
    names = ", ".join(m.removeprefix(hit.path) for m in hit.members)
    first = hit.members[0]
    return (
        f"Folder of {len(hit.members)} like files (same format and layout): {names}\n"
        f"Description of {first}, as an example of the layout:\n{described[first]}"
    )
