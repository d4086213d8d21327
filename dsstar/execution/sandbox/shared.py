"""What a script holds in memory outside its processes' resident pages.

The watchdog sums the proportional resident memory (Pss) of the script's processes. Memory a
script can hold without it showing there is counted here and added:

- its tmpfs: the working directory, `/tmp` and `/dev/shm` (POSIX shared memory) are one
  tmpfs per script, whose pages are memory; read through `/proc/<pid>/root`;
- memfds it holds open but has not mapped (a mapped one is in Pss already);
- SysV shared memory segments of its IPC namespace that no process has attached (attached
  ones are in Pss). Each script has an IPC namespace of its own, so these are its segments;
  they are read from `/proc/sysvipc/shm` by a short-lived thread that joins that namespace
  (setns changes only the calling thread's IPC namespace).

Pages both mapped and counted here (a mapped /tmp file, say) count twice: the cap errs on
the side of the host. A process of the script's uid whose root is the host's (the host's own
`kill -9 -1` run as that uid when the script is ended) is no way into the script's tmpfs or
IPC namespace: read through it, the host's /tmp would count as the script's memory.
"""

from __future__ import annotations

import ctypes
import os
import threading

__all__ = ["held_bytes"]

CLONE_NEWIPC = 0x08000000
_LIBC = ctypes.CDLL(None, use_errno=True)


def held_bytes(pids: list[int], isolated: bool) -> int:
    """Bytes held by the processes `pids` of one script outside their Pss. `isolated`: the
    script has its own tmpfs and IPC namespace (modes bwrap and unshare)."""
    if not pids:
        return 0
    total = _memfds(pids)
    host = os.stat("/")
    inside = [pid for pid in pids if not _on_root(pid, host)] if isolated else []
    if inside:
        total += _tmpfs(inside) + _sysv(inside)
    return total


def _on_root(pid: int, host: os.stat_result) -> bool:
    """Whether `pid`'s root is `host` (True too when it is gone: nothing to read)."""
    try:
        root = os.stat(f"/proc/{pid}/root")
    except OSError:
        return True
    return (root.st_dev, root.st_ino) == (host.st_dev, host.st_ino)


def _tmpfs(pids: list[int]) -> int:
    for pid in pids:
        try:
            info = os.statvfs(f"/proc/{pid}/root/tmp")
        except OSError:
            continue  # gone meanwhile: the next one will do
        return (info.f_blocks - info.f_bfree) * info.f_frsize
    return 0


def _memfds(pids: list[int]) -> int:
    held: dict[tuple[int, int], int] = {}
    mapped: set[int] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", "rb") as maps:
                mapped.update(int(line.split()[4]) for line in maps if b"/memfd:" in line)
            for fd in os.listdir(f"/proc/{pid}/fd"):
                path = f"/proc/{pid}/fd/{fd}"
                if os.readlink(path).startswith("/memfd:"):
                    info = os.stat(path)
                    held[(info.st_dev, info.st_ino)] = info.st_blocks * 512
        except (OSError, ValueError, IndexError):
            continue
    return sum(size for (_, inode), size in held.items() if inode not in mapped)


def _sysv(pids: list[int]) -> int:
    found = [0]

    def read() -> None:  # in its own thread: setns moves only this thread
        try:
            fd = os.open(f"/proc/{pids[0]}/ns/ipc", os.O_RDONLY)
        except OSError:
            return
        try:
            if _LIBC.setns(fd, CLONE_NEWIPC) != 0:
                return
        finally:
            os.close(fd)
        try:
            with open("/proc/sysvipc/shm", "rb") as table:
                next(table)  # the header line
                for line in table:
                    fields = line.split()
                    if int(fields[6]) == 0:  # nattch: detached, so in no process's Pss
                        found[0] += int(fields[14]) + int(fields[15])  # rss + swap
        except (OSError, ValueError, IndexError, StopIteration):
            return

    thread = threading.Thread(target=read, name="dsstar-sysv", daemon=True)
    thread.start()
    thread.join(timeout=2)
    return found[0]
