"""DA-Code's text scorer: a JSON answer (in the run's answer text or a delivered .json file)
against the gold dictionary.

- The answer is the first `{` to the last `}` of the text, read leniently (single quotes,
  trailing commas, Python literals); a list answer counts by its first dictionary.
- Keys are matched trimmed and lower-cased; a gold key the answer lacks scores 0.
- A one-item list and its item are the same answer (`["Monaco"]` and `"Monaco"`); a scalar
  against a longer list is read as a one-item list.
- The answer's value is read as the gold value's type (`"82.6"` as 82.6; a value that cannot
  be read so scores 0), then: numbers within 0.01 (integers exactly), texts equal once trimmed
  and lower-cased, lists of the same length item by item (items of the same type; sorted
  first with `ignore_order`), dictionaries with the same keys value by value.
- `score_rule`: `all` (the default) scores 1 only when every key matches; `divide` the share of
  keys that match. With several gold dictionaries or several answers the best pair counts.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

__all__ = ["compare_text", "read_answer"]

TOLERANCE = 1e-2


def read_answer(text: str) -> dict[str, Any] | None:
    """The JSON object in `text`, or None."""
    match = re.search(r"\{.*\}", text or "", re.DOTALL)
    if not match:
        return None
    raw = match.group()
    attempts = (
        lambda: json.loads(raw),
        lambda: json.loads(re.sub(r",\s*([}\]])", r"\1", raw)),
        lambda: ast.literal_eval(raw),
        lambda: json.loads(raw.replace("'", '"')),
    )
    for attempt in attempts:
        try:
            found = attempt()
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(found, dict):
            return found
    return None


def _as_dict(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, list):
        return next((item for item in value if isinstance(item, dict)), None)
    return None


def _same(gold: Any, given: Any, ignore_order: bool) -> bool:
    if isinstance(gold, bool) or gold is None:
        return gold == given
    if isinstance(gold, float):
        return abs(gold - given) <= TOLERANCE
    if isinstance(gold, int):
        return gold == given
    if isinstance(gold, str):
        return gold.strip().lower() == given.strip().lower()
    if isinstance(gold, list):
        if len(gold) != len(given) or not gold:
            return False
        if ignore_order:
            gold, given = sorted(gold, key=_order), sorted(given, key=_order)
        return all(
            type(a) is type(b) and _same(a, b, ignore_order)
            for a, b in zip(gold, given, strict=True)
        )
    if isinstance(gold, dict):
        if gold.keys() != given.keys() or not gold:
            return False
        return all(
            type(value) is type(given[key]) and _same(value, given[key], ignore_order)
            for key, value in gold.items()
        )
    return gold == given


def _order(value: Any) -> tuple:
    return (value is None, str(value))


def _single(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _key_score(gold: Any, given: Any, ignore_order: bool) -> float:
    gold_one, given_one = _single(gold), _single(given)
    if type(gold_one) is type(given_one):
        gold, given = gold_one, given_one
    elif isinstance(gold, list) and not isinstance(given, list):
        given = [given]
    elif not isinstance(gold, list) and isinstance(given, list):
        gold = [gold]
    try:
        given = type(gold)(given)  # read the answer as the gold value's type
    except (TypeError, ValueError):
        return 0.0
    return float(_same(gold, given, ignore_order))


def _score(gold: dict, given: dict, score_rule: str, ignore_order: bool) -> float:
    answer = {str(key).strip().lower(): value for key, value in given.items()}
    scores = []
    for key, value in gold.items():
        name = str(key).strip().lower()
        scores.append(_key_score(value, answer[name], ignore_order) if name in answer else 0.0)
    if not scores:
        return 0.0
    if score_rule in ("divide", "devide"):  # DA-Code's configs spell it both ways
        return sum(scores) / len(scores)
    return float(all(scores))


def _rule(option: Any, index: int, default: Any) -> Any:
    if isinstance(option, list):
        return option[index] if index < len(option) else default
    return default if option is None else option


def compare_text(
    answers: list[str | Path | dict], golds: list[dict | Path], options: dict[str, Any]
) -> float:
    """The best score of any answer (text, .json file or dictionary) against any gold."""
    given = [found for found in map(_load, answers) if found is not None]
    expected = [found for found in map(_load, golds) if found is not None]
    ignore_order = bool(_rule(options.get("ignore_order"), 0, False))
    best = 0.0
    for index, gold in enumerate(expected):
        rule = _rule(options.get("score_rule"), index, "all")
        for answer in given:
            best = max(best, _score(gold, answer, rule, ignore_order))
    return best


def _load(item: str | Path | dict) -> dict[str, Any] | None:
    if isinstance(item, dict | list):
        return _as_dict(item)
    if isinstance(item, Path):
        try:
            text = item.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        try:
            return _as_dict(json.loads(text))
        except ValueError:
            return read_answer(text)
    return read_answer(item)
