"""The artifact store: a local folder or an fsspec URL (s3://bucket/prefix). What is stored
where in it, the keys, is dsstar.keys.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import fsspec
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from dsstar.errors import StorageError, UsageError
from dsstar.locations import normalize_location
from dsstar.text import clean, clean_deep

__all__ = ["Entry", "Store", "Stored", "check_run_id", "new_run_id"]

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def check_run_id(run_id: str) -> str:
    """A run id is a single safe path segment; anything else is a usage error."""
    if not _RUN_ID.fullmatch(run_id) or ".." in run_id:
        raise UsageError(
            f"invalid run id {run_id!r}: use letters, digits, '.', '_' and '-' (at most 100)"
        )
    return run_id


def new_run_id() -> str:
    """Sortable and unique: UTC time plus a random suffix, e.g. 20261121-193000-3fa2c1."""
    return f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def _storage_hint(url: str) -> str:
    """What to check when the storage at `url` cannot be written, by its scheme."""
    protocol = fsspec.utils.get_protocol(url)
    if protocol in {"file", "local"}:
        return " Check that the folder is writable."
    if protocol in {"s3", "s3a"}:
        return (
            " Check the bucket name, AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID and"
            " AWS_SECRET_ACCESS_KEY (or your cloud profile)."
        )
    return (
        f" Storage is a local folder or s3://bucket/prefix (a {protocol}:// URL works when"
        f" fsspec's '{protocol}' filesystem can reach and write it)."
    )


@dataclass(frozen=True)
class Stored:
    """An object already in the storage, by its key, as a value to store under another key:
    the storage copies it (`Store.copy`), its bytes never pass through this process."""

    key: str


@dataclass(frozen=True)
class Entry:
    """An object listed under a key: its name, size in bytes and when it was last written."""

    name: str
    size: int
    modified: datetime


class Store:
    """Reads and writes text, JSON and byte objects under one storage URL."""

    def __init__(self, url: str) -> None:
        self.url = normalize_location(url)  # runs resumed from another directory find it

    @cached_property
    def _fs_root(self) -> tuple[fsspec.AbstractFileSystem, str]:
        protocol = fsspec.utils.get_protocol(self.url)
        options: dict[str, Any] = {"auto_mkdir": True} if protocol in {"file", "local"} else {}
        try:
            fs, root = url_to_fs(self.url, **options)
        except ValueError as exc:  # fsspec knows no such scheme
            raise StorageError(
                f"unknown storage scheme '{protocol}://' in {self.url}: storage is a local"
                " folder or s3://bucket/prefix"
            ) from exc
        except ImportError as exc:  # a scheme fsspec knows, its package not installed
            raise StorageError(f"cannot open storage {self.url}: {exc}") from exc
        return fs, root.rstrip("/")

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        return self._fs_root[0]

    def _path(self, key: str) -> str:
        return f"{self._fs_root[1]}/{key}"

    def uri(self, key: str = "") -> str:
        """The full URL of `key`, for reports and links."""
        return f"{self.url.rstrip('/')}/{key}" if key else self.url

    def write_text(self, key: str, text: str) -> str:
        """Store `text` as UTF-8; what cannot be encoded (lone surrogates) is replaced."""
        return self.write_bytes(key, clean(text).encode("utf-8"))

    def write_bytes(self, key: str, data: bytes) -> str:
        """Store `data` whole: readers see the old object or the new one, never a part."""
        path = self._path(key)
        try:
            if not isinstance(self.fs, LocalFileSystem):
                self.fs.pipe_file(path, bytes(data))  # an object store replaces in one step
            else:  # a file written in place can be read half-way: write beside it, then rename
                partial = f"{path}.{secrets.token_hex(4)}.part"
                try:
                    self.fs.pipe_file(partial, bytes(data))
                    os.replace(partial, path)
                finally:
                    if os.path.lexists(partial):
                        os.unlink(partial)
        except Exception as exc:  # fsspec backends raise their own families (OSError, botocore...)
            raise StorageError(f"cannot write {self.uri(key)}: {exc}") from exc
        return self.uri(key)

    def create_json(self, key: str, data: Any) -> bool:
        """Store `data` at `key` only if nothing is there yet, in one step: of two writers,
        exactly one gets True. Local folders use O_EXCL; S3 a conditional PUT
        (If-None-Match: *); other schemes check first, which two writers can both pass."""
        blob = json.dumps(clean_deep(data), indent=2, ensure_ascii=False, default=str).encode()
        path = self._path(key)
        try:
            if isinstance(self.fs, LocalFileSystem):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(blob)
            elif fsspec.utils.get_protocol(self.url) in {"s3", "s3a"}:
                self.fs.pipe_file(path, blob, mode="create")
            elif self.fs.exists(path):
                return False
            else:
                self.fs.pipe_file(path, blob)
        except FileExistsError:
            return False
        except Exception as exc:
            if "PreconditionFailed" in repr(exc) or "412" in str(exc):
                return False  # S3: the object exists (s3fs versions differ in what they raise)
            raise StorageError(f"cannot create {self.uri(key)}: {exc}") from exc
        return True

    def write_json(self, key: str, data: Any) -> str:
        """Store `data` as JSON; every string in it is made valid text first."""
        blob = json.dumps(clean_deep(data), indent=2, ensure_ascii=False, default=str)
        return self.write_text(key, blob)

    def read_text(self, key: str) -> str:
        """The text stored at `key`; bytes that are not UTF-8 are read as U+FFFD."""
        try:
            return self.fs.cat_file(self._path(key)).decode("utf-8", errors="replace")
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise StorageError(f"cannot read {self.uri(key)}: {exc}") from exc

    def read_bytes(self, key: str, most: int | None = None) -> bytes:
        """The bytes stored at `key`; with `most`, at most that many are read, and an object
        larger than that is a StorageError (what was stored is not what was meant)."""
        try:
            with self.fs.open(self._path(key), "rb") as handle:
                data = handle.read() if most is None else handle.read(most + 1)
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise StorageError(f"cannot read {self.uri(key)}: {exc}") from exc
        if most is not None and len(data) > most:
            raise StorageError(f"{self.uri(key)} holds more than {most:,} bytes")
        return data

    def copy(self, source: str, key: str) -> str:
        """Store at `key` the object at `source`, without reading it into this process: in a
        local folder the kernel copies the file, in an object store the server copies the
        object. Readers of `key` see the old object or the new one."""
        origin, path = self._path(source), self._path(key)
        try:
            if isinstance(self.fs, LocalFileSystem):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                partial = f"{path}.{secrets.token_hex(4)}.part"
                try:  # a copy, not a link: a file changed in place changes no other
                    shutil.copyfile(origin, partial)
                    os.replace(partial, path)
                finally:
                    if os.path.lexists(partial):
                        os.unlink(partial)
            else:
                self.fs.copy(origin, path)
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise StorageError(f"cannot copy {self.uri(source)} to {self.uri(key)}: {exc}") from exc
        return self.uri(key)

    def entries(self, key: str) -> list[Entry]:
        """The objects directly under `key` (folders left out); empty when it does not exist."""
        try:
            listed = self.fs.ls(self._path(key), detail=True)
        except FileNotFoundError:
            return []
        except Exception as exc:
            raise StorageError(f"cannot list {self.uri(key)}: {exc}") from exc
        return [
            Entry(item["name"].rstrip("/").rsplit("/", 1)[-1], int(item.get("size") or 0),
                  _modified(item))
            for item in listed
            if item.get("type") != "directory"
        ]  # fmt: skip

    def remove(self, keys: list[str], recursive: bool = False) -> None:
        """Delete the objects at `keys` (with what lies under them, when `recursive`); one
        already gone is no error."""
        paths = [self._path(key) for key in keys]
        try:
            if isinstance(self.fs, LocalFileSystem):  # one by one: a missing one stops no other
                for path in paths:
                    try:
                        self.fs.rm(path, recursive=recursive)
                    except FileNotFoundError:
                        continue
            elif paths:  # in batches, one request for many (S3's delete_objects)
                self.fs.rm(paths, recursive=recursive)
        except FileNotFoundError:
            pass
        except Exception as exc:
            raise StorageError(f"cannot delete under {self.url}: {exc}") from exc

    def read_json(self, key: str) -> Any:
        text = self.read_text(key)
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise StorageError(f"{self.uri(key)} is not valid JSON: {exc}") from exc

    def exists(self, key: str) -> bool:
        try:
            return bool(self.fs.exists(self._path(key)))
        except Exception as exc:
            raise StorageError(f"cannot reach {self.uri(key)}: {exc}") from exc

    def check(self) -> None:
        """Fail now, with advice, when the storage cannot be written (before any LLM call)."""
        probe = f".dsstar-probe-{secrets.token_hex(4)}"
        try:
            self.fs.pipe_file(self._path(probe), b"ok")
            self.fs.rm_file(self._path(probe))
        except StorageError:
            raise  # the URL itself is wrong: its message says how
        except Exception as exc:
            hint = _storage_hint(self.url)
            raise StorageError(
                f"cannot write to storage {self.url}: {_reason(exc)}.{hint}"
            ) from exc

    def listdir(self, key: str) -> list[str]:
        """Names directly under `key` (empty when it does not exist)."""
        try:
            entries = self.fs.ls(self._path(key), detail=False)
        except FileNotFoundError:
            return []
        except Exception as exc:
            raise StorageError(f"cannot list {self.uri(key)}: {exc}") from exc
        return sorted(entry.rstrip("/").rsplit("/", 1)[-1] for entry in entries)


def _modified(item: dict[str, Any]) -> datetime:
    """When a listed object was last written, as fsspec's backends state it (a local file's
    mtime, an S3 object's LastModified)."""
    stamp = item.get("mtime", item.get("LastModified", item.get("last_modified")))
    if isinstance(stamp, datetime):
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    if isinstance(stamp, int | float):
        return datetime.fromtimestamp(stamp, UTC)
    return datetime.now(UTC)  # unknown: counts as new, so it is never pruned for its age


def _reason(exc: Exception) -> str:
    """The first line of an error, without the noise some backends add."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]
