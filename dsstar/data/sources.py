"""Where the input files come from: a local folder (or single file) or an fsspec URL, and
the view of them that generated scripts read as `data/`.

Remote data is downloaded once per run into a local snapshot. Either way the root is opened
once (`DataRoot`; a run form's root is opened by the worker's check itself) and the scripts
see a view built through that opening (see `dsstar.data.lake`): only regular files under the
root, archives expanded in place, and nothing a link outside the root points to."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from fsspec.core import url_to_fs

from dsstar.data.formats import by_name
from dsstar.data.lake import ArchiveLimits, DataRoot, Skipped, build_view
from dsstar.data.lake.archives import sha256_of
from dsstar.data.profiler import detect_format
from dsstar.errors import DataError
from dsstar.locations import is_remote

__all__ = [
    "open_data",
    "ArchiveLimits",
    "DataFile",
    "DataRoot",
    "DataSource",
    "Skipped",
]


@dataclass(frozen=True)
class DataFile:
    """One input file: its path relative to the data root (archive members as
    `bundle.zip/inner/x.csv`), size, format and content hash."""

    path: str
    size: int
    format: str
    sha256: str
    # (path, sha256) of the files its format says a reader opens with it (`Format.needs`)
    needs: tuple[tuple[str, str], ...] = ()

    @property
    def sandbox_path(self) -> str:
        """Where generated scripts find it."""
        return f"data/{self.path}"


def _identify(path: Path, relative: str) -> tuple[str, str]:
    """A file's sha256 and format, read from the file itself."""
    return sha256_of(path), detect_format(str(path))


def _with_needs(files: list[DataFile]) -> list[DataFile]:
    """Each file with the files of the lake its format says a reader opens with it."""
    hashes = {f.path: f.sha256 for f in files}
    found = []
    for file in files:
        fmt = by_name(file.format)
        wanted = fmt.needs(file.path) if fmt is not None and fmt.needs is not None else ()
        needs = tuple(
            (p, hashes[p]) for p in dict.fromkeys(wanted) if p in hashes and p != file.path
        )
        found.append(replace(file, needs=needs) if needs else file)
    return found


class DataSource:
    """The data root of a run, materialized as a local read-only view. `url` is a location
    or the root already opened (`DataRoot`, as the worker's check leaves it): the view is
    built through that opening, and this source closes it."""

    def __init__(
        self,
        url: str | DataRoot,
        cache_dir: Path,
        limits: ArchiveLimits | None = None,
        archive_cache: Path | None = None,
    ) -> None:
        self.url = url if isinstance(url, str) else url.location
        self._cache_dir = Path(cache_dir)
        # Expanded archives, keyed by content: shared by every run that passes the same folder.
        self._archive_cache = Path(archive_cache or self._cache_dir / "archives")
        self.limits = limits or ArchiveLimits()
        self.is_remote = isinstance(url, str) and is_remote(url)
        self._snapshot: Path | None = None
        if isinstance(url, DataRoot):
            self.root = url
        elif self.is_remote:
            self._snapshot = self._download()
            self.root = DataRoot.open(str(self._snapshot))
        else:
            self.root = DataRoot.open(url)
        # Its one spelling (see normalize_location), the local one taken from what was
        # opened: a path looked up again could lead elsewhere by now.
        self.location = url.rstrip("/") if self.is_remote else self.root.path

    @cached_property
    def _view(self) -> tuple[Path, list[Skipped]]:
        self._cache_dir.mkdir(parents=True, exist_ok=True)
        views = self._cache_dir / "views"
        views.mkdir(exist_ok=True)
        view = Path(tempfile.mkdtemp(prefix="data-", dir=views))
        view.chmod(0o755)  # the sandbox's unprivileged uid reads it as it is, without a copy
        try:
            skipped = build_view(self.root, view, self._archive_cache, self.limits)
        except OSError as exc:
            raise DataError(f"cannot read data location {self.url}: {exc}") from exc
        finally:
            self.root.close()  # the view is what is read from here on
        return view, skipped

    @property
    def mount_dir(self) -> Path:
        """The folder shown to scripts as `data/` (built on first use)."""
        return self._view[0]

    @property
    def skipped(self) -> list[Skipped]:
        """Entries of the data root that are not in the view, with the reason for each."""
        return self._view[1]

    def files(self, identify: Callable[[Path, str], tuple[str, str]] = _identify) -> list[DataFile]:
        """Every file of the view, sorted by path. Raises DataError when there is none.
        `identify(path, relative_path)` gives a file's sha256 and format (default: hash its
        bytes and detect the format from its head); the catalog passes one that reuses what
        it knows of unchanged files."""
        view = self.mount_dir
        paths = sorted(p for p in view.rglob("*") if p.is_file())
        files = []
        for p in paths:
            relative = p.relative_to(view).as_posix()
            sha, found = identify(p, relative)
            files.append(DataFile(path=relative, size=p.stat().st_size, format=found, sha256=sha))
        if not files:
            raise DataError(f"no files found under {self.url}{_skipped_reasons(self.skipped)}")
        return _with_needs(files)

    def skipped_records(self) -> list[dict[str, Any]]:
        """The skipped entries in the shape of `describe --json` files, error stated."""
        return [
            {"path": s.path, "format": "skipped", "description": "", "error": s.reason}
            for s in self.skipped
        ]

    def close(self) -> None:
        """Remove the view (and a remote snapshot); the data root itself is untouched."""
        self.root.close()
        if "_view" in self.__dict__:
            shutil.rmtree(self.__dict__.pop("_view")[0], ignore_errors=True)
        if self._snapshot is not None:
            shutil.rmtree(self._snapshot, ignore_errors=True)

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


def open_data(
    data: str | DataRoot, limits: ArchiveLimits, work_dir: Path | None, tag: str = "data"
) -> DataSource:
    """The data root (a location, or the root the worker's check opened) as a read-only view
    (downloaded first when it is remote), its archives expanded within `limits`, in a
    temporary folder under `work_dir` (None: the system's) removed by `scratch.release(tag)`,
    or when the process ends."""
    from dsstar.execution import scratch

    return DataSource(
        data, scratch.new_dir(work_dir, tag), limits, archive_cache=scratch.archive_cache(work_dir)
    )


def _skipped_reasons(skipped: list[Skipped], shown: int = 5) -> str:
    """What was skipped and why, for an error that would otherwise only count it:
    ": skipped pipe (a FIFO: not opened), ..." (the first `shown` entries, then a count)."""
    if not skipped:
        return ""
    said = ", ".join(f"{s.path} ({s.reason})" for s in skipped[:shown])
    more = f" and {len(skipped) - shown} more" if len(skipped) > shown else ""
    return f": skipped {said}{more}"
