"""Listing a data root safely: only regular files that really live under it.

The walk starts from the root's descriptor (`DataRoot`) and goes down with `dir_fd`, never
through a path: a folder or file swapped for a link after it was listed is refused
(`O_NOFOLLOW`), not followed. Every entry is examined with lstat before it is opened, so a
FIFO, socket or device is never opened (opening a FIFO would block); a symbolic link is
followed only when it resolves inside the root, and whatever is opened is checked again by
its descriptor to lie under the root."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from dsstar.data.lake.root import DataRoot

__all__ = ["Skipped", "is_hidden", "walk"]

_SKIPPED_PARTS = {"__pycache__", "__MACOSX"}
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe): not opened"),
    (stat.S_ISSOCK, "a socket: not opened"),
    (stat.S_ISBLK, "a block device: not opened"),
    (stat.S_ISCHR, "a character device: not opened"),
)
_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_OUTSIDE = "a symbolic link that leads outside the data root"


@dataclass(frozen=True)
class Skipped:
    """An entry of the data root that scripts and prompts never see, and why."""

    path: str
    reason: str


def is_hidden(relative: str) -> bool:
    """Dot-files, dot-folders and tool litter are left out silently, as a user expects."""
    return any(p.startswith(".") or p in _SKIPPED_PARTS for p in relative.split("/"))


def _special(mode: int) -> str | None:
    for test, reason in _KINDS:
        if test(mode):
            return reason
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else "not a regular file"


def walk(root: DataRoot, skipped: list[Skipped]) -> Iterator[tuple[str, int]]:
    """(relative posix path, open descriptor) of every regular file under `root` (or of
    `root` itself when it is a file); the caller closes each descriptor. The entries left
    out are appended to `skipped`, with their reasons."""
    if not root.is_dir:
        yield root.name, os.dup(root.fd)
        return
    info = os.fstat(root.fd)
    yield from _folder(root, os.dup(root.fd), "", {(info.st_dev, info.st_ino)}, skipped)


def _folder(
    root: DataRoot, fd: int, prefix: str, visited: set[tuple[int, int]], skipped: list[Skipped]
) -> Iterator[tuple[str, int]]:
    """The files of the open folder `fd` and of its subfolders, depth first (only the chain
    of folders down to the current one is held open)."""
    try:
        try:
            entries = sorted(os.scandir(fd), key=lambda e: e.name)
        except OSError as exc:
            why = f"folder not readable: {exc.strerror}"
            skipped.append(Skipped(prefix.rstrip("/") or ".", why))
            return
        for entry in entries:
            if is_hidden(entry.name):
                continue
            relative = prefix + entry.name
            found = _open(root, fd, entry, relative)
            if isinstance(found, Skipped):
                skipped.append(found)
                continue
            info = os.fstat(found)
            if stat.S_ISREG(info.st_mode):
                yield relative, found
            elif (info.st_dev, info.st_ino) in visited:
                os.close(found)
                skipped.append(Skipped(relative, "a link to a folder already listed"))
            else:
                visited.add((info.st_dev, info.st_ino))
                yield from _folder(root, found, relative + "/", visited, skipped)
    finally:
        os.close(fd)


def _open(root: DataRoot, folder: int, entry: os.DirEntry, relative: str) -> int | Skipped:
    """The entry opened (a regular file or a folder under the root), or why it is left out."""
    try:
        mode = entry.stat(follow_symlinks=False).st_mode
    except OSError as exc:
        return Skipped(relative, _why(exc, link=False))
    link = stat.S_ISLNK(mode)
    try:
        if link:
            mode = _lead(root, folder, entry.name)
            if mode is None:
                return Skipped(relative, _OUTSIDE)
        reason = _special(mode)
        if reason:
            return Skipped(relative, reason)
        flags = _OPEN | (os.O_DIRECTORY if stat.S_ISDIR(mode) else 0)
        fd = os.open(entry.name, flags if link else flags | os.O_NOFOLLOW, dir_fd=folder)
    except OSError as exc:
        return Skipped(relative, _why(exc, link))
    if not root.holds(fd):  # swapped or moved between the look and the open
        os.close(fd)
        return Skipped(relative, _OUTSIDE if link else "moved outside the data root while read")
    reason = _special(os.fstat(fd).st_mode)
    if reason:
        os.close(fd)
        return Skipped(relative, reason)
    return fd


def _lead(root: DataRoot, folder: int, name: str) -> int | None:
    """The mode of what the link `name` leads to, or None when that lies outside the root.
    Judged by a path-only descriptor (O_PATH): the kernel resolves the link, and nothing is
    opened for reading, so a device or FIFO outside the root is never opened. What is then
    opened is judged again by its own descriptor."""
    target = os.open(name, os.O_PATH | os.O_CLOEXEC, dir_fd=folder)
    try:
        return os.fstat(target).st_mode if root.holds(target) else None
    finally:
        os.close(target)


def _why(exc: OSError, link: bool) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop" if link else "replaced by a symbolic link: not followed"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "a broken symbolic link" if link else "removed or replaced while read"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "not readable (permission denied)"
    return f"cannot be examined: {exc.strerror}"
