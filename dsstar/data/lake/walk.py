"""Listing a data root safely: only regular files that really live under it.

Every entry is examined with lstat before anything is opened, so a FIFO, socket or device
is never opened (opening a FIFO would block), and a symbolic link is followed only when its
target resolves inside the root."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Skipped", "is_hidden", "walk"]

_SKIPPED_PARTS = {"__pycache__", "__MACOSX"}
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe): not opened"),
    (stat.S_ISSOCK, "a socket: not opened"),
    (stat.S_ISBLK, "a block device: not opened"),
    (stat.S_ISCHR, "a character device: not opened"),
)


@dataclass(frozen=True)
class Skipped:
    """An entry of the data root that scripts and prompts never see, and why."""

    path: str
    reason: str


def is_hidden(relative: str) -> bool:
    """Dot-files, dot-folders and tool litter are left out silently, as a user expects."""
    return any(p.startswith(".") or p in _SKIPPED_PARTS for p in relative.split("/"))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _special(mode: int) -> str | None:
    for test, reason in _KINDS:
        if test(mode):
            return reason
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else "not a regular file"


def walk(root: Path) -> tuple[list[tuple[str, str]], list[Skipped]]:
    """(relative posix path, real path) of every regular file under `root` (or `root` itself
    when it is a file), sorted by path, and the entries left out with their reasons."""
    real_root = os.path.realpath(root)
    if not os.path.isdir(real_root):
        mode = os.stat(real_root).st_mode
        reason = _special(mode)
        name = Path(root).name
        return ([], [Skipped(name, reason)]) if reason else ([(name, real_root)], [])
    files: list[tuple[str, str]] = []
    skipped: list[Skipped] = []
    visited = {real_root}
    stack = [(real_root, "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as exc:
            skipped.append(
                Skipped(prefix.rstrip("/") or ".", f"folder not readable: {exc.strerror}")
            )
            continue
        for entry in entries:
            relative = prefix + entry.name
            if is_hidden(entry.name):
                continue
            found = _examine(entry, relative, real_root)
            if isinstance(found, Skipped):
                skipped.append(found)
            elif os.path.isdir(found):
                if found in visited:
                    skipped.append(Skipped(relative, "a link to a folder already listed"))
                    continue
                visited.add(found)
                stack.append((found, relative + "/"))
            else:
                files.append((relative, found))
    return sorted(files), sorted(skipped, key=lambda s: s.path)


def _examine(entry: os.DirEntry, relative: str, real_root: str) -> str | Skipped:
    """The real path of a regular file or folder to take, or why it is left out."""
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError as exc:
        return Skipped(relative, f"cannot be examined: {exc.strerror}")
    path = entry.path
    if stat.S_ISLNK(info.st_mode):
        target = os.path.realpath(path)
        if not _inside(target, real_root):
            return Skipped(relative, "a symbolic link that leads outside the data root")
        try:
            info = os.stat(target)
        except OSError:
            return Skipped(relative, "a broken symbolic link")
        path = target
    reason = _special(info.st_mode)
    if reason:
        return Skipped(relative, reason)
    if stat.S_ISREG(info.st_mode) and not os.access(path, os.R_OK):
        return Skipped(relative, "not readable (permission denied)")
    return path
