"""Finalyzer: turns the last script into one that prints the answer in the required format."""

from __future__ import annotations

from ..llm import Message
from ._base import FileInfo, clip, extract_code
from ._base import render as _render

__all__ = ["parse", "render"]


def render(
    *,
    question: str,
    guidelines: str,
    files: list[FileInfo],
    plan: list[str],
    code: str,
    output: str,
) -> list[Message]:
    """Ask for the final script that prints only the answer, following `guidelines`."""
    return _render(
        "finalyzer",
        question=question,
        guidelines=guidelines,
        files=files,
        plan=plan,
        code=code,
        output=clip(output),
    )


def parse(text: str) -> str | None:
    """The final script, or None (a failed attempt the debugger can repair)."""
    return extract_code(text)
