"""Summarizer: shortens a long traceback to what the debugger needs."""

from __future__ import annotations

from dsstar.algorithm.agents._base import Agent, clip
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import split_thinking
from dsstar.model.llm import Message

__all__ = ["AGENT", "parse", "render"]


def render(*, error: str) -> list[Message]:
    """Ask for a short summary of the error."""
    return _render("summarizer", error=clip(error, 20000))


def parse(text: str) -> str | None:
    """The summary (thinking blocks left out); None when empty (the caller then falls back
    to the clipped traceback)."""
    return split_thinking(text or "")[0].strip() or None


AGENT = Agent("summarizer", ("summarizer",), parse)
