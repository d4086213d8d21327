"""The catalog: offline profiles and analyzer descriptions of data files, kept in storage and
keyed by file content, so that no command or run profiles or analyzes an unchanged file twice.

    catalog/roots/<root digest>.json           one data root: path -> [size, mtime_ns, sha256,
                                               format, format detector version]
    catalog/profiles/<sha256>/<key>.txt        offline profile (key: path, profiler version)
    catalog/analyses/<sha256>/<key>.json       analyzer record (key: path, prompt, models...)

Listing a root checks every file's size and mtime against its index first and hashes only
new or changed files (and detects their format), so a warm listing of a large lake reads no
file content. The content
objects are the truth: a lost, stale or concurrently overwritten index costs hashing, never a
wrong description. The layout works the same on a local folder and on s3:// storage.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

from dsstar.data.formats import definition_sources, generation
from dsstar.data.profiler import detect_format, transient
from dsstar.data.sources import DataFile, DataSource
from dsstar.errors import StorageError
from dsstar.keys import catalog_analysis, catalog_profile, catalog_root
from dsstar.storage import Store

__all__ = ["Catalog", "profiler_version", "save_analysis", "sha256_file"]

_IO_THREADS = 16  # storage round trips in flight when reading or writing many objects


def sha256_file(path: Path) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _short(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode(
        "utf-8", "surrogatepass"
    )
    return hashlib.sha256(blob).hexdigest()[:24]


def _detector_version() -> str:
    """A fingerprint of the format detector and the formats it knows: a changed detector, or
    a format registered or removed, detects afresh."""
    return _detector_version_at(generation())


@cache
def _detector_version_at(_formats: int) -> str:
    from dsstar.data.profiler import detector_sources

    return _short(*detector_sources())


def profiler_version() -> str:
    """A fingerprint of the profiler's source and of every format's definition: a changed
    profiler, or a format registered or removed, makes fresh profiles."""
    return _profiler_version_at(generation())


@cache
def _profiler_version_at(_formats: int) -> str:
    from dsstar.data import profiler

    origin = Path(profiler.__file__)
    sources = sorted(origin.parent.glob("*.py")) if origin.name == "__init__.py" else [origin]
    own = (p.read_bytes().decode("utf-8", "replace") for p in sources)
    return _short(*own, *definition_sources())


def save_analysis(store: Store, sha256: str, key: str, record: dict[str, Any]) -> None:
    """Keep one analyzer record (a JSON-safe dict) for every later command and run."""
    store.write_json(catalog_analysis(sha256, key), record)


class Catalog:
    """The cached knowledge about one data root, in `store`."""

    def __init__(self, store: Store, root: str) -> None:
        """`root`: the data root's location, normalized (`DataSource.location`)."""
        self.store = store
        self.root = root
        self._index_key = catalog_root(_short(root))
        self._loaded: dict[str, list[Any]] | None = None  # the index, read on first use
        self._changed = False
        self.hashed = 0  # files whose content was hashed by this catalog (new or changed)
        self.computed = 0  # profiles computed (not found in the catalog)

    # -- listing ---------------------------------------------------------------------------

    @property
    def _index(self) -> dict[str, list[Any]]:
        # Read when a listing needs it: reading profiles or analyses of a large lake does
        # not hold an entry per file besides the caller's list.
        if self._loaded is None:
            self._loaded = self._load_index()
        return self._loaded

    def identify(self, path: Path, relative: str) -> tuple[str, str]:
        """A file's sha256 and format: the indexed ones while its size and mtime (and, for
        the format, the detector) are unchanged, else computed now and indexed."""
        stat = path.stat()
        known = self._index.get(relative)
        if not (known and known[0] == stat.st_size and known[1] == stat.st_mtime_ns):
            known = [stat.st_size, stat.st_mtime_ns, sha256_file(path)]
            self.hashed += 1
        if len(known) >= 5 and known[4] == _detector_version():
            return known[2], known[3]
        found = detect_format(str(path))
        self._index[relative] = [*known[:3], found, _detector_version()]
        self._changed = True
        return known[2], found

    def files(self, source: DataSource) -> list[DataFile]:
        """Every file of `source`, hashing only new or changed ones; the index is saved."""
        files = source.files(identify=self.identify)
        present = {f.path for f in files}
        gone = [path for path in self._index if path not in present]
        for path in gone:
            del self._index[path]
        if gone or self._changed:
            index = {"root": self.root, "files": self._index}
            self.store.write_text(self._index_key, json.dumps(index))
            self._changed = False
        return files

    def _load_index(self) -> dict[str, list[Any]]:
        try:
            data = json.loads(self.store.read_text(self._index_key))
        except FileNotFoundError:
            return {}
        except (StorageError, ValueError):
            return {}  # unreadable or corrupt: rebuilt from the files, nothing is lost
        files = data.get("files") if isinstance(data, dict) else None
        return files if isinstance(files, dict) else {}

    # -- offline profiles ------------------------------------------------------------------

    def profiles(
        self,
        files: list[DataFile],
        compute: Callable[[list[DataFile]], dict[str, str]],
    ) -> dict[str, str]:
        """path -> offline profile of every file. Profiles missing from the catalog are made
        by `compute(missing_files)` (which returns path -> text) and stored."""
        return {
            path: text
            for chunk in self.profile_chunks(files, compute)
            for path, text in chunk.items()
        }

    def profile_chunks(
        self,
        files: list[DataFile],
        compute: Callable[[list[DataFile]], dict[str, str]],
        size: int | None = None,
    ) -> Iterator[dict[str, str]]:
        """The offline profiles of `files` (path -> text), `size` files at a time in their
        order (None: all at once): a caller that keeps only what it needs of each chunk holds
        at most `size` profiles, however large the lake. Each chunk's missing profiles are
        made by `compute(missing_files)` and stored before the chunk is given."""
        version = profiler_version()
        step = size or max(1, len(files))
        for start in range(0, len(files), step):
            chunk = files[start : start + step]
            keys = {f.path: catalog_profile(f.sha256, _short(f.path, version)) for f in chunk}
            found = self._read_many(keys.values())
            missing = [f for f in chunk if keys[f.path] not in found]
            fresh = compute(missing) if missing else {}
            self.computed += len(fresh)
            kept = {path: text for path, text in fresh.items() if not transient(path, text)}
            self._write_many({keys[path]: text for path, text in kept.items()})
            texts = {f.path: found.get(keys[f.path], fresh.get(f.path, "")) for f in chunk}
            del found, fresh, kept  # not held while the caller reads this chunk
            yield texts

    # -- analyzer records ------------------------------------------------------------------

    def analyses(self, wanted: dict[str, tuple[str, str]]) -> dict[str, dict[str, Any]]:
        """path -> stored analyzer record, for the paths of `wanted` (path -> (sha256, key))
        that have one."""
        objects = {path: catalog_analysis(sha, key) for path, (sha, key) in wanted.items()}
        found = self._read_many(objects.values())
        records: dict[str, dict[str, Any]] = {}
        for path, key in objects.items():
            if key in found:
                try:
                    records[path] = json.loads(found[key])
                except ValueError:
                    continue  # a torn write: analyzed again, then overwritten
        return records

    # -- storage ---------------------------------------------------------------------------

    def _read_many(self, keys: Iterable[str]) -> dict[str, str]:
        keys = list(keys)

        def read(key: str) -> tuple[str, str | None]:
            try:
                return key, self.store.read_text(key)
            except FileNotFoundError:
                return key, None

        if len(keys) < 4:
            pairs = [read(key) for key in keys]
        else:  # object stores answer many small reads far faster in parallel
            with ThreadPoolExecutor(min(_IO_THREADS, len(keys))) as pool:
                pairs = list(pool.map(read, keys))
        return {key: text for key, text in pairs if text is not None}

    def _write_many(self, objects: dict[str, str]) -> None:
        if len(objects) < 4:
            for key, text in objects.items():
                self.store.write_text(key, text)
            return
        with ThreadPoolExecutor(min(_IO_THREADS, len(objects))) as pool:
            list(pool.map(lambda item: self.store.write_text(*item), objects.items()))
