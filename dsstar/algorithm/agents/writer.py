"""Writer: drafts the report, in markdown, from the numbered answers of the sub-questions,
citing each as [N]; asked again after a review, with its draft and the reviewer's findings.

The reply is read as markdown; dsstar never shows it as markdown as it stands: the report
is rebuilt from its text (`dsstar.research.document`), so no link, image or HTML of the
reply survives."""

from __future__ import annotations

import re
from typing import Any

from dsstar.algorithm.agents._base import Agent, clip
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import fenced_blocks, split_thinking
from dsstar.model.llm import Message

__all__ = ["AGENT", "REPORT_CHARS", "parse", "render"]

# A report is a few pages at most; a runaway reply is cut before it enters the next prompt.
REPORT_CHARS = 40_000
_MARKDOWN = {"markdown", "md", "mdx", ""}
# "Here is the report:", "Sure! Below is the revised report." before the report itself.
_PREAMBLE = re.compile(
    r"^(?:sure|certainly|of course|okay|ok|here(?:'s| is| are)|below is|i(?:'ve| have))\b[^\n]*\n+",
    re.I,
)
# A references section of the writer's own: dsstar adds the references itself.
_OWN_REFERENCES = re.compile(
    r"^#{1,6}\s*(?:references|sources|citations)\b.*\Z", re.I | re.M | re.S
)


def render(
    *,
    question: str,
    guidelines: str,
    answers: list[dict[str, Any]],
    draft: str = "",
    issues: list[str] | None = None,
) -> list[Message]:
    """Ask for the report of `question` from `answers` (each {number, question, answered,
    status, answer, error, files}); with `draft`, a rewrite that fixes `issues`."""
    return _render(
        "writer",
        question=question,
        guidelines=guidelines,
        answers=answers,
        draft=clip(draft, REPORT_CHARS),
        issues=[clip(issue, 1000) for issue in issues or []],
    )


def parse(text: str) -> str | None:
    """The report of a reply: without thinking, a polite preamble, the fence a model may put
    around the whole of it, or a references section of its own; None when empty."""
    visible = split_thinking(text or "")[0].strip()
    blocks = fenced_blocks(visible)
    tagged = [body for lang, body in blocks if lang in _MARKDOWN - {""}]
    bare = [body for lang, body in blocks if not lang]
    if tagged:  # the report in a ```markdown fence, whatever is said around it
        visible = max(tagged, key=len)
    elif bare and len(max(bare, key=len)) > len(visible) / 2:  # fenced, untagged
        visible = max(bare, key=len)
    elif "\n#" in visible or visible.startswith("#"):
        visible = _PREAMBLE.sub("", visible, count=1)
    visible = _OWN_REFERENCES.sub("", visible).strip()
    return clip(visible, REPORT_CHARS) or None


AGENT = Agent("writer", ("writer",), parse)
