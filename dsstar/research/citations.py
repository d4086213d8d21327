"""The citations of a report ([3], [2][5], [1, 4]) and what they promise: each resolves to an
answer, every answered sub-question is cited, and the numbers a report states come from the
answers it cites (checked mechanically where a number can be read: "12.5 %", "1,204", "3.2
million")."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

__all__ = ["cited", "drop_unresolved", "numbers_in", "unsupported_numbers"]

# [3], [2, 5], [2; 5]: a group of citation numbers (a year in brackets, [2024], is none).
_GROUP = re.compile(r"\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\]")
# A number as a report writes it: 1204, 1,204, 12.5, -3, 12.5%, 3.2 million.
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-+\u2212])?(?P<value>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<unit>\s?%|\s?(?:k|thousand|m|mn|million|bn|billion)\b)?",
    re.I,
)
_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "bn": 1e9,
          "billion": 1e9}  # fmt: skip


def _numbers(group: str) -> list[int]:
    return [int(n) for n in re.split(r"\s*[,;]\s*", group)]


def cited(text: str) -> list[int]:
    """The answer numbers `text` cites, in the order first cited."""
    found: dict[int, None] = {}
    for group in _GROUP.findall(text):
        found.update(dict.fromkeys(_numbers(group)))
    return list(found)


def drop_unresolved(text: str, known: set[int]) -> tuple[str, list[int]]:
    """`text` with every citation of a number not in `known` taken out (a group left empty
    goes whole, with the space before it), and the numbers taken out."""
    dropped: list[int] = []

    def keep(match: re.Match[str]) -> str:
        numbers = _numbers(match.group(2))
        dropped.extend(n for n in numbers if n not in known)
        kept = [str(n) for n in numbers if n in known]
        return f"{match.group(1)}[{', '.join(kept)}]" if kept else ""

    return _SPACED_GROUP.sub(keep, text), dropped


_SPACED_GROUP = re.compile(r"(\s?)" + _GROUP.pattern)


def numbers_in(text: str) -> list[tuple[str, float, float]]:
    """The numbers `text` states, citations left out: (as written, value, tolerance), the
    tolerance being half a unit of the last digit written (12.5 % is 0.125 +- 0.0005)."""
    found = []
    for match in _NUMBER.finditer(_GROUP.sub(" ", text)):
        digits = match.group("value").replace(",", "")
        decimals = len(digits.partition(".")[2])
        unit = (match.group("unit") or "").strip().lower()
        scale = 0.01 if unit == "%" else _SCALE.get(unit, 1.0)
        sign = -1.0 if match.group("sign") in ("-", "\u2212") else 1.0
        value = sign * float(digits) * scale
        found.append((match.group().strip(), value, 0.5 * 10.0**-decimals * scale))
    return found


def _matches(value: float, tolerance: float, known: Iterable[float]) -> bool:
    """Whether some known number, as written or as a fraction shown in percent, is `value`
    rounded as the report rounds it."""
    for number in known:
        for candidate in (number, number / 100):  # "12.5 %" of an answer that says 12.5
            if math.isclose(candidate, value, abs_tol=tolerance + 1e-9, rel_tol=1e-9):
                return True
            if abs(abs(candidate) - abs(value)) <= tolerance + 1e-9 and value < 0 < candidate:
                return True  # "fell by -12 %" of an answer of 12
    return False


def unsupported_numbers(
    units: Iterable[str], answers: Mapping[int, str], context: str = ""
) -> list[str]:
    """The numbers of `units` (a report's paragraphs, list items, table rows) that no answer
    they cite holds: a unit citing nothing is checked against every answer. Numbers that
    `context` holds (the question, the sub-questions: a year, a "top 5") pass; each number
    that fails is named once, as the report wrote it."""
    background = [value for _, value, _ in numbers_in(context)]
    every = [value for text in answers.values() for _, value, _ in numbers_in(text)]
    missing: dict[str, None] = {}
    for unit in units:
        sources = [answers[n] for n in cited(unit) if n in answers]
        known = [v for text in sources for _, v, _ in numbers_in(text)] if sources else every
        for written, value, tolerance in numbers_in(unit):
            if not _matches(value, tolerance, known + background):
                missing[written] = None
    return list(missing)
