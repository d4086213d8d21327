"""`dsstar describe` and `dsstar retrieve`: the analysis stage alone, and ranking."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ..errors import DSStarError
from ._app import (
    ApiBaseOpt,
    DaskAddressOpt,
    DataOpt,
    JsonOpt,
    ModelOpt,
    OfflineOpt,
    TaskRunnerOpt,
    app,
    check_data,
    fail_usage,
    load_settings,
    prefect_quietly,
)
from ._output import LiveProgress


def _descriptions(data: str, offline: bool, **flags: Any) -> list[dict[str, Any]]:
    """Every file's description: the built-in profiler offline, else the analyzer agent."""
    settings = load_settings(**flags)
    check_data(data)
    if offline:
        import tempfile

        from ..data import DataSource
        from ..profiler import profile_file

        source = DataSource(data, Path(tempfile.gettempdir()) / "dsstar-cache")
        return [
            {
                "path": f.path,
                "format": f.format,
                "description": profile_file(source.mount_dir / f.path, f.path),
                "error": None,
            }
            for f in source.files()
        ]
    from ..llm import require_model

    require_model(settings)
    from flows._runners import build_task_runner
    from flows.describe import describe as describe_flow

    options = {k: v for k, v in flags.items() if v is not None}
    describe_flow = describe_flow.with_options(task_runner=build_task_runner(settings))
    with LiveProgress(enabled=True):
        return describe_flow(data=data, options=options)


@app.command()
def describe(
    data: DataOpt,
    offline: OfflineOpt = False,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    task_runner: TaskRunnerOpt = None,
    dask_address: DaskAddressOpt = None,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
) -> None:
    """Describe every file under --data (the analysis stage alone).

    Example: dsstar describe --data examples/sales --offline
    """
    prefect_quietly(verbose)
    try:
        files = _descriptions(
            data, offline, model=model, api_base=api_base,
            task_runner=task_runner, dask_address=dask_address,
        )  # fmt: skip
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
