"""Debugger: repairs a failing script. The analyzer variant sees the traceback only; the
solution variant also sees the file descriptions, which usually hold the fix (column names,
sheet names, table schemas)."""

from __future__ import annotations

from collections.abc import Sequence

from dsstar.algorithm.agents._base import PROMPT_CODE_CHARS, Agent, FileInfo, clip
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import extract_code
from dsstar.model.llm import Message

__all__ = ["AGENT", "parse", "render_analyzer", "render_solution"]


def render_analyzer(
    *, path: str, code: str, error: str, libraries: Sequence[str] = ()
) -> list[Message]:
    """Ask for a repaired description script, with the standard library and `libraries`."""
    return _render(
        "debugger_analyzer",
        path=path,
        code=clip(code, PROMPT_CODE_CHARS),
        error=clip(error),
        libraries=list(libraries),
    )


def render_solution(
    *,
    question: str,
    code: str,
    error: str,
    files: list[FileInfo],
    plan: list[str] | None = None,
    base_code: str = "",
    guidelines: str = "",
    libraries: Sequence[str] = (),
) -> list[Message]:
    """Ask for a repaired solution script. `plan` says what the script must do; without a
    script (the coder's reply had none) the debugger writes it from the plan and `base_code`.
    The final script's debugger also sees the answer's `guidelines`; every one is told the
    `libraries` the scripts' interpreter has (a missing module is then no mystery)."""
    return _render(
        "debugger_solution",
        question=question,
        code=clip(code, PROMPT_CODE_CHARS),
        error=clip(error),
        files=files,
        plan=plan or [],
        base_code=clip(base_code, PROMPT_CODE_CHARS),
        guidelines=guidelines,
        libraries=list(libraries),
    )


def parse(text: str) -> str | None:
    """The repaired script, or None (the attempt failed)."""
    return extract_code(text)


AGENT = Agent("debugger", ("debugger_analyzer", "debugger_solution"), parse)
