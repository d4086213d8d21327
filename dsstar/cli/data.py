"""`dsstar describe` and `dsstar retrieve`: the analysis stage alone, and ranking."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Annotated, Any

import typer

from dsstar.cli._app import (
    ApiBaseOpt,
    DaskAddressOpt,
    DataOpt,
    JsonOpt,
    LLMConcurrencyOpt,
    MaxParallelOpt,
    ModelOpt,
    OfflineOpt,
    TaskRunnerOpt,
    app,
    check_data,
    console,
    fail_usage,
    flag_name,
    load_settings,
    prefect_quietly,
    setting_option,
)
from dsstar.cli._output import LiveProgress, heading, json_line, shown
from dsstar.errors import DSStarError
from dsstar.execution.failure import failure_line


def _descriptions(data: str, offline: bool, **flags: Any) -> list[dict[str, Any]]:
    """Every file's description (see `dsstar.api.file_descriptions`), the analyzer's progress
    shown while it works."""
    from dsstar.api import file_descriptions

    interval = load_settings().progress_interval
    return file_descriptions(
        data, offline, around=lambda: LiveProgress(enabled=True, interval=interval),
        name=flag_name, **flags,
    )  # fmt: skip


@app.command()
def describe(
    data: DataOpt,
    offline: OfflineOpt = False,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    max_parallel: MaxParallelOpt = None,
    llm_concurrency: LLMConcurrencyOpt = None,
    task_runner: TaskRunnerOpt = None,
    dask_address: DaskAddressOpt = None,
    estimate: Annotated[
        bool,
        typer.Option(
            "--estimate",
            help="Call no model: print the files, their groups of like files, the analyzer"
            " calls the describe would make, their tokens and their cost at the model's prices.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
) -> None:
    """Describe every file under --data (the analysis stage alone). Descriptions are kept in
    the catalog under DSSTAR_STORAGE: unchanged files are never described twice, and of
    like files (one folder, format and schema) the analyzer is asked about one.

    Example: dsstar describe --data examples/sales --offline
    """
    prefect_quietly(verbose)
    if estimate:
        _print_estimate(data, offline, as_json, model=model, api_base=api_base)
        return
    try:
        files = _descriptions(
            data,
            offline,
            model=model,
            api_base=api_base,
            max_parallel=max_parallel,
            llm_concurrency=llm_concurrency,
            task_runner=task_runner,
            dask_address=dask_address,
        )
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    unprofiled = [
        {"path": f["path"], "reason": f["profile_error"]} for f in files if f.get("profile_error")
    ]
    if as_json:
        keys = ("path", "format", "description", "error")
        payload = {"files": [{k: f.get(k) for k in keys} for f in files], "unprofiled": unprofiled}
        sys.stdout.write(json_line(payload))
        return
    out = console()
    for f in files:
        heading(out, shown(f"{f['path']} ({f['format']})"))
        # The analyzer's whole output is in --json and the run's attempts.json: one line here.
        text = f["description"] or f"skipped: {failure_line(f['error'] or '', 'script.py')}"
        out.print(shown(text), markup=False, highlight=False)
    if unprofiled:
        heading(out, "not profiled")
        out.print(shown(unprofiled_summary(unprofiled)), markup=False, highlight=False)


def unprofiled_summary(unprofiled: list[dict[str, str]]) -> str:
    """The files with no shape to share (their offline profile failed or names no
    structure), counted by reason, the three commonest named."""
    reasons = Counter(item["reason"] for item in unprofiled)
    common = "; ".join(f"{n} x {reason}" for reason, n in reasons.most_common(3))
    more = f"; {len(reasons) - 3} other reasons" if len(reasons) > 3 else ""
    return (
        f"{len(unprofiled):,} files have no offline profile to group them by, so each is"
        f" analyzed on its own ({common}{more})"
    )


def _print_estimate(data: str, offline: bool, as_json: bool, **flags: Any) -> None:
    """`describe --estimate`: what a describe would cost, without calling the model."""
    if offline:
        fail_usage("--estimate counts model calls; --offline makes none", as_json)
    from dsstar.algorithm.estimate import REPLY_TOKENS, estimate_describe

    try:
        settings = load_settings(**flags)
        check_data(data)
        from dsstar.inputs.spec import opened, require_model

        require_model(settings)
        with opened(data, settings, "estimate") as (source, spec):
            found = estimate_describe(spec, source)
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    if as_json:
        sys.stdout.write(json_line(found.to_dict()))
        return
    cost = (
        f"${found.cost_usd:,.4f} at {found.model} prices"
        if found.cost_usd is not None
        else f"no price known for {found.model}"
    )
    lines = [
        f"files          {found.files:,} ({found.described:,} described before)",
        f"groups         {found.groups:,} (like files: one folder, format and schema)",
        f"analyzer calls {found.calls:,}",
        f"tokens         {found.input_tokens:,} in, {found.output_tokens:,} out"
        f" (replies assumed {REPLY_TOKENS} tokens)",
        f"cost           {cost}",
    ]
    if found.unprofiled:
        lines.append(f"not profiled   {unprofiled_summary(found.unprofiled)}")
    console().print("\n".join(lines), markup=False, highlight=False)


@app.command()
def retrieve(
    data: DataOpt,
    question: Annotated[str, typer.Option("--question", "-q", help="The question to rank for.")],
    top_k: Annotated[int, typer.Option(help="How many sources to list.")] = 10,
    offline: OfflineOpt = False,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    embedding_model: Annotated[str | None, setting_option("embedding_model")] = None,
    embedding_api_base: Annotated[str | None, setting_option("embedding_api_base")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the sources most relevant to --question, best first, with their scores (1 = best).

    A source is a file, or a folder of like files (a path ending in '/') that counts once.

    Example: dsstar retrieve --data examples/sales -q "revenue by region" --offline
    """
    prefect_quietly(False)
    from dsstar.data.retrieval import rank_sources
    from dsstar.inputs.spec import embedding

    try:
        files = _descriptions(data, offline, model=model, api_base=api_base)
        settings = load_settings(
            embedding_model=embedding_model, embedding_api_base=embedding_api_base
        )
        documents = {f["path"]: f["description"] or "" for f in files if f["format"] != "skipped"}
        chosen = embedding(settings)
        similarity = chosen.similarity() if chosen else None
        hits = rank_sources(question, documents, similarity=similarity)[:top_k]
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    if as_json:
        payload = {"files": [{"path": h.path, "score": h.score} for h in hits]}
        sys.stdout.write(json_line(payload))
        return
    out = console()
    for h in hits:
        members = f"  ({len(h.members)} like files)" if h.path.endswith("/") else ""
        out.print(f"{h.score:.3f}  {shown(h.path)}{members}", highlight=False, markup=False)
