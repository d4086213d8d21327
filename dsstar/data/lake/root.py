"""A local data root opened once: every later read goes through that opening.

A run's data location is resolved and judged once (for a run form, against the worker's
data roots: `dsstar.inputs.trust`). What was judged is the directory (or file) then opened,
held as a descriptor until the run's view is built: the folder is walked with `dir_fd`
(openat-style), never through its path again, so a folder swapped for a link after the
check is not followed. Each file and folder opened is then checked by its descriptor
(`/proc/self/fd`) to lie under the root as it was opened: a link inside the root, or a
folder moved out of it during the walk, cannot bring in a file from elsewhere."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from dsstar.errors import DataError
from dsstar.locations import local_path

__all__ = ["DataRoot", "real_path"]

_TRIES = 3  # readings of a root renamed over and over (see DataRoot.holds)
_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC  # a FIFO never blocks


def real_path(fd: int) -> str:
    """Where the file or folder open as `fd` lies now (its links resolved), from the kernel."""
    target = os.readlink(f"/proc/self/fd/{fd}")
    return target.removesuffix(" (deleted)")


def inside(path: str, root: str) -> bool:
    """Whether `path` is `root` or lies under it (both real paths)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class DataRoot:
    """A local folder or file, opened: `fd` is what every walk starts from, `path` its real
    path when opened, `location` what the run records, `fence` the real paths of the
    declared roots everything read must also lie under (empty from the CLI: the root alone)."""

    def __init__(self, fd: int, location: str, name: str, fence: tuple[str, ...] = ()) -> None:
        self.fd, self.location, self.name, self.fence = fd, location, name, fence
        self.path = real_path(fd)
        self.is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)

    @classmethod
    def open(cls, location: str, fence: tuple[str, ...] = ()) -> DataRoot:
        """Open `location` (links followed: a root that is a link is taken as named).
        DataError when it does not exist, cannot be opened, or is no file or folder."""
        path = local_path(location)
        try:
            fd = os.open(path, _OPEN)
        except FileNotFoundError:
            raise DataError(f"data location {location} does not exist") from None
        except OSError as exc:
            raise DataError(f"cannot open data location {location}: {exc.strerror}") from exc
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            os.close(fd)
            raise DataError(f"data location {location} is neither a folder nor a regular file")
        return cls(fd, location, Path(path).name, fence)

    def holds(self, fd: int) -> bool:
        """Whether what `fd` has open lies under this root where it is now (a folder moved
        while walked is followed) and under the declared roots.

        Both are read from the kernel, one after the other: were the root renamed between the
        two readings (its whole tree moves with it), an entry inside would read as outside.
        So the root's path is read on both sides of the entry's, and the question asked again
        when the answer is no: an entry really outside is outside on every try, while renames
        cannot keep landing between readings microseconds apart."""
        for _ in range(_TRIES):
            root = real_path(self.fd)
            path = real_path(fd)
            fenced = not self.fence or any(inside(path, fence) for fence in self.fence)
            if fenced and inside(path, root) and real_path(self.fd) == root:
                return True
        return False

    def close(self) -> None:
        """Let the descriptor go (once the view is built, or the run ends)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> DataRoot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DataRoot({self.location!r}, real={self.path!r})"
