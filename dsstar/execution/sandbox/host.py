"""What every backend starts from on the host: the boot program's command, the allowlisted
environment, and who dsstar runs as."""

from __future__ import annotations

import os
import shutil
import sys
from functools import cache
from pathlib import Path

__all__ = [
    "PRELUDE",
    "boot_python",
    "environment",
    "interpreter_reachable",
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


@cache
def interpreter_reachable(python: str | None = None) -> bool:
    """Whether an unprivileged uid can run this Python (or `python`, the scripts' own)
    without namespaces (mode 'none').

    Not so when it lives under /root, as pyenv puts it; mode 'none' then keeps root's uid.
    """
    if python is None:
        here = [sys.executable, sys.prefix]
    else:  # the interpreter and its environment's folder (a venv's bin/..)
        here = [python, os.path.dirname(os.path.dirname(python))]
    for path in map(os.path.realpath, here):
        for parent in Path(path).parents:
            if not os.stat(parent).st_mode & 0o001:
                return False
    return True


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
