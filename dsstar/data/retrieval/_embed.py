"""Embedding similarity for retrieval, with vectors cached by text hash.

The cache takes any mapping from key to vector as its store: a dict (memory), the
`JsonDirStore` below (one small file per vector), or the profile catalog's own store.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # dsstar.model.llm imports litellm: loaded only when embeddings are used
    from dsstar.model.config import LLMConfig

__all__ = [
    "Embedding",
    "EmbeddingCache",
    "EmbeddingSimilarity",
    "JsonDirStore",
]

MAX_CHARS = 1000  # text embedded per source: path words and the head of its profile
_BATCH = 64  # texts per embedding request


class JsonDirStore(MutableMapping[str, list[float]]):
    """Vectors as `<dir>/<key[:2]>/<key>.json`, written atomically (safe for parallel runs)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def _file(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def __getitem__(self, key: str) -> list[float]:
        try:
            return json.loads(self._file(key).read_text())
        except (OSError, ValueError) as exc:  # missing or half-written: embed again
            raise KeyError(key) from exc

    def __setitem__(self, key: str, vector: list[float]) -> None:
        target = self._file(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as handle:
            json.dump(vector, handle)
        os.replace(tmp, target)

    def __delitem__(self, key: str) -> None:
        self._file(key).unlink(missing_ok=True)

    def __iter__(self) -> Iterator[str]:
        return (p.stem for p in self.folder.glob("*/*.json"))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class EmbeddingCache:
    """Vectors keyed by (model, input type, text) hash; misses are embedded in batches."""

    def __init__(
        self,
        config: LLMConfig,
        store: MutableMapping[str, list[float]] | None = None,
        run_id: str = "",
    ) -> None:
        self.config = config
        self.run_id = run_id  # sent as X-DSStar-Run, so gateways attribute the cost
        self.store: MutableMapping[str, list[float]] = {} if store is None else store
        self.requests = 0  # embedding requests sent, for benchmarks and tests

    def key(self, text: str, input_type: str | None) -> str:
        raw = f"{self.config.model}\0{input_type or ''}\0{text}".encode("utf-8", "surrogatepass")
        return hashlib.sha256(raw).hexdigest()

    def vectors(self, texts: list[str], input_type: str | None = None) -> list[list[float]]:
        """One vector per text, in order; only texts never seen before are sent."""
        from dsstar.model.llm import embed

        keys = [self.key(text, input_type) for text in texts]
        found: dict[str, list[float]] = {}
        for key in set(keys):
            try:
                found[key] = self.store[key]
            except KeyError:
                pass
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        text_of = dict(zip(keys, texts, strict=True))
        for start in range(0, len(missing), _BATCH):
            batch = missing[start : start + _BATCH]
            self.requests += 1
            texts_of_batch = [text_of[k] for k in batch]
            vectors = embed(self.config, texts_of_batch, input_type=input_type, run_id=self.run_id)
            for key, vector in zip(batch, vectors, strict=True):
                self.store[key] = found[key] = vector
        return [found[key] for key in keys]


class EmbeddingSimilarity:
    """Cosine similarity of the question to each source text (a `Similarity` for ranking)."""

    def __init__(self, cache: EmbeddingCache, input_types: bool = False) -> None:
        self.cache = cache
        self.input_types = input_types  # send "query"/"passage" (asymmetric models like E5)

    def __call__(self, question: str, texts: dict[str, str]) -> dict[str, float]:
        import numpy as np

        keys = list(texts)
        query_type, passage_type = ("query", "passage") if self.input_types else (None, None)
        docs = self.cache.vectors([texts[k][:MAX_CHARS] for k in keys], passage_type)
        (query,) = self.cache.vectors([question[:MAX_CHARS]], query_type)
        matrix = _unit(np.asarray(docs, dtype=np.float32))
        scores = matrix @ _unit(np.asarray([query], dtype=np.float32))[0]
        return {key: float(s) for key, s in zip(keys, scores, strict=True)}


def _unit(matrix: object) -> object:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


@dataclass(frozen=True)
class Embedding:
    """The embedding model that retrieval fuses with BM25 (the settings embedding_*, read in
    `dsstar.inputs.spec.embedding`), as a run's spec carries it: JSON-safe, without secrets."""

    model: str
    api_base: str | None
    timeout: float
    cache_dir: str | None  # vectors kept by text hash; None: in memory for the run
    input_type: bool

    def similarity(self, run_id: str = "") -> EmbeddingSimilarity:
        """The `Similarity` of this model, its vectors cached on disk."""
        from dsstar.model.config import LLMConfig

        config = LLMConfig(model=self.model, api_base=self.api_base, timeout=self.timeout)
        folder = self.cache_dir
        store: MutableMapping[str, list[float]] = JsonDirStore(Path(folder)) if folder else {}
        return EmbeddingSimilarity(EmbeddingCache(config, store, run_id), self.input_type)
