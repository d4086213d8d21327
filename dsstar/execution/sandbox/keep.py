"""The figure files a script saved in its working directory, read after it has exited.

Standard library only: host.py puts this source before boot.py's, so the root supervisor
inside the sandbox calls `collect` on the tmpfs (or, in mode 'none', on the host folder)
before both vanish. Only regular files with one link on the working directory's own
filesystem are read, never through a symlink and never blocking (a FIFO is skipped), at the
top level and one folder down, within a count and a byte budget.
"""

import base64
import os
import stat

__all__ = ["FIGURE_SUFFIXES", "collect"]

FIGURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".svg", ".pdf", ".html")
_SCAN = 2000  # entries looked at per folder: a flood of files costs no more than this


def _candidates(workdir):
    """(relative name, lstat) of figure-named regular files, top level and one folder down."""
    found, folders = _scan(workdir, "")
    for name in sorted(folders)[:16]:
        try:
            found += _scan(os.path.join(workdir, name), name + "/")[0]
        except OSError:
            continue
    return sorted(found)


def _scan(folder, prefix):
    found, folders = [], []
    with os.scandir(folder) as entries:
        for count, entry in enumerate(entries):
            if count >= _SCAN:
                break
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode) and not prefix and entry.name != "data":
                folders.append(entry.name)
            elif stat.S_ISREG(info.st_mode) and entry.name.lower().endswith(FIGURE_SUFFIXES):
                found.append((prefix + entry.name, info))
    return found, folders


def _read(path, device, room):
    """The bytes of `path` when it is still a lone regular file on `device` within `room`."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_dev != device
                or info.st_size > room):  # fmt: skip
            return None
        data = os.read(fd, room + 1) if info.st_size else b""
        return data if len(data) <= room else None
    finally:
        os.close(fd)


def collect(workdir, most, budget):
    """{'figures': [{'name', 'bytes', 'data' (base64)}], 'left_out': n} of `workdir`."""
    kept, left_out = [], 0
    try:
        device = os.stat(workdir, follow_symlinks=False).st_dev
        candidates = _candidates(workdir) if most > 0 else []
    except OSError:
        return {"figures": [], "left_out": 0}
    for name, info in candidates:
        room = budget - sum(f["bytes"] for f in kept)
        data = None
        if len(kept) < most and info.st_size <= room:
            data = _read(os.path.join(workdir, name), device, room)
        if data is None:
            left_out += 1
            continue
        kept.append({"name": name, "bytes": len(data),
                     "data": base64.b64encode(data).decode("ascii")})  # fmt: skip
    return {"figures": kept, "left_out": left_out}
