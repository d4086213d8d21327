"""One module per agent: `render(...)` builds the chat messages from its Jinja template in
`prompts/`, `parse(text)` turns any reply, however malformed, into a defined result."""

from dsstar.algorithm.agents import (
    analyzer,
    coder,
    debugger,
    finalyzer,
    planner,
    router,
    summarizer,
    verifier,
)
from dsstar.algorithm.agents._base import PROMPT_OUTPUT_CHARS, FileInfo, clip, render
from dsstar.algorithm.agents._reading import extract_code, split_thinking

__all__ = [
    "PROMPT_OUTPUT_CHARS",
    "FileInfo",
    "analyzer",
    "clip",
    "coder",
    "debugger",
    "extract_code",
    "finalyzer",
    "planner",
    "render",
    "router",
    "split_thinking",
    "summarizer",
    "verifier",
]
