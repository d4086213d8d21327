"""Finalyzer: turns the last script into one that states the answer in the required format
(on a `FINAL ANSWER:` line, see `dsstar.algorithm.answer`)."""

from __future__ import annotations

import re

from dsstar.algorithm.agents._base import (
    PROMPT_CODE_CHARS,
    PROMPT_OUTPUT_CHARS,
    Agent,
    FileInfo,
    clip,
)
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import extract_code
from dsstar.model.llm import Message

__all__ = ["AGENT", "asked_files", "parse", "render"]

# A file name with a suffix a script would write: result.csv, revenue.png, out/model.pkl.
_NAMED = re.compile(r"(?<![\w/.-])((?:[\w-]+/)?[\w.-]*\w\.(?:csv|tsv|parquet|xlsx|xls|json|png"
                    r"|jpe?g|svg|pdf|html|txt|md|npy|pkl|joblib|sqlite|db))\b", re.I)  # fmt: skip


def render(
    *,
    question: str,
    guidelines: str,
    files: list[FileInfo],
    plan: list[str],
    code: str,
    output: str,
    max_output_chars: int = PROMPT_OUTPUT_CHARS,
    status: str = "verified",
    reason: str = "",
    asked: list[str] | None = None,
) -> list[Message]:
    """Ask for the final script that states the answer, following `guidelines`. `status` says
    how the rounds ended (verified, max_rounds, accepted, not_applicable, with `reason`);
    `asked`: the file names the question or the guidelines ask for, which it must write."""
    return _render(
        "finalyzer",
        status=status,
        reason=reason,
        question=question,
        guidelines=guidelines,
        files=files,
        plan=plan,
        code=clip(code, PROMPT_CODE_CHARS),
        output=clip(output, max_output_chars),
        asked=asked or [],
    )


def parse(text: str) -> str | None:
    """The final script, or None (a failed attempt the debugger can repair)."""
    return extract_code(text)


def asked_files(*texts: str) -> list[str]:
    """The file names a question or its guidelines mention, in order, once each."""
    found: list[str] = []
    for text in texts:
        for name in _NAMED.findall(text or ""):
            if name not in found and not name.startswith("data/"):
                found.append(name)
    return found


AGENT = Agent("finalyzer", ("finalyzer",), parse)
