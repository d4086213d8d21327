"""`dsstar replay` and `dsstar demo`: runs answered by recorded replies.

Both are ordinary runs of the ds-star flow (Prefect, sandbox, storage, ledger) whose model is
`recorded/<location>` (`dsstar.model.recorded`): litellm serves each request the reply recorded
for its label, and nothing else differs. `replay` records nothing new about the stored run: it
starts a new run and compares the two.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from dsstar.algorithm.verdict import ANSWERED
from dsstar.cli._app import (
    EXIT_FAILED,
    EXIT_OK,
    JsonOpt,
    StorageOpt,
    app,
    console,
    err,
    fail_usage,
    flag_name,
    invoked,
    load_settings,
    prefect_quietly,
)
from dsstar.cli._output import report
from dsstar.cli.run import StoredDataOpt, run_with_progress
from dsstar.errors import DSStarError
from dsstar.inputs.questions import PROJECT_DIR, load_questions
from dsstar.keys import replies_folder, run_record
from dsstar.storage import check_run_id

# What a recorded run must not take from the stored settings or the environment: another
# model or address, a reused solution (whose verdict was never recorded), a person's turn.
_RECORDED = {"agent_models": {}, "api_base": "", "reuse": False, "ask_human": False}

VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's logs.")]


@app.command()
def replay(
    run_id: Annotated[str, typer.Argument(help="The stored run to replay.", metavar="RUN_ID")],
    storage: StorageOpt = None,
    data: StoredDataOpt = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run a stored run (or report) again with the replies it recorded; say what changed.

    No model is asked: each request gets the reply the stored run received
    for it (by round and agent). Every script runs again, in the sandbox, on
    the data as it is now. The replay is a new run (its own id, stored and
    shown like any other, its replies marked recorded); then each round's
    output and the answer are compared with the stored ones. A request the
    stored run never made (a script that fails only now needs the debugger)
    ends the replay there, as a difference.

    A report is replayed whole: its decomposer, writer and critic, and each
    sub-question's run with that sub-run's own replies; then each sub-run is
    compared as a run, and the figures the report cites.

    The stored run is data, not settings for this process: the replay runs
    under this process's policy (DSSTAR_* variables) and takes from the
    record only what a run form could choose; its data must lie under
    DSSTAR_DATA_ROOTS unless --data names it (docs/sandbox.md).

    Exit codes: 0 every round's output and the answer are as stored,
    1 something differs (the report says what), 2 no such run or it kept
    no replies.

    Example: dsstar replay 20261121-193000-3fa2c1
    """
    prefect_quietly(verbose)
    from dsstar.api import prepare_report, prepare_run
    from dsstar.inputs.report import stored_bounds
    from dsstar.inputs.stored import StoredRun, judged
    from dsstar.storage import Store
    from dsstar.views.replay import compare_reports, compare_runs, recorded_model

    try:
        check_run_id(run_id)
        store = Store(load_settings(storage=storage).storage)
        record = store.read_json(run_record(run_id))
        if not store.listdir(replies_folder(run_id)):
            fail_usage(f"run {run_id} kept no model replies to replay", as_json)
        # The replay's own: the stored replies answer (this storage's), nothing else does,
        # and cost nothing (no ceiling of the record's applies).
        own = _RECORDED | {"model": recorded_model(store, run_id), "storage": store.url,
                           "max_cost": None, "max_tokens": None}  # fmt: skip
        stored = StoredRun.of(run_id, record)
        options, policy, location = judged(stored, own, data)
        texts = {"question": stored.question, "data": location,
                 "guidelines": stored.guidelines}  # fmt: skip
        if record.get("kind") == "report":  # its sub-runs answered from theirs (recorded.py)
            prepared = prepare_report(**texts, name=flag_name, policy=policy,
                                      **stored_bounds(record), **options)  # fmt: skip
        else:
            prepared = prepare_run(**texts, name=flag_name, policy=policy, **options)
    except FileNotFoundError:
        fail_usage(f"no run {run_id} under {store.url}", as_json)
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    err.print(f"replaying run {run_id} with its recorded replies", highlight=False)
    result = run_with_progress(prepared, as_json)
    if record.get("kind") == "report":
        compared = compare_reports(store, run_id, result["run_id"])
    else:
        compared = compare_runs(store, run_id, result["run_id"])
    if as_json:
        sys.stdout.write(json.dumps({**compared, "replay": result}, ensure_ascii=False) + "\n")
    else:
        report(result, as_json=False)
        _say_comparison(compared)
    raise typer.Exit(EXIT_OK if compared["same"] else EXIT_FAILED)


def _say_comparison(compared: dict[str, Any]) -> None:
    out = console()
    out.print(
        f"replay of run {compared['run_id']} (as run {compared['replay_run_id']}):",
        highlight=False,
    )
    for item in compared.get("rounds") or []:
        said = "same output" if item["same"] else item["change"]
        out.print(Text(f"  round {item['round']:02d}: {said}"))
    for item in compared.get("sub_questions") or []:  # a report's
        said = "same answer and rounds" if item["same"] else item["change"]
        out.print(Text(f"  sub-question [{item['number']}]: {said}"))
    if "figures" in compared:
        figures = compared["figures"]
        changed = "; ".join(figures["changed"])
        out.print(Text(f"  cited figures: {'same' if figures['same'] else 'changed: ' + changed}"))
    if "answer" in compared:
        answer = compared["answer"]
        out.print(Text(f"  answer: {'same' if answer['same'] else answer['change']}"))
    verdict = (
        "same: every round's output and the answer are as stored"
        if compared["same"]
        else "changed: see the lines above"
    )
    out.print(Text(verdict, style="green" if compared["same"] else "yellow"))


# The demo: the example data, its first question, and replies recorded for them.
EXAMPLES = PROJECT_DIR / "examples"
DEMO_QUESTIONS = EXAMPLES / "sales-questions.yaml"
DEMO_REPLIES = EXAMPLES / "sales-replies.yaml"
# The report demo: an open question over the same data, and replies recorded for its report.
DEMO_REPORT = EXAMPLES / "sales-report.yaml"
DEMO_REPORT_REPLIES = EXAMPLES / "report-replies.yaml"


@app.command()
def demo(
    storage: StorageOpt = None,
    report_: Annotated[
        bool,
        typer.Option(
            "--report",
            help="Answer the example's open question with a report instead (dsstar report):"
            " sub-questions answered in parallel by DS-STAR runs, a report citing each,"
            " reviewed once.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Answer the example question with replies recorded from a model.

    A whole run over examples/sales, with no model and no key: the ds-star
    flow analyzes the files, plans, codes and verifies in rounds, runs every
    script in the sandbox and stores everything, as `dsstar run` does; only
    the replies come from examples/sales-replies.yaml (the model
    `recorded/<that file>`), and the run says so (CLI, run.json, Prefect
    UI). Then it says where to look at the run, and how to ask your own
    question with your model.

    With --report, the open question of examples/sales-report.yaml is answered with a
    report, as `dsstar report` does, from examples/report-replies.yaml: three sub-questions
    (each a DS-STAR run of its own, at once), a draft, a review that adds one, and the
    report rewritten, stored as final/report.md and report.html with its chart.

    Example: dsstar demo

    Example: dsstar demo --report
    """
    prefect_quietly(verbose)
    from dsstar.api import prepare_run

    ui = _prefect_ui()  # now: a temporary server, started below, sets PREFECT_API_URL
    if report_:
        _demo_report(storage, as_json, ui)
    if not (DEMO_QUESTIONS.is_file() and DEMO_REPLIES.is_file()):
        fail_usage(f"the demo needs {EXAMPLES} (a checkout of dsstar, installed with -e)")
    try:
        first = load_questions(DEMO_QUESTIONS)[0]
        prepared = prepare_run(
            question=first.question, data=first.data, guidelines=first.guidelines,
            name=flag_name, storage=storage, model=f"recorded/{DEMO_REPLIES}", **_RECORDED,
        )  # fmt: skip
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    err.print(f"demo: {first.question}", highlight=False)
    result = run_with_progress(prepared, as_json)
    report(result, as_json)
    if not as_json:
        _where_to_look(result, ui)
    raise typer.Exit(EXIT_OK if result["status"] in ANSWERED else EXIT_FAILED)


def _demo_report(storage: str | None, as_json: bool, ui: str) -> None:
    """`dsstar demo --report`: the example's open question as a recorded report."""
    from dsstar.api import prepare_report

    if not (DEMO_REPORT.is_file() and DEMO_REPORT_REPLIES.is_file()):
        fail_usage(f"the demo needs {EXAMPLES} (a checkout of dsstar, installed with -e)")
    try:
        first = load_questions(DEMO_REPORT)[0]
        prepared = prepare_report(
            question=first.question, data=first.data, guidelines=first.guidelines,
            name=flag_name, storage=storage, model=f"recorded/{DEMO_REPORT_REPLIES}",
            sub_questions=3, follow_ups=1, refinements=1, **_RECORDED,
        )  # fmt: skip
    except DSStarError as exc:
        fail_usage(str(exc), as_json)
    err.print(f"demo report: {first.question}", highlight=False)
    result = run_with_progress(prepared, as_json)
    report(result, as_json)
    if not as_json:
        _where_to_look(result, ui, report=True)
    raise typer.Exit(EXIT_OK if result["status"] in ANSWERED else EXIT_FAILED)


def _prefect_ui() -> str:
    """The Prefect UI of the API the user configured ("" when runs go to a temporary server,
    which has none: its runs are kept in Prefect's database, which `prefect server start`
    serves)."""
    ui = os.environ.get("PREFECT_UI_URL") or os.environ.get("PREFECT_API_URL", "")
    return ui.rstrip("/").removesuffix("/api")


def _where_to_look(result: dict[str, Any], ui: str, report: bool = False) -> None:
    me, run_id = invoked(), result["run_id"]
    prefect = str(Path(sys.executable).parent / "prefect")
    flow_run = f"/runs/flow-run/{result.get('flow_run_id')}"
    shown = (
        f"in the Prefect UI: {ui}{flow_run}"
        if ui
        else f"in the Prefect UI: start it with `{prefect} server start`, then open"
        f" http://127.0.0.1:4200{flow_run}"
    )
    what = (
        "its outline and sub-questions, each a run of its own"
        if report
        else "every round: plan, code, output, verdict"
    )
    files = "".join(f"\n  {o['name']}: {o['uri']}" for o in result.get("outputs") or [])
    command = "report" if report else "run"
    err.print(
        f"\nLook at the {'report' if report else 'run'}:\n  {me} runs show {run_id}      ({what})"
        f"\n  its stored objects: {result['artifacts_uri']}{files if report else ''}\n  {shown}\n"
        f"\nAsk your own question with your model, e.g.:\n"
        f"  export OPENAI_API_KEY=...\n"
        f'  {me} {command} --data PATH --question "..." --model openai/gpt-4o\n'
        f"(any litellm model: see `{me} {command} --help` and the README's Models)",
        highlight=False,
    )
