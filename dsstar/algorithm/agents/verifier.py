"""Verifier: judges whether the plan, as implemented and executed, answers the question."""

from __future__ import annotations

from dsstar.algorithm.agents._base import (
    PROMPT_CODE_CHARS,
    PROMPT_OUTPUT_CHARS,
    Agent,
    FileInfo,
    clip,
)
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import yes_no
from dsstar.model.llm import Message

__all__ = ["AGENT", "parse", "read", "render", "render_again"]


def render(
    *,
    question: str,
    plan: list[str],
    code: str,
    output: str,
    max_output_chars: int = PROMPT_OUTPUT_CHARS,
    files: list[FileInfo] | None = None,
    outputs: str = "",
) -> list[Message]:
    """Ask Yes/No: is this plan sufficient, judged by its code and its output? The files
    open the prompt as they open every agent's (one prefix, cached by the provider).
    `outputs` says what the files the code wrote hold (tables, charts): the verifier sees no
    image, so a chart is judged by the reader's description of the saved image or, where none
    was made, by the one its script's figure hook reported, which the prompt says is the
    script's word."""
    return _render(
        "verifier",
        files=files or [],
        question=question,
        plan=plan,
        code=clip(code, PROMPT_CODE_CHARS),
        output=clip(output, max_output_chars),
        outputs=clip(outputs, max_output_chars),
    )


def render_again(messages: list[Message], reply: str) -> list[Message]:
    """The same request with the unclear reply and a reminder to answer Yes or No."""
    said = clip(reply, 2000)
    return [*messages, {"role": "assistant", "content": said}, *_render("verifier_again")]


def read(text: str) -> bool | None:
    """The verdict wherever the model put it (see `_reading.yes_no`); None when the reply
    said neither Yes nor No, so that the caller can ask once more."""
    return yes_no(text)


def parse(text: str) -> bool:
    """The verdict; an unclear reply reads as No (the plan is not shown to be sufficient)."""
    return bool(read(text))


AGENT = Agent("verifier", ("verifier", "verifier_again"), parse)
