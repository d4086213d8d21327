"""The answer a final script states, read from its output.

The finalyzer's script states its answer on a line of its own, ``FINAL ANSWER: <value>``, so
that whatever else it prints (a progress line, a warning, a debug value) never becomes the
answer. An empty value is an answer: DABStep asks for an empty string when the answer is an
empty list. A script whose output states no answer has none, except one that printed a
single line and nothing else (the paper's finalyzer prints only the answer): that line is it.
"""

from __future__ import annotations

import re

__all__ = ["MARKER", "stated_answer", "states_answer"]

MARKER = "FINAL ANSWER:"

# Markdown emphasis around the marker is tolerated: some models print "**FINAL ANSWER:**".
_STATED = re.compile(r"^[ \t*_]*FINAL ANSWER:[*_]*[ \t]?(?P<value>.*?)[ \t]*$", re.M)


def stated_answer(stdout: str) -> str | None:
    """The last answer `stdout` states ("" when stated empty); None when it states none."""
    stated = _STATED.findall(stdout or "")
    if stated:
        return stated[-1].strip()
    lines = [line.strip() for line in (stdout or "").splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 else None


def states_answer(stdout: str) -> bool:
    """Whether `stdout` states an answer on a `FINAL ANSWER:` line of its own (a single line
    printed and nothing else, which `stated_answer` also takes, does not count)."""
    return _STATED.search(stdout or "") is not None
