"""Retrieval: keep the top-K files whose descriptions best match the question.

Scores are TF-IDF cosine similarities over words of the path and description, computed
locally: no embedding service is needed and the ranking is deterministic.
"""

from __future__ import annotations

import math
import re
from collections import Counter

__all__ = ["rank", "tokenize"]

_WORD = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    """Lower-cased words; path separators and underscores split words too."""
    return _WORD.findall(text.lower().replace("_", " "))


def rank(question: str, documents: dict[str, str]) -> list[tuple[str, float]]:
    """All document keys with their similarity to `question`, best first (ties by key)."""
    tokens = {key: Counter(tokenize(f"{key} {text}")) for key, text in documents.items()}
    count = len(tokens) or 1
    document_frequency = Counter(word for bag in tokens.values() for word in bag)
    idf = {word: math.log((1 + count) / (1 + df)) + 1 for word, df in document_frequency.items()}
    query = _weights(Counter(tokenize(question)), idf)
    scored = [(key, _cosine(query, _weights(bag, idf))) for key, bag in tokens.items()]
    return sorted(scored, key=lambda item: (-item[1], item[0]))


def _weights(bag: Counter[str], idf: dict[str, float]) -> dict[str, float]:
    return {word: (1 + math.log(n)) * idf.get(word, 1.0) for word, n in bag.items()}


def _cosine(a: dict[str, float], b: dict[str, float]) -> float:
    dot = sum(weight * b.get(word, 0.0) for word, weight in a.items())
    norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    return round(dot / norm, 6) if norm else 0.0
