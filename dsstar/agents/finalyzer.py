"""Finalyzer: turns the last script into one that prints the answer in the required format."""

from __future__ import annotations

from ..llm import Message
from ._base import PROMPT_CODE_CHARS, PROMPT_OUTPUT_CHARS, FileInfo, clip
from ._base import render as _render
from ._reading import extract_code

__all__ = ["parse", "render"]


def render(
    *,
    question: str,
    guidelines: str,
    files: list[FileInfo],
    plan: list[str],
    code: str,
    output: str,
    max_output_chars: int = PROMPT_OUTPUT_CHARS,
) -> list[Message]:
    """Ask for the final script that prints only the answer, following `guidelines`."""
    return _render(
        "finalyzer",
        question=question,
        guidelines=guidelines,
        files=files,
        plan=plan,
        code=clip(code, PROMPT_CODE_CHARS),
        output=clip(output, max_output_chars),
    )


def parse(text: str) -> str | None:
    """The final script, or None (a failed attempt the debugger can repair)."""
    return extract_code(text)
