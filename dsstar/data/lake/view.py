"""The mount view: the folder generated scripts see read-only as `data/`.

Regular files are hard-linked from the descriptors the walk opened (copied from them when a
hard link cannot be made, e.g. across devices): what enters the view is the very file that
was checked, never a path looked up again. In-root symbolic links appear as the files they
point to, unsafe entries are absent, and archives appear as folders of their members under
their own name: `bundle.zip/inner/table.csv`, `metrics.csv.gz/metrics.csv`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from dsstar.data.lake.archives import ArchiveError, ArchiveLimits, expand_cached
from dsstar.data.lake.root import DataRoot
from dsstar.data.lake.walk import Skipped, walk
from dsstar.data.profiler import archive_kind

__all__ = ["build_view"]

_CHUNK = 1 << 20


def _link(fd: int, target: Path, proc: int | None) -> None:
    """Hard-link the file open as `fd` at `target`, else copy its bytes from the descriptor.
    `proc` is /proc/self/fd, open: linkat follows its entry to the opened file itself."""
    try:
        if proc is not None:
            os.link(str(fd), target, src_dir_fd=proc, follow_symlinks=True)
            return
    except OSError:
        pass  # another device, or protected hard links: copy
    with open(target, "wb") as out:
        offset = 0
        while chunk := os.pread(fd, _CHUNK, offset):
            out.write(chunk)
            offset += len(chunk)


def _link_tree(tree: Path, target: Path) -> None:
    """The expanded archive `tree` (the worker's own cache) linked in at `target`."""
    for folder, _dirs, names in os.walk(tree):
        relative = Path(folder).relative_to(tree)
        (target / relative).mkdir(parents=True, exist_ok=True)
        for name in names:
            source, placed = os.path.join(folder, name), target / relative / name
            try:
                os.link(source, placed, follow_symlinks=False)
            except OSError:
                shutil.copyfile(source, placed, follow_symlinks=False)


# Office files are zips, read as documents when their zip is sound (archive_kind); one that
# is not was tried as an archive, but to its owner it is a workbook, not an archive.
_DOCUMENTS = {".xlsx": "workbook", ".xlsm": "workbook", ".xltx": "workbook",
              ".xltm": "workbook", ".docx": "document", ".docm": "document",
              ".pptx": "presentation", ".ods": "spreadsheet", ".odt": "document"}  # fmt: skip
_DAMAGED = "damaged or unreadable "  # how archives.py begins the reason of a damaged one


def _not_expanded(name: str, exc: ArchiveError) -> str:
    """Why the archive `name` is left out, said of what it is to its owner."""
    kind = _DOCUMENTS.get(Path(name).suffix.lower())
    if kind is None:
        return f"archive not expanded: {exc}"
    why = str(exc)
    if why.startswith(_DAMAGED):  # "(BadZipFile: ...)"
        return f"the {kind} is unreadable {why.removeprefix(_DAMAGED)}"
    return f"the {kind} is unreadable: {why}"


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def build_view(root: DataRoot, view: Path, cache: Path, limits: ArchiveLimits) -> list[Skipped]:
    """Fill the empty folder `view` from the opened data root `root` (a folder or one
    file); returns the entries left out, with reasons."""
    try:
        proc: int | None = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        proc = None
    try:
        return _fill(root, view, cache, limits, proc)
    finally:
        if proc is not None:
            os.close(proc)


def _fill(
    root: DataRoot, view: Path, cache: Path, limits: ArchiveLimits, proc: int | None
) -> list[Skipped]:
    skipped: list[Skipped] = []
    made: set[Path] = {view}
    for relative, fd in walk(root, skipped):
        target = view / relative
        try:
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            _link(fd, target, proc)
        except OSError as exc:
            skipped.append(Skipped(relative, f"could not be staged: {exc.strerror or exc}"))
            continue
        finally:
            os.close(fd)
        # The archive is read from the view (the worker's own folder), never from the root.
        kind = archive_kind(str(target))
        if not kind:
            continue
        try:
            tree, rejected = expand_cached(target, kind, cache, limits, name=target.name)
            target.unlink()
            _link_tree(tree, target)
            skipped += [Skipped(f"{relative}/{name}", why) for name, why in rejected]
        except ArchiveError as exc:
            _remove(target)
            skipped.append(Skipped(relative, _not_expanded(relative, exc)))
        except OSError as exc:
            _remove(target)
            skipped.append(Skipped(relative, f"could not be staged: {exc.strerror or exc}"))
    return sorted(skipped, key=lambda s: s.path)
