"""Planner: proposes the first step, or the next step given the plan and the last result."""

from __future__ import annotations

import re

from dsstar.algorithm.agents._base import (
    GUIDANCE_CHARS,
    PLAN_STEP_CHARS,
    PROMPT_OUTPUT_CHARS,
    Agent,
    FileInfo,
    clip,
)
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import split_thinking
from dsstar.model.llm import Message

__all__ = ["AGENT", "parse", "render_initial", "render_next", "unanswerable"]

# List markers, headings and the model's own labels: "Step 2:", "Step #2:", "Step 2 -".
_LEAD = re.compile(
    r"^\s*(?:[-*•]\s+|\d+[.)]\s*|#+\s*"
    r"|(?:(?:next|first|new)\s+)?step\s*#?\s*\d*\s*[:.)\-\u2013\u2014]\s*)+",
    re.I,
)
# A preamble that announces the step: "Based on the output, the next step is:", "Here is
# the first step:", "**Next step:**". Up to the colon (or "is") it goes.
_PREAMBLE = re.compile(
    r"^[^\n]{0,200}?\b(?:next|first|new|following|proposed|one)\s+step\b[^\n:]{0,60}?"
    r"(?:\bis\b|\bwould\s+be\b|\bshould\s+be\b|:)[*_\s:]*(?:to\s+(?=\w))?",
    re.I,
)
_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+", re.M)
# A paragraph that explains the step rather than being it.
_RATIONALE = re.compile(
    r"^\W*(?:rationale|reason(?:ing)?|why|explanation|justification|note|this\s+(?:will|step)"
    r"|that\s+way)\b",
    re.I,
)
# The planner's way of saying that the files cannot answer the question (see the prompts).
_UNANSWERABLE = re.compile(r"^\W*not\s+applicable\b[\W]*(?P<why>.*)", re.I | re.DOTALL)


def render_initial(
    *, question: str, files: list[FileInfo], previous_plan: list[str]
) -> list[Message]:
    """Ask for one simple first step (optionally seeded by a plan that worked before)."""
    return _render("planner_initial", question=question, files=files, previous_plan=previous_plan)


def render_next(
    *,
    question: str,
    files: list[FileInfo],
    plan: list[str],
    last_output: str,
    max_output_chars: int = PROMPT_OUTPUT_CHARS,
    guidance: str = "",
    dropped: list[str] | None = None,
    why: str = "",
) -> list[Message]:
    """Ask for the one step that best moves the plan forward, given the last execution result
    (and the user's guidance, when a person gave some after the last round).

    After a backtrack, `dropped` are the steps cut from the plan and `why` the router's
    reply: the last output came from the script that still implemented them, and the
    planner is told so, lest it propose the same wrong step again. With an empty plan (step
    1 was wrong) this asks for a new first step, still conditioned on the last result, as
    in Algorithm 1 of the paper."""
    return _render(
        "planner_next",
        question=question,
        files=files,
        plan=plan,
        last_output=clip(last_output, max_output_chars),
        guidance=clip(guidance, GUIDANCE_CHARS),
        dropped=[clip(step, PLAN_STEP_CHARS) for step in dropped or []],
        first_dropped=len(plan) + 1,
        why=clip(why, GUIDANCE_CHARS),
    )


def parse(text: str) -> str | None:
    """The step itself, cut to a bounded length; None when empty.

    Left out: thinking blocks, a preamble ("Based on the output, the next step is:"), list
    markers and "Step N:" labels, markdown emphasis, and paragraphs that explain the step.
    When the model listed several steps, the first is the next one."""
    visible = split_thinking(text or "")[0].strip().strip("`").strip()
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", visible) if p.strip()]
    # "Next step:" or a heading alone, the step in the paragraph after it.
    while len(paragraphs) > 1 and _is_label(paragraphs[0]):
        paragraphs.pop(0)
    lines = paragraphs[0].splitlines() if paragraphs else []
    if len(lines) > 1 and _is_label(lines[0]):  # "### Step 2" over the step
        paragraphs[0] = "\n".join(lines[1:])
    kept = [p for p in paragraphs[1:] if not _RATIONALE.match(p)]
    step = "\n\n".join(paragraphs[:1] + kept) if paragraphs else ""
    items = _ITEM.split(step)
    if len(items) > 2:  # a list of steps: the first item is the next one
        step = items[1] if not items[0].strip() or items[0].rstrip().endswith(":") else items[0]
    step = re.sub(r"(\*\*|__)(.+?)\1", r"\2", step)  # "**Step 3:**" is a label like any other
    step = _PREAMBLE.sub("", step, count=1)
    step = _LEAD.sub("", step, count=1).strip().strip('*_`"').strip()
    step = step[:1].upper() + step[1:]  # "…the next step is to compute" leaves "compute"
    return clip(step, PLAN_STEP_CHARS) or None


def _is_label(text: str) -> bool:
    """A line that introduces the step: ends with a colon, a markdown heading, or a few bold
    words ("**Next step**")."""
    text = text.strip()
    if "\n" in text:
        return False
    return (
        text.rstrip("*_ ").endswith(":")
        or text.startswith("#")
        or bool(re.fullmatch(r"(\*\*|__)[^*_.]{1,60}\1", text))
    )


def unanswerable(text: str) -> str | None:
    """The reason, when the planner replied that the files cannot answer the question ("Not
    Applicable: no merchant of that name in the data"); None otherwise."""
    visible = split_thinking(text or "")[0].strip().strip('*_`"').strip()
    said = _UNANSWERABLE.match(visible)
    if not said:
        return None
    return clip(said.group("why").strip(), PLAN_STEP_CHARS) or "the files cannot answer it"


AGENT = Agent("planner", ("planner_initial", "planner_next"), parse)
