"""Where the input files come from: a local folder (or single file) or an fsspec URL.

Remote data is downloaded once into a local cache folder, because generated scripts read
files from a read-only local `data/` folder.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fsspec.core import url_to_fs

from .errors import DataError
from .profiler import detect_format

__all__ = ["DataFile", "DataSource", "normalize_location"]


def normalize_location(url: str) -> str:
    """One spelling per data root: local paths become absolute, URLs lose trailing slashes."""
    if "://" in url and not url.startswith("file://"):
        return url.rstrip("/")
    return str(Path(url.removeprefix("file://")).expanduser().resolve())


_SKIPPED_PARTS = {"__pycache__", "__MACOSX"}


@dataclass(frozen=True)
class DataFile:
    """One input file: its path relative to the data root, size, format and content hash."""

    path: str
    size: int
    format: str
    sha256: str

    @property
    def sandbox_path(self) -> str:
        """Where generated scripts find it."""
        return f"data/{self.path}"


class DataSource:
    """The data root of a run, materialized as a local folder."""

    def __init__(self, url: str, cache_dir: Path) -> None:
        self.url = url
        self._cache_dir = cache_dir
        self.is_remote = "://" in url and not url.startswith("file://")
        if self.is_remote:
            self.root = self._download()
        else:
            self.root = Path(url.removeprefix("file://")).expanduser().resolve()
            if not self.root.exists():
                raise DataError(f"data location {url} does not exist")
            if self.root.is_file():  # scripts must see this file, not its whole folder
                self.root = self._stage_single_file(self.root)

    def files(self, digest: Callable[[Path, str], str] | None = None) -> list[DataFile]:
        """Every visible file under the root, sorted by path. Raises DataError when none.
        `digest(path, relative_path)` gives a file's sha256 (default: hash its bytes; the
        catalog passes one that reuses the hashes of unchanged files)."""
        candidates = sorted(p for p in self.root.rglob("*") if p.is_file())
        base = self.root
        files = [
            DataFile(
                path=p.relative_to(base).as_posix(),
                size=p.stat().st_size,
                format=detect_format(str(p)),
                sha256=(digest or _sha256)(p, p.relative_to(base).as_posix()),
            )
            for p in candidates
            if _visible(p.relative_to(base))
        ]
        if not files:
            raise DataError(f"no files found under {self.url}")
        return files

    @property
    def mount_dir(self) -> Path:
        """The folder shown to scripts as `data/`."""
        return self.root

    def _stage_single_file(self, path: Path) -> Path:
        self._cache_dir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix="data-", dir=self._cache_dir))
        shutil.copy2(path, folder / path.name)
        return folder

    def _download(self) -> Path:
        try:
            fs, path = url_to_fs(self.url)
            if not fs.exists(path):
                raise DataError(f"data location {self.url} does not exist")
        except DataError:
            raise
        except Exception as exc:
            raise DataError(f"cannot reach data location {self.url}: {exc}") from exc
        # A fresh snapshot for every run: files deleted upstream must not linger, and a
        # concurrent run must never see a file half re-downloaded.
        self._cache_dir.mkdir(parents=True, exist_ok=True)
        target = Path(tempfile.mkdtemp(prefix="data-", dir=self._cache_dir))
        try:
            if fs.isfile(path):
                fs.get_file(path, str(target / path.rsplit("/", 1)[-1]))
                return target
            fs.get(path.rstrip("/") + "/", str(target), recursive=True)
        except Exception as exc:
            raise DataError(f"cannot download {self.url}: {exc}") from exc
        return target


def _visible(relative: Path) -> bool:
    return not any(part.startswith(".") or part in _SKIPPED_PARTS for part in relative.parts)


def _sha256(path: Path, relative: str = "") -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
