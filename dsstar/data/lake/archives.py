"""Expanding archives safely, once per content.

An archive becomes a folder of its members, built in a cache keyed by the archive's content
hash, so a second run links the finished expansion instead of unpacking again. Bounds on the
bytes written and the member count stop bombs; member names that are absolute, climb out
with `..`, are links or devices are rejected with a reason.

The bounds count what the parser itself holds, not only what is written: every entry
(folders, and tar's pax and long-name headers, included) is a member, a tar header's size
counts against the bytes before it is read (Python's tarfile reads a pax header whole: a
1.5 GiB one took the process to 1.6 GB), and no header may exceed `MAX_HEADER_BYTES`. A
zip's entry count is read from its end record before its directory is loaded."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import json
import lzma
import shutil
import tarfile
import tempfile
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from dsstar.data.lake.walk import is_hidden
from dsstar.data.profiler import archive_kind

__all__ = ["ArchiveError", "ArchiveLimits", "expand_cached", "sha256_of"]

_STREAMS = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}
_STREAM_SUFFIXES = {".gz": "", ".gzip": "", ".bz2": "", ".xz": "", ".tgz": ".tar"}
_CHUNK = 1 << 20
MAX_HEADER_BYTES = 1 << 20  # one pax or GNU long-name header; real ones are a few hundred
_TAR_HEADERS = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
                tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)  # fmt: skip


class ArchiveError(Exception):
    """The archive cannot be expanded (damaged, or over a bound); the text says why."""


@dataclass(frozen=True)
class ArchiveLimits:
    """Bounds on one top-level archive, nested members included."""

    max_bytes: int = 2 << 30
    max_members: int = 20_000
    max_depth: int = 2


class _Budget:
    """What one expansion may still write; shared by the nested levels."""

    def __init__(self, limits: ArchiveLimits) -> None:
        self.limits, self.bytes, self.members = limits, 0, 0

    def member(self) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise ArchiveError(
                f"more than {self.limits.max_members:,} members (DSSTAR_ARCHIVE_MAX_MEMBERS)"
            )

    def header(self, size: int) -> None:
        """An archive header of `size` bytes is about to be read into memory."""
        if size > MAX_HEADER_BYTES:
            raise ArchiveError(f"a header of {size:,} bytes (more than {MAX_HEADER_BYTES:,})")
        self.member()
        self._count(size)

    def _count(self, size: int) -> None:
        self.bytes += size
        if self.bytes > self.limits.max_bytes:
            raise ArchiveError(
                f"expands to more than {self.limits.max_bytes:,} bytes (DSSTAR_ARCHIVE_MAX_BYTES)"
            )

    def write(self, source, target: Path) -> None:
        with open(target, "wb") as out:
            while chunk := source.read(_CHUNK):
                self._count(len(chunk))
                out.write(chunk)


def sha256_of(path: str | Path) -> str:
    """The hex SHA-256 of a file's content."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _safe_name(name: str) -> str | None:
    """The member's relative path, or None when it is absolute or leaves the archive."""
    name = name.replace("\\", "/")
    path = PurePosixPath(name)
    if not path.parts or path.is_absolute() or ":" in path.parts[0]:  # C:/... counts too
        return None
    parts = [p for p in path.parts if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _stream_name(name: str) -> str:
    for suffix, replacement in _STREAM_SUFFIXES.items():
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)] + replacement
    return "content"


def _place(root: Path, name: str) -> Path:
    target = root / name
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_dir():
        raise ArchiveError(f"member {name!r} is both a folder and a file")
    return target


def _zip_entries(archive: Path) -> int | None:
    """The entry count a zip's end record declares (None when it cannot be read here)."""
    try:
        with open(archive, "rb") as handle:
            end = zipfile._EndRecData(handle)  # the record ZipFile itself reads first
    except (OSError, AttributeError):
        return None
    return end[zipfile._ECD_ENTRIES_TOTAL] if end else None


def _expand_zip(archive: Path, root: Path, budget: _Budget, rejected: _Rejected) -> None:
    declared = _zip_entries(archive) or 0
    if budget.members + declared > budget.limits.max_members:  # before its directory loads
        raise ArchiveError(
            f"more than {budget.limits.max_members:,} members (DSSTAR_ARCHIVE_MAX_MEMBERS)"
        )
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            budget.member()  # folders too: 400k empty folders are 400k entries
            if info.is_dir():
                continue
            name = _safe_name(info.filename)
            mode = info.external_attr >> 16
            if name is None:
                rejected.append((info.filename, "unsafe member path (absolute or '..')"))
            elif mode and (mode & 0o170000) not in (0, 0o100000):
                rejected.append((name, "a link or special file inside the archive"))
            elif not is_hidden(name):
                with zf.open(info) as source:
                    budget.write(source, _place(root, name))


def _bounded_tarinfo(budget: _Budget) -> type[tarfile.TarInfo]:
    """A TarInfo whose headers are counted, and bounded, before tarfile reads them."""

    class Bounded(tarfile.TarInfo):
        def _proc_member(self, tf: tarfile.TarFile) -> tarfile.TarInfo:
            if self.type in _TAR_HEADERS:
                budget.header(self.size)
            return super()._proc_member(tf)

    return Bounded


def _tar_mode(kind: str) -> str:
    """How tarfile opens an archive of `kind`: its own compression only. 'r:*' would also try
    a compressed file's raw bytes as a plain tar, and about one gzip header in 250 (its
    timestamp) reads as a valid tar header: the stream became a member named by its bytes."""
    return "r:" if kind == "tar" else f"r:{kind}"


def _expand_tar(archive: Path, kind: str, root: Path, budget: _Budget, rejected: _Rejected) -> None:
    with tarfile.open(archive, _tar_mode(kind), tarinfo=_bounded_tarinfo(budget)) as tf:
        for member in tf:  # streams: the index of a compressed tar is never loaded whole
            budget.member()  # folders too: 400k empty folders are 400k entries
            if member.isdir():
                continue
            name = _safe_name(member.name)
            if name is None:
                rejected.append((member.name, "unsafe member path (absolute or '..')"))
            elif member.issym() or member.islnk():
                rejected.append((name, "a link inside the archive (not followed)"))
            elif not member.isreg():
                rejected.append((name, "a device, FIFO or special member"))
            elif not is_hidden(name):
                source = tf.extractfile(member)
                if source is not None:
                    budget.write(source, _place(root, name))


def _is_tar(archive: Path, kind: str, budget: _Budget) -> bool:
    """Whether the stream `archive` of `kind` holds a tar; its first header is read bounded,
    as tarfile.is_tarfile would read it whole. ArchiveError past the bound."""
    try:
        bounded = _bounded_tarinfo(_Budget(budget.limits))
        with tarfile.open(archive, _tar_mode(kind), tarinfo=bounded):
            return True
    except (OSError, EOFError, tarfile.TarError, lzma.LZMAError):
        return False


class _Rejected(list):
    """Rejected members, named by their path from the top-level archive."""

    def __init__(self, prefix: str = "") -> None:
        super().__init__()
        self.prefix = prefix

    def append(self, item: tuple[str, str]) -> None:
        super().append((self.prefix + item[0], item[1]))


def _expand(
    archive: Path,
    name: str,
    kind: str,
    root: Path,
    budget: _Budget,
    rejected: _Rejected,
    depth: int,
) -> None:
    """Unpack `archive` (called `name`) into `root`, then nested archives in place, up to
    the depth bound; deeper archives stay packed files."""
    root.mkdir(parents=True, exist_ok=True)
    if kind == "zip":
        _expand_zip(archive, root, budget, rejected)
    elif kind == "tar" or _is_tar(archive, kind, budget):
        _expand_tar(archive, kind, root, budget, rejected)
    else:
        budget.member()
        with _STREAMS[kind](archive, "rb") as source:
            budget.write(source, root / _stream_name(name))
    if depth >= budget.limits.max_depth:
        return
    for member in sorted(p for p in root.rglob("*") if p.is_file()):
        inner = archive_kind(str(member))
        if inner:
            packed = member.with_name(member.name + ".packed")
            member.rename(packed)
            nested = _Rejected(rejected.prefix + member.relative_to(root).as_posix() + "/")
            _expand(packed, member.name, inner, member, budget, nested, depth + 1)
            rejected.extend(nested)
            packed.unlink()


def expand_cached(
    archive: str | Path,
    kind: str,
    cache: Path,
    limits: ArchiveLimits,
    *,
    name: str | None = None,
    digest: str | None = None,
) -> tuple[Path, list[tuple[str, str]]]:
    """The folder holding `archive`'s members, and the members rejected with reasons.
    Raises ArchiveError (also for later calls: failures are cached too)."""
    archive = Path(archive)
    digest = digest or sha256_of(archive)
    # The stream member's name comes from the archive's, so it is part of the key.
    bounds = hashlib.sha256(json.dumps([asdict(limits), name]).encode()).hexdigest()[:8]
    home = cache / f"{digest}-{bounds}"
    record = home / "record.json"
    if not record.exists():
        cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="expand-", dir=cache))
        rejected = _Rejected()
        try:
            tree, budget = staging / "tree", _Budget(limits)
            _expand(archive, name or archive.name, kind, tree, budget, rejected, 1)
            outcome = {"rejected": list(rejected), "error": None}
        except ArchiveError as exc:
            outcome = {"rejected": [], "error": str(exc)}
        except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, lzma.LZMAError) as exc:
            outcome = {
                "rejected": [],
                "error": f"damaged or unreadable ({type(exc).__name__}: {exc})",
            }
        if outcome["error"]:
            shutil.rmtree(staging / "tree", ignore_errors=True)
        (staging / "record.json").write_text(json.dumps(outcome))
        try:
            staging.rename(home)
        except OSError:  # another process finished the same archive first
            shutil.rmtree(staging, ignore_errors=True)
    outcome = json.loads(record.read_text())
    if outcome["error"]:
        raise ArchiveError(outcome["error"])
    return home / "tree", [tuple(r) for r in outcome["rejected"]]
