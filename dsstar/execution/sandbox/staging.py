"""Folders the sandbox makes on the host: named after their owner's pid, removed after use,
and swept when that pid is dead (a crashed or killed run)."""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

__all__ = [
    "new_dir",
    "readable_data",
    "readonly_copy",
    "remove",
    "sweep_stale",
    "write_etc",
]

_KINDS = ("exec", "pool", "stage", "data", "view", "fonts")  # what new_dir and copies are named
_LOCK = threading.Lock()
_SWEPT: set[str] = set()
_COPIES: dict[Path, Path] = {}


def scratch_root(work_root: Path | None) -> Path:
    root = Path(work_root or tempfile.gettempdir())
    root.mkdir(parents=True, exist_ok=True)
    return root


def new_dir(kind: str, work_root: Path | None) -> Path:
    """A fresh private folder `dsstar-<kind>-<pid>-<random>` under the work root."""
    prefix = f"dsstar-{kind}-{os.getpid()}-"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root(work_root)))


def remove(path: Path) -> None:
    """Delete a folder the sandbox made, read-only copies included."""

    def make_writable(func, target, _exc):  # type: ignore[no-untyped-def]
        try:
            os.chmod(os.path.dirname(target), 0o700)
            func(target)
        except OSError:
            pass

    shutil.rmtree(path, onerror=make_writable)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(work_root: Path | None = None) -> list[Path]:
    """Remove the sandbox's `dsstar-<kind>-<pid>-*` folders left by processes now gone."""
    removed = []
    for entry in scratch_root(work_root).glob("dsstar-*-*-*"):
        parts = entry.name.split("-")
        ours = parts[1] in _KINDS and parts[2].isdigit()  # names other code uses are left be
        if ours and entry.is_dir() and not _alive(int(parts[2])):
            remove(entry)
            removed.append(entry)
    return removed


def sweep_once(work_root: Path | None) -> None:
    """Sweep a work root the first time this process uses it."""
    key = str(scratch_root(work_root).resolve())
    with _LOCK:
        if key in _SWEPT:
            return
        _SWEPT.add(key)
    sweep_stale(work_root)


def write_etc(stage: Path, uids: range | None) -> Path:
    """A minimal /etc: users and groups for the sandbox uids, and localhost."""
    etc = stage / "etc"
    etc.mkdir()
    users = ["root:x:0:0:root:/root:/usr/sbin/nologin"]
    groups = ["root:x:0:"]
    for n, uid in enumerate(uids or ()):
        users.append(f"sandbox{n}:x:{uid}:{uid}:sandbox:/sandbox:/usr/sbin/nologin")
        groups.append(f"sandbox{n}:x:{uid}:")
    users.append("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin")
    groups.append("nogroup:x:65534:")
    (etc / "passwd").write_text("\n".join(users) + "\n")
    (etc / "group").write_text("\n".join(groups) + "\n")
    (etc / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")
    return etc


@functools.cache
def _world_readable(data_dir: Path, _mtime_ns: int) -> bool:
    for folder, _dirs, files in os.walk(data_dir):
        if os.stat(folder).st_mode & 0o005 != 0o005:
            return False
        for name in files:
            try:
                if not os.stat(os.path.join(folder, name)).st_mode & 0o004:
                    return False
            except OSError:
                continue  # a dangling link: nothing to read either way
    return True


def readable_data(data_dir: Path, work_root: Path | None) -> Path:
    """`data_dir`, or a view of it the sandbox uid can read (folders made by mkdtemp are
    0700, for instance): folders made anew, readable files hard-linked, the rest copied."""
    if _world_readable(data_dir, data_dir.stat().st_mtime_ns):
        return data_dir
    with _LOCK:
        key = Path(f"view:{data_dir}")
        if key in _COPIES and _COPIES[key].exists():
            return _COPIES[key]
        view = new_dir("view", work_root)
        view.chmod(0o755)
        for folder, dirs, files in os.walk(data_dir):
            target = view / os.path.relpath(folder, data_dir)
            for name in dirs:
                if os.path.islink(os.path.join(folder, name)):
                    files.append(name)  # a link stays a link, resolved inside the sandbox
                else:
                    (target / name).mkdir(mode=0o755)
            for name in files:
                _view_entry(os.path.join(folder, name), target / name)
        _COPIES[key] = view
        return view


def _view_entry(source: str, target: Path) -> None:
    mode = os.lstat(source).st_mode
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(source), target)
    elif stat.S_ISREG(mode):
        if mode & 0o004:
            try:
                os.link(source, target, follow_symlinks=False)
                return
            except OSError:
                pass  # another filesystem: copy
        shutil.copyfile(source, target, follow_symlinks=False)
        target.chmod(0o444)
    # FIFOs, sockets and devices are left out, never opened


def readonly_copy(data_dir: Path, work_root: Path | None) -> Path:
    """Mode 'none': a world-readable, read-only copy of the data, once per process."""
    with _LOCK:
        if data_dir in _COPIES and _COPIES[data_dir].exists():
            return _COPIES[data_dir]
        digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:12]
        staging = new_dir("stage", work_root)
        copy = staging / "data"
        # Links stay links (never followed by root here); FIFOs and devices are not opened.
        shutil.copytree(data_dir, copy, symlinks=True, ignore=_special_files)
        for path in sorted(copy.rglob("*"), reverse=True):
            if not path.is_symlink():
                path.chmod(0o555 if path.is_dir() else 0o444)
        copy.chmod(0o555)
        target = staging.parent / f"dsstar-data-{os.getpid()}-{digest}"
        copy.rename(target)
        staging.rmdir()
        _COPIES[data_dir] = target
        return target


def _special_files(folder: str, names: list[str]) -> list[str]:
    skipped = []
    for name in names:
        mode = os.lstat(os.path.join(folder, name)).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            skipped.append(name)
    return skipped


@atexit.register
def _remove_copies() -> None:
    for copy in _COPIES.values():
        remove(copy)
