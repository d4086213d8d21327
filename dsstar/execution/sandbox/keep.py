"""The files a script wrote in its working directory, read after it has exited.

Standard library only: host.py puts this source before boot.py's, so the root supervisor
inside the sandbox calls `collect` on the tmpfs (or, in mode 'none', on the host folder)
before both vanish. Every regular file with one link on the working directory's own
filesystem is read, at the top level and one folder down, never through a symlink and never
blocking (a FIFO is skipped), within a count and a byte budget. The inputs (`data/`), the
script itself and hidden names (caches such as matplotlib's, the chart descriptions) are not
outputs; each chart description (prelude.py) goes with the file it describes.
"""

import base64
import json
import os
import stat

__all__ = ["FIGURE_SUFFIXES", "collect", "is_figure"]

FIGURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".svg", ".pdf", ".html")
_SCAN = 2000  # entries looked at per folder: a flood of files costs no more than this
_NOT_OUTPUTS = ("data", "script.py")  # top level: the staged inputs and the script
_CHARTS = ".dsstar-charts.jsonl"  # prelude.CHARTS_FILE
_CHARTS_BYTES = 4 << 20  # chart descriptions read at most, all together


def is_figure(name):
    """Whether `name` is an image or page a chart library saves."""
    return name.lower().endswith(FIGURE_SUFFIXES)


def _candidates(workdir):
    """(relative name, lstat) of regular files, top level and one folder down."""
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
            if entry.name.startswith(".") or (not prefix and entry.name in _NOT_OUTPUTS):
                continue
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode) and not prefix:
                folders.append(entry.name)
            elif stat.S_ISREG(info.st_mode):
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


def _charts(workdir, device):
    """{saved name: description} from the chart hook's lines; the last save of a name wins."""
    data = _read(os.path.join(workdir, _CHARTS), device, _CHARTS_BYTES)
    found = {}
    for line in (data or b"").splitlines():
        try:
            item = json.loads(line)
            if isinstance(item.get("name"), str) and isinstance(item.get("chart"), dict):
                found[item["name"]] = item["chart"]
        except (ValueError, AttributeError):
            continue
    return found


def collect(workdir, most, budget):
    """{'outputs': [{'name', 'bytes', 'data' (base64), 'chart' (a figure's description, when
    it has one)}], 'left_out': [names]} of `workdir`."""
    kept, left_out = [], []
    try:
        device = os.stat(workdir, follow_symlinks=False).st_dev
        candidates = _candidates(workdir) if most > 0 else []
        charts = _charts(workdir, device) if candidates else {}
    except OSError:
        return {"outputs": [], "left_out": []}
    for name, info in candidates:
        room = budget - sum(f["bytes"] for f in kept)
        data = None
        if len(kept) < most and info.st_size <= room:
            data = _read(os.path.join(workdir, name), device, room)
        if data is None:
            left_out.append(name)
            continue
        item = {"name": name, "bytes": len(data), "data": base64.b64encode(data).decode("ascii")}
        if name in charts:
            item["chart"] = charts[name]
        kept.append(item)
    return {"outputs": kept, "left_out": left_out}
