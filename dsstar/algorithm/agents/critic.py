"""Critic: reviews a draft report against its cited answers, and proposes complementary
sub-questions where the report is thin (DS-STAR+'s refinement), as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsstar.algorithm.agents._base import Agent, clip
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import json_value
from dsstar.algorithm.agents.decomposer import read_items
from dsstar.algorithm.agents.writer import REPORT_CHARS
from dsstar.model.llm import Message

__all__ = ["AGENT", "Critique", "parse", "render"]

_ISSUE_CHARS = 1000
_ISSUE_KEYS = ("issues", "problems", "findings", "gaps")


@dataclass(frozen=True)
class Critique:
    """What the critic found (`issues`, for the writer) and the sub-questions it proposes
    (each {"question", "guidelines"}); both empty: the report is complete."""

    issues: list[str] = field(default_factory=list)
    sub_questions: list[dict[str, str]] = field(default_factory=list)


def render(
    *,
    question: str,
    guidelines: str,
    answers: list[dict[str, Any]],
    report: str,
    checks: list[str],
    most: int,
) -> list[Message]:
    """Ask for the problems of `report` and at most `most` new sub-questions; `checks` are
    what dsstar's own checks found (numbers no cited answer holds, answers left uncited)."""
    return _render(
        "critic",
        question=question,
        guidelines=guidelines,
        answers=answers,
        report=clip(report, REPORT_CHARS),
        checks=checks,
        most=most,
    )


def parse(text: str) -> Critique:
    """The critique of a reply: a JSON object with issues and sub_questions (or a list,
    read as sub-questions); an empty Critique when the reply holds neither."""
    value = json_value(text)
    issues: list[str] = []
    if isinstance(value, dict):
        lowered = {str(k).lower(): v for k, v in value.items()}
        found = next((lowered[k] for k in _ISSUE_KEYS if isinstance(lowered.get(k), list)), [])
        issues = [clip(" ".join(str(i).split()), _ISSUE_CHARS) for i in found if str(i).strip()]
    return Critique(issues, read_items(value) if value is not None else [])


AGENT = Agent("critic", ("critic",), parse)
