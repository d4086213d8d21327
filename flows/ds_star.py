"""The DS-STAR flow: analyze every file, then plan, code, execute, verify and route in rounds
until the verifier accepts the plan or the rounds run out; finally format the answer."""

from __future__ import annotations

import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prefect import flow, get_client
from prefect.runtime import flow_run

from dsstar import agents, progress
from dsstar.agents import FileInfo
from dsstar.data import DataSource, normalize_location
from dsstar.ledger import RunRow
from dsstar.llm import require_model
from dsstar.retrieval import rank
from dsstar.sandbox import resolve_mode
from dsstar.settings import Settings
from tasks._common import result_storage
from tasks.agents import AgentCalls, RunSpec, Script
from tasks.analysis import analyze_file

from ._contracts import check_contracts
from ._run import Run
from ._runners import default_task_runner

__all__ = ["ds_star"]


def default_run_id() -> str:
    """For runs started from the UI or a schedule: derived from the Prefect flow run, so a
    retry of that flow run continues the same DS-STAR run (and finds its cached work)."""
    with get_client(sync_client=True) as client:
        created = client.read_flow_run(flow_run.id).created
    return f"{created:%Y%m%d-%H%M%S}-{str(flow_run.id)[:6]}"


def _flow_run_name() -> str:
    return flow_run.parameters.get("run_id") or default_run_id()


@flow(
    name="ds-star",
    flow_run_name=_flow_run_name,
    log_prints=False,
    task_runner=default_task_runner(),
)
def ds_star(
    question: str,
    data: str,
    guidelines: str = "",
    model: str | None = None,
    max_rounds: int = 20,
    storage: str | None = None,
    reuse: bool = True,
    run_id: str | None = None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Answer a question about a folder or bucket of data files with the DS-STAR agent.

    Args:
        question: The question to answer, e.g. "Which region had the highest revenue?".
        data: Folder, single file or URL (s3://bucket/prefix) holding the data files.
        guidelines: How the answer must be formatted, e.g. "a number with 2 decimals".
        model: litellm model for every agent (default: DSSTAR_MODEL on the worker).
        max_rounds: Most plan/code/verify rounds before the answer is finalized anyway.
        storage: Where artifacts go: a folder or s3://bucket/prefix (default: DSSTAR_STORAGE).
        reuse: Try the last verified solution of this question first (one or two LLM calls).
        run_id: Continue or name a run; by default derived from this flow run, so a retry
            resumes it.
        options: Any other dsstar setting by name, e.g. {"exec_timeout": 60}.
    """
    chosen = {"model": model, "max_rounds": max_rounds, "storage": storage, "reuse": reuse}
    chosen |= options or {}
    settings = Settings(**{k: v for k, v in chosen.items() if v is not None})
    require_model(settings)
    resolve_mode(settings.sandbox)  # no isolation available: stop before any LLM call
    run = Run.start(
        run_id=run_id or default_run_id(),
        settings=settings,
        params={"question": question, "data": normalize_location(data), "guidelines": guidelines},
    )
    try:
        return solve(run, question, data, guidelines, settings)
    except Exception as exc:  # record why in run.json (when storage allows), then fail the run
        run.fail(exc)
        raise


def solve(run: Run, question: str, data: str, guidelines: str, settings: Settings) -> dict:
    """Algorithm 1 of the paper, step by step."""
    source = open_data(data, settings)
    spec = RunSpec.from_settings(settings, run.run_id, run.store.url, source.mount_dir)
    calls = AgentCalls(spec)
    run.track(calls)

    # 0. A question answered before: re-run its verified solution on today's data first,
    #    unless a file broke its data contract (then the full loop runs, seeded below).
    contracts = check_contracts(run, source)
    previous = run.previous_solution() if settings.reuse else None
    if previous and not contracts["failed"]:
        script = try_previous_solution(run, calls, question, previous)
        if script:
            return run.finish("verified", previous.plan, script, reused=True)
    seed_plan = previous.plan if previous else []

    # 1. Analyze every file, concurrently; descriptions are cached by file content.
    files = analyze_files(spec, source)
    run.record_analyses(files)
    # 2. Retrieve: only the top-K descriptions go into the prompts.
    context = retrieve(question, files, settings.top_k, settings.max_description_chars)
    run.note(files_considered=[f.path for f in context])

    def solution_debugger(code: str, error: str) -> list[dict[str, str]]:
        return agents.debugger.render_solution(
            question=question, code=code, error=error, files=context
        )

    # 3. Round 0: one simple first step, implemented and executed.
    plan = [calls.plan_first("r00", question, context, previous_plan=seed_plan)]
    first = agents.coder.render_initial(question=question, files=context, step=plan[0])
    code = calls.code("r00", first)
    script = calls.run_with_repair("r00", code, solution_debugger)
    code_for_prefix = {len(plan): script.code}
    number, route_label = 0, None

    # 4. Verify; while not sufficient: route, plan the next step, code it, execute.
    while True:
        label = f"r{number:02d}"
        sufficient, verifier_reply = calls.verify(label, question, plan, script)
        run.record_round(number, plan, script, sufficient, verifier_reply, route_label)
        if sufficient:
            status = "verified"
            break
        if number + 1 >= settings.max_rounds:
            status = "max_rounds"
            break
        route = calls.route(label, question, plan, script.result.output, context)
        if route.wrong_step is not None:  # backtrack: drop the wrong step and all after it
            plan = plan[: route.wrong_step - 1]
        base_code = code_for_prefix.get(len(plan), "")
        number, route_label = number + 1, route.label
        run.open_round(number, route)
        label = f"r{number:02d}"
        if plan:
            step = calls.plan_next(label, question, context, plan, script.result.output)
            request = agents.coder.render_next(
                question=question, files=context, plan=[*plan, step], base_code=base_code
            )
        else:  # step 1 was wrong: start afresh, as in round 0
            step = calls.plan_first(label, question, context, previous_plan=[])
            request = agents.coder.render_initial(question=question, files=context, step=step)
        plan = [*plan, step]
        code = calls.code(label, request)
        script = calls.run_with_repair(label, code, solution_debugger)
        code_for_prefix[len(plan)] = script.code

    # 5. Finalize: a script that prints only the answer, in the required format.
    final = finalize(calls, question, guidelines, context, plan, script, solution_debugger)
    return run.finish(status, plan, final)


def try_previous_solution(
    run: Run, calls: AgentCalls, question: str, previous: RunRow
) -> Script | None:
    """Execute the last verified solution and ask the verifier once. Returns the script when
    it ran and was accepted (it is then round 00 of this run), else None."""
    result = calls.execute("execute reuse", previous.solution)
    script = Script(code=previous.solution or "", result=result)
    if not result.ok:
        run.record_reuse_attempt(script, False, "(not asked: the solution failed to run)")
        return None
    sufficient, reply = calls.verify("reuse", question, previous.plan, script)
    if not sufficient:
        run.record_reuse_attempt(script, False, reply)
        return None
    run.record_round(0, previous.plan, script, True, reply, None)
    return script


def open_data(data: str, settings: Settings) -> DataSource:
    """The data root, downloaded into a local cache first when it is remote."""
    return DataSource(data, (settings.work_dir or Path(tempfile.gettempdir())) / "dsstar-cache")


def analyze_files(spec: RunSpec, source: DataSource) -> list[dict[str, Any]]:
    """Describe every file, in parallel; unchanged files reuse their cached analysis."""
    files = source.files()
    progress.emit("stage", name="analyze", total=len(files))
    analyze = analyze_file.with_options(result_storage=result_storage(spec.storage))
    futures = [analyze.submit(asdict(file), asdict(spec)) for file in files]
    return [future.result() for future in futures]


def retrieve(
    question: str, files: list[dict[str, Any]], top_k: int, max_chars: int
) -> list[FileInfo]:
    """The top-K described files (all of them when there are at most K), as agents see them."""
    chosen = files
    if len(files) > top_k:
        ranking = rank(question, {f["path"]: f["description"] for f in files})
        keep = {path for path, _ in ranking[:top_k]}
        chosen = [f for f in files if f["path"] in keep]
    return [
        FileInfo(path=f"data/{f['path']}", description=agents.clip(f["description"], max_chars))
        for f in chosen
    ]


def finalize(
    calls: AgentCalls,
    question: str,
    guidelines: str,
    context: list[FileInfo],
    plan: list[str],
    script: Script,
    fix: Any,
) -> Script:
    """The finalyzer rewrites the last script to print only the answer; it is then executed."""
    messages = agents.finalyzer.render(
        question=question,
        guidelines=guidelines,
        files=context,
        plan=plan,
        code=script.code,
        output=script.result.output,
    )
    return calls.run_with_repair("final", calls.finalize(messages), fix)
