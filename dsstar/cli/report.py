"""`dsstar report`: an open question answered with a report (DS-STAR+)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from dsstar.algorithm.verdict import ANSWERED
from dsstar.cli._app import (
    EXIT_FAILED,
    EXIT_OK,
    DataOpt,
    JsonOpt,
    app,
    console,
    fail_usage,
    flag_name,
    load_settings,
    prefect_quietly,
    settings_flags,
)
from dsstar.cli._output import json_line, report
from dsstar.cli.run import RUN_FLAGS, _agent_models, run_with_progress
from dsstar.errors import DSStarError
from dsstar.inputs.report import REPORT_FIELDS, ReportForm

__all__ = ["report_command", "run_report_flow"]


def _bound(name: str) -> Any:
    """The report form's field `name` as a flag: its help and bounds from the form."""
    field = ReportForm.model_fields[name]
    bounds = {type(m).__name__: m for m in field.metadata}
    low = getattr(bounds.get("Ge"), "ge", None)
    high = getattr(bounds.get("Le"), "le", None)
    return typer.Option(
        min=low, max=high, help=f"{field.description} [default: {field.default}]",
        show_default=False,
    )  # fmt: skip


@app.command("report")
@settings_flags(*RUN_FLAGS)
def report_command(
    data: DataOpt,
    question: Annotated[
        str, typer.Option("--question", "-q", help="The open question the report answers.")
    ],
    guidelines: Annotated[
        str,
        typer.Option(
            help="What the report must look like, e.g. an outline: '1. Overview 2. By region'."
        ),
    ] = "",
    sub_questions: Annotated[int | None, _bound("sub_questions")] = None,
    follow_ups: Annotated[int | None, _bound("follow_ups")] = None,
    refinements: Annotated[int | None, _bound("refinements")] = None,
    agent_model: Annotated[
        list[str] | None,
        typer.Option(
            help="Per-agent model, AGENT=MODEL; repeatable, e.g. writer=openai/gpt-4o"
            " \\[env: DSSTAR_AGENT_MODELS as JSON]."
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            help="Use this run id instead of a generated one. A stored report's id continues"
            " that report; its sub-questions are runs <id>-q01, <id>-q02, ..."
        ),
    ] = None,
    estimate: Annotated[
        bool,
        typer.Option(
            "--estimate",
            help="Print what the report may cost (calls, tokens, USD, and the --max-cost it"
            " needs to run whole) and exit, without calling the model.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")] = False,
    flags: dict[str, Any] | None = None,
) -> None:
    """Answer an open --question about the files under --data with a report.

    Every file is analyzed once; a model breaks the question into factoid sub-questions,
    each answered by a DS-STAR run (in parallel, each a child flow run of the report's);
    a writer drafts a report that cites every answer by number; then, --refinements times,
    a reviewer reads it, at most --follow-ups more sub-questions are answered where it is
    thin, and it is rewritten. The report is stored as final/report.md and report.html
    (its charts inline), listed in --json's outputs, and shown in the Prefect UI.

    --max-cost and --max-tokens bound the whole report, sub-runs included: one that reaches
    them is written from what was answered and says what is missing (exit 1; `dsstar resume
    RUN_ID --max-cost N` answers the rest).

    Example: dsstar report --data examples/sales -q "How did sales go in 2024 H1?"
    """
    prefect_quietly(verbose)
    chosen = {k: v for k, v in (flags or {}).items() if v is not None}
    bounds = {"sub_questions": sub_questions, "follow_ups": follow_ups,
              "refinements": refinements}  # fmt: skip
    bounds = {k: v for k, v in bounds.items() if v is not None}
    try:
        models = _agent_models(agent_model)
        if models:
            chosen["agent_models"] = models
        if estimate:
            _print_estimate(data, question, guidelines, bounds, chosen, as_json)
            raise typer.Exit(EXIT_OK)
        from dsstar.api import prepare_report

        prepared = prepare_report(
            question=question, data=data, guidelines=guidelines, run_id=run_id,
            name=flag_name, **bounds, **chosen,
        )  # fmt: skip
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    run_report_flow(prepared, as_json)


def run_report_flow(prepared: Any, as_json: bool) -> None:
    """Run (or resume) a prepared report, report its result and exit (0: a report written
    whole, 1: failed, or written over budget from what was answered)."""
    result = run_with_progress(prepared, as_json)
    report(result, as_json)
    raise typer.Exit(EXIT_OK if result["status"] in ANSWERED else EXIT_FAILED)


def _print_estimate(
    data: str,
    question: str,
    guidelines: str,
    bounds: dict[str, Any],
    chosen: dict[str, Any],
    as_json: bool,
) -> None:
    """`report --estimate`: what the report may cost, without calling the model."""
    from pydantic import ValidationError

    from dsstar.errors import UsageError
    from dsstar.inputs.form import explain
    from dsstar.inputs.preflight import check_data
    from dsstar.inputs.spec import opened, require_model
    from dsstar.research.estimate import estimate_report
    from dsstar.research.loop import Bounds

    try:
        form = ReportForm(question=question, data=data, guidelines=guidelines, **bounds)
    except ValidationError as exc:
        raise UsageError(explain(exc, flag_name)) from exc
    report_bounds = Bounds(**{name: getattr(form, name) for name in REPORT_FIELDS})
    settings = load_settings(**chosen)
    check_data(data)
    require_model(settings)
    with opened(data, settings, "estimate") as (source, spec):
        found = estimate_report(spec, source, question, guidelines, report_bounds)
    if as_json:
        sys.stdout.write(json_line(found.to_dict()))
        return

    def usd(value: float | None) -> str:
        return f"${value:,.4f}" if value is not None else f"unknown (no price for {found.model})"

    lines = [
        f"files           {found.files:,} ({found.analyzer_calls:,} to analyze)",
        f"sub-questions   at most {found.sub_questions}",
        f"model calls     about {found.calls:,}",
        f"tokens          about {found.input_tokens:,} in, {found.output_tokens:,} out",
        f"cost            about {usd(found.cost_usd)}",
        f"--max-cost      at least {usd(found.needed_usd)} to run whole (each call needs"
        " room for its bound, and the writer keeps room for the last draft)",
    ]
    console().print("\n".join(lines), markup=False, highlight=False)
