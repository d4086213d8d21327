"""BM25 over each source's text, optionally fused with embedding similarity by reciprocal rank."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any

from dsstar.data.retrieval._sources import MIN_MEMBERS, Source, group_sources
from dsstar.data.retrieval._text import (
    YEAR,
    document_text,
    name_years,
    path_words,
    span_years,
    tokenize,
)

__all__ = ["Hit", "Similarity", "rank", "rank_sources", "reciprocal_rank_fusion", "source_text"]

RRF_K = 60  # the usual constant: damps the head of each ranking so no single one dominates
_YEAR = re.compile(YEAR)  # a question word that names a year
_MAX_MEMBER_NAMES = 200  # member names indexed for a folder source (state names, dates...)

# Similarity of the question to each source text, e.g. embedding cosine similarity.
Similarity = Callable[[str, dict[str, str]], dict[str, float]]


@dataclass(frozen=True)
class Hit:
    """One ranked source: a file, or a folder of like files (`path` ends with '/')."""

    path: str
    score: float
    members: tuple[str, ...]


def source_text(source: Source, documents: dict[str, str]) -> str:
    """The text a source is ranked by. A folder of like files is its folder words, the names
    of its members, and the text of its first member standing for the shared layout."""
    if not source.is_group:
        return document_text(source.path, documents.get(source.path, ""))
    names = " ".join(path_words(PurePosixPath(m).stem) for m in source.members[:_MAX_MEMBER_NAMES])
    first = source.members[0]
    return "\n".join(
        [
            document_text(source.path, f"{len(source.members)} like files: {names}"),
            document_text(first, documents.get(first, ""), path_boost=1),
        ]
    )


def rank_sources(
    question: str,
    documents: dict[str, str],
    *,
    similarity: Similarity | None = None,
    group: bool = True,
    min_members: int = MIN_MEMBERS,
) -> list[Hit]:
    """Sources for `question`, best first, scores in [0, 1] (1 for the best).

    `documents` maps each file path to its offline profile and/or LLM description. With
    `group`, folders of like files rank as one source. With `similarity` (embeddings), the
    BM25 ranking and the similarity ranking are fused by reciprocal rank.
    """
    sources = _sources(tuple(documents.items()), group, min_members)
    if not sources:
        return []
    texts = {s.path: source_text(s, documents) for s in sources}
    named = {s.path: tuple(y for m in s.members for y in name_years(m)) for s in sources}
    scores = _bm25(question, texts, named)
    if similarity is not None:
        dense = similarity(question, texts)
        scores = reciprocal_rank_fusion([_order(scores), _order(dense)])
    top = max(scores.values(), default=0.0)
    hits = [
        Hit(s.path, round(scores[s.path] / top, 6) if top > 0 else 0.0, s.members) for s in sources
    ]
    return sorted(hits, key=lambda h: (-h.score, h.path))


def rank(
    question: str,
    documents: dict[str, str],
    *,
    similarity: Similarity | None = None,
    group: bool = True,
) -> list[tuple[str, float]]:
    """(path, score) of every source, best first; folders of like files end with '/'."""
    hits = rank_sources(question, documents, similarity=similarity, group=group)
    return [(h.path, h.score) for h in hits]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Sum of 1 / (k + rank) over the rankings each key appears in (rank 1 is the best)."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for position, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + position)
    return fused


def _order(scores: dict[str, float]) -> list[str]:
    """Keys best first; equal scores in path order, so rankings are deterministic."""
    return [key for key, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


@lru_cache(maxsize=4)
def _sources(items: tuple[tuple[str, str], ...], group: bool, min_members: int) -> list[Source]:
    """Sources of a lake, kept for the next questions over the same documents."""
    if group:
        return group_sources(dict(items), min_members)
    return [Source(path, (path,)) for path, _ in sorted(items)]


def _bm25(
    question: str, texts: dict[str, str], named: dict[str, tuple[str, ...]] | None = None
) -> dict[str, float]:
    """BM25 over the words of each text, plus BM25 over a second field: the years each text
    spans and those its file names close on (`named`). A field of its own, so a table
    covering 1985-2023 matches a question about 2007 without its 39 years lengthening (and
    so weakening) its words."""
    keys = list(texts)
    query = tokenize(question)
    totals = [0.0] * len(keys)
    years = [word for word in query if _YEAR.fullmatch(word)]
    if query:
        words = _index(tuple(_document_tokens(texts[k]) for k in keys), 0.75)
        totals = _add(totals, words, query)
    if years:
        named = named or {}
        fields = tuple(_source_years(texts[k], named.get(k, ())) for k in keys)
        # Years are a coverage, not a bag of words: a table of 1985-2023 covers 2007 as
        # fully as a table of 2007 alone, so that field ignores length (b=0).
        totals = _add(totals, _index(fields, 0.0), years)
    return dict(zip(keys, totals, strict=True))


def _add(totals: list[float], index: Any, query: list[str]) -> list[float]:
    if index is None:
        return totals
    return [t + float(s) for t, s in zip(totals, index.get_scores(query), strict=True)]


@lru_cache(maxsize=8)
def _index(tokens: tuple[tuple[str, ...], ...], b: float) -> Any:
    """The BM25 index of one field of a lake, kept for the next questions over the lake."""
    import bm25s  # imported here: building the CLI must not pay for it

    if not any(tokens):
        return None
    index = bm25s.BM25(b=b)
    index.index([list(t) for t in tokens], show_progress=False)
    return index


@lru_cache(maxsize=1 << 14)
def _document_tokens(text: str) -> tuple[str, ...]:
    """Tokens of one source text; unchanged files are not tokenized again in this process."""
    return tuple(tokenize(text))


@lru_cache(maxsize=1 << 14)
def _source_years(text: str, named: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys([*span_years(text), *named]))
