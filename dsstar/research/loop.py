"""The method of DS-STAR+, whole, free of Prefect:

1. (the files were analyzed once, before: their descriptions are `files`)
2. the decomposer breaks the open question into factoid sub-questions (JSON);
3. each is answered by a DS-STAR run, all of a pass at once (`ReportRuntime.answer`);
4. the writer drafts a markdown report that cites each answer by number;
5. for each refinement: the critic reviews the draft (told what dsstar's own checks found:
   numbers no cited answer holds, answers left uncited) and proposes complementary
   sub-questions where the report is thin; they are answered, and the report is rewritten.
   A critic that finds nothing ends the refinements early.

A sub-run that fails or is not verified is an answer like another, cited as such. Once the
report's spending ceiling is reached (`ReportRuntime.stop_reason`), no new sub-question
starts, and the report is written from what was answered; a call the ceiling refuses
(OverBudget) ends that stage: without a draft the answers stand alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dsstar.algorithm import agents
from dsstar.algorithm.agents import FileInfo
from dsstar.algorithm.agents.critic import Critique
from dsstar.algorithm.context import fit_context, retrieve
from dsstar.algorithm.context_budget import whole_documents
from dsstar.algorithm.spec import RunSpec
from dsstar.errors import OverBudget
from dsstar.model.llm import Message, count_tokens
from dsstar.research.assemble import build_report
from dsstar.research.subs import SubAnswer, SubQuestion, numbered

__all__ = ["Bounds", "Research", "ReportRuntime", "draft_checks", "report_files", "research"]


class ReportRuntime(Protocol):
    """What the method needs from where it runs: the flow's (flows/report.py), a test's."""

    def ask(self, agent: str, label: str, messages: list[Message]) -> str:
        """The model's reply to `messages` (label: the call's name); OverBudget when the
        report's ceiling refuses it."""
        ...

    def answer(self, subs: list[SubQuestion]) -> list[SubAnswer]:
        """Each sub-question answered by its own DS-STAR run, at once, in order; a run that
        fails is an answer with its status, and one the ceiling kept from starting is
        `skipped`. Never raises for one sub-run."""
        ...

    def stop_reason(self) -> str | None:
        """Why no new sub-question may start (the ceiling was reached), or None."""
        ...

    def drafted(self, round: int, body: str | None, critique: Critique | None) -> None:
        """A draft was written in `round` (after `critique`, from round 1 on): kept, shown."""
        ...


@dataclass(frozen=True)
class Bounds:
    """How many sub-questions the decomposer may ask, how many more each review may add,
    and how many reviews (refinement passes) there are at most."""

    sub_questions: int = 5
    follow_ups: int = 3
    refinements: int = 2


@dataclass
class Research:
    """What the method produced: every sub-answer (by number), the last draft (None when
    none could be written), the critiques, and why it stopped early (None: it did not)."""

    answers: list[SubAnswer] = field(default_factory=list)
    body: str | None = None
    critiques: list[Critique] = field(default_factory=list)
    stopped: str | None = None


def research(
    rt: ReportRuntime, question: str, guidelines: str, files: list[FileInfo], bounds: Bounds
) -> Research:
    """Answer the open `question` with a report (see the module)."""
    done = Research()
    try:
        proposed = _decompose(rt, question, guidelines, files, bounds.sub_questions)
    except OverBudget as exc:
        done.stopped = str(exc)
        return done
    subs = numbered(proposed, [], bounds.sub_questions, round=0)
    done.answers = rt.answer(subs)
    done.body = _write(rt, 0, question, guidelines, done, issues=[])
    rt.drafted(0, done.body, None)
    for round in range(1, bounds.refinements + 1):
        if done.body is None or rt.stop_reason():
            break
        checks = draft_checks(question, guidelines, done.body, done.answers)
        try:
            critique = _criticize(rt, round, question, guidelines, done, checks, bounds)
        except OverBudget as exc:
            done.stopped = str(exc)
            break
        done.critiques.append(critique)
        asked = [a.sub for a in done.answers]
        new = numbered(critique.sub_questions, asked, bounds.follow_ups, round=round)
        if not new and not critique.issues and not checks:
            break  # nothing to fix, nothing to add: the draft is the report
        if new:
            done.answers += rt.answer(new)
        rewritten = _write(rt, round, question, guidelines, done, critique.issues + checks)
        done.body = rewritten or done.body
        rt.drafted(round, done.body, critique)
    done.stopped = done.stopped or rt.stop_reason()
    return done


def _decompose(
    rt: ReportRuntime, question: str, guidelines: str, files: list[FileInfo], most: int
) -> list[dict[str, str]]:
    """The decomposer's sub-questions; a reply with none is asked once more, and then the
    question itself is the one sub-question (a report still comes of it)."""
    messages = agents.decomposer.render(
        question=question, guidelines=guidelines, files=files, most=most
    )
    for label in ("decomposer", "decomposer #1"):
        items = agents.decomposer.parse(rt.ask("decomposer", label, messages))
        if items:
            return items
    return [{"question": question, "guidelines": ""}]


def _write(
    rt: ReportRuntime,
    round: int,
    question: str,
    guidelines: str,
    done: Research,
    issues: list[str],
) -> str | None:
    """The writer's draft of `round` (a rewrite of the last one after round 0); None when
    the ceiling refused the call or the reply held no report (the last draft stands)."""
    messages = agents.writer.render(
        question=question,
        guidelines=guidelines,
        answers=[a.for_prompt() for a in done.answers],
        draft=(done.body or "") if round else "",
        issues=issues,
    )
    try:
        return agents.writer.parse(rt.ask("writer", f"writer {round}", messages))
    except OverBudget as exc:
        done.stopped = done.stopped or str(exc)
        return None


def _criticize(
    rt: ReportRuntime,
    round: int,
    question: str,
    guidelines: str,
    done: Research,
    checks: list[str],
    bounds: Bounds,
) -> Critique:
    messages = agents.critic.render(
        question=question,
        guidelines=guidelines,
        answers=[a.for_prompt() for a in done.answers],
        report=done.body or "",
        checks=checks,
        most=bounds.follow_ups,
    )
    return agents.critic.parse(rt.ask("critic", f"critic {round}", messages))


def draft_checks(question: str, guidelines: str, body: str, answers: list[SubAnswer]) -> list[str]:
    """What dsstar's own checks find in a draft: numbers that no cited answer holds,
    citations of no answer, answered sub-questions it never cites."""
    report = build_report(question, body, answers, [], context=f"{question}\n{guidelines}")
    found = report.checks()
    uncited = [a.number for a in answers if a.answered and a.number not in report.cited]
    if uncited:
        found.append("answers the report never cites: " + ", ".join(f"[{n}]" for n in uncited))
    return found


def report_files(
    question: str, analyses: list[dict[str, Any]], mount_dir: Path | None, spec: RunSpec
) -> list[FileInfo]:
    """The files the decomposer sees, as a DS-STAR run's agents would (step 2 of Algorithm
    1): documentation whole, the top-K descriptions, within the prompt's token budget."""
    bounds = spec.retrieval
    files = whole_documents(analyses, mount_dir, bounds.max_document_chars)
    context = retrieve(question, files, bounds.top_k, bounds.max_description_chars)
    model = spec.llm["decomposer"]["model"] or ""
    fitted = fit_context(
        question, context, bounds.context_tokens, lambda text: count_tokens(model, text)
    )
    return fitted.files
