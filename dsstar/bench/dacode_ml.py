"""DA-Code's machine-learning scorers: a delivered predictions file, a metric, and the metric
scaled between the task's bounds.

`compare_ml` (classification, clustering, regression tasks):

- the predictions and the gold file must have as many rows (compared row by row, in order);
- identifier columns are set aside: a name holding `id` or `unnamed` whose values are nearly
  all distinct (more than 80 %), unless the name holds `pca` or `feature`;
- the target column is the task's `target_column` (clustering: `Cluster`), matched to a
  column name loosely (case, spaces and punctuation aside, or 90 % alike); else the only
  column; else the one column that looks like a target of the task's type (binary: two
  values; multi: three to nine; cluster: few; regression: many numbers), a `label`/`class`/
  `result` column among several;
- clustering has no gold: the silhouette is computed on the delivered file itself, every
  column but the identifiers (the features the answer wrote and its cluster labels, as
  DA-Code reads them); one cluster scores 0; above 6,000 rows a stratified sample of 6,000.
  DA-Code's silhouette averages a point's distance to its own cluster with the point itself
  counted, so it runs a little above scikit-learn's; negative values count as 0.

`compare_competition_ml` (Kaggle-style submissions): the submission must have the gold's
rows and columns (names, any order); when there is an identifier column (the first whose name
holds `id`, with more than 60 % distinct values) the identifiers must be the gold's, and both
are sorted by it and compared without it.

Metrics: f1 (weighted over classes), accuracy, roc_auc_score, r2, silhouette,
quadratic_weighted_kappa (the two files' label ranges must agree), and the errors rmse, mae,
mse, rmsle, medae, smape, logloss. Scaling: `(value - lower) / (upper - lower)` kept within
0..1, so a value at the upper bound or better scores 1. For an error (lower is better) the
smaller bound is the best: 1 there, 0 at the larger bound. (DA-Code's own code scales errors
like the other metrics, which would reward a larger error; its configs' bounds for errors are
read here as the range between the best and the worst value.)
"""

from __future__ import annotations

import math
import re
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

__all__ = ["LOWER_IS_BETTER", "compare_competition_ml", "compare_ml", "scale", "silhouette"]

TYPES = ("binary", "multi", "cluster", "regression")
LOWER_IS_BETTER = {"rmse", "mae", "mse", "rmsle", "medae", "smape", "logloss",
                   "logloss_class", "logloss_total", "crps"}  # fmt: skip
LABEL_NAMES = {"label", "labels", "class", "classes", "results", "result"}
SAMPLE = 6000


class _Refused(Exception):
    """The answer cannot be scored (its reason goes to the task's row); it scores 0."""


def scale(value: float, metric: str, lower: float, upper: float) -> float:
    """The metric's value as a score between the task's bounds (0..1)."""
    if metric in LOWER_IS_BETTER:
        best, worst = min(lower, upper), max(lower, upper)
        share = 1.0 if worst == best and value <= best else (worst - value) / (worst - best or 1)
    else:
        share = (value - lower) / (upper - lower) if upper != lower else float(value >= upper)
    if math.isnan(share):
        return 0.0
    return min(max(share, 0.0), 1.0)


def _task_type(config: dict[str, Any]) -> str:
    kind = str(config.get("type", "")).lower()
    found = next((name for name in TYPES if name in kind), None)
    if found is None:
        raise _Refused(f"unknown machine-learning task type {kind!r}; known: {TYPES}")
    return found


def _squash(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.lower())


def _match(name: str, columns: list[str]) -> str:
    """The column named like `name` (case, spaces and punctuation aside, or 90 % alike)."""
    for column in columns:
        if _squash(column) == _squash(name):
            return column
    ratios = [(SequenceMatcher(None, name.lower(), c.lower()).ratio(), c) for c in columns]
    best = max(ratios, default=(0.0, ""))
    return best[1] if best[0] > 0.9 else ""


def _is_identifier(frame: Any, column: str) -> bool:
    name = column.lower()
    if "pca" in name or "feature" in name:
        return False
    return ("id" in name or "unnamed" in name) and frame[column].nunique() > 0.8 * len(frame)


def _looks_like_target(frame: Any, column: str, kind: str) -> bool:
    values = frame[column]
    distinct = values.nunique()
    if kind == "binary":
        return distinct == 2
    if kind == "multi":
        return 2 < distinct < 10
    if kind == "cluster":
        return 1 <= distinct < max(0.01 * len(frame), 10)
    numeric = str(values.dtype) in ("int64", "float64")
    ordered = values.sort_values().diff().dropna()
    running = len(ordered) > 0 and bool((ordered == 1).all())  # 1, 2, 3...: an index
    return numeric and not running and distinct > max(3, 0.1 * len(frame))


def _split(frame: Any, kind: str, wanted: str) -> tuple[Any, str]:
    """The frame without its identifier columns, and its target column ('' if none)."""
    columns = [str(c) for c in frame.columns]
    frame = frame.set_axis(columns, axis=1)
    target = _match(wanted, columns) if wanted else ""
    if len(columns) == 1:
        return frame, target or columns[0]
    identifiers = [c for c in columns if _is_identifier(frame, c)]
    if not target:
        candidates = [c for c in columns if c not in identifiers
                      and _looks_like_target(frame, c, kind)]  # fmt: skip
        if len(candidates) == 1:
            target = candidates[0]
        else:
            target = next((c for c in candidates if c.lower() in LABEL_NAMES), "")
    kept = frame.drop(columns=[c for c in identifiers if c != target])
    return kept, target


def _labels(values: Any) -> list:
    """Class labels as DA-Code compares them: numbers as integers, texts trimmed, any case."""
    kind = str(values.dtype)
    if "float" in kind or "bool" in kind:
        return [int(v) for v in values.fillna(-1)]
    if "int" in kind:
        return list(values)
    return [str(v).strip().lower() for v in values]


def _numbers(values: Any) -> Any:
    import numpy as np
    import pandas as pd

    array = values.to_numpy() if isinstance(values, pd.Series | pd.DataFrame) else values
    if not np.issubdtype(np.asarray(array).dtype, np.number):
        raise _Refused("the predictions hold values that are not numbers")
    return np.asarray(array, dtype=float)


def silhouette(features: Any, labels: Any) -> float:
    """DA-Code's silhouette: a point's own-cluster distance averaged with itself counted."""
    import numpy as np
    from sklearn.metrics import pairwise_distances

    labels = np.asarray(labels)
    clusters = np.unique(labels)
    if len(clusters) < 2:
        raise _Refused("the answer has a single cluster; a silhouette needs two or more")
    distances = pairwise_distances(np.asarray(features, dtype=float))
    means = np.stack([distances[:, labels == c].mean(axis=1) for c in clusters], axis=1)
    own = np.searchsorted(clusters, labels)
    inside = means[np.arange(len(labels)), own]
    means[np.arange(len(labels)), own] = np.inf
    nearest = means.min(axis=1)
    score = float(np.mean((nearest - inside) / np.maximum(inside, nearest)))
    return max(score, 0.0)


def _features(frame: Any) -> Any:
    from sklearn.preprocessing import LabelEncoder

    frame = frame.copy()
    for column in frame.columns:
        numeric = frame[column].apply(lambda v: isinstance(v, int | float)).all()
        if not numeric:
            frame[column] = LabelEncoder().fit_transform(frame[column].astype(str))
    return frame


def _qwk(given: Any, gold: Any) -> float:
    import numpy as np

    gold = np.asarray(gold).reshape(-1)
    try:
        given = np.asarray(given).reshape(-1).astype(gold.dtype)
    except (TypeError, ValueError) as exc:
        raise _Refused(f"the predictions cannot be read as the gold's labels: {exc}") from exc
    if given.min() != gold.min() or given.max() != gold.max():
        raise _Refused(
            "quadratic weighted kappa needs the predictions' label range to be the gold's"
        )
    low = gold.min()
    classes = int(gold.max() - low) + 1
    truth, guess = (gold - low).astype(int), (given - low).astype(int)
    observed = np.zeros((classes, classes))
    np.add.at(observed, (truth, guess), 1)
    expected = np.outer(
        np.bincount(truth, minlength=classes), np.bincount(guess, minlength=classes)
    )
    expected = expected / expected.sum() * observed.sum()
    grid = np.arange(classes)
    weights = (grid[:, None] - grid[None, :]) ** 2 / max(classes - 1, 1) ** 2
    denominator = (weights * expected).sum()
    return float(1.0 - (weights * observed).sum() / denominator) if denominator else 1.0


def _metric(name: str, given: Any, gold: Any) -> float:
    import numpy as np
    from sklearn import metrics

    if name in ("f1", "accuracy"):
        truth, guess = _labels(gold), _labels(given)
        if {type(v) for v in truth} != {type(v) for v in guess}:
            guess = [str(v) for v in guess]
            truth = [str(v) for v in truth]
        if name == "accuracy":
            return float(metrics.accuracy_score(truth, guess))
        return float(metrics.f1_score(truth, guess, average="weighted"))
    if name == "quadratic_weighted_kappa":
        return _qwk(given, gold)
    guess, truth = _numbers(given), _numbers(gold)
    if name == "roc_auc_score":
        return float(metrics.roc_auc_score(truth, guess))
    if name == "r2":
        return float(metrics.r2_score(truth, guess))
    if name == "rmse":
        return math.sqrt(metrics.mean_squared_error(truth, guess))
    if name == "mse":
        return float(metrics.mean_squared_error(truth, guess))
    if name == "mae":
        return float(metrics.mean_absolute_error(truth, guess))
    if name == "medae":
        return float(metrics.median_absolute_error(truth, guess))
    if name == "rmsle":
        return math.sqrt(metrics.mean_squared_log_error(truth, np.clip(guess, 0, None)))
    if name == "smape":
        size = (np.abs(guess) + np.abs(truth)) / 2
        with np.errstate(divide="ignore", invalid="ignore"):
            parts = np.where(size == 0, 0.0, np.abs(guess - truth) / size)
        return float(np.mean(parts) * 100)
    if name in ("logloss", "logloss_class", "logloss_total"):
        return float(metrics.log_loss(truth, guess))
    raise _Refused(f"no metric {name!r}")


def _bounds(config: dict[str, Any]) -> tuple[float, float]:
    return float(config.get("lower_bound", 0.0)), float(config.get("upper_bound", 0.9))


def _result(metric: str, value: float | None, config: dict[str, Any], error: str = "") -> dict:
    lower, upper = _bounds(config)
    score = 0.0 if value is None else scale(value, metric, lower, upper)
    row = {"score": score, "metric": metric, "metric_value": value,
           "lower_bound": lower, "upper_bound": upper}  # fmt: skip
    return row | ({"error": error} if error else {})


def _read(path: Path) -> Any:
    import pandas as pd

    try:
        return pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise _Refused(f"cannot read {path.name}: {exc}") from exc


def compare_ml(given: Path, gold: Path | None, options: dict[str, Any], config: dict) -> dict:
    """Score a classification, clustering or regression task's predictions."""
    metric = str(config.get("metric", "")).strip().lower()
    try:
        kind = _task_type(config)
        if not given.is_file():
            raise _Refused(f"no {given.name} delivered")
        frame = _read(given)
        wanted = "Cluster" if kind == "cluster" else str(options.get("target_column") or "")
        if kind == "cluster":
            kept, target = _split(frame, kind, wanted)
            if not target:
                raise _Refused("no Cluster column in the answer")
            labels = kept[target].to_numpy()
            features = _features(kept)
            if len(labels) > SAMPLE:
                from sklearn.utils import resample

                features, labels = resample(features, labels, n_samples=SAMPLE,
                                            random_state=42, stratify=labels)  # fmt: skip
            return _result(metric, silhouette(features, labels), config)
        if gold is None or not gold.is_file():
            raise _Refused("the task has no gold file")
        truth = _read(gold)
        if len(truth) != len(frame):
            raise _Refused(f"{len(frame)} rows delivered, the gold has {len(truth)}")
        truth, gold_target = _split(truth, kind, wanted)
        frame, target = _split(frame, kind, gold_target)
        if not target:
            raise _Refused(f"no target column in the answer (the gold's is {gold_target!r})")
        value = _metric(metric, frame[target], truth[gold_target])
    except _Refused as exc:
        return _result(metric, None, config, str(exc))
    except ValueError as exc:  # scikit-learn refuses the values (unknown labels, NaN...)
        return _result(metric, None, config, f"cannot compute {metric}: {exc}")
    return _result(metric, value, config)


def compare_competition_ml(given: Path, gold: Path, options: dict[str, Any], config: dict) -> dict:
    """Score a competition submission: the gold's rows and columns, matched by identifier."""
    metric = str(config.get("metric", "")).strip().lower().replace(" ", "_")
    try:
        if not given.is_file():
            raise _Refused(f"no {given.name} delivered")
        frame, truth = _read(given), _read(gold)
        if len(frame) != len(truth):
            raise _Refused(f"{len(frame)} rows delivered, the gold has {len(truth)}")
        if set(frame.columns) != set(truth.columns):
            raise _Refused(f"the columns are {sorted(frame.columns)}, not {sorted(truth.columns)}")
        key = next((c for c in truth.columns if "id" in str(c).lower()), None)
        if key is not None and truth[key].nunique() > max(0.6 * len(truth), 2):
            if set(frame[key]) != set(truth[key]):
                raise _Refused(f"the {key} values are not the gold's")
            frame = frame.sort_values(key).drop(columns=[key])
            truth = truth.sort_values(key).drop(columns=[key])
        frame, truth = frame.sort_index(axis=1), truth.sort_index(axis=1)
        if metric in ("f1", "accuracy"):
            value = _metric(metric, frame.iloc[:, 0], truth.iloc[:, 0])
        else:
            value = _metric(metric, frame.to_numpy(), truth.to_numpy())
    except _Refused as exc:
        return _result(metric, None, config, str(exc))
    except ValueError as exc:
        return _result(metric, None, config, f"cannot compute {metric}: {exc}")
    return _result(metric, value, config)
