"""DA-Code's machine-learning scorers, computed as DA-Code's evaluator computes them (so that a
figure compares with published ones), with a corrected figure beside it where DA-Code's
definition is odd. The metrics themselves are in dacode_metrics.

`compare_ml` (classification, clustering and regression tasks):

- the task type is the config's `type` matched to one of DA-Code's four (binary
  classification, multi classification, cluster, regression) by fuzzy ratio above 90;
- the predictions and the gold file must have as many rows; they are compared row by row;
- a frame's target column is the one named by the task (`target_column`; clustering:
  `Cluster`) when a column matches it by fuzzy ratio above 90, else the column of that exact
  name, else the only column, else the one column that looks like a target of the task's type
  (binary: two values; multi: three to nine; cluster: few; regression: many numbers that are
  not a running index), else among several such a `label`/`class`/`result` column. The gold's
  target found so is the name looked for in the predictions;
- identifier columns (a name holding `id` or `unnamed`, more than 80 % distinct values, unless
  the name holds `pca` or `feature`) are dropped;
- clustering has no gold: the silhouette of the delivered file itself, every column left
  (its features and its cluster labels; text columns label-encoded), a stratified sample of
  6,000 rows above that. DA-Code's silhouette counts a point in its own cluster's mean
  distance; a negative silhouette counts as 0.

`compare_competition_ml` (Kaggle-style submissions): the gold's rows and columns (names, any
order); with an identifier column (the gold's first whose name holds `id`, more than 60 %
distinct values) the identifiers must be the gold's, and both are sorted by it and compared
without it; the metric sees every other column.

The metrics, as DA-Code defines them: `f1` (weighted unless the task says `average`),
`accuracy`, `r2`, `roc_auc_score`, `silhouette`, `quadratic_weighted_kappa`, `rmse`, `mae`,
`mse`, `medae`, `smape` (percent), and

- `rmsle`: the mean squared log error, without the root;
- `logloss_class`: -1/2 times the sum over classes of the mean log2 probability given to that
  class's rows (rows renormalised, probabilities clipped to 1e-15..1-1e-15);
- `logloss_total`: -1/2 times the mean over rows of the log2 probability of the true class;
- `quadratic_weighted_kappa`: its observed matrix counts the labels 0..N-1 as they are, its
  expected one the labels shifted to start at 0 (the two agree only when labels start at 0);
- `accuracy`: on text labels DA-Code compares the predictions with themselves (1 whenever
  they can be encoded); on a competition's frame it cannot compute it (0).

Every value is scaled `(value - lower) / (upper - lower)` and kept within 0..1, errors and
log-losses included, which rewards a larger error wherever the config's lower bound is the
smaller. That is DA-Code's score, and the task's. Beside it, `corrected` holds the figure a
reader would expect where DA-Code's differs: the error metrics scaled with the smaller bound
as the best; RMSLE with its root (bounds likewise); log-losses in natural log, the class one
balanced over the classes (bounds converted by the same factor); the kappa and the accuracy as
their textbook definitions.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from dsstar.bench.dacode_metrics import Refused, encoded, silhouette
from dsstar.bench.dacode_metrics import metric as metric_named

__all__ = ["LOWER_IS_BETTER", "best_match", "compare_competition_ml", "compare_ml", "scale",
           "silhouette"]  # fmt: skip

TYPES = ("binary classification", "multi classification", "cluster", "regression")
LOWER_IS_BETTER = {"rmse", "mae", "mse", "rmsle", "medae", "smape", "logloss_class",
                   "logloss_total", "crps"}  # fmt: skip
LABEL_NAMES = {"label", "labels", "class", "classes", "results", "result"}


def scale(value: float, lower: float, upper: float) -> float:
    """DA-Code's scaling: the value's place between the bounds, kept within 0..1. Equal
    bounds divide by zero (DA-Code's evaluator then scores the part 0)."""
    return min(max((value - lower) / (upper - lower), 0), 1)


def _corrected_share(value: float, metric: str, lower: float, upper: float) -> float:
    if metric in LOWER_IS_BETTER:
        best, worst = min(lower, upper), max(lower, upper)
        share = (worst - value) / (worst - best) if worst != best else float(value <= best)
    else:
        share = (value - lower) / (upper - lower) if upper != lower else float(value >= upper)
    return 0.0 if math.isnan(share) else min(max(share, 0.0), 1.0)


# --- fuzzy matching, as the evaluator's fuzzywuzzy (with python-Levenshtein) does -----------


def _clean(text: str) -> str:
    return re.sub(r"(?ui)\W", " ", text).lower().strip()


def _processed(text: str) -> str:
    """The string as fuzzywuzzy's extractOne hands it to WRatio: cleaned, characters 128-255
    dropped, cleaned again."""
    first = _clean(str(text))
    return _clean("".join(c for c in first if not 128 <= ord(c) < 256))


def best_match(query: str, choices: list[str]) -> tuple[str, int]:
    """The choice most like `query` and its weighted ratio (0..100, rounded as fuzzywuzzy
    rounds); the first of equals wins."""
    from rapidfuzz import fuzz

    wanted = _processed(query)
    found, best = choices[0], -1
    for choice in choices:
        other = _processed(choice)
        ratio = round(fuzz.WRatio(wanted, other, processor=None)) if wanted and other else 0
        if ratio > best:
            found, best = choice, ratio
    return found, best


def _task_type(config: dict[str, Any]) -> str:
    kind = config.get("type", "")
    name, ratio = best_match(kind, list(TYPES))
    if not ratio > 90:
        raise ValueError(f"unknown machine-learning task type {kind!r}; known: {TYPES}")
    return name.split(" ")[0]


# --- which columns ----------------------------------------------------------------------------


def _running(values: Any) -> bool:
    """Consecutive integers once sorted: an index, not a target."""
    ordered = values.sort_values().to_numpy()
    return all(ordered[i] - ordered[i - 1] == 1 for i in range(1, len(ordered)))


def _looks_like_target(values: Any, kind: str, rows: int) -> bool:
    distinct = values.nunique()
    if kind == "binary":
        return distinct == 2
    if kind == "multi":
        return 2 < distinct < 10
    if kind == "cluster":
        return 1 <= distinct < max(0.01 * rows, 10)
    return (str(values.dtype) in ("int64", "float64") and not _running(values)
            and distinct > max(3, 0.1 * rows))  # fmt: skip


def _guess(frame: Any, kind: str, named: str) -> tuple[list[str], str]:
    """Identifier columns, and the target: `named` if a column has that name, else by type."""
    columns = list(frame.columns)
    if len(columns) == 1:
        return [], columns[0]
    named = "Cluster" if kind == "cluster" else named
    target = named if named and named in columns else ""
    rows = len(frame)
    identifiers, candidates = [], []
    for column in columns:
        values = frame[column]
        lowered = column.lower()
        if ("id" in lowered or "unnamed" in lowered) and values.nunique() > 0.8 * rows:
            identifiers.append(column)
            continue
        if target:
            continue
        if _looks_like_target(values, kind, rows):
            candidates.append(column)
    if not target:
        if len(candidates) == 1:
            target = candidates[0]
        else:
            target = next((c for c in candidates if c.lower() in LABEL_NAMES), "")
    return identifiers, target


def _target_and_rest(frame: Any, kind: str, named: str) -> tuple[Any, str]:
    """The frame without its identifier columns, and its target column ('' if none)."""
    named = "Cluster" if kind == "cluster" else named
    target = ""
    if named:
        found, ratio = best_match(named, list(frame.columns))
        target = found if ratio > 90 else ""
    identifiers, guessed = _guess(frame, kind, named)
    target = target or guessed
    dropped = [c for c in identifiers if "pca" not in c.lower() and "feature" not in c.lower()]
    return frame.drop(columns=dropped), target


# --- corrected figures ----------------------------------------------------------------------------


def _textbook(metric: str, value: float, result: Any, gold: Any) -> tuple[float, Any] | None:
    """(the textbook value, how DA-Code's bounds convert to its scale) where DA-Code's
    definition differs from the textbook's; None where only the direction is at issue."""
    import numpy as np
    import pandas as pd
    from sklearn.metrics import cohen_kappa_score

    if metric == "rmsle":
        return math.sqrt(value), lambda bound: math.sqrt(max(bound, 0.0))
    if metric == "logloss_total":
        factor = 2 * math.log(2)
        return value * factor, lambda bound: bound * factor
    if metric == "logloss_class":
        factor = 2 * math.log(2) / max(np.asarray(gold).shape[-1] if np.ndim(gold) > 1 else 2, 1)
        return value * factor, lambda bound: bound * factor
    if metric == "quadratic_weighted_kappa":
        truth, given = np.asarray(gold).reshape(-1), np.asarray(result).reshape(-1)
        return float(cohen_kappa_score(truth, given.astype(truth.dtype), weights="quadratic")), None
    if metric == "accuracy":
        truth = gold if isinstance(gold, pd.DataFrame) else gold.to_frame()
        given = result if isinstance(result, pd.DataFrame) else result.to_frame()

        def norm(frame: Any) -> Any:
            return frame.apply(lambda c: c.astype(str).str.strip().str.lower()
                               if c.dtype == object or str(c.dtype) == "str" else c)  # fmt: skip

        same = norm(given).to_numpy() == norm(truth).to_numpy()
        return float(same.all(axis=1).mean()), None
    return None


def _corrected(metric: str, value: float | None, result: Any, gold: Any, lower: float,
               upper: float) -> dict[str, Any] | None:  # fmt: skip
    """The corrected figure of a part, or None where DA-Code's is already the textbook's."""
    if metric not in LOWER_IS_BETTER and metric not in ("quadratic_weighted_kappa", "accuracy"):
        return None
    textbook = None
    if value is not None or metric in ("quadratic_weighted_kappa", "accuracy"):
        try:
            textbook = _textbook(metric, value, result, gold) if result is not None else None
        except Exception:  # the textbook metric cannot be computed either: no figure
            textbook = None
    if textbook is None:
        if value is None:
            return {"score": 0.0, "metric_value": None}
        fixed = value
    else:
        fixed, convert = textbook
        if convert is not None:
            lower, upper = convert(lower), convert(upper)
    return {"score": _corrected_share(fixed, metric, lower, upper), "metric_value": fixed,
            "lower_bound": lower, "upper_bound": upper}  # fmt: skip


# --- the two scorers ------------------------------------------------------------------------------


def _bounds(config: dict[str, Any]) -> tuple[float, float]:
    return config.get("lower_bound", 0.0), config.get("upper_bound", 0.9)


def _finish(metric: str, compute: Any, config: dict[str, Any], frames: Any) -> dict[str, Any]:
    """Run the metric; scale its value as DA-Code does; add the corrected figure."""
    lower, upper = _bounds(config)
    row: dict[str, Any] = {"metric": metric, "lower_bound": lower, "upper_bound": upper}
    try:
        value = compute()
    except Refused as exc:
        row |= {"score": 0.0, "metric_value": None, "error": str(exc)}
        value = None
    else:
        row |= {"score": scale(value, lower, upper), "metric_value": value}
    fixed = _corrected(metric, value, *frames(), float(lower), float(upper))
    return row | ({"corrected": fixed} if fixed is not None else {})


def _csv(files: Any) -> Path | None:
    items = files if isinstance(files, list) else [files]
    found = next((str(f) for f in items if str(f).endswith(".csv")), "")
    return Path(found) if found else None


def compare_ml(result: Any, expected: Any, options: dict[str, Any]) -> dict[str, Any]:
    """Score a classification, clustering or regression task's predictions file (DA-Code's
    `compare_ml`). Raises where DA-Code's evaluator raises (a bad config, no gold file)."""
    import pandas as pd

    config = options.get("config") or {}
    metric = config.get("metric", "")
    if not config or not config.get("type"):
        raise ValueError("a machine-learning task needs a config with a type")
    kind = _task_type(config)
    gold, given = _csv(expected), _csv(result)
    if kind != "cluster" and (gold is None or not gold.exists()):
        raise FileNotFoundError(f"no gold file {gold}")
    if given is None or not given.exists():
        return {"score": 0.0, "metric": metric, "error": f"no result file {given}"}
    truth = pd.read_csv(gold) if kind != "cluster" else None
    frame = pd.read_csv(given)
    named = ""
    if truth is not None:
        if len(truth) != len(frame):
            return {"score": 0.0, "metric": metric,
                    "error": f"{len(frame)} rows delivered, the gold has {len(truth)}"}  # fmt: skip
        truth, named = _target_and_rest(truth, kind, options.get("target_column", ""))
    frame, target = _target_and_rest(frame, kind, named)
    if not target:
        return {"score": 0.0, "metric": metric,
                "error": f"no target column in the answer (the gold's is {named!r})"}  # fmt: skip
    compute = metric_named(metric)
    labels = frame[target]
    if metric == "silhouette":
        return _finish(metric, lambda: silhouette(encoded(frame), labels), config,
                       lambda: (None, None))  # fmt: skip
    gold_labels = truth[named] if truth is not None else pd.Series(dtype="float64")
    return _finish(metric, lambda: compute(labels, gold_labels, kind, {}), config,
                   lambda: (labels, gold_labels))  # fmt: skip


def _matched(frame: Any, truth: Any) -> tuple[Any, Any]:
    """Both frames by identifier, without it, their columns in name order."""
    if len(frame) != len(truth):
        raise Refused(f"{len(frame)} rows delivered, the gold has {len(truth)}")
    if set(frame.columns) != set(truth.columns):
        extra = sorted(set(frame.columns) - set(truth.columns))
        raise Refused(f"the columns are not the gold's (extra: {extra})")
    key = next((c for c in truth.columns if "id" in c.lower()), "")
    if key and truth[key].nunique() > max(0.6 * len(truth), 2):
        if set(frame[key]) != set(truth[key]):
            raise Refused(f"the {key} values are not the gold's")
        truth = truth.sort_values(by=key).drop(columns=[key])
        frame = frame.sort_values(by=key).drop(columns=[key])
    return frame.sort_index(axis=1), truth.sort_index(axis=1)


def compare_competition_ml(result: Any, expected: Any, options: dict[str, Any]) -> dict[str, Any]:
    """Score a competition submission (DA-Code's `compare_competition_ml`)."""
    import pandas as pd

    config = options.get("config") or {}
    metric = config.get("metric", "")
    if not config or not config.get("type") or not metric:
        raise ValueError("a competition needs a config with a type and a metric")
    kind = _task_type(config)
    results = result if isinstance(result, list) else [result]
    golds = expected if isinstance(expected, list) else [expected]
    if len(results) != 1 or len(golds) != 1:
        raise ValueError("a competition is scored on one submission against one gold file")
    given, gold = Path(results[0]), Path(golds[0])
    if not gold.exists():
        raise FileNotFoundError(f"no gold file {gold.name}")
    if not given.exists():
        return {"score": 0.0, "metric": metric, "error": f"no result file {given.name}"}
    try:
        frame, truth = _matched(pd.read_csv(given), pd.read_csv(gold))
    except Refused as exc:
        return {"score": 0.0, "metric": metric, "error": str(exc)}
    metric = metric.lower().strip().replace(" ", "_")
    compute = metric_named(metric)
    average = {"average": options.get("average", "")}
    return _finish(metric, lambda: compute(frame, truth, kind, average), config,
                   lambda: (frame, truth))  # fmt: skip
