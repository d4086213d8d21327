"""Analyzer: writes a script that loads one data file and prints its essential properties."""

from __future__ import annotations

from collections.abc import Sequence

from dsstar.algorithm.agents._base import Agent
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import extract_code
from dsstar.model.llm import Message

__all__ = ["AGENT", "parse", "render"]


def render(*, path: str, format: str, libraries: Sequence[str] = ()) -> list[Message]:
    """Ask for a description script for the file at `path` (relative to the sandbox), using
    the standard library and `libraries` (what the scripts' interpreter has)."""
    return _render("analyzer", path=path, format=format, libraries=list(libraries))


def parse(text: str) -> str | None:
    """The script, or None (a failed attempt the debugger can repair)."""
    return extract_code(text)


AGENT = Agent("analyzer", ("analyzer",), parse)
