"""Like files are analyzed once: the analyzer's script for one file of a shape describes
the others (`dsstar.data.shapes`), run in the sandbox with no model call.

The analyzer writes the path it was given into its script, in whatever form (a literal,
`os.path.join` parts, `Path("data/x") / "y.csv"`). A member's script is that script with
every form of the origin's path rewritten to the member's; it runs over the same `data/`
view as every script. The member is described by it only when the run succeeds, prints
something, never names the origin (a script that globs or lists its folder could describe
another file), and names the columns the origin's output named; otherwise the member gets
its own analyzer call. A script that does not name its file at all describes no member.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from dsstar.algorithm import member_runner
from dsstar.algorithm.runtime import Calls
from dsstar.algorithm.spec import RunSpec
from dsstar.data.catalog import Catalog
from dsstar.data.profiler import ProfileLimits, failure, profile_files
from dsstar.data.shapes import column_names, group_by_shape, shape_key
from dsstar.data.sources import DataFile
from dsstar.text import digest

__all__ = [
    "MAX_BATCH",
    "Plan",
    "batch_size",
    "describe_members",
    "for_member",
    "plan_analysis",
    "shares_script",
]

MAX_BATCH = 64  # like files whose scripts run in one sandbox process, at most
_RUNNER_SOURCE = Path(member_runner.__file__).read_text(encoding="utf-8")


@dataclass
class Plan:
    """What a cold or partly warm analysis does: the files the analyzer is asked about (one
    per shape that has no script yet), and each other missing file with the path of the
    file whose script is to describe it. `unprofiled`: why each structured file has no shape
    to share (its offline profile failed, or names no structure: the file could not be
    read); such a file is analyzed alone, and reported by describe and its estimate."""

    analyze: list[DataFile] = field(default_factory=list)
    members: list[tuple[DataFile, str]] = field(default_factory=list)
    groups: int = 0
    profiles: dict[str, str] = field(default_factory=dict)
    unprofiled: dict[str, str] = field(default_factory=dict)


def _why_alone(path: str, profile: str) -> str:
    """Why a structured file's profile names no structure: the profiler's failure, or the
    file's (a reader's error)."""
    found = failure(path, profile) or next(
        (line for line in profile.split("\n") if line.startswith("could not parse")), None
    )
    return (found or "its profile names no columns, keys, sheets or tables")[:300]


def shares_script(record: dict[str, Any] | None) -> bool:
    """Whether `record`'s script may describe like files: it ran and described its file."""
    return bool(
        record
        and record.get("source") in ("analyzer", "script")
        and record.get("error") is None
        and record.get("script")
    )


def plan_analysis(
    spec: RunSpec,
    catalog: Catalog,
    files: list[DataFile],
    known: dict[str, dict[str, Any]],
    missing: list[DataFile],
    *,
    every_shape: bool = False,
) -> Plan:
    """Group `files` by shape (offline profiles from the catalog, profiled in the sandbox
    when new) and decide, for each of `missing`, whether the analyzer is asked or a known
    or first-analyzed like file's script describes it. With nothing missing, files are
    grouped (and `groups` counted) only for `every_shape`."""
    if not missing and not every_shape:
        return Plan()
    limits = ProfileLimits(memory_mb=spec.limits["memory_mb"], workers=spec.max_parallel)
    work_root = Path(spec.work_dir) if spec.work_dir else None
    profiles = catalog.profiles(
        files,
        lambda new: profile_files(
            Path(spec.data_dir),
            [f.path for f in new],
            limits=limits,
            mode=spec.sandbox,
            work_root=work_root,
        ),  # fmt: skip
    )
    by_path = {f.path: f for f in files}
    todo = {f.path for f in missing}
    plan = Plan(profiles=profiles)
    for file in files:
        if shape_key(file.path, file.format, profiles[file.path])[0] == "alone":
            plan.unprofiled[file.path] = _why_alone(file.path, profiles[file.path])
    groups = group_by_shape((f.path, f.format, profiles[f.path]) for f in files)
    plan.groups = len(groups)
    for group in groups:
        wanted = [path for path in group if path in todo]
        if not wanted:
            continue
        origin = next((p for p in group if p not in todo and shares_script(known.get(p))), None)
        if origin is None:
            origin = wanted.pop(0)
            plan.analyze.append(by_path[origin])
        plan.members += [(by_path[path], origin) for path in wanted]
    return plan


def _token(text: str) -> str:
    """`text` as a whole path token: not inside a longer name."""
    return rf"(?<![\w.\-]){re.escape(text)}(?![\w\-]|\.\w)"


def for_member(code: str, origin: str, member: str) -> str | None:
    """The origin's script with every form of its path rewritten to the member's: each run
    of two or more path parts (`data/x/y.csv`, `data/x`, `y/day_01.csv`), the file name, and
    each other differing part as a string literal (`os.path.join("data", "x", ...)`); None
    when the script does not name its file, so that it cannot be told to read another."""
    if origin == member:
        return code
    # Scripts see the files under data/: `data/x` is a run of parts as much as `x/y.csv`.
    old, new = ("data", *PurePosixPath(origin).parts), ("data", *PurePosixPath(member).parts)
    if len(old) != len(new) or not re.search(_token(old[-1]), code):
        return None
    n = len(old)
    runs = [(i, j) for i in range(n) for j in range(i + 2, n + 1)] + [(n - 1, n)]
    swaps = {"/".join(old[i:j]): "/".join(new[i:j]) for i, j in runs}
    for before, after in zip(old[:-1], new[:-1], strict=True):
        for quote in "'\"":
            swaps[f"{quote}{before}{quote}"] = f"{quote}{after}{quote}"
    swaps = {before: after for before, after in swaps.items() if before != after}
    # One pass, the longest form first: a rewritten path is never rewritten again.
    pattern = "|".join(
        re.escape(b) if b[0] in "'\"" else _token(b) for b in sorted(swaps, key=len, reverse=True)
    )
    return re.sub(pattern, lambda m: swaps[m.group(0)], code) if swaps else code


def _fits(output: str, origin: dict[str, Any], member: str, profiles: dict[str, str]) -> bool:
    """Whether a member's output describes the member: it never names the origin's file
    (unless both have one name), and it names every column of the member that the origin's
    output named of the origin's."""
    name, path = PurePosixPath(origin["path"]).name, origin["path"]
    if name != PurePosixPath(member).name and re.search(_token(name), output):
        return False
    if path != member and path in output:
        return False
    named = {
        c for c in column_names(profiles.get(origin["path"], "")) if c in origin["description"]
    }
    return named <= {c for c in column_names(profiles.get(member, "")) if c in output}


def describe_members(
    calls: Calls,
    files: list[dict[str, Any]],
    origin: dict[str, Any],
    spec: RunSpec,
    profiles: dict[str, str],
) -> list[dict[str, Any] | None]:
    """The catalog record of each of `files` described by `origin`'s script, with no model
    call; None for a file the script does not fit (see the module's docstring). The scripts
    run in one sandbox process, each in a child of its own (`member_runner`); a file whose
    report is missing (the batch was cut short) or cut runs alone, as any script does."""
    codes = {f["path"]: for_member(origin["script"], origin["path"], f["path"]) for f in files}
    jobs = [(path, code) for path, code in codes.items() if code is not None]
    reports = _run_batch(calls, jobs, origin["path"], spec) if len(jobs) > 1 else {}
    records: list[dict[str, Any] | None] = []
    for file in files:
        code, report = codes[file["path"]], reports.get(file["path"])
        if code is None:
            records.append(None)
            continue
        if report is None:
            result = calls.execute(f"analysis {file['path']} (script of {origin['path']})", code)
            report = {"status": 0 if result.ok else 1, "output": result.output}
        output = report["output"].strip()
        fits = report["status"] == 0 and output and _fits(output, origin, file["path"], profiles)
        records.append(_record(file, origin, code, output, spec) if fits else None)
    return records


def batch_size(origin: dict[str, Any], spec: RunSpec) -> int:
    """How many like files of `origin` run in one sandbox process: as many as fit in one
    script's output (`output_bytes`) if each prints twice what the origin printed, quoted
    as JSON, and at most `MAX_BATCH`."""
    each = 3 * (2 * len(origin.get("description") or "") + 500)
    return max(1, min(MAX_BATCH, spec.limits["output_bytes"] // each))


def _run_batch(
    calls: Calls, jobs: list[tuple[str, str]], origin: str, spec: RunSpec
) -> dict[str, dict[str, Any]]:
    """path -> {"status", "output"} of each job the batch reported whole."""
    cap = max(1000, spec.limits["output_bytes"] // (3 * len(jobs)))
    script = (
        _RUNNER_SOURCE
        + f"\nmain(json.loads({json.dumps(jobs)!r}), {float(spec.limits['timeout_s'])}, {cap})\n"
    )
    result = calls.execute(f"analysis of {len(jobs)} like files (script of {origin})", script)
    wanted, reports = {path for path, _ in jobs}, {}
    for line in result.output.splitlines():
        if not line.startswith(member_runner.MARK):
            continue
        try:
            report = json.loads(line[len(member_runner.MARK) :])
        except ValueError:
            continue
        path = report.get("path") if isinstance(report, dict) else None
        if path in wanted and path not in reports and not report.get("truncated"):
            reports[path] = {"status": report.get("status"), "output": str(report.get("output"))}
    return reports


def _record(
    file: dict[str, Any], origin: dict[str, Any], code: str, output: str, spec: RunSpec
) -> dict[str, Any]:
    return {
        **file,
        "description": output,
        "source": "script",
        "error": None,
        "script": code,
        "script_from": origin.get("script_from") or origin["path"],
        "script_digest": origin.get("script_digest") or digest(origin["script"]),
        "attempts": [],
        "run_id": spec.run_id,
    }
