"""`dsstar describe` and `dsstar retrieve`: the analysis stage alone, and ranking."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ..errors import DSStarError
from ..settings import Settings
from ._app import (
    ApiBaseOpt,
    DataOpt,
    JsonOpt,
    LLMConcurrencyOpt,
    MaxParallelOpt,
    ModelOpt,
    OfflineOpt,
    app,
    check_data,
    fail_usage,
    load_settings,
    prefect_quietly,
)
from ._output import LiveProgress


def _descriptions(data: str, offline: bool, **flags: Any) -> list[dict[str, Any]]:
    """Every file's description: the built-in profiler offline, else the analyzer agent.
    Both come from the catalog in storage when the file's content was described before."""
    settings = load_settings(**flags)
    check_data(data)
    if offline:
        return _offline(data, settings)
    from ..llm import require_model

    require_model(settings)
    from flows.describe import describe as describe_flow

    options = {k: v for k, v in flags.items() if v is not None}
    with LiveProgress(enabled=True):
        return describe_flow(data=data, options=options)


def _offline(data: str, settings: Settings) -> list[dict[str, Any]]:
    """Offline profiles of every file (no LLM, no Prefect), profiling only what changed."""
    import tempfile

    from ..catalog import Catalog
    from ..data import DataSource
    from ..storage import Store

    source = DataSource(data, (settings.work_dir or Path(tempfile.gettempdir())) / "dsstar-cache")
    catalog = Catalog(Store(settings.storage), data)
    files = catalog.files(source)
    texts = catalog.profiles(files, lambda missing: _profile(source, missing))
    return [
        {"path": f.path, "format": f.format, "description": texts[f.path], "error": None}
        for f in files
    ]


def _profile(source: Any, files: list[Any]) -> dict[str, str]:
    """path -> offline profile, for the files the catalog did not know."""
    from ..profiler import profile_file

    return {f.path: profile_file(source.mount_dir / f.path, f.path) for f in files}


@app.command()
def describe(
    data: DataOpt,
    offline: OfflineOpt = False,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    max_parallel: MaxParallelOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
) -> None:
    """Describe every file under --data (the analysis stage alone). Descriptions are kept in
    the catalog under --storage: unchanged files are never described twice.

    Example: dsstar describe --data examples/sales --offline
    """
    prefect_quietly(verbose)
    try:
        files = _descriptions(
            data,
            offline,
            model=model,
            api_base=api_base,
            max_parallel=max_parallel,
            llm_concurrency=llm_concurrency,
        )
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    if as_json:
        keys = ("path", "format", "description", "error")
        payload = {"files": [{k: f.get(k) for k in keys} for f in files]}
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
        return
    out = Console(soft_wrap=True)
    for f in files:
        out.rule(f"{f['path']} ({f['format']})")
        out.print(f["description"], markup=False, highlight=False)


@app.command()
def retrieve(
    data: DataOpt,
    question: Annotated[str, typer.Option("--question", "-q", help="The question to rank for.")],
    top_k: Annotated[int, typer.Option(help="How many files to list.")] = 10,
    offline: OfflineOpt = False,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the files most relevant to --question, best first, with their similarity scores.

    Example: dsstar retrieve --data examples/sales -q "revenue by region" --offline
    """
    prefect_quietly(False)
    try:
        files = _descriptions(data, offline, model=model, api_base=api_base)
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    from ..retrieval import rank

    ranking = rank(question, {f["path"]: f["description"] for f in files})[:top_k]
    if as_json:
        payload = {"files": [{"path": path, "score": score} for path, score in ranking]}
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    for path, score in ranking:
        Console(soft_wrap=True).print(f"{score:.3f}  {path}", highlight=False)
