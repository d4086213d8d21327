"""Reader: describes a chart a script saved from the image itself, for the agents that cannot
see it (the verifier) and for whoever reads the run's record. Only a model that sees images is
asked (`Calls.image`); the image goes with the prompt as a data: URL of the bytes kept."""

from __future__ import annotations

import base64

from dsstar.algorithm.agents._base import Agent, clip
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import split_thinking
from dsstar.model.llm import Message

__all__ = ["AGENT", "IMAGE_TYPES", "image_type", "parse", "render"]

# The formats a model's image input takes, by the bytes they start with (not by the name the
# script gave the file); an SVG or PDF chart is not shown to the reader.
IMAGE_TYPES = {b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg"}
# A description longer than this is cut before it enters the verifier's prompt and the record.
READING_CHARS = 4000


def image_type(data: bytes) -> str | None:
    """The media type of an image a model can be shown, from its first bytes; None otherwise."""
    return next((kind for start, kind in IMAGE_TYPES.items() if data.startswith(start)), None)


def render(*, name: str, question: str, data: bytes, kind: str) -> list[Message]:
    """Ask for a description of the image `data` (of media type `kind`), saved as `name`."""
    [message] = _render("reader", name=name, question=clip(question, 4000))
    url = f"data:{kind};base64,{base64.b64encode(data).decode('ascii')}"
    parts = [{"type": "text", "text": message["content"]},
             {"type": "image_url", "image_url": {"url": url}}]  # fmt: skip
    return [{"role": "user", "content": parts}]


def parse(text: str) -> str | None:
    """The description (thinking blocks left out), cut at READING_CHARS; None when empty."""
    reading = split_thinking(text or "")[0].strip()
    return clip(reading, READING_CHARS) if reading else None


AGENT = Agent("reader", ("reader",), parse)
