"""Coder: implements the plan as one complete script, building on the code of the earlier steps."""

from __future__ import annotations

from collections.abc import Sequence

from dsstar.algorithm.agents._base import PROMPT_CODE_CHARS, Agent, FileInfo, clip
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import extract_code
from dsstar.model.llm import Message

__all__ = ["AGENT", "parse", "render_again", "render_initial", "render_next"]


def render_initial(
    *, question: str, files: list[FileInfo], step: str, libraries: Sequence[str] = ()
) -> list[Message]:
    """Ask for a script implementing the first step, with the standard library and
    `libraries` (what the scripts' interpreter has)."""
    return _render(
        "coder_initial", question=question, files=files, step=step, libraries=list(libraries)
    )


def render_next(
    *,
    question: str,
    files: list[FileInfo],
    plan: list[str],
    base_code: str,
    libraries: Sequence[str] = (),
) -> list[Message]:
    """Ask for a full script implementing the whole plan, extending `base_code`."""
    return _render(
        "coder_next",
        question=question,
        files=files,
        plan=plan,
        base_code=clip(base_code, PROMPT_CODE_CHARS),
        libraries=list(libraries),
    )


def render_again(messages: list[Message], reply: str) -> list[Message]:
    """The same request with the reply that held no code and a reminder to send the script."""
    said = clip(reply, 2000)
    return [*messages, {"role": "assistant", "content": said}, *_render("coder_again")]


def parse(text: str) -> str | None:
    """The script, or None (a failed attempt the debugger can repair)."""
    return extract_code(text)


AGENT = Agent("coder", ("coder_initial", "coder_next", "coder_again"), parse)
