"""Planner: proposes the first step, or the next step given the plan and the last result."""

from __future__ import annotations

import re

from ..llm import Message
from ._base import GUIDANCE_CHARS, PLAN_STEP_CHARS, PROMPT_OUTPUT_CHARS, FileInfo, clip
from ._base import render as _render

__all__ = ["parse", "render_initial", "render_next"]

_LEAD = re.compile(r"^\s*(?:[-*•]\s*|\d+[.)]\s*|(?:next\s+)?step\s*\d*\s*[:.)-]\s*)+", re.I)


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
) -> list[Message]:
    """Ask for the one step that best moves the plan forward, given the last execution result
    (and the user's guidance, when a person gave some after the last round).

    With an empty plan (step 1 was judged wrong and dropped) this asks for a new first step,
    still conditioned on the last result, as in Algorithm 1 of the paper."""
    return _render(
        "planner_next",
        question=question,
        files=files,
        plan=plan,
        last_output=clip(last_output, max_output_chars),
        guidance=clip(guidance, GUIDANCE_CHARS),
    )


def parse(text: str) -> str | None:
    """The step text without list markers or a "Step N:" prefix, cut to a bounded length;
    None when empty."""
    step = (text or "").strip().strip("`").strip()
    step = _LEAD.sub("", step, count=1).strip()
    return clip(step, PLAN_STEP_CHARS) or None
