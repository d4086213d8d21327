"""KramaBench's metrics, one per answer type, as its official evaluator scores a task.

| answer_type           | metric (what counts in the overall score)                           |
|-----------------------|---------------------------------------------------------------------|
| numeric_exact         | success: 1 when the numbers are equal (floats: within 1e-6, or      |
| string_exact          |   1e-4 of the larger magnitude); strings equal trimmed, any case     |
| numeric_approximate   | rae_score: 1 / (1 + |predicted - truth| / |truth|)                   |
| string_approximate    | llm_paraphrase: 1 when an LLM judge says both state the same thing  |
| list_exact            | f1 over the items (strings equal trimmed, any case; numbers 1e-6)   |
| list_approximate      | f1_approximate: strings by the judge, numbers within 1 %            |

Without a model for the judge, approximate strings fall back to text overlap: the unigram F1
of the two lower-cased texts (ROUGE-1, which the official evaluator also records for this type);
a list item counts as a paraphrase when the words of one contain all the words of the other
("space force" and "U.S. Space Force"). Scores obtained this way are flagged
(`judged_by: "text-overlap"`) and summed apart in the summary.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

__all__ = ["METRICS", "Judge", "score_task", "text_overlap"]

Judge = Callable[[str, str], bool | None]  # (predicted, truth) -> paraphrase? (None: no verdict)
METRICS = {
    "numeric_exact": "success",
    "string_exact": "success",
    "numeric_approximate": "rae_score",
    "string_approximate": "llm_paraphrase",
    "list_exact": "f1",
    "list_approximate": "f1_approximate",
}


def _to_float(text: str) -> float:
    # A trailing percent sign means a fraction, as in the official str_to_float.
    return float(text[:-1]) / 100 if text.endswith("%") else float(text)


def _as_number(value: Any) -> Any:
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        text = value.strip().removesuffix("%").strip()
        try:
            return _to_float(text)
        except ValueError:
            return value
    return value


def success(predicted: Any, truth: Any) -> float:
    """Exact types: numbers equal (floats up to rounding), strings equal trimmed in any case."""
    if predicted is None:
        return 0.0
    p, t = _as_number(predicted), _as_number(truth)
    if isinstance(p, int | float) and isinstance(t, int | float):
        if p == t:
            return 1.0
        if not (isinstance(p, float) or isinstance(t, float)):
            return 0.0
        if t == 0:
            return float(abs(p) < 1e-6)
        diff = abs(p - t)
        close = diff / abs(t) < 1e-6 or diff < 1e-6 or diff < max(abs(p), abs(t)) * 1e-4
        return float(close)
    if isinstance(truth, str) and isinstance(predicted, str):
        return float(predicted.strip().lower() == truth.strip().lower())
    if isinstance(truth, str):
        return 0.0  # a number against a text answer
    return float(predicted == truth)


def rae_score(predicted: Any, truth: Any) -> float:
    """1 / (1 + relative absolute error); 0 when either side is not a number."""
    try:
        p = _to_float(predicted.strip()) if isinstance(predicted, str) else float(predicted)
        t = _to_float(truth.strip()) if isinstance(truth, str) else float(truth)
        return 1 / (1 + abs(p - t) / abs(t))
    except (TypeError, ValueError, ZeroDivisionError):
        return 0.0


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def text_overlap(predicted: str, truth: str) -> float:
    """Unigram F1 of the two texts (ROUGE-1 F-measure), lower-cased, punctuation ignored."""
    p, t = Counter(_tokens(predicted)), Counter(_tokens(truth))
    common = sum((p & t).values())
    if not common:
        return 0.0
    precision, recall = common / sum(p.values()), common / sum(t.values())
    return 2 * precision * recall / (precision + recall)


def _parse_list(text: str, comma_fallback: bool) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text.strip())  # Python literals such as ['a', 'b']
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        if not comma_fallback:
            raise ValueError(f"not a list: {text[:80]!r}") from None
        return [item.strip() for item in text.split(",") if item.strip()]


def _f1(target: list, predicted: list, same: Callable[[Any, Any], bool]) -> float:
    if not target:
        return float(not predicted)
    matched: set[int] = set()
    found = 0
    for t in target:
        for j, p in enumerate(predicted):
            if same(p, t):
                matched.add(j)
                found += 1
                break
    recall = found / len(target)
    precision = len(matched) / len(predicted) if predicted else 0.0
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def _near(p: Any, t: float, tolerance: float, strict: bool) -> bool:
    if isinstance(p, str):
        try:
            p = _to_float(p)
        except ValueError:
            return False
    if not isinstance(p, int | float):
        return False
    error = abs(p - t) / max(abs(t), 1e-12)
    return error < tolerance if strict else error <= tolerance


def _exact_item(p: Any, t: Any) -> bool:
    if isinstance(t, str):
        return t.strip().lower() == str(p).strip().lower()
    if isinstance(t, int | float):
        return _near(p, t, 1e-6, strict=True)
    return p == t


def f1(predicted: Any, truth: Any) -> float:
    """list_exact: F1 of the predicted items against the true ones."""
    try:
        if isinstance(predicted, list) and isinstance(truth, str):
            truth = json.loads(truth)
        if isinstance(predicted, str) and isinstance(truth, list):
            predicted = _parse_list(predicted, comma_fallback=True)
        if isinstance(predicted, str) and isinstance(truth, str):
            return float(predicted.strip().lower() == truth.strip().lower())
        return _f1(list(truth), list(predicted), _exact_item)
    except (TypeError, ValueError):
        return 0.0


class _Paraphrase:
    """The judge when there is one, else text overlap; remembers which one decided."""

    def __init__(self, judge: Judge | None) -> None:
        self.judge = judge
        self.fallback = False

    def __call__(self, predicted: str, truth: str) -> bool:
        if self.judge is not None:
            verdict = self.judge(predicted, truth)
            if verdict is not None:
                return verdict
        self.fallback = True
        words_p, words_t = set(_tokens(predicted)), set(_tokens(truth))
        return bool(words_p and words_t) and (words_p <= words_t or words_t <= words_p)


def f1_approximate(predicted: Any, truth: Any, paraphrase: _Paraphrase) -> float:
    """list_approximate: F1 where strings match by paraphrase and numbers within 1 %."""
    try:
        truth = json.loads(truth) if isinstance(truth, str) else truth
        predicted = (
            _parse_list(predicted, comma_fallback=False)
            if isinstance(predicted, str)
            else predicted
        )
        predicted = list(predicted)

        def same(p: Any, t: Any) -> bool:
            if isinstance(t, str):
                return paraphrase(str(p), t)
            return _near(p, t, 0.01, strict=False)

        return _f1(list(truth), predicted, same)
    except (TypeError, ValueError):
        return 0.0


def _one(answer_type: str, predicted: Any, truth: Any, paraphrase: _Paraphrase) -> float:
    if answer_type in ("numeric_exact", "string_exact"):
        return success(predicted, truth)
    if answer_type == "numeric_approximate":
        return rae_score(predicted, truth)
    if answer_type == "list_exact":
        return f1(predicted, truth)
    if answer_type == "list_approximate":
        return f1_approximate(predicted, truth, paraphrase)
    if answer_type == "string_approximate":
        if predicted is None:
            return 0.0
        if paraphrase.judge is not None:
            verdict = paraphrase.judge(str(predicted), str(truth))
            if verdict is not None:
                return float(verdict)
        paraphrase.fallback = True
        return text_overlap(str(predicted), str(truth))
    raise ValueError(f"unknown answer_type {answer_type!r}; known: {', '.join(METRICS)}")


def score_task(
    answer_type: str, predicted: Any, truths: list[Any], judge: Judge | None = None
) -> dict[str, Any]:
    """The task's score (0..1) against its answer and any accepted alternatives (best wins),
    with the metric used and who judged approximate strings."""
    paraphrase = _Paraphrase(judge)
    best = max(_one(answer_type, predicted, truth, paraphrase) for truth in truths)
    result = {"score": best, "metric": METRICS[answer_type]}
    if paraphrase.fallback:
        result["judged_by"] = "text-overlap"
    elif answer_type in ("string_approximate", "list_approximate") and judge is not None:
        result["judged_by"] = "llm"
    return result
