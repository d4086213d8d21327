"""The host uids scripts run as, one per running script, held machine-wide.

Without user namespaces a script's uid is the machine's: the tree watchdog sums every process
of that uid, and `kill -9 -1` run as it ends every one. So two dsstar processes on one host
(other TMPDIR, HOME or venv; a container that mounts the same folder) must never hand one uid
to two scripts. A uid is held with an flock on its slot file in one machine-wide folder
(`SLOT_FOLDERS`, the first that is usable: root's, not writable by anyone else), and is taken
only when the kernel shows it free: a uid with processes while its slot is unlocked belongs to
a dsstar that locks elsewhere (it is skipped), unless the slot's last holder, recorded in the
slot file, is dead (then they are leftovers of a script it ran, and are killed).
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from dsstar.errors import ConfigError
from dsstar.execution.sandbox.host import is_root
from dsstar.execution.sandbox.supervise import kill_uid, scan
from dsstar.settings import Settings

__all__ = ["LEGACY_FOLDER", "SLOT_FOLDERS", "UID_SLOTS", "slot_folder", "uid_range", "uid_slot"]

UID_SLOTS = 256
# Machine-wide whatever the environment: /run is root's and per boot (a lock outlives no
# reboot); /var/lock where /run is missing or read-only. Never TMPDIR: two processes with
# other temporary folders would lock other files for the same uids.
SLOT_FOLDERS = (Path("/run/dsstar/uid-slots"), Path("/var/lock/dsstar-uid-slots"))
# Where earlier versions of dsstar locked them (under the temporary folder, /tmp by
# default): locked too where it is safe to, so that an older dsstar on the host never shares
# a uid with this one.
LEGACY_FOLDER = Path("/tmp/dsstar-uids")


@cache
def uid_range() -> range:
    """The host uids scripts run as: far from real accounts and the usual subordinate ranges
    by default (DSSTAR_EXEC_UID_BASE)."""
    base = Settings().exec_uid_base
    return range(base, base + UID_SLOTS)


def slot_folder(candidates: tuple[Path, ...] | None = None) -> Path:
    """The folder of the uid slot locks: the first of `candidates` (`SLOT_FOLDERS`) that exists
    or can be made, owned by root and writable by no one else (one that is not is never used:
    whoever could write there could hold or free any uid)."""
    refused = []
    for folder in SLOT_FOLDERS if candidates is None else candidates:
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = os.lstat(folder)
        except OSError as exc:
            refused.append(f"{folder}: {exc.strerror or exc}")
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
            refused.append(f"{folder}: not a folder of root's that only root may write")
            continue
        return folder
    raise ConfigError("no folder for the sandbox's uid locks: " + "; ".join(refused))


@contextmanager
def uid_slot() -> Iterator[int | None]:
    """Hold a dedicated uid for one script (None when dsstar is not root)."""
    if not is_root():
        yield None
        return
    folder, legacy = slot_folder(), _legacy_folder()
    while True:
        for slot in range(UID_SLOTS):
            fd = _lock(folder / str(slot))
            if fd is None:
                continue
            old = _lock(legacy / str(slot)) if legacy else None
            try:
                if legacy and old is None:
                    continue  # an older dsstar holds this uid
                uid = uid_range()[slot]
                if scan(uid)[0]:
                    if _holder_alive(fd):
                        continue  # the uid's processes are another dsstar's: not free
                    kill_uid(uid)  # left by a holder that died mid-script
                _record_holder(fd)
                yield uid
                return
            finally:
                for held in (fd, old):
                    if held is not None:
                        os.close(held)  # releases the lock
        time.sleep(0.05)  # every slot busy: wait for one


def _legacy_folder() -> Path | None:
    try:
        return slot_folder((LEGACY_FOLDER,))
    except ConfigError:
        return None  # a /tmp folder made by someone else: not trusted, and not needed


def _lock(path: Path) -> int | None:
    """An open, exclusively locked slot file; None when another process holds it."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _start_time(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot), which tells it from a later process that
    reuses its pid; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _record_holder(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {_start_time(os.getpid())}\n".encode(), 0)


def _holder_alive(fd: int) -> bool:
    """Whether the process the slot file names as its last holder still runs (an empty or
    unreadable record names no dead holder: the uid's processes are then not ours)."""
    try:
        pid, started = os.pread(fd, 100, 0).decode().split()
        return _start_time(int(pid)) == started
    except ValueError:
        return True
