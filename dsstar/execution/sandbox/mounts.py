"""The sandbox's filesystem, built by the root of its new mount namespace. Standard library only.

host.py puts this source before boot.py's (both run as one `python -c` program): mode
'unshare' builds the same read-only root as bwrap does and pivots into it, and every script
gets a fresh tmpfs working directory with the data mounted read-only at `data/`.
"""

import ctypes
import os
import sys

LIBC = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE, MNT_DETACH, CLONE_NEWNS = 4096, 16384, 1 << 18, 2, 0x20000
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
WORK, SCRIPT, FONTS = "/sandbox", "/sandbox/script.py", "/.dsstar/fonts"


def _c(value):
    return None if value is None else os.fsencode(value)  # a file name may not be UTF-8


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(src, target, fstype=None, flags=0, data=None):
    _check(LIBC.mount(_c(src), _c(target), _c(fstype), ctypes.c_ulong(flags), _c(data)), target)


def bind(src, target, readonly=True):
    mount(src, target, None, MS_BIND | MS_REC)
    if readonly:
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def prctl(option, value):
    _check(LIBC.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl {option}")


def build_root(spec):
    """Mode 'unshare': build the same read-only root as bwrap does, then pivot into it."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    new = spec["newroot"]
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for src, dst in spec["binds"]:
        target = new + dst
        if os.path.isdir(src):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        bind(src, target)
    for link, target in spec["symlinks"]:
        os.symlink(target, new + link)
    for path in ("/proc", "/dev", "/tmp", WORK, "/.scratch"):
        os.makedirs(new + path, exist_ok=True)
    mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount("tmpfs", new + "/dev", "tmpfs", MS_NOSUID, "mode=0755,size=64k")
    for name in ("null", "zero", "full", "random", "urandom"):
        open(f"{new}/dev/{name}", "a").close()
        bind(f"/dev/{name}", f"{new}/dev/{name}", readonly=False)
    os.makedirs(new + "/dev/shm")
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        os.symlink(target, f"{new}/dev/{name}")
    os.chdir(new)
    _check(LIBC.syscall(PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root")
    _check(LIBC.umount2(b".", MNT_DETACH), "umount old root")  # the host tree is gone
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def prepare_workdir(spec, code):
    """A fresh tmpfs, capped at the disk limit, holds the working directory and /tmp."""
    uid, disk = spec["uid"], spec["limits"]["disk"]
    if "workdir" in spec:
        return  # a backend that does not isolate: the host made a plain folder, no namespace
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    mount("tmpfs", "/.scratch", "tmpfs", MS_NOSUID | MS_NODEV, f"size={disk},mode=0755{owner}")
    for name in ("work", "tmp", "shm"):
        os.mkdir(f"/.scratch/{name}", 0o700)
        if uid is not None:
            os.chown(f"/.scratch/{name}", uid, uid)
    for path in _python_under_tmp():  # carried into the fresh /tmp by the recursive bind
        inside = "/.scratch/tmp" + path[len("/tmp") :]
        os.makedirs(inside, 0o755, exist_ok=True)
        bind(path, inside)
    bind("/.scratch/work", WORK, readonly=False)
    bind("/.scratch/tmp", "/tmp", readonly=False)
    bind("/.scratch/shm", "/dev/shm", readonly=False)
    _check(LIBC.umount2(b"/.scratch", MNT_DETACH), "umount scratch")
    os.mkdir(WORK + "/data", 0o755)  # owned by root: the script cannot replace it
    if spec.get("files") is None:
        bind("/.data", WORK + "/data")
    else:
        bind_files(spec["files"])
    seed_caches(uid)
    with open(SCRIPT, "w", encoding="utf-8", errors="surrogatepass") as handle:
        handle.write(code)
    if uid is not None:
        os.chown(SCRIPT, uid, uid)


def seed_caches(uid, source=FONTS):
    """matplotlib's font list, built once on the host and staged read-only at `source`, copied
    into this script's private config folder ($MPLCONFIGDIR, under its fresh /tmp): its
    matplotlib starts at once instead of scanning the fonts (a second or more), and writes
    nowhere shared."""
    target = os.environ.get("MPLCONFIGDIR")
    if not target or not os.path.isdir(source):
        return
    os.makedirs(target, 0o700, exist_ok=True)
    for name in os.listdir(source):
        with open(os.path.join(source, name), "rb") as src:
            blob = src.read()
        with open(os.path.join(target, name), "wb") as dst:
            dst.write(blob)
        if uid is not None:
            os.chown(os.path.join(target, name), uid, uid)
    if uid is not None:
        os.chown(target, uid, uid)


def bind_files(paths):
    """Only `paths` (relative to the data root) under data/, each read-only; then the data
    root is covered with an empty folder, so the script finds no other file of the lake. A
    path that leads out of the data root, or is not a file there, is left out."""
    root = "/.data"
    for path in paths:
        if os.path.isabs(path) or os.path.normpath(path) != path or path.startswith(".."):
            continue
        source = os.path.realpath(os.path.join(root, path))
        target = os.path.join(WORK, "data", path)
        if not source.startswith(root + "/") or not os.path.isfile(source):
            continue
        if os.path.lexists(target):
            continue
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        open(target, "a").close()
        bind(source, target)
    mount("tmpfs", root, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=0555")


def _python_under_tmp():
    """The interpreter's folders that live under /tmp (a virtualenv made there, as in a clone
    made with mktemp): the script's fresh /tmp would hide them, so they are bound into it at
    the same paths, read-only."""
    executable_root = os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))
    folders = {sys.prefix, sys.base_prefix, executable_root}
    return sorted(path for path in folders if path.startswith("/tmp/"))
