"""DABStep's answer matching, rule for rule as its official scorer applies it.

An answer matches the truth when, after trimming and lower-casing both:

1. either side is a number written with thousands separators (``1,234.5``) or a plain
   decimal (``0.99``, ``0,99``): the first number of each side is compared numerically;
2. otherwise, when either side holds ``,`` or ``;``: both are lists (brackets dropped, split on
   ``,`` and ``;``), compared without regard to order, item by item with these same rules;
3. otherwise, when both sides hold a number: their first numbers are compared numerically;
4. otherwise as strings: equal once everything but letters, digits and ``_`` is removed; or,
   when one side is a single word, that word is among the other side's words; or the two
   strings are more than 95 % similar (difflib's ratio).

Numbers match when equal; when both are below 1, within a relative or absolute 1e-4; else when
equal once rounded to the fewer decimals of the two, or within a relative or absolute 1e-4.
"""

from __future__ import annotations

import math
import re
from difflib import SequenceMatcher

__all__ = ["extract_number", "lists_match", "numbers_match", "question_scorer", "strings_match"]

# A number with at least one thousands group (optional decimals), or a plain decimal number
# whose decimal mark is a dot or a comma; an optional leading dollar sign.
_GROUPED_OR_DECIMAL = re.compile(r"^\$?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+[.,]\d+)$")
# The first unsigned number in a text, e.g. ".5", "12", "12.", "3.25" (a trailing % is ignored).
_FIRST_NUMBER = re.compile(r"(\d*\.\d+|\d+\.?\d*)%?")
TOLERANCE = 1e-4
SIMILARITY = 0.95


def _grouped_or_decimal(text: str) -> bool:
    return bool(_GROUPED_OR_DECIMAL.match(text.strip()))


def extract_number(text: str) -> float | None:
    """The first number in `text`, with commas and dollar signs removed first (no sign)."""
    match = _FIRST_NUMBER.search(text.replace(",", "").replace("$", ""))
    if not match:
        return None
    try:
        return float(match.group(1))
    except ValueError:
        return None


def _decimals(number: float) -> int:
    # As the official scorer counts them: the digits after the dot of Python's float repr.
    shown = str(number)
    return len(shown.split(".")[-1]) if "." in shown else 0


def numbers_match(a: float, b: float) -> bool:
    """Equal; close (1e-4) when both are below 1; else equal at the fewer decimals, or close."""
    if a == b:
        return True
    if a < 1 and b < 1:
        return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)
    places = min(_decimals(a), _decimals(b))
    if round(a, places) == round(b, places):
        return True
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def strings_match(a: str, b: str) -> bool:
    """Equal without punctuation and spaces; one-word subset; or similarity above 0.95."""
    if re.sub(r"[^\w]", "", a) == re.sub(r"[^\w]", "", b):
        return True
    words_a = re.findall(r"\b\w+\b", a.lower())
    words_b = re.findall(r"\b\w+\b", b.lower())
    if words_a and words_b and (len(words_a) == 1 or len(words_b) == 1):
        return set(words_a) <= set(words_b) or set(words_b) <= set(words_a)
    return SequenceMatcher(None, a, b).ratio() > SIMILARITY


def _items(text: str) -> list[str]:
    inner = re.sub(r"^\[|\]$", "", text.strip())
    return sorted(item.strip() for item in re.split(r"[,;]", inner) if item.strip())


def lists_match(a: str, b: str) -> bool:
    """Order-free lists split on ',' or ';': the same items, or pairwise matching items."""
    items_a, items_b = _items(a), _items(b)
    if items_a == items_b:
        return True
    if len(items_a) != len(items_b):
        return False
    return all(question_scorer(x, y) for x, y in zip(items_a, items_b, strict=True))


def question_scorer(answer: str | None, truth: str | None) -> bool:
    """Whether `answer` matches `truth` under DABStep's rules (see the module docstring)."""
    if answer is None or truth is None:
        return False
    a, b = str(answer).strip().lower(), str(truth).strip().lower()
    if _grouped_or_decimal(a) or _grouped_or_decimal(b):
        x, y = extract_number(a), extract_number(b)
        return x is not None and y is not None and numbers_match(x, y)
    if any(mark in text for mark in (",", ";") for text in (a, b)):
        return lists_match(a, b)
    x, y = extract_number(a), extract_number(b)
    if x is not None and y is not None:
        return numbers_match(x, y)
    return strings_match(a, b)
