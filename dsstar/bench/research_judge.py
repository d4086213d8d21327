"""The LLM judge of DABStep-Research: a report graded against its task's checklist, for content
and for format, each from 1 to 5, as that benchmark grades (prompts/research_judge.j2).

Like an agent: `render` builds the request, `parse` reads the grades wherever the model put
them (a JSON object, fenced or not; "Content: 4/5" lines).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dsstar.algorithm.agents import clip, json_value
from dsstar.algorithm.agents import render as _render
from dsstar.errors import LLMError
from dsstar.inputs.spec import config_for
from dsstar.model.llm import Message, complete
from dsstar.settings import Settings
from dsstar.text import digest

__all__ = ["ResearchJudge", "parse", "render"]

REPORT_CHARS = 30_000  # a report graded whole up to this size
_LINE = re.compile(r"\b(content|format)\b[*_\s]*[:=\-]?\s*[*_]*\s*([1-5])(?:\s*/\s*5)?\b", re.I)


def render(*, question: str, guidelines: str, checklist: list[str], report: str) -> list[Message]:
    """The judge's request: the task, its checklist and the report to grade."""
    return _render(
        "research_judge",
        question=question,
        guidelines=guidelines,
        checklist=checklist,
        report=clip(report, REPORT_CHARS),
    )


def parse(text: str) -> dict[str, int] | None:
    """{"content": 1..5, "format": 1..5} of a reply, or None when it holds neither grade."""
    value = json_value(text)
    grades: dict[str, int] = {}
    if isinstance(value, dict):
        for name, grade in value.items():
            kind = str(name).lower()
            if kind in ("content", "format") and _grade(grade) is not None:
                grades[kind] = _grade(grade)
    for name, grade in _LINE.findall(text or ""):
        grades.setdefault(name.lower(), int(grade))
    return grades if {"content", "format"} <= set(grades) else None


def _grade(value: Any) -> int | None:
    try:
        grade = round(float(value))
    except (TypeError, ValueError):
        return None
    return grade if 1 <= grade <= 5 else None


class ResearchJudge:
    """Grades reports with the verifier's model (header `X-DSStar-Agent: judge`), one call
    per report; grades are kept in `cache_file` (when given), so that grading again asks
    nothing twice. A failed call or an unreadable reply grades None (reported as such)."""

    def __init__(
        self, settings: Settings, run_id: str = "bench-judge", cache_file: Path | None = None
    ) -> None:
        self.config = config_for(settings, "verifier")
        self.api_key = settings.api_key.get_secret_value() if settings.api_key else None
        self.run_id = run_id
        self.cache_file = cache_file
        self.calls: list[dict] = []
        self._seen: dict[str, dict[str, int] | None] = {}
        if cache_file and cache_file.is_file():
            self._seen = json.loads(cache_file.read_text(encoding="utf-8"))

    def save(self) -> None:
        if self.cache_file:
            known = {k: v for k, v in self._seen.items() if v is not None}
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            self.cache_file.write_text(json.dumps(known, indent=1) + "\n", encoding="utf-8")

    def grade(
        self, question: str, guidelines: str, checklist: list[str], report: str
    ) -> dict[str, int] | None:
        """The grades of `report` for the task, or None."""
        key = digest(question, guidelines, checklist, report)
        if key not in self._seen:
            messages = render(
                question=question, guidelines=guidelines, checklist=checklist, report=report
            )
            try:
                reply = complete(self.config, messages, agent="judge", run_id=self.run_id,
                                 label="research judge", api_key=self.api_key)  # fmt: skip
            except LLMError:
                return None
            self.calls.append(reply.to_dict() | {"agent": "judge", "label": "research judge"})
            self._seen[key] = parse(reply.text)
        return self._seen[key]
