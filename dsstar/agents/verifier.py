"""Verifier: judges whether the plan, as implemented and executed, answers the question."""

from __future__ import annotations

import re

from ..llm import Message
from ._base import PROMPT_CODE_CHARS, PROMPT_OUTPUT_CHARS, clip
from ._base import render as _render

__all__ = ["parse", "render"]


def render(
    *,
    question: str,
    plan: list[str],
    code: str,
    output: str,
    max_output_chars: int = PROMPT_OUTPUT_CHARS,
) -> list[Message]:
    """Ask Yes/No: is this plan sufficient, judged by its code and its output?"""
    return _render(
        "verifier",
        question=question,
        plan=plan,
        code=clip(code, PROMPT_CODE_CHARS),
        output=clip(output, max_output_chars),
    )


def parse(text: str) -> bool:
    """True only when the first word is yes (any case or punctuation); anything else is No."""
    first = re.search(r"[A-Za-z]+", text or "")
    return bool(first) and first.group().lower() == "yes"
