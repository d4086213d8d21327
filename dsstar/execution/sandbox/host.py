"""What every backend starts from on the host: the boot program's command, the allowlisted
environment, and who dsstar runs as."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from dsstar.errors import ConfigError

__all__ = [
    "PRELUDE",
    "boot_python",
    "check_dedicated_uid",
    "closed_interpreter",
    "closed_to_others",
    "environment",
    "is_root",
    "kill_with_parent",
]

_PASSTHROUGH_ENV = ("LANG", "LC_ALL", "TZ")
# One program from five standard-library sources: mounts.py builds the sandbox's filesystem,
# keep.py collects the files a script wrote, prelude.py describes the charts it saves (and
# starts a cold script), seccomp.py refuses the system calls a script never needs, boot.py
# runs and supervises the script.
PRELUDE = (Path(__file__).parent / "prelude.py").read_text(encoding="utf-8")
_BOOT = "\n".join(
    (Path(__file__).parent / name).read_text(encoding="utf-8")
    for name in ("mounts.py", "keep.py", "prelude.py", "seccomp.py", "boot.py")
)


def is_root() -> bool:
    return os.geteuid() == 0


def closed_to_others(path: str | os.PathLike[str]) -> Path | None:
    """The outermost folder on the way to `path` (links resolved) that other users may not
    enter (no search permission for them), as /root; None when each one lets them."""
    for folder in reversed(Path(os.path.realpath(path)).parents):
        try:
            if not os.stat(folder).st_mode & 0o001:
                return folder
        except FileNotFoundError:  # made later, as the umask says (for its owner, root)
            return None
    return None


@cache
def closed_interpreter(python: str | None = None) -> Path | None:
    """What keeps an unprivileged uid from running this Python (or `python`, the scripts'
    own) without namespaces (mode 'none'): a folder on the way to it or to its environment
    that others may not enter, as /root is where pyenv puts it; None when there is none."""
    if python is None:
        executable, prefix = sys.executable, sys.prefix
    else:  # the interpreter and its environment's folder (a venv's bin/..)
        executable, prefix = python, os.path.dirname(os.path.dirname(python))
    return closed_to_others(executable) or closed_to_others(Path(prefix) / "x")


def check_dedicated_uid(mode: str, pythons: Iterable[str], work_root: Path | None) -> None:
    """As root, a mode that does not isolate runs each script as a dedicated unprivileged
    uid, never as root: ConfigError, naming the folder and the fix, when that uid could not
    run one of the interpreters `pythons` (the scripts', dsstar's own for the offline
    profiler) or enter the work root. Nothing to check when dsstar is not root (scripts then
    run as its own uid)."""
    if not is_root():
        return
    root = Path(work_root or tempfile.gettempdir())
    for python in pythons:
        closed = closed_interpreter(python)
        if closed is not None:
            fix = (
                f"run dsstar from a Python every user may run (its own, {python}, runs the"
                " offline profiler, and scripts unless DSSTAR_SCRIPT_PYTHON names another)"
                if os.path.realpath(python) == os.path.realpath(sys.executable)
                else f"set DSSTAR_SCRIPT_PYTHON to a Python every user may run (the scripts'"
                f" Python is {python}; a virtual environment made outside {closed}, say)"
            )
            break
    else:
        closed = closed_to_others(root / "x")
        fix = f"set DSSTAR_WORK_DIR to a folder every user may enter (the work folder is {root})"
    if closed is not None:
        raise ConfigError(
            f"sandbox mode {mode!r} runs scripts as a dedicated unprivileged uid when dsstar"
            f" runs as root, never as root itself, and that uid may not enter {closed}: {fix};"
            " or use a mode that isolates (bwrap, unshare)."
        )


def boot_python(python: str | None = None) -> list[str]:
    """The scripts' interpreter (`spec["python"]`; None: this Python) running the boot
    program; the spec (JSON) follows as its one argument."""
    return [python or sys.executable, "-I", "-u", "-c", _BOOT]


def kill_with_parent() -> list[str]:
    """A prefix that kills the command when dsstar dies (empty without util-linux setpriv)."""
    return ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []


def environment(home: str, tmp: str) -> dict[str, str]:
    """An allowlisted environment: nothing of the parent's secrets can leak through it."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": tmp,
        "USER": "sandbox",
        "LANG": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLBACKEND": "Agg",
        # Caches and configuration of the scripts' libraries (matplotlib's font list, numba's
        # compiled functions, anything that follows XDG) go to the script's private
        # temporary folder: never the working directory, whose files are the script's work.
        "MPLCONFIGDIR": f"{tmp}/.matplotlib",
        "XDG_CACHE_HOME": f"{tmp}/.cache",
        "XDG_CONFIG_HOME": f"{tmp}/.config",
        "NUMBA_CACHE_DIR": f"{tmp}/.numba",
        # One thread per BLAS pool keeps the address space of numpy small under RLIMIT_AS.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update({k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ})
    return env
