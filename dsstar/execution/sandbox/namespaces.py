"""The two backends that isolate, with the same layout and the same guarantees.

- `Bubblewrap` ('bwrap'): bubblewrap makes the mount, PID, network, IPC and UTS namespaces
  and the read-only root;
- `Unshare` ('unshare'): util-linux `unshare` makes the same namespaces and the boot program
  builds the same root itself (bind mounts, pivot_root; see mounts.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from dsstar.execution.sandbox.host import boot_python, environment, is_root, kill_with_parent
from dsstar.execution.sandbox.interpreter import interpreter

__all__ = ["FIX", "Bubblewrap", "Unshare"]

_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64")
# What Python, pandas and TLS need of /etc; nothing else of the host's /etc is visible.
_HOST_ETC = ("localtime", "timezone", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ssl/certs",
             "ca-certificates", "nsswitch.conf", "mime.types", "alternatives", "fonts")  # fmt: skip
FIX = (
    "install bubblewrap (apt-get install bubblewrap), allow user namespaces"
    " (sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=10000), or run"
    " without isolation on purpose with --sandbox none (DSSTAR_SANDBOX=none)"
)


class Bubblewrap:
    """bubblewrap builds the namespaces and the read-only root."""

    name = "bwrap"
    isolates = True
    fix = FIX

    def available(self) -> bool:
        return _works([_bwrap(), *_bwrap_flags(), "--ro-bind", "/", "/", "true"])

    def argv(self, stage: Path, data_dir: Path, spec: dict[str, Any]) -> list[str]:
        python = spec.get("python")
        root = _bwrap_root(stage, data_dir, python)
        return [_bwrap(), *_bwrap_flags(), *root, *boot_python(python), json.dumps(spec)]


class Unshare:
    """util-linux `unshare` makes the namespaces; the boot program builds the root in them."""

    name = "unshare"
    isolates = True
    fix = FIX

    def available(self) -> bool:
        if not (shutil.which("unshare") and (shutil.which("setpriv") or not is_root())):
            return False
        return _works(["unshare", *_unshare_flags(), "true"])

    def argv(self, stage: Path, data_dir: Path, spec: dict[str, Any]) -> list[str]:
        newroot = stage / "root"
        newroot.mkdir()
        python = spec.get("python")
        binds, links = _root_layout(stage, data_dir, python)
        spec = {**spec, "newroot": str(newroot), "binds": binds, "symlinks": links}
        unshare = ["unshare", *_unshare_flags()]
        return [*kill_with_parent(), *unshare, *boot_python(python), json.dumps(spec)]


def _works(probe: list[str]) -> bool:
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _bwrap() -> str:
    return shutil.which("bwrap") or "bwrap"


def _bwrap_flags() -> list[str]:
    user = [] if is_root() else ["--unshare-user", "--uid", "0", "--gid", "0"]
    return ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", *user, "--die-with-parent", "--new-session"]  # fmt: skip


def _unshare_flags() -> list[str]:
    user = [] if is_root() else ["--user", "--map-root-user"]
    return ["--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child", *user]


def _root_layout(
    stage: Path, data_dir: Path, python: str | None = None
) -> tuple[list[list[str]], list[list[str]]]:
    """Read-only binds (host path, path inside) and symlinks (path inside, target); the
    folders of the scripts' interpreter (`python`; None: this one) at their own paths."""
    binds: list[list[str]] = []
    links: list[list[str]] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            links.append([path, os.readlink(path)])
        elif os.path.isdir(path):
            binds.append([path, path])
    if python is None or python == sys.executable:
        own = str(Path(sys.executable).resolve().parents[1])
        python_dirs = {sys.prefix, sys.base_prefix, own}
    else:
        python_dirs = set(interpreter(python).prefixes)
    for path in sorted(python_dirs, key=len):  # a folder before the folders inside it
        if os.path.isdir(path) and not any(path.startswith(b[0] + "/") for b in binds):
            binds.append([path, path])
    for name in ("passwd", "group", "hosts"):
        binds.append([str(stage / "etc" / name), f"/etc/{name}"])
    for name in _HOST_ETC:
        if os.path.exists(f"/etc/{name}"):
            binds.append([os.path.realpath(f"/etc/{name}"), f"/etc/{name}"])
    binds += [[str(stage), "/.dsstar"], [str(data_dir), "/.data"]]
    return binds, links


def _bwrap_root(stage: Path, data_dir: Path, python: str | None) -> list[str]:
    binds, links = _root_layout(stage, data_dir, python)
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
