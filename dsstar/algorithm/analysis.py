"""Step 1 of the algorithm: a description of one data file, written by the analyzer's script.

The analyzer writes a script that prints what the file holds; the script runs in the sandbox and
is repaired from its tracebacks alone. When every attempt fails, the built-in profiler's
description stands in, marked as such. Each description goes into the catalog at once, keyed
by the file's content and by everything else that makes it (`config_key`), so a run stopped
half-way keeps every finished description and no later run pays for it again. Of like files,
one is analyzed and its script describes the others (`dsstar.algorithm.likeness`). Every
script of a file's analysis sees that file alone under `data/` (`dsstar.algorithm.scope`).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from dsstar.algorithm import agents
from dsstar.algorithm.likeness import Plan, plan_analysis
from dsstar.algorithm.repair import run_with_repair
from dsstar.algorithm.runtime import Calls
from dsstar.algorithm.scope import Scoped, own_files
from dsstar.algorithm.spec import RunSpec
from dsstar.data.catalog import Catalog, save_analysis
from dsstar.data.profiler import ProfileLimits, profile_files
from dsstar.data.sources import DataFile, DataSource
from dsstar.storage import Store
from dsstar.text import digest

__all__ = [
    "analysis_plan",
    "analyze_file",
    "cached_descriptions",
    "config_key",
    "describe_records",
    "keep",
    "known_analyses",
]

ERROR_CHARS = 2000  # of a failed analysis's output, kept with its record
# Descriptions made while an analyzer's script saw the whole lake may hold other files' rows:
# a key of its own makes every file described afresh, from itself alone.
_SCOPE = "own file"


def _request(file: dict[str, Any], spec: RunSpec) -> list[dict[str, str]]:
    return agents.analyzer.render(
        path=f"data/{file['path']}", format=file["format"], libraries=spec.libraries
    )


def config_key(file: dict[str, Any], spec: RunSpec) -> str:
    """What, besides the file's content, makes its analysis: path, prompt, models and limits,
    but not the run: every run over an unchanged file reuses the first description. Only
    what changes a reply counts (model, temperature): a moved gateway or a longer timeout
    does not make a description stale. The files a format needs besides the file (their
    paths and content) count too: its script reads them."""
    models = {
        name: (spec.llm[name]["model"], spec.llm[name].get("temperature"))
        for name in ("analyzer", "debugger", "summarizer")
    }
    needs = [list(pair) for pair in file.get("needs") or ()]
    return digest(
        file["path"],
        _request(file, spec),
        models,
        asdict(spec.limits),
        _SCOPE,
        *([needs] if needs else []),
    )


def analyze_file(calls: Calls, file: dict[str, Any], spec: RunSpec) -> dict[str, Any]:
    """Describe one file (see the module's docstring); returns its catalog record. `calls`
    must run scripts without keeping figures: an analyzer prints, any chart it saves is
    dropped. Its scripts, the debugger's included, see `file` alone under `data/`."""
    calls = Scoped(calls, own_files(file))
    sandbox_path = f"data/{file['path']}"
    request = _request(file, spec)
    code = agents.analyzer.parse(calls.ask("analyzer", f"analyzer {file['path']}", request))
    script = run_with_repair(
        calls,
        f"analysis {file['path']}",
        code,
        lambda code, error: agents.debugger.render_analyzer(
            path=sandbox_path, code=code, error=error, libraries=spec.libraries
        ),
        spec.budget,
    )
    output = script.result.output.strip()
    ok = script.result.ok and bool(output)
    return {
        **file,
        "description": output if ok else _profile(file["path"], spec),
        "source": "analyzer" if ok else "profiler",
        "error": None if ok else agents.clip(script.result.output, ERROR_CHARS),
        "script": script.code,
        "script_from": file["path"] if ok else None,
        "script_digest": digest(script.code) if ok else None,
        "attempts": script.attempts,
        "run_id": spec.run_id,
    }


def keep(record: dict[str, Any], spec: RunSpec) -> None:
    """Into the catalog at once: a run stopped half-way keeps every finished description."""
    save_analysis(Store(spec.storage), record["sha256"], config_key(record, spec), record)


def _profile(path: str, spec: RunSpec) -> str:
    """The built-in profiler's description, read inside the sandbox like any script."""
    limits = ProfileLimits(memory_mb=spec.limits.memory_mb, workers=1)
    work_root = Path(spec.work_dir) if spec.work_dir else None
    texts = profile_files(
        Path(spec.data_dir), [path], limits=limits, mode=spec.sandbox, work_root=work_root
    )
    return texts[path]


def known_analyses(
    spec: RunSpec, source: DataSource, fresh: set[str] = frozenset()
) -> tuple[list[DataFile], dict[str, dict[str, Any]], list[DataFile]]:
    """Every file of `source`, the records the catalog holds for them (same content, path,
    prompt and models) by path, and the files still to analyze. Files in `fresh` count as
    unknown."""
    catalog = Catalog(Store(spec.storage), source.location)
    files = catalog.files(source)  # hashes only new or changed files
    wanted = {f.path: (f.sha256, config_key(asdict(f), spec)) for f in files if f.path not in fresh}
    found = catalog.analyses(wanted)
    return files, found, [f for f in files if f.path not in found]


def analysis_plan(
    spec: RunSpec,
    source: DataSource,
    files: list[DataFile],
    found: dict[str, dict[str, Any]],
    missing: list[DataFile],
    *,
    every_shape: bool = False,
) -> Plan:
    """Which of `missing` the analyzer is asked about and which a like file's script
    describes (`dsstar.algorithm.likeness.plan_analysis`)."""
    catalog = Catalog(Store(spec.storage), source.url)
    return plan_analysis(spec, catalog, files, found, missing, every_shape=every_shape)


def describe_records(analyses: list[dict[str, Any]], source: DataSource) -> list[dict[str, Any]]:
    """What `describe` returns: one record per file, then the entries left out of the view.
    `profile_error`: why the file's offline profile failed in this describe, if it did."""
    described = [
        {k: item[k] for k in ("path", "format", "description", "source", "error")}
        | {"profile_error": item.get("profile_error")}
        for item in analyses
    ]
    return described + [r | {"source": "skipped"} for r in source.skipped_records()]


def cached_descriptions(spec: RunSpec, source: DataSource) -> list[dict[str, Any]] | None:
    """`describe`'s answer when the catalog knows every file of `source`, read without
    Prefect (a server and a flow run cost seconds; this is a few reads from storage); None
    when some file still needs the analyzer."""
    files, found, missing = known_analyses(spec, source)
    return None if missing else describe_records([found[f.path] for f in files], source)
