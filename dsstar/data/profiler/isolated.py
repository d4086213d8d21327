"""Profiling inside the sandbox: the profiler's own source runs as a generated script would,
with the data mounted read-only, a batch of files per interpreter and bounds per file.

The sandbox cannot import dsstar, so the script is the text of the self-contained modules
of the format registry and of this package joined in dependency order, then the user's
format modules, followed by one call."""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dsstar.data.formats import BUILTIN_MODULES, plugin_sources
from dsstar.execution import stopping
from dsstar.execution.sandbox import OUTSIDE_RETRIES, Limits, run_script
from dsstar.settings import default

__all__ = [
    "KILLED_OUTSIDE",
    "ProfileLimits",
    "failure",
    "library_source",
    "profile_files",
    "script_source",
    "transient",
]

KILLED_OUTSIDE = "the profiler was killed from outside"  # a transient failure's reason

# Their sources make the sandboxed script; they are read from disk, not imported, since
# they import pandas and this module is loaded by every command that lists a lake. The format
# registry's own modules come first.
_MODULES = ("_detect", "_base", "_tables", "_docs", "_core")  # each imports only earlier ones
_MARK = "@@dsstar-profile@@ "  # what _core prints before each result (a test checks both agree)
# The modules are joined into one script: their imports of one another, and of the format
# registry (a user's format module imports it too), go.
_JOINED_IMPORT = re.compile(
    r"^from dsstar\.data\.(?:profiler|formats)(?:\.\w+)? import (\([^)]*\)|[^\n]*)\n", re.M
)
# A user's format module runs in a namespace of its own (seeded with the script's names), so
# its names cannot replace the profiler's; one that fails leaves its files to the others.
_PLUGIN = """
try:
    exec(compile({source!r}, {name!r}, "exec"), dict(globals(), __name__={name!r}))
except Exception as _exc:
    print("format module {name} not loaded:", type(_exc).__name__, _exc, file=_sys.stderr)
"""


@dataclass(frozen=True)
class ProfileLimits:
    """Bounds of offline profiling: per file, and per batch script."""

    file_timeout_s: float = default("profile_timeout")
    file_max_bytes: int = default("profile_max_bytes")
    max_chars: int = default("max_description_chars")
    batch_files: int = 100
    memory_mb: int = default("exec_memory_mb")
    workers: int = max(1, min(4, os.cpu_count() or 1))


def _joinable(source: str) -> str:
    return _JOINED_IMPORT.sub("", source.replace("from __future__ import annotations\n", ""))


@cache
def _builtin_library() -> str:
    parts = [_joinable(Path(m.__file__).read_text(encoding="utf-8")) for m in BUILTIN_MODULES]
    for module in _MODULES:
        parts.append(_joinable((Path(__file__).parent / f"{module}.py").read_text("utf-8")))
    return "\n".join(parts)


def library_source() -> str:
    """The profiler as one script, with every user's format module in use."""
    plugins = [
        _PLUGIN.format(source=_JOINED_IMPORT.sub("", source), name=name)
        for name, source in plugin_sources().items()
    ]
    head = "from __future__ import annotations\n\nimport sys as _sys\n"
    return head + _builtin_library() + "".join(plugins)


def script_source(paths: list[str], limits: ProfileLimits) -> str:
    """The script that profiles `paths` (relative to `data/`) and prints marked results."""
    call = (
        "\nimport os as _os\n"
        f"profile_batch({['data/' + p for p in paths]!r}, {paths!r},"
        f" seconds={limits.file_timeout_s!r}, max_bytes={limits.file_max_bytes!r},"
        f" max_chars={limits.max_chars!r})\n"
        "_os._exit(0)  # skip interpreter teardown: the results are out\n"
    )
    return library_source() + call


def _parse(output: str) -> tuple[dict[str, str], str | None]:
    """Finished results, and the file that was started but not finished (if any)."""
    done: dict[str, str] = {}
    started: str | None = None
    for line in output.split("\n"):
        if not line.startswith(_MARK):
            continue
        try:
            record = json.loads(line[len(_MARK) :])
        except ValueError:  # a line cut by the output bound
            continue
        if "start" in record:
            started = record["start"]
        elif "text" in record:
            done[record["path"]] = record["text"]
            started = None
    return done, started


def failure(path: str, text: str) -> str | None:
    """Why `path`'s offline profile `text` could not be made; None for a profile."""
    head = f"File: {path}\nnot profiled: "
    return text[len(head) :].split("\n", 1)[0] if text.startswith(head) else None


def transient(path: str, text: str) -> bool:
    """Whether `path`'s profile failed for a reason outside the file (another process killed
    the profiler): such a text is not kept, and the next run profiles the file again."""
    return (failure(path, text) or "").startswith(KILLED_OUTSIDE)


def _run_batch(
    mount_dir: Path, paths: list[str], limits: ProfileLimits, mode: str, work_root: Path | None
) -> dict[str, str]:
    """Profile `paths`; when the script dies (time, memory), the file it was on gets the
    reason and the rest go on in a fresh script. Killed from outside (not by its caps), the
    script is not the file's fault: the files left run again, up to OUTSIDE_RETRIES times
    in a row with none finished."""
    results: dict[str, str] = {}
    pending = list(paths)
    kills = 0
    while pending:
        # Each result is at most max_chars characters, up to 3 bytes each in UTF-8.
        sandbox_limits = Limits(
            timeout_s=20.0 + limits.file_timeout_s * len(pending),
            memory_mb=limits.memory_mb,
            output_bytes=(limits.max_chars * 4 + 1000) * len(pending) + 10_000,
        )
        code = script_source(pending, limits)
        result = run_script(code, data_dir=mount_dir, limits=sandbox_limits, mode=mode,
                            work_root=work_root, outside_retries=0)  # fmt: skip
        done, stuck = _parse(result.output)
        results.update(done)
        rest = [p for p in pending if p not in done]
        if not rest:
            break
        if result.killed_outside:
            kills = 0 if done else kills + 1
            if kills <= OUTSIDE_RETRIES and not stopping.requested():
                pending = rest
                continue
            why = f"{KILLED_OUTSIDE} ({kills} times in a row); profiled again by the next run"
            results.update({p: f"File: {p}\nnot profiled: {why}" for p in rest})
            break
        if stuck is None:  # it died before the first file: nothing will work, say why
            reason = _tail(result.output) or "the profiling script failed to start"
            results.update({p: f"File: {p}\nnot profiled: {reason}" for p in rest})
            break
        timed_out = result.timed_out or "Timeout (" in result.output  # faulthandler's
        why = "time" if timed_out else "memory or a crash"
        results[stuck] = f"File: {stuck}\nnot profiled: the profiler stopped on this file ({why})"
        pending = [p for p in rest if p != stuck]
    return results


def _tail(output: str) -> str:
    lines = [ln for ln in output.strip().split("\n") if not ln.startswith(_MARK)]
    return " ".join(lines[-3:])[:500]


def profile_files(
    mount_dir: Path,
    paths: list[str],
    *,
    limits: ProfileLimits | None = None,
    mode: str = "auto",
    work_root: Path | None = None,
) -> dict[str, str]:
    """The offline profile of each of `paths` (relative to `mount_dir`, the folder scripts
    see as `data/`), profiled in sandboxed batches. Never raises for a bad file: its text
    states the error."""
    limits = limits or ProfileLimits()
    batches = [paths[i : i + limits.batch_files] for i in range(0, len(paths), limits.batch_files)]
    results: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(limits.workers, len(batches) or 1))) as pool:
        for done in pool.map(
            lambda batch: _run_batch(Path(mount_dir), batch, limits, mode, work_root), batches
        ):
            results.update(done)
    return {p: results[p] for p in paths}
