"""Like files are analyzed once: the analyzer's script for one file of a shape describes
the others (`dsstar.data.shapes`), run in the sandbox with no model call.

The analyzer writes the path it was given into its script, in whatever form (a literal,
`os.path.join` parts, `Path("data/x") / "y.csv"`). A member's script is that script with
every form of the origin's path rewritten to the member's, inside its string literals only
(`for_member`); it runs alone in the sandbox and sees only the member under `data/`, as the
analyzer's script sees only its own file (`dsstar.algorithm.scope`). The member is described
by it only when the run succeeds, prints something, never names the origin (a script that
globs or lists its folder could describe another file), and names the columns the origin's
output named; otherwise the member gets its own analyzer call. A script that does not name
its file at all describes no member, nor does one whose member path cannot be written as a
literal where the origin's stood.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from dsstar.algorithm.runtime import Calls
from dsstar.algorithm.scope import own_files
from dsstar.algorithm.spec import RunSpec
from dsstar.data.catalog import Catalog
from dsstar.data.profiler import ProfileLimits, failure, profile_files
from dsstar.data.shapes import column_names, shape_key
from dsstar.data.sources import DataFile
from dsstar.text import digest

__all__ = [
    "MAX_BATCH",
    "PROFILE_CHUNK",
    "Plan",
    "batch_size",
    "describe_members",
    "for_member",
    "plan_analysis",
    "shares_script",
]

MAX_BATCH = 64  # like files described by one task, at most
# Offline profiles read (or made) at once while files are grouped by shape: a lake of any
# size is grouped in the memory of this many profiles (each at most `max_chars`).
PROFILE_CHUNK = 800


@dataclass
class Plan:
    """What a cold or partly warm analysis does: the files the analyzer is asked about (one
    per shape that has no script yet), and each other missing file with the path of the
    file whose script is to describe it. `columns`: the column names of each such origin's
    shape, which its like files share (`shapes.shape_key`), to tell whether a member's
    output describes it (`_fits`). `unprofiled`: why each structured file has no shape
    to share (its offline profile failed, or names no structure: the file could not be
    read); such a file is analyzed alone, and reported by describe and its estimate.

    A plan holds no profile: however large the lake, memory holds a shape key per group,
    the paths, and one chunk of profiles (`PROFILE_CHUNK`) while they are read."""

    analyze: list[DataFile] = field(default_factory=list)
    members: list[tuple[DataFile, str]] = field(default_factory=list)
    groups: int = 0
    columns: dict[str, list[str]] = field(default_factory=dict)
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
    limits = ProfileLimits(memory_mb=spec.limits.memory_mb, workers=spec.max_parallel)
    # A chunk keeps every profiling worker busy: two full batches each, at least.
    size = max(PROFILE_CHUNK, 2 * limits.batch_files * limits.workers)
    work_root = Path(spec.work_dir) if spec.work_dir else None
    chunks = catalog.profile_chunks(
        files,
        lambda new: profile_files(
            Path(spec.data_dir),
            [f.path for f in new],
            limits=limits,
            mode=spec.sandbox,
            work_root=work_root,
        ),  # fmt: skip
        size,
    )
    plan = Plan()
    # Of each profile only its shape key is kept, and the column names once per shape.
    groups: dict[tuple[str, ...], list[DataFile]] = {}
    columns: dict[tuple[str, ...], list[str]] = {}
    by_path = {f.path: f for f in files}
    for chunk in chunks:
        for path, profile in chunk.items():
            file = by_path[path]
            key = shape_key(file.path, file.format, profile)
            if key[0] == "alone":
                plan.unprofiled[file.path] = _why_alone(file.path, profile)
            if key not in groups:
                groups[key], columns[key] = [], sorted(column_names(profile))
            groups[key].append(file)
    plan.groups = len(groups)
    todo = {f.path for f in missing}
    for key, group in groups.items():
        wanted = [f for f in group if f.path in todo]
        if not wanted:
            continue
        origin = next(
            (f.path for f in group if f.path not in todo and shares_script(known.get(f.path))),
            None,
        )
        if origin is None:
            first = wanted.pop(0)
            origin = first.path
            plan.analyze.append(first)
        plan.members += [(file, origin) for file in wanted]
        plan.columns[origin] = columns[key]
    return plan


def _token(text: str) -> str:
    """`text` as a whole path token: not inside a longer name."""
    return rf"(?<![\w.\-]){re.escape(text)}(?![\w\-]|\.\w)"


def for_member(code: str, origin: str, member: str) -> str | None:
    """The origin's script with every form of its path rewritten to the member's: each run
    of two or more path parts (`data/x/y.csv`, `data/x`, `y/day_01.csv`), the file name, and
    each other differing part as a string literal (`os.path.join("data", "x", ...)`); None
    when the script does not name its file, so that it cannot be told to read another.

    Only string literals are rewritten, each as a literal again: kept as written when the
    new text needs no escape, else `repr` of its value. An f-string or bytes literal holds
    the member's path only when it needs no escape there; else, and whenever the rewritten
    script is not the origin's with other strings, None: the member's name never becomes
    code, and the member gets its own analyzer call."""
    if origin == member:
        return code
    # Scripts see the files under data/: `data/x` is a run of parts as much as `x/y.csv`.
    old, new = ("data", *PurePosixPath(origin).parts), ("data", *PurePosixPath(member).parts)
    if len(old) != len(new) or not re.search(_token(old[-1]), code):
        return None
    n = len(old)
    runs = [(i, j) for i in range(n) for j in range(i + 2, n + 1)] + [(n - 1, n)]
    swaps = {"/".join(old[i:j]): "/".join(new[i:j]) for i, j in runs}
    swaps = {before: after for before, after in swaps.items() if before != after}
    parts = {b: a for b, a in zip(old[:-1], new[:-1], strict=True) if b != a}
    added = [a for b, a in zip(old, new, strict=True) if b != a]
    # One pass, the longest form first: a rewritten path is never rewritten again.
    pattern = re.compile("|".join(_token(b) for b in sorted(swaps, key=len, reverse=True)))
    rewrite = _Rewrite(lambda text: pattern.sub(lambda m: swaps[m.group(0)], text), parts, added)
    try:
        rewritten = rewrite.script(code)
        same = rewritten is not None and _skeleton(rewritten) == _skeleton(code)
    except (SyntaxError, ValueError, tokenize.TokenError):
        return None
    return rewritten if same else None


@dataclass
class _Rewrite:
    """The rewriting of one script's string literals (see `for_member`)."""

    swap: Callable[[str], str]  # the path forms in a text, rewritten
    parts: dict[str, str]  # a literal that is one differing path part -> the member's part
    added: list[str]  # the member's path parts that differ from the origin's

    def script(self, code: str) -> str | None:
        starts = [0]
        for line in code.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        edits = []
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.STRING:
                text = self.literal(tok.string)
            elif tok.type == _FSTRING_MIDDLE:  # Python 3.12 splits f-strings into tokens
                text = self.in_place(tok.string, ascii_only=False)
            else:
                continue
            if text is None:
                return None
            if text != tok.string:
                edits.append((starts[tok.start[0] - 1] + tok.start[1], len(tok.string), text))
        for at, length, text in reversed(edits):
            code = code[:at] + text + code[at + length :]
        return code

    def literal(self, token: str) -> str | None:
        """A string literal rewritten: a literal of the new value."""
        prefix = token[: len(token) - len(token.lstrip("rRuUbBfF"))]
        if set(prefix.lower()) & {"f", "b"}:  # code between braces, or bytes: edited in place
            return self.in_place(token, ascii_only="b" in prefix.lower())
        value = ast.literal_eval(token)
        changed = self.parts.get(value) or self.swap(value)
        if changed == value:
            return token
        if not _plain(changed, ascii_only=False):
            return repr(changed)
        body = token[len(prefix) :]
        quote = body[:3] if body[:3] in ('"""', "'''") else body[0]
        return f"{prefix}{quote}{changed}{quote}"  # as the script wrote it: no escape is due

    def in_place(self, text: str, *, ascii_only: bool) -> str | None:
        """`text` with the paths rewritten where they stand; None when the member's parts
        would need an escape there."""
        changed = self.swap(text)
        if changed == text or all(_plain(a, ascii_only=ascii_only) for a in self.added):
            return changed
        return None


_FSTRING_MIDDLE = getattr(tokenize, "FSTRING_MIDDLE", -1)
_ESCAPED = frozenset("'\"\\{}")


def _plain(text: str, *, ascii_only: bool) -> bool:
    """Whether `text` reads as itself inside any string literal: no quote, backslash,
    brace, line break or other unprintable character."""
    return text.isprintable() and not _ESCAPED & set(text) and (text.isascii() or not ascii_only)


def _skeleton(code: str) -> str:
    """The script's syntax tree with every string's value left out: two scripts that differ
    only in what their strings hold have the same skeleton."""
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            node.value, node.kind = type(node.value)(), None
    return ast.dump(tree)


def _fits(output: str, origin: dict[str, Any], member: str, columns: Collection[str]) -> bool:
    """Whether a member's output describes the member: it never names the origin's file
    (unless both have one name), and it names every column of the shape (`columns`, which
    the origin and its like files share) that the origin's output named of the origin's."""
    name, path = PurePosixPath(origin["path"]).name, origin["path"]
    if name != PurePosixPath(member).name and re.search(_token(name), output):
        return False
    if path != member and path in output:
        return False
    return all(c in output for c in columns if c in origin["description"])


def describe_members(
    calls: Calls,
    files: list[dict[str, Any]],
    origin: dict[str, Any],
    spec: RunSpec,
    columns: Collection[str],
) -> list[dict[str, Any] | None]:
    """The catalog record of each of `files` described by `origin`'s script, with no model
    call; None for a file the script does not fit (see the module's docstring). `columns`:
    the column names of their shape (`Plan.columns`). Each file's script runs alone, over
    that file alone: what one prints is its own file's."""
    records: list[dict[str, Any] | None] = []
    for file in files:
        code = for_member(origin["script"], origin["path"], file["path"])
        if code is None:
            records.append(None)
            continue
        label = f"analysis {file['path']} (script of {origin['path']})"
        result = calls.execute(label, code, files=own_files(file))
        output = result.output.strip()
        fits = result.ok and output and _fits(output, origin, file["path"], columns)
        records.append(_record(file, origin, code, output, spec) if fits else None)
    return records


def batch_size(origin: dict[str, Any], spec: RunSpec) -> int:
    """How many like files of `origin` one task describes: as many as fit in one script's
    output (`output_bytes`) if each prints twice what the origin printed, quoted as JSON,
    and at most `MAX_BATCH`; so a task's result stays small."""
    each = 3 * (2 * len(origin.get("description") or "") + 500)
    return max(1, min(MAX_BATCH, spec.limits.output_bytes // each))


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
