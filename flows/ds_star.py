"""The DS-STAR flow: analyze every file, then plan, code, execute, verify and route in rounds
until the verifier accepts the plan or the rounds run out; finally format the answer."""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import asdict
from typing import Any

from prefect import flow, get_client, get_run_logger
from prefect.exceptions import MissingContextError
from prefect.runtime import flow_run

from dsstar import agents, progress, scratch
from dsstar.agents import FileInfo
from dsstar.catalog import Catalog
from dsstar.contracts import failed_paths
from dsstar.data import DataFile, DataSource, archive_limits, normalize_location
from dsstar.errors import LLMError
from dsstar.ledger import RunRow
from dsstar.llm import preload
from dsstar.preflight import preflight
from dsstar.retrieval import Similarity, embedding_similarity, rank_sources
from dsstar.settings import Settings
from dsstar.storage import Store
from tasks._common import is_transient, result_storage
from tasks.agents import AgentCalls, RunSpec, Script
from tasks.analysis import analyze_file, config_key

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
    preflight(settings, data)  # model, keys, isolation, data, storage: before any stored run
    scratch.sweep(settings.work_dir)  # temporary folders of processes that died
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
    except BaseException as exc:  # SIGINT, SIGTERM (Prefect's TerminationSignal): resumable
        run.interrupt(exc)
        raise
    finally:
        scratch.release(run.run_id)  # this run's data snapshot or staged file


def solve(run: Run, question: str, data: str, guidelines: str, settings: Settings) -> dict:
    """Algorithm 1 of the paper, step by step."""
    source = open_data(data, settings, tag=run.run_id)
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

    # 1. Analyze every file, concurrently; descriptions are cached by file content, except
    #    for files that broke their contract: those are described afresh.
    files = analyze_files(spec, source, fresh=failed_paths(contracts))
    run.record_analyses(files)
    # 2. Retrieve: only the top-K descriptions go into the prompts.
    context = retrieve(
        question,
        files,
        settings.top_k,
        settings.max_description_chars,
        embedding_similarity(settings, run.run_id),
    )
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
        # The next step is planned from the last result, also when step 1 was wrong and the
        # plan is now empty (Algorithm 1: the planner always sees r).
        step = calls.plan_next(label, question, context, plan, script.result.output)
        if plan:
            request = agents.coder.render_next(
                question=question, files=context, plan=[*plan, step], base_code=base_code
            )
        else:  # a new first step: a script from scratch, as in round 0
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
    if not result.ok or not result.stdout.strip():
        run.record_reuse_attempt(script, False, "(not asked: it failed or printed nothing)")
        return None
    sufficient, reply = calls.verify("reuse", question, previous.plan, script)
    if not sufficient:
        run.record_reuse_attempt(script, False, reply)
        return None
    run.record_round(0, previous.plan, script, True, reply, None)
    return script


def open_data(data: str, settings: Settings, tag: str = "data") -> DataSource:
    """The data root as a read-only view (downloaded first when it is remote), in a temporary
    folder removed by `scratch.release(tag)`, or when the process ends."""
    return DataSource(
        data,
        scratch.new_dir(settings.work_dir, tag),
        archive_limits(settings),
        archive_cache=scratch.archive_cache(settings.work_dir),
    )


def analyze_files(
    spec: RunSpec, source: DataSource, fresh: set[str] = frozenset()
) -> list[dict[str, Any]]:
    """Describe every file, in parallel; files the catalog already knows (same content, path,
    prompt and models) are not analyzed again, and get no task of their own. Files in
    `fresh` are analyzed again whatever the caches hold."""
    catalog = Catalog(Store(spec.storage), source.url)
    files = catalog.files(source)  # hashes only new or changed files
    spec_dict = asdict(spec)
    wanted = {
        f.path: (f.sha256, config_key(asdict(f), spec_dict)) for f in files if f.path not in fresh
    }
    results = catalog.analyses(wanted)
    misses = [f for f in files if f.path not in results]
    if misses:
        preload()  # litellm's import overlaps the first analyses' task runs
    progress.emit("stage", name="analyze", total=len(files), cached=len(results))
    delays = [spec.llm_retry_delay * 2**i for i in range(spec.llm_retries)]
    analyze = analyze_file.with_options(
        result_storage=result_storage(spec.storage),
        retries=spec.llm_retries,  # its LLM calls run inline: a transient error retries it
        retry_delay_seconds=delays or 0,
        retry_condition_fn=is_transient,
    )
    for record in _bounded(analyze, misses, spec_dict, _window(spec), fresh):
        results[record["path"]] = record
    return [results[f.path] for f in files]


def _window(spec: RunSpec) -> int:
    """Analyses submitted at once: enough to keep every script slot and LLM slot busy, and
    no more, so a lake of thousands of files never means thousands of threads."""
    defaults = Settings()
    return (spec.max_parallel or defaults.max_parallel) + (
        spec.llm_concurrency or defaults.llm_concurrency
    )


def _bounded(
    analyze: Any, files: list[DataFile], spec: dict[str, Any], window: int, fresh: set[str]
) -> Any:
    """Submit one analysis task per file, at most `window` pending at a time; yields the
    records in file order. Progress counts finished analyses as they finish."""
    free = threading.Semaphore(window)
    done = itertools.count(1)

    def finished(_: Any) -> None:
        free.release()
        progress.emit("analyzed", done=next(done), total=len(files))

    futures = []
    for file in files:
        free.acquire()
        task = analyze.with_options(refresh_cache=True) if file.path in fresh else analyze
        future = task.submit(asdict(file), spec)
        future.add_done_callback(finished)
        futures.append(future)
    for future in futures:
        yield future.result()


def retrieve(
    question: str,
    files: list[dict[str, Any]],
    top_k: int,
    max_chars: int,
    similarity: Similarity | None = None,
) -> list[FileInfo]:
    """The top-K sources (all files when there are at most K), as agents see them.

    A folder of like files counts as one source and is shown once: its member list and
    the description of its first member."""
    if len(files) <= top_k:
        return [
            FileInfo(path=f"data/{f['path']}", description=agents.clip(f["description"], max_chars))
            for f in files
        ]
    described = {f["path"]: f["description"] or "" for f in files}
    try:
        hits = rank_sources(question, described, similarity=similarity)[:top_k]
    except LLMError as exc:  # embeddings only refine the ranking: BM25 alone still works
        _logger().warning("embedding server failed, ranking with BM25 alone: %s", exc)
        hits = rank_sources(question, described)[:top_k]
    return [
        FileInfo(
            path=f"data/{h.path}", description=agents.clip(_source_text(h, described), max_chars)
        )
        for h in hits
    ]


def _logger() -> logging.Logger | logging.LoggerAdapter:
    try:
        return get_run_logger()
    except MissingContextError:  # called outside a flow run (tests, scripts)
        return logging.getLogger("dsstar")


def _source_text(hit: Any, described: dict[str, str]) -> str:
    if not hit.path.endswith("/"):
        return described[hit.path]
    names = ", ".join(m.removeprefix(hit.path) for m in hit.members)
    first = hit.members[0]
    return (
        f"Folder of {len(hit.members)} like files (same format and layout): {names}\n"
        f"Description of {first}, as an example of the layout:\n{described[first]}"
    )


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
        max_output_chars=calls.spec.max_output_chars,
    )
    return calls.run_with_repair("final", calls.finalize(messages), fix)


def completed_result(state: Any, storage: str, run_id: str) -> dict[str, Any]:
    """The return value of a Completed ds-star flow run; when Prefect lost it (a Completed
    state without data, seen rarely on a busy server), the same result rebuilt from the
    stored run.json."""
    from prefect.exceptions import MissingResult

    from dsstar.report import run_result

    try:
        return state.result()
    except MissingResult:
        store = Store(storage or Settings().storage)
        return run_result(store.read_json(f"runs/{run_id}/run.json"), store.uri(f"runs/{run_id}"))
