"""What every agent shares: template rendering, code extraction (see `_reading`) and prompt
hashing."""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from dsstar.model.llm import Message
from dsstar.settings import default

# The templates are package data of the top-level `prompts` package, installed or not.
PROMPTS_DIR = Path(str(importlib.resources.files("prompts")))


# Output shown to an agent is clipped: the head says what ran, the tail holds the traceback.
PROMPT_OUTPUT_CHARS = default("max_output_chars")
# Code quoted in a prompt: far above any real script, but a runaway reply stays bounded.
PROMPT_CODE_CHARS = 40_000
# A plan step is one or two sentences; a longer reply is cut before it enters every prompt.
PLAN_STEP_CHARS = 2000
# A person's guidance between rounds enters two prompts; a pasted essay is cut.
GUIDANCE_CHARS = 4000


@dataclass(frozen=True)
class Agent:
    """An agent, defined once, in its own module: `name` (what the model settings and the
    X-DSStar-Agent header call it), the `templates` of `prompts/` it renders, and `parse`,
    which turns any reply into its result."""

    name: str
    templates: tuple[str, ...]
    parse: Callable[..., Any]


@dataclass(frozen=True)
class FileInfo:
    """A data file as the agents see it: its path inside the sandbox and its description."""

    path: str
    description: str


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROMPTS_DIR),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,
    )


def render(template: str, **variables: Any) -> list[Message]:
    """Render `prompts/<template>.j2` into a single user message."""
    text = _environment().get_template(f"{template}.j2").render(**variables)
    return [{"role": "user", "content": text.strip() + "\n"}]


def clip(text: str, limit: int = PROMPT_OUTPUT_CHARS) -> str:
    """Keep the head and the tail of a long text, saying how much was left out."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return f"[{len(text)} characters left out]"
    head = limit * 2 // 5
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit} characters left out] ...\n{text[-tail:]}"
