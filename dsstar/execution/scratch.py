"""Temporary folders of a process (remote data snapshots, single files staged alone), removed
at the end of each run and, when a process died before it could do so, by the next one.

    <base>/dsstar-cache/p<pid>-<start>-<host>/<tag>-XXXX/

The owner's pid, start time and host are in the folder name, so a later process on the same
host can tell that the owner is gone (or that its pid now belongs to another process).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from functools import cache
from pathlib import Path

import psutil

__all__ = ["archive_cache", "new_dir", "owner", "owner_alive", "release", "release_all", "sweep"]

CACHE = "dsstar-cache"
_LEGACY_AGE_S = 6 * 3600  # `data-*` folders of older versions, left directly under dsstar-cache
_OWNED = re.compile(r"p(\d+)-(\d+)-(.+)")
_mine: dict[str, list[Path]] = {}
_lock = threading.Lock()


@cache
def owner() -> dict[str, int | str]:
    """This process as a run records it: host, pid and start time (seconds since the epoch)."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_started": int(psutil.Process().create_time()),
    }


def owner_alive(host: str | None, pid: int | None, started: int | None) -> bool | None:
    """Whether that process still runs: None when it is on another host (unknowable here)."""
    if host != socket.gethostname() or not pid:
        return None
    try:
        created = int(psutil.Process(pid).create_time())
    except psutil.Error:
        return False
    return started is None or abs(created - started) <= 1


def base_dir(work_dir: Path | None) -> Path:
    """Where temporary folders go: DSSTAR_WORK_DIR, else the system's temp folder."""
    return Path(work_dir or tempfile.gettempdir()) / CACHE


def archive_cache(work_dir: Path | None) -> Path:
    """Expanded archives, keyed by content and shared by every run (never swept)."""
    return base_dir(work_dir) / "archives"


def new_dir(work_dir: Path | None, tag: str = "data") -> Path:
    """A fresh folder owned by this process; `release(tag)` or process exit removes it."""
    me = owner()
    parent = base_dir(work_dir) / f"p{me['pid']}-{me['pid_started']}-{me['host']}"
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{_safe(tag)}-", dir=parent))
    with _lock:
        _mine.setdefault(tag, []).append(folder)
    return folder


def release(tag: str) -> None:
    """Remove the folders made under `tag` (and this process's folder once it is empty)."""
    with _lock:
        folders = _mine.pop(tag, [])
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(OSError):
            folder.parent.rmdir()  # fails while another run of this process still uses it


@atexit.register
def release_all(*_: object) -> None:
    """Remove every folder this process made (at exit, and when it is stopped)."""
    with _lock:
        tags = list(_mine)
    for tag in tags:
        release(tag)


def sweep(work_dir: Path | None) -> list[Path]:
    """Remove the folders of processes on this host that are gone; returns what went."""
    root = base_dir(work_dir)
    try:
        entries = list(root.iterdir())
    except OSError:
        return []
    host, removed = socket.gethostname(), []
    for entry in entries:
        match = _OWNED.fullmatch(entry.name)
        if match:
            pid, started, where = int(match[1]), int(match[2]), match[3]
            if where != host or owner_alive(where, pid, started) is not False:
                continue
        elif not (entry.name.startswith("data-") and _older_than(entry, _LEGACY_AGE_S)):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def _older_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime > seconds
    except OSError:
        return False


def _safe(tag: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", tag)[:60] or "data"
