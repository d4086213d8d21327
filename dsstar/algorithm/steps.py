"""Algorithm 1 of the paper, whole: steps 0 to 5 in one function, free of Prefect.

0. Reuse: a question answered before re-runs its verified solution on today's data first,
   unless a file broke its data contract.
1. Analyze every file (the runtime does it, concurrently and cached by content).
2. Retrieve: the top-K descriptions, documentation files whole, within the prompt's budget.
3, 4. Rounds of plan, code, execute, verify and route (`loop.rounds`).
5. Finalize: a script that states the answer in the required format (`loop.finalize`).

Everything goes through a `Runtime`: the Prefect flow's (`flows/_runtime.py`) or the local
one (`local.LocalRuntime`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsstar.algorithm import loop
from dsstar.algorithm.calls import Problem
from dsstar.algorithm.context import fit_context, retrieve
from dsstar.algorithm.context_budget import whole_documents
from dsstar.algorithm.runtime import Runtime, Script
from dsstar.algorithm.spec import RunSpec
from dsstar.algorithm.verdict import Status
from dsstar.data.contracts import failed_paths
from dsstar.data.sources import DataSource
from dsstar.errors import OverBudget
from dsstar.events import Analyzed, Retrieved, Reused
from dsstar.model.llm import count_tokens

__all__ = ["Solution", "solve"]


@dataclass(frozen=True)
class Solution:
    """How a run of the algorithm ended: its status and plan, and the final script (None when
    a person stopped the run: there is no answer then). `reused_from`: the earlier run whose
    verified solution still answers."""

    status: Status
    plan: list[str]
    final: Script | None
    reused_from: str | None = None


def solve(
    rt: Runtime,
    question: str,
    guidelines: str,
    source: DataSource,
    spec: RunSpec,
) -> Solution:
    """Answer `question` about the files of `source` (steps 0 to 5, see the module), within
    the bounds of the run's `spec`."""
    budget = spec.budget
    # 0. A question answered before: its verified solution runs on today's data first,
    #    unless a file broke its data contract (then the full loop runs, seeded below).
    contracts = rt.check_contracts(source)
    previous = rt.previous_solution() if spec.reuse else None
    if previous and not contracts["failed"]:
        script = loop.reuse(rt, question, previous.plan, previous.solution, budget)
        if script:
            rt.say(Reused(previous.run_id))
            return Solution(Status.VERIFIED, previous.plan, script, reused_from=previous.run_id)

    # 1. Analyze every file; descriptions are cached by file content, except for files that
    #    broke their contract: those are described afresh.
    try:
        analyses = rt.analyze_files(source, failed_paths(contracts))
    except OverBudget as exc:  # the analyses that finished are kept
        rt.record_analyses(exc.analyses)
        raise
    rt.record_analyses(analyses)
    rt.say(Analyzed(analyses))

    # 2. Retrieve: only the top-K descriptions go into the prompts, documentation files
    #    whole, all of them within the prompt's token budget.
    problem = _problem(rt, question, guidelines, source, spec, analyses)

    # 3, 4. Round 0; then verify, route, plan, code, execute until the plan is sufficient,
    #    the rounds run out, or a person accepts or stops.
    seed = previous.plan if previous else []
    outcome = loop.rounds(rt, problem, budget, seed_plan=seed)
    if outcome.status is Status.STOPPED:  # a person stopped the run: no answer
        return Solution(outcome.status, outcome.plan, None)

    # 5. Finalize: a script that states the answer in the required format, told how the
    #    rounds ended.
    final = loop.finalize(
        rt, problem, budget, outcome.plan, outcome.script, outcome.status, outcome.reason
    )
    return Solution(outcome.status, outcome.plan, final)


def _problem(
    rt: Runtime,
    question: str,
    guidelines: str,
    source: DataSource,
    spec: RunSpec,
    analyses: list[dict[str, Any]],
) -> Problem:
    """Step 2: the files the agents see, noted in the run's record."""
    bounds = spec.retrieval
    files = whole_documents(analyses, source.mount_dir, bounds.max_document_chars)
    similarity = spec.embedding.similarity(rt.run_id) if spec.embedding else None
    context = retrieve(question, files, bounds.top_k, bounds.max_description_chars, similarity)
    model = spec.llm["planner"]["model"] or ""
    fitted = fit_context(
        question, context, bounds.context_tokens, lambda text: count_tokens(model, text)
    )
    rt.note(files_considered=[f.path for f in context], context_left_out=fitted.left_out)
    rt.say(Retrieved([f.path for f in context], total=len(files)))
    return Problem(question, guidelines, fitted.files, spec.libraries)
