"""DA-Code's text scorer: a JSON answer against the gold dictionaries, as DA-Code's evaluator
scores it.

- The answer is the run's answer text (or a `.json` file it names): from its first `{` to its
  last `}`, read as JSON5 (single quotes, trailing commas, unquoted keys; not Python's `True`
  or `None`). Text that holds braces but no JSON5 there is an error (the part scores 0 and,
  as in DA-Code, ends the task's scoring); text without braces scores 0. A `.json` file is
  read as JSON, else with its single quotes made double; a list counts by its first
  dictionary.
- Keys are matched trimmed and lower-cased; a gold key the answer lacks scores 0.
- A one-item list and its item are the same answer (`["Monaco"]` and `"Monaco"`); a scalar
  against a longer list is read as a one-item list.
- The answer's value is read as the gold value's type (`"82.6"` as 82.6, 3.9 as the integer
  3; a value that cannot be read so scores 0), then: floats within 0.01, integers and texts
  equal (texts trimmed and lower-cased), lists of the same length item by item (items of the
  same type; sorted by their text first with `ignore_order`), dictionaries with exactly the
  same keys value by value. A gold boolean or null inside the comparison has no rule in
  DA-Code: an error, the part scores 0.
- `score_rule` is a list, one entry per gold dictionary: `all` (the default) scores 1 only when
  every key matches; `devide` (DA-Code's spelling) the share of keys that match; any other
  value (`divide` too) is an error. With several gold dictionaries the best one counts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["compare_text", "explain", "read_answer"]

TOLERANCE = 1e-2


class _NoRule(Exception):
    """A value type DA-Code has no comparison for (its evaluator fails on it)."""


def read_answer(text: str) -> Any:
    """The JSON5 value from the text's first `{` to its last `}`; None without braces.
    Raises ValueError when the braces hold no JSON5 (DA-Code's evaluator fails there)."""
    import json5

    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        return None
    return json5.loads(match.group())


def _read_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        try:
            return json.loads(path.read_text().replace("'", '"'))
        except Exception:  # DA-Code gives up on any failure here: no answer
            return None


def _load(item: Any) -> Any:
    if isinstance(item, dict):
        return item
    if isinstance(item, str | Path) and str(item).endswith(".json"):
        return _read_file(Path(item))
    if isinstance(item, str):
        return read_answer(item)
    return None


def _same(gold: Any, given: Any, options: dict[str, Any]) -> float:
    """One value against the gold value of the same type, by DA-Code's rule for that type."""
    if isinstance(gold, bool) or gold is None or not isinstance(gold, float | int | str | list
                                                                 | dict):  # fmt: skip
        raise _NoRule(f"no rule to compare a {type(gold).__name__}")
    if isinstance(gold, float):
        return float(abs(gold - given) <= TOLERANCE)
    if isinstance(gold, int):
        return float(gold == given)
    if isinstance(gold, str):
        return float(gold.lower().strip() == given.lower().strip())
    if isinstance(gold, list):
        return _same_list(gold, given, options)
    if gold.keys() != given.keys():
        return 0.0
    scores = []
    for key, value in gold.items():
        if type(value) is not type(given[key]):
            return 0.0
        scores.append(_same(value, given[key], options))
    return float(all(scores) and len(scores) > 0)


def _same_list(gold: list, given: list, options: dict[str, Any]) -> float:
    if len(gold) != len(given):
        return 0.0
    order = options.get("ignore_order", False)
    order = order[0] if isinstance(order, list) else order
    if order:

        def key(x: Any) -> tuple:
            return (x is None, str(x), isinstance(x, int | float))

        gold, given = sorted(gold, key=key), sorted(given, key=key)
    scores = []
    for a, b in zip(gold, given, strict=True):
        if type(a) is not type(b):
            return 0.0
        scores.append(_same(a, b, options))
    return float(all(scores) and len(scores) > 0)


def _single(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _key_score(gold: Any, given: Any, options: dict[str, Any]) -> float:
    if type(_single(gold)) is type(_single(given)):
        gold, given = _single(gold), _single(given)
    elif isinstance(gold, list) and not isinstance(given, list):
        given = [given]
    elif not isinstance(gold, list) and isinstance(given, list):
        gold = [gold]
    try:
        given = type(gold)(given)  # the answer read as the gold value's type
    except Exception:  # any value that cannot be read so scores 0, as in DA-Code
        return 0.0
    return _same(gold, given, options)


def _score(gold: dict, given: dict, rule: str, options: dict[str, Any]) -> float:
    answer = {key.lower().strip(): value for key, value in given.items()}
    scores = []
    for key, value in gold.items():
        name = key.lower().strip()
        scores.append(_key_score(value, answer[name], options) if name in answer else 0.0)
    if rule == "all":
        return float(all(scores))
    if rule == "devide":
        return sum(scores) / len(scores)
    raise ValueError(f"unknown score_rule {rule!r}")


def compare_text(answer: Any, expected: Any, options: dict[str, Any]) -> float | None:
    """The best score of the answer (text, `.json` path or dictionary) against any gold
    dictionary; None (scored 0) when there is no answer to read. Raises where DA-Code's
    evaluator fails (unreadable JSON5, a rule it lacks)."""
    golds = expected if isinstance(expected, list) else [expected]
    if not golds:
        raise TypeError("no gold dictionary")
    golds = [found for found in map(_load, golds) if found is not None]
    answers = answer if isinstance(answer, list) else [answer]
    answers = [found for found in map(_load, answers) if found is not None]
    if not answers:
        return None
    if len(answers) == 1 and isinstance(answers[0], list):
        answers = [next((item for item in answers[0] if isinstance(item, dict)), None)]
        if answers[0] is None:
            return None
    rules = options.get("score_rule", ["all"] * len(golds))
    compare = {"ignore_order": options.get("ignore_order", [False] * len(golds))}
    try:
        scores = [_score(gold, given, rules[index], compare)
                  for index, gold in enumerate(golds) for given in answers]  # fmt: skip
    except _NoRule as exc:
        raise ValueError(str(exc)) from exc
    return max(scores)


def explain(answer: Any, expected: Any) -> str:
    """Why the answer scores 0 against the (first) gold dictionary, in a line."""
    given = _load(answer)
    if isinstance(given, list):
        given = next((item for item in given if isinstance(item, dict)), None)
    if not isinstance(given, dict):
        return "no JSON answer in the result text"
    gold = next((g for g in map(_load, expected if isinstance(expected, list) else [expected])
                 if isinstance(g, dict)), {})  # fmt: skip
    found = {key.lower().strip(): value for key, value in given.items()}
    missing = [key for key in gold if key.lower().strip() not in found]
    if missing:
        return f"the answer lacks the gold's keys {missing}"
    differ = [key for key, value in gold.items()
              if not _key_score(value, found[key.lower().strip()], {})]  # fmt: skip
    return f"the answer's values differ from the gold's for {differ}"
