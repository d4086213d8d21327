"""What a report may cost, before any model call (`dsstar report --estimate`), and the room its
writer keeps under the report's ceiling.

A report's calls: the file analysis (as `dsstar describe --estimate` counts it: the analyzer
calls of the files the catalog does not know), the decomposer, each sub-question's DS-STAR
run (assumed to take `SUB_RUN_ROUNDS` rounds: planner, coder and verifier in round 0; router,
planner, coder and verifier in each further round; the finalyzer), and per refinement pass
the critic, its follow-up sub-questions and the writer again. A prompt is counted with the
model's tokenizer: the file descriptions and the question, plus `OVERHEAD_TOKENS` of
instructions, code and output; a reply is `REPLY_TOKENS` long.

The ceiling (`dsstar.model.ceiling`) lets a call through only while its bound (its prompt and
its whole output limit, down to the least it may ask for) fits in what is left, and the writer
keeps the room of its last draft (`writer_reserve`): the cost a report needs is what it is
likely to spend plus that headroom (`needed_usd`). A ceiling below it stops new sub-questions
before they are all answered.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from dsstar.algorithm import agents
from dsstar.algorithm.estimate import REPLY_TOKENS, estimate_describe
from dsstar.algorithm.spec import RunSpec
from dsstar.data.sources import DataSource
from dsstar.model.ceiling import Ceiling
from dsstar.model.llm import count_tokens
from dsstar.model.pricing import Estimate, estimate, price
from dsstar.research.loop import Bounds
from dsstar.research.subs import ANSWER_CHARS

__all__ = ["ReportEstimate", "estimate_report", "lowered", "writer_reserve"]

SUB_RUN_ROUNDS = 2  # round 0 and one refinement round: what a factoid sub-question takes
OVERHEAD_TOKENS = 1500  # a prompt's instructions, plan, code and output besides the files
_DRAFT_CHARS = 12_000  # a report's draft, as a rewrite's prompt holds it


@dataclass(frozen=True)
class ReportEstimate:
    """A report's likely calls, tokens and cost, and the ceiling it needs to run whole
    (`needed_usd`, `needed_tokens`: None without a price)."""

    files: int
    analyzer_calls: int
    sub_questions: int
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    needed_usd: float | None
    needed_tokens: int
    writer_room_usd: float | None  # kept for the last draft, under the ceiling
    call_bound_usd: float | None  # the least room one call needs to be sent
    model: str

    def to_dict(self) -> dict:
        return asdict(self)


def sub_run_calls(rounds: int = SUB_RUN_ROUNDS) -> int:
    """The model calls of a sub-question's run of `rounds` rounds."""
    return 3 + 4 * (rounds - 1) + 1


def estimate_report(
    spec: RunSpec, source: DataSource, question: str, guidelines: str, bounds: Bounds
) -> ReportEstimate:
    """Estimate a report of `question` over `source` under `spec` (see the module)."""
    described = estimate_describe(spec, source)
    model = spec.llm["planner"]["model"] or ""
    files = described.files
    context = count_tokens(model, question + guidelines) + OVERHEAD_TOKENS
    context += _descriptions_tokens(spec, source, model)
    subs = bounds.sub_questions + bounds.refinements * bounds.follow_ups
    # decomposer; the sub-runs; writer after every pass; critic at every refinement
    own = 1 + (1 + bounds.refinements) + bounds.refinements
    calls = own + subs * sub_run_calls(min(SUB_RUN_ROUNDS, spec.budget.max_rounds + 1))
    inputs = calls * context + described.input_tokens
    outputs = calls * REPLY_TOKENS + described.output_tokens
    likely = price(model, inputs, outputs)
    room = writer_reserve(spec, question, guidelines, subs)
    call = estimate(model, [{"role": "user", "content": "x" * (4 * context)}]).at_least()
    needed = None if likely is None or room.cost_usd is None or call.cost_usd is None else (
        round(likely + room.cost_usd + call.cost_usd, 6)
    )  # fmt: skip
    return ReportEstimate(
        files=files,
        analyzer_calls=described.calls,
        sub_questions=subs,
        calls=calls + described.calls,
        input_tokens=inputs,
        output_tokens=outputs,
        cost_usd=None if likely is None else round(likely, 6),
        needed_usd=needed,
        needed_tokens=inputs + outputs + room.tokens + call.tokens,
        writer_room_usd=None if room.cost_usd is None else round(room.cost_usd, 6),
        call_bound_usd=None if call.cost_usd is None else round(call.cost_usd, 6),
        model=model,
    )


def _descriptions_tokens(spec: RunSpec, source: DataSource, model: str) -> int:
    """The tokens of the file descriptions the prompts open with (those known; a file not
    described yet counts as its offline profile would, a few hundred tokens)."""
    from dsstar.algorithm.analysis import known_analyses

    files, found, missing = known_analyses(spec, source)
    text = "\n".join(str(record.get("description") or "") for record in found.values())
    known = count_tokens(model, text) if text else 0
    limit = spec.retrieval.context_tokens
    return min(known + 300 * len(missing), limit) if limit else known + 300 * len(missing)


def writer_reserve(spec: RunSpec, question: str, guidelines: str, answers: int) -> Estimate:
    """The least bound of the writer's rewrite of a report of `answers` answers: the room the
    report keeps under its ceiling for its last draft."""
    model = spec.llm["writer"]["model"] or ""
    shown = [
        {"number": n, "question": "x" * 200, "answered": True, "status": "verified",
         "answer": "x" * ANSWER_CHARS, "error": "", "files": []}
        for n in range(1, answers + 1)
    ]  # fmt: skip
    messages = agents.writer.render(
        question=question, guidelines=guidelines, answers=shown, draft="x" * _DRAFT_CHARS,
        issues=["x" * 300] * 3,
    )  # fmt: skip
    return estimate(model, messages).at_least()


def lowered(ceiling: Ceiling, room: Estimate) -> Ceiling:
    """`ceiling` less `room`: what the sub-runs, the decomposer and the critic may spend."""
    cost = None
    if ceiling.max_cost is not None:
        cost = round(ceiling.max_cost - (room.cost_usd or 0.0), 9)
    tokens = None if ceiling.max_tokens is None else ceiling.max_tokens - room.tokens
    return Ceiling(max_cost=cost, max_tokens=tokens)
