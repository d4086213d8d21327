"""Decomposer: breaks an open question into factoid sub-questions (DS-STAR+), as JSON.

Each sub-question is answered alone by a DS-STAR run; a report is then written from the
answers (`dsstar.research`). Replies are read the way models write them: a JSON list in a
```json fence with prose around it, a bare list, an object that holds the list, items that
are strings or objects, and as a last resort a numbered or bulleted list of questions."""

from __future__ import annotations

import re
from typing import Any

from dsstar.algorithm.agents._base import Agent, FileInfo, clip
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import json_value, split_thinking
from dsstar.model.llm import Message

__all__ = ["AGENT", "QUESTION_CHARS", "parse", "read_items", "render"]

# A sub-question is a sentence or two; a runaway one is cut before it becomes a run.
QUESTION_CHARS = 600
_FORMAT_CHARS = 300
_QUESTION_KEYS = ("question", "sub_question", "subquestion", "text", "q")
_FORMAT_KEYS = ("format", "guidelines", "answer_format", "expected_format")
_LIST_KEYS = ("sub_questions", "subquestions", "questions", "items", "follow_ups")
# "1. What ...?", "- What ...?", "* **Q2:** What ...?"
_LISTED = re.compile(
    r"^\s*(?:[-*•]|\d+[.)])\s+(?:\*\*)?(?:Q\d+[:.]\s*)?(?:\*\*)?\s*(.+\?)\s*$", re.M
)


def render(*, question: str, guidelines: str, files: list[FileInfo], most: int) -> list[Message]:
    """Ask for at most `most` factoid sub-questions of `question`, each answerable from the
    files alone; `guidelines` say what the report must look like (an outline, say)."""
    return _render("decomposer", question=question, guidelines=guidelines, files=files, most=most)


def parse(text: str) -> list[dict[str, str]]:
    """The sub-questions of a reply, in its order: each {"question", "guidelines"} (the
    format the decomposer asked of its answer, "" when none). Empty when it holds none."""
    value = json_value(text)
    items = read_items(value) if value is not None else []
    if items:
        return items
    visible = split_thinking(text or "")[0]
    return [{"question": clip(q.strip("*_ "), QUESTION_CHARS), "guidelines": ""}
            for q in _LISTED.findall(visible)]  # fmt: skip


def read_items(value: Any) -> list[dict[str, str]]:
    """Sub-questions from a JSON value: a list of strings or objects, or an object holding
    such a list (under "sub_questions", "questions", ...). The critic's replies use it too."""
    if isinstance(value, dict):
        lowered = {str(k).lower(): v for k, v in value.items()}
        value = next((lowered[k] for k in _LIST_KEYS if isinstance(lowered.get(k), list)), None)
        if value is None and any(k in lowered for k in _QUESTION_KEYS):
            value = [lowered]  # one sub-question alone
    if not isinstance(value, list):
        return []
    items = []
    for item in value:
        question, guidelines = _item(item)
        if question:
            items.append({"question": clip(question, QUESTION_CHARS),
                          "guidelines": clip(guidelines, _FORMAT_CHARS)})  # fmt: skip
    return items


def _item(item: Any) -> tuple[str, str]:
    if isinstance(item, str):
        return " ".join(item.split()), ""
    if not isinstance(item, dict):
        return "", ""
    lowered = {str(k).lower(): v for k, v in item.items()}
    question = next((lowered[k] for k in _QUESTION_KEYS if isinstance(lowered.get(k), str)), "")
    form = next((lowered[k] for k in _FORMAT_KEYS if isinstance(lowered.get(k), str)), "")
    return " ".join(question.split()), " ".join(form.split())


AGENT = Agent("decomposer", ("decomposer",), parse)
