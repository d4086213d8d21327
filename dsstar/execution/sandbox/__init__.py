"""Run untrusted, LLM-written Python scripts in a sandbox.

Each script gets a fresh working directory (a tmpfs capped with /tmp at `disk_mb`) with the
input files read-only under `data/` (all of them, or only those it is given: `files`), an
allowlisted environment, a minimal /etc, no network, and runs as a dedicated unprivileged
host uid with caps on processes, tree memory, CPU, wall time and output. Modes are backends
in one table (modes.py): `bwrap` and `unshare` isolate (same layout, same guarantees); `none`
keeps only the limits, the environment and the uid (as root, scripts still run as a dedicated
uid, or not at all), and is used only when asked for.
`register` adds a backend (see backends.Backend).

Scripts start warm (forked from a pool interpreter with pandas imported, see pool.py) when
they can, else cold; both give the same result.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from dsstar.execution import stopping
from dsstar.execution.sandbox import pool
from dsstar.execution.sandbox.backends import Backend
from dsstar.execution.sandbox.host import PRELUDE, check_dedicated_uid, environment
from dsstar.execution.sandbox.interpreter import resolve_python, stage_fonts
from dsstar.execution.sandbox.modes import (
    MODES,
    backend,
    boot_argv,
    register,
    resolve_mode,
    unregister,
)
from dsstar.execution.sandbox.staging import (
    new_dir,
    readable_data,
    readonly_copy,
    remove,
    sweep_once,
    sweep_stale,
    write_etc,
)
from dsstar.execution.sandbox.supervise import kill_tree, kill_uid, result, watch
from dsstar.execution.sandbox.types import ExecResult, Limits
from dsstar.execution.sandbox.uids import uid_range, uid_slot

__all__ = [
    "MODES",
    "OUTSIDE_RETRIES",
    "Backend",
    "ExecResult",
    "Limits",
    "register",
    "resolve_mode",
    "run_script",
    "sweep_stale",
    "unregister",
]

log = logging.getLogger(__name__)

OUTSIDE_RETRIES = 2  # runs again of a script another process killed (see run_script)


def run_script(
    code: str,
    *,
    data_dir: Path,
    limits: Limits,
    mode: str = "auto",
    work_root: Path | None = None,
    files: Sequence[str] | None = None,
    outside_retries: int = OUTSIDE_RETRIES,
    python: str | None = None,
) -> ExecResult:
    """Run `code` as a script with `data_dir` mounted read-only at `data/`; with `files`
    (paths relative to `data_dir`), only those files appear under `data/`, and nothing
    else of `data_dir` can be read (in a mode that isolates): a file's description is made
    from that file alone. A path that leads out of `data_dir` is left out.

    A script killed from outside (`ExecResult.killed_outside`) runs again, up to
    `outside_retries` times, unless this process is stopping: the kill was not its doing.

    `python` is the interpreter scripts run in (None: this one; see interpreter.py), the
    worker's choice (DSSTAR_SCRIPT_PYTHON), never a run form's."""
    python = resolve_python(python)
    for _ in range(outside_retries):
        done = _run_once(code, data_dir, limits, mode, work_root, files, python)
        if not done.killed_outside or stopping.requested():
            return done
        log.warning("a script was killed from outside the sandbox's limits: running it again")
    return _run_once(code, data_dir, limits, mode, work_root, files, python)


def _run_once(
    code: str,
    data_dir: Path,
    limits: Limits,
    mode: str,
    work_root: Path | None,
    files: Sequence[str] | None,
    python: str,
) -> ExecResult:
    mode = resolve_mode(mode)
    isolated = backend(mode).isolates
    if not isolated:  # as root, never a script as root: refused before it is staged
        check_dedicated_uid(mode, [python], work_root)
    sweep_once(work_root)
    data_dir = Path(data_dir).resolve()
    code = code.encode("utf-8", "replace").decode("utf-8")  # lone surrogates cannot be run
    only = None if files is None else list(files)
    with uid_slot() as uid:
        if uid is not None and isolated:
            data_dir = readable_data(data_dir, work_root)
        note = ""
        if limits.warm:
            zygote, note = pool.get(mode, data_dir, work_root, python)
            if zygote is not None:
                warm = zygote.run(code, uid, limits, only)
                if warm is not None:
                    return warm
                note = zygote.failure
        return _cold(code, data_dir, limits, mode, isolated, work_root, uid, note, only, python)


def _cold(
    code: str,
    data_dir: Path,
    limits: Limits,
    mode: str,
    isolated: bool,
    work_root: Path | None,
    uid: int | None,
    note: str,
    files: list[str] | None,
    python: str,
) -> ExecResult:
    """A fresh interpreter for one script, in fresh namespaces when the backend isolates."""
    stage = new_dir("exec", work_root)
    pipes = [os.pipe() for _ in range(3)]
    try:
        (stage / "script.py").write_text(code, encoding="utf-8")
        write_etc(stage, uid_range())
        stage_fonts(stage / "fonts", python)
        spec = {"role": "cold", "uid": uid, "limits": limits.boot(), "status_fd": pipes[2][1],
                "prelude": PRELUDE, "python": python}  # fmt: skip
        if files is not None:
            spec["files"] = files
        cwd, env = None, environment("/sandbox", "/tmp")
        if not isolated:
            cwd = _plain_workdir(stage, code, data_dir, work_root, uid, files)
            env = environment(str(cwd), str(_private_tmp(stage, uid)))
            _seed_fonts(stage / "fonts", Path(env["MPLCONFIGDIR"]), uid)
            spec["workdir"] = str(cwd)
        proc = pool.spawn(boot_argv(mode, stage, data_dir, spec), pipes, env, cwd)
        report, facts = watch(
            tuple(r for r, _ in pipes), uid, limits, lambda: _kill(uid, proc), isolated
        )
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pool.kill_group(proc)
            proc.wait()
        return result(report, facts, limits, mode, start="cold", note=note)
    finally:
        remove(stage)


def _plain_workdir(
    stage: Path,
    code: str,
    data_dir: Path,
    work_root: Path | None,
    uid: int | None,
    files: list[str] | None,
) -> Path:
    """A backend that does not isolate: a host folder owned by the script's uid, data as a
    read-only copy (of `files` alone when given; such a backend confines no read, so this
    only keeps data/ as it is in the other modes)."""
    workdir = stage / "work"
    workdir.mkdir()
    (workdir / "script.py").write_text(code, encoding="utf-8")
    copy = readonly_copy(data_dir, work_root)
    if files is None:
        (workdir / "data").symlink_to(copy)
    else:
        _link_files(copy, workdir / "data", files)
    if uid is not None:
        stage.chmod(0o755)
        for path in (workdir, workdir / "script.py"):
            os.chown(path, uid, uid)
    return workdir


def _private_tmp(stage: Path, uid: int | None) -> Path:
    """Mode 'none': the script's temporary folder (TMPDIR, the libraries' caches), beside its
    working directory in the stage and removed with it: the working directory holds only
    what the script wrote there."""
    tmp = stage / "tmp"
    tmp.mkdir(mode=0o700)
    if uid is not None:
        os.chown(tmp, uid, uid)
    return tmp


def _seed_fonts(source: Path, target: Path, uid: int | None) -> None:
    """Mode 'none': the boot program's seed_caches, done by the host in the script's own
    temporary folder."""
    if not source.is_dir():
        return
    target.mkdir(mode=0o700)
    for item in source.iterdir():
        shutil.copyfile(item, target / item.name)
        if uid is not None:
            os.chown(target / item.name, uid, uid)
    if uid is not None:
        os.chown(target, uid, uid)


def _link_files(copy: Path, target: Path, files: list[str]) -> None:
    """`files` of the read-only copy under `target`, linked (copied across filesystems); a
    path that leads out of the copy, or is not a file there, is left out."""
    target.mkdir(mode=0o755)
    root = copy.resolve()
    for path in files:
        source = (root / path).resolve()
        if Path(path).is_absolute() or root not in source.parents or not source.is_file():
            continue
        entry = target / path
        if entry.exists():
            continue
        entry.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        try:
            os.link(source, entry)
        except OSError:
            shutil.copyfile(source, entry)
            entry.chmod(0o444)
    for folder in sorted((p for p in target.rglob("*") if p.is_dir()), reverse=True):
        folder.chmod(0o555)
    target.chmod(0o555)


def _kill(uid: int | None, proc) -> None:  # type: ignore[no-untyped-def]
    if uid is None:
        kill_tree(proc.pid)  # the boot program reaps and reports; orphans come back to it
    else:
        kill_uid(uid)
