"""Retrieval: rank the files (and folders of like files) that a question needs.

BM25 (bm25s) over each file's path words, offline profile (columns, sheets, tables,
headings, sample values) and LLM description; optionally fused by reciprocal rank with
embedding similarity from any litellm embedding model. Folders holding many like files
rank as one source, so a table split over 50 files takes one slot of the top-K.
"""

from __future__ import annotations

from dsstar.data.retrieval._embed import (
    Embedding,
    EmbeddingCache,
    EmbeddingSimilarity,
    JsonDirStore,
)
from dsstar.data.retrieval._rank import (
    Hit,
    Similarity,
    rank,
    rank_sources,
    reciprocal_rank_fusion,
    source_text,
)
from dsstar.data.retrieval._sources import MIN_MEMBERS, Source, group_sources
from dsstar.data.retrieval._text import document_text, path_words, tokenize

__all__ = [
    "MIN_MEMBERS",
    "Embedding",
    "EmbeddingCache",
    "EmbeddingSimilarity",
    "Hit",
    "JsonDirStore",
    "Similarity",
    "Source",
    "document_text",
    "group_sources",
    "path_words",
    "rank",
    "rank_sources",
    "reciprocal_rank_fusion",
    "source_text",
    "tokenize",
]
