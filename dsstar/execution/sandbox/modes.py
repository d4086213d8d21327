"""Isolation modes, and the command line that starts the boot program in each.

- `bwrap`: bubblewrap makes the mount, PID, network, IPC and UTS namespaces and the
  read-only root;
- `unshare`: util-linux `unshare` makes the same namespaces and the boot program builds the
  same root itself (bind mounts, pivot_root);
- `none`: a plain subprocess with the same limits and uid, for explicit use only.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from dsstar.errors import ConfigError

__all__ = [
    "ISOLATED",
    "MODES",
    "boot_argv",
    "environment",
    "interpreter_reachable",
    "is_root",
    "resolve_mode",
]

log = logging.getLogger(__name__)

ISOLATED = ("bwrap", "unshare")
MODES = ("auto", *ISOLATED, "none")  # the names users may give (and 'process', the old 'none')
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
# What Python, pandas and TLS need of /etc; nothing else of the host's /etc is visible.
_HOST_ETC = ("localtime", "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl/certs",
             "ca-certificates", "nsswitch.conf", "mime.types", "alternatives", "fonts")  # fmt: skip
_PASSTHROUGH_ENV = ("LANG", "LC_ALL", "TZ")
# One program from four standard-library sources: mounts.py builds the sandbox's filesystem,
# keep.py collects the figure files a script saved, seccomp.py refuses the system calls a
# script never needs, boot.py runs and supervises the script.
_BOOT = "\n".join(
    (Path(__file__).parent / name).read_text(encoding="utf-8")
    for name in ("mounts.py", "keep.py", "seccomp.py", "boot.py")
)
_FIX = (
    "install bubblewrap (apt-get install bubblewrap), allow user namespaces"
    " (sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=10000), or run"
    " without isolation on purpose with --sandbox none (DSSTAR_SANDBOX=none)"
)


def is_root() -> bool:
    return os.geteuid() == 0


@cache
def interpreter_reachable() -> bool:
    """Whether an unprivileged uid can run this Python without namespaces (mode 'none').

    Not so when it lives under /root, as pyenv puts it; mode 'none' then keeps root's uid.
    """
    for path in (os.path.realpath(sys.executable), os.path.realpath(sys.prefix)):
        for parent in Path(path).parents:
            if not os.stat(parent).st_mode & 0o001:
                return False
    return True


@cache
def _usable(mode: str) -> bool:
    """Whether this mode can make its namespaces here (probed once per process)."""
    if mode == "bwrap":
        probe = [shutil.which("bwrap") or "bwrap", *_bwrap_flags(), "--ro-bind", "/", "/", "true"]
    else:
        if not (shutil.which("unshare") and (shutil.which("setpriv") or not is_root())):
            return False
        probe = ["unshare", *_unshare_flags(), "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def resolve_mode(mode: str = "auto", *, probe: bool = True) -> str:
    """The one place a sandbox mode name is resolved; settings, preflight and the executor
    all call it.

    With `probe` (default), the mode scripts run in: 'auto' becomes the first isolating mode
    that works here, 'bwrap' and 'unshare' must work here, 'none' stays 'none'. Without it,
    only the name is checked and spelled the one way ('process' is the old 'none'), so
    settings can be read on a machine that will not run scripts. Raises ConfigError, naming
    the fix, when the name is unknown or the mode cannot isolate scripts here.
    """
    if mode == "process":
        _warn_deprecated()
        mode = "none"
    if mode not in MODES:
        raise ConfigError(f"unknown sandbox mode {mode!r}: use {', '.join(MODES)}.")
    if not probe or mode == "none":
        return mode
    if mode in ISOLATED:
        if not _usable(mode):
            raise ConfigError(f"sandbox mode {mode!r} does not work on this machine: {_FIX}.")
        return mode
    for candidate in ISOLATED:
        if _usable(candidate):
            return candidate
    raise ConfigError(f"no usable isolation for generated scripts: {_FIX}.")


@cache
def _warn_deprecated() -> None:
    log.warning("sandbox mode 'process' is deprecated; it now means 'none'")


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
        # One thread per BLAS pool keeps the address space of numpy small under RLIMIT_AS.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    env.update({k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ})
    return env


def boot_argv(mode: str, stage: Path, data_dir: Path, spec: dict[str, Any]) -> list[str]:
    """The command that starts the boot program with `spec` in the given mode."""
    python = [sys.executable, "-I", "-u", "-c", _BOOT]
    if mode == "bwrap":
        argv = [shutil.which("bwrap") or "bwrap", *_bwrap_flags(), *_bwrap_root(stage, data_dir)]
        return [*argv, *python, json.dumps(spec)]
    kill_with_parent = ["setpriv", "--pdeathsig", "KILL"] if shutil.which("setpriv") else []
    if mode == "unshare":
        newroot = stage / "root"
        newroot.mkdir()
        binds, links = _root_layout(stage, data_dir)
        spec = {**spec, "newroot": str(newroot), "binds": binds, "symlinks": links}
        return [*kill_with_parent, "unshare", *_unshare_flags(), *python, json.dumps(spec)]
    return [*kill_with_parent, *python, json.dumps(spec)]


def _bwrap_flags() -> list[str]:
    user = [] if is_root() else ["--unshare-user", "--uid", "0", "--gid", "0"]
    return ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", *user, "--die-with-parent", "--new-session"]  # fmt: skip


def _unshare_flags() -> list[str]:
    user = [] if is_root() else ["--user", "--map-root-user"]
    return ["--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child", *user]


def _root_layout(stage: Path, data_dir: Path) -> tuple[list[list[str]], list[list[str]]]:
    """Read-only binds (host path, path inside) and symlinks (path inside, target)."""
    binds: list[list[str]] = []
    links: list[list[str]] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            links.append([path, os.readlink(path)])
        elif os.path.isdir(path):
            binds.append([path, path])
    python_dirs = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parents[1])}
    for path in sorted(python_dirs):
        if os.path.isdir(path) and not any(path.startswith(b[0] + "/") for b in binds):
            binds.append([path, path])
    for name in ("passwd", "group", "hosts"):
        binds.append([str(stage / "etc" / name), f"/etc/{name}"])
    for name in _HOST_ETC:
        if os.path.exists(f"/etc/{name}"):
            binds.append([os.path.realpath(f"/etc/{name}"), f"/etc/{name}"])
    binds += [[str(stage), "/.dsstar"], [str(data_dir), "/.data"]]
    return binds, links


def _bwrap_root(stage: Path, data_dir: Path) -> list[str]:
    binds, links = _root_layout(stage, data_dir)
    parents = {str(p) for _, dst in binds for p in Path(dst).parents if str(p) != "/"}
    args: list[str] = []
    for parent in sorted(parents, key=lambda p: p.count("/")):  # bwrap would make them 0700
        args += ["--perms", "0755", "--dir", parent]
    for path, target in links:
        args += ["--symlink", target, path]
    for src, dst in binds:
        args += ["--ro-bind", src, dst]
    env = environment("/sandbox", "/tmp")
    setenv = [item for key, value in env.items() for item in ("--setenv", key, value)]
    return [*args, "--proc", "/proc", "--dev", "/dev",
            "--dir", "/tmp", "--dir", "/sandbox", "--dir", "/.scratch",
            "--remount-ro", "/", "--chdir", "/", "--clearenv", *setenv]  # fmt: skip
