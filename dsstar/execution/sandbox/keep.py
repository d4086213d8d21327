"""The files a script wrote in its working directory, read after it has exited.

Standard library only: host.py puts this source before boot.py's, so the root supervisor
inside the sandbox calls `collect` on the tmpfs (or, in mode 'none', on the host folder)
before both vanish. Every regular file with one link on the working directory's own
filesystem is read, at the top level and one folder down, never through a symlink and never
blocking (a FIFO is skipped), within a count and a byte budget. The inputs (`data/`), the
script itself and hidden names (caches such as matplotlib's, the chart descriptions) are not
outputs. Everything else that is not kept is named in `left_out`, with the reason.

A chart description (prelude.py) is what the script's figure hook reported, in the script's
own process: the script can write that file too, so it is never more than the script's word.
It goes only with a kept file of a format matplotlib saves whose bytes start as that format
does and are those the hook hashed when it saved them (not a file changed, or made, after).
"""

import base64
import hashlib
import json
import os
import stat

__all__ = ["FIGURE_SUFFIXES", "collect", "is_figure", "name_problem"]

FIGURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".svg", ".pdf", ".html")
# How a file of each format matplotlib saves starts: a description goes only with such a file.
_SIGNATURES = {
    ".png": (b"\x89PNG\r\n\x1a\n",),
    ".jpg": (b"\xff\xd8\xff",),
    ".jpeg": (b"\xff\xd8\xff",),
    ".pdf": (b"%PDF-",),
    ".svg": (b"<?xml", b"<svg"),
}
_SCAN = 2000  # entries looked at per folder: a flood of files costs no more than this
_FOLDERS = 16  # folders looked in, one level down
_NOT_OUTPUTS = ("data", "script.py")  # top level: the staged inputs and the script
_CHARTS = ".dsstar-charts.jsonl"  # prelude.CHARTS_FILE
_CHARTS_BYTES = 4 << 20  # chart descriptions read at most, all together
_NAME_CHARS = 200  # the longest name kept (a storage key is made of it)
OVER_BOUNDS = "past the bounds"  # the reason the host words with the bounds' settings


def is_figure(name):
    """Whether `name` is an image or page a chart library saves."""
    return name.lower().endswith(FIGURE_SUFFIXES)


def name_problem(name):
    """Why `name` cannot be kept as an output's name (a storage key, a line of a report), or
    None: not UTF-8, a control character (a newline), a backslash, too long."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not UTF-8"
    if not name.isprintable():
        return "its name has a control character"
    if "\\" in name:
        return "its name has a backslash"
    if len(name) > _NAME_CHARS:
        return f"its name is longer than {_NAME_CHARS} characters"
    return None


def _candidates(workdir, left_out):
    """(relative name, lstat) of regular files, top level and one folder down; what else is
    there (links, FIFOs, folders not looked in) goes to `left_out`."""
    found, folders = _scan(workdir, "", left_out)
    folders.sort()
    past = f"a folder past the first {_FOLDERS} looked in"
    left_out += [(name + "/", past) for name in folders[_FOLDERS:]]
    for name in folders[:_FOLDERS]:
        try:
            found += _scan(os.path.join(workdir, name), name + "/", left_out)[0]
        except OSError:
            left_out.append((name + "/", "a folder that could not be read"))
    return sorted(found)


def _scan(folder, prefix, left_out):
    found, folders = [], []
    with os.scandir(folder) as entries:
        for count, entry in enumerate(entries):
            if count >= _SCAN:
                left_out.append((prefix or "./", f"more than {_SCAN} entries: the rest unread"))
                break
            if entry.name.startswith(".") or (not prefix and entry.name in _NOT_OUTPUTS):
                continue
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                if prefix:
                    left_out.append((prefix + entry.name + "/", "a folder two levels down"))
                else:
                    folders.append(entry.name)
            elif stat.S_ISREG(info.st_mode):
                found.append((prefix + entry.name, info))
            else:
                link = stat.S_ISLNK(info.st_mode)
                left_out.append(
                    (prefix + entry.name, "a symbolic link" if link else "not a regular file")
                )
    return found, folders


def _read(path, device, room):
    """(the bytes of `path`, None) when it is still a lone regular file on `device` within
    `room`; else (None, why)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return None, f"it could not be opened ({exc.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, "not a regular file"
        if info.st_nlink != 1:
            return None, "a file with more than one link"
        if info.st_dev != device:
            return None, "on another filesystem"
        if info.st_size > room:
            return None, OVER_BOUNDS
        data = os.read(fd, room + 1) if info.st_size else b""
        return (data, None) if len(data) <= room else (None, OVER_BOUNDS)
    finally:
        os.close(fd)


def _charts(workdir, device):
    """{saved name: (sha256, description)} from the chart hook's lines; the last save of a
    name wins."""
    data = _read(os.path.join(workdir, _CHARTS), device, _CHARTS_BYTES)[0]
    found = {}
    for line in (data or b"").splitlines():
        try:
            item = json.loads(line)
            name, digest, chart = item.get("name"), item.get("sha256"), item.get("chart")
            if isinstance(name, str) and isinstance(digest, str) and isinstance(chart, dict):
                found[name] = (digest, chart)
        except (ValueError, AttributeError):
            continue
    return found


def _description(name, data, charts):
    """The hook's description of output `name` when its bytes are a figure the hook saved
    (see the module's docstring); else None."""
    digest, chart = charts.get(name, (None, None))
    suffix = os.path.splitext(name)[1].lower()
    starts = _SIGNATURES.get(suffix, ())  # none for another suffix: no description
    if chart is None or not data[:64].lstrip().startswith(starts):
        return None
    return chart if hashlib.sha256(data).hexdigest() == digest else None


def collect(workdir, most, budget):
    """{'outputs': [{'name', 'bytes', 'data' (base64), 'chart' (a figure's description, when
    it has one)}], 'left_out': [[name, why]] (by name)} of `workdir`."""
    kept, left_out = [], []
    try:
        device = os.stat(workdir, follow_symlinks=False).st_dev
        candidates = _candidates(workdir, left_out) if most > 0 else []
        charts = _charts(workdir, device) if candidates else {}
    except OSError:
        return {"outputs": [], "left_out": []}
    for name, info in candidates:
        room = budget - sum(f["bytes"] for f in kept)
        data, why = None, name_problem(name)
        if why is None and (len(kept) >= most or info.st_size > room):
            why = OVER_BOUNDS
        if why is None:
            data, why = _read(os.path.join(workdir, name), device, room)
        if data is None:
            left_out.append((name, why))
            continue
        item = {"name": name, "bytes": len(data), "data": base64.b64encode(data).decode("ascii")}
        chart = _description(name, data, charts)
        if chart is not None:
            item["chart"] = chart
        kept.append(item)
    return {"outputs": kept, "left_out": [list(pair) for pair in sorted(left_out)]}
