"""DA-Code's machine-learning metrics, as its evaluator defines them (dacode_ml says which
differ from the textbook's, and scales them). Each takes the predictions and the gold
(pandas Series or frames), the task type and the part's options, and returns the value;
`Refused` where DA-Code scores the part 0 with a reason, any other error where DA-Code's
evaluator fails on it."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["METRICS", "Refused", "encoded", "metric", "silhouette"]

SAMPLE = 6000
CLIP = 1e-15


class Refused(Exception):
    """DA-Code scores the part 0 and says why (a metric it could not compute, no file)."""


class _Encoder:
    """Labels as DA-Code's classification metrics read them: floats truncated to integers,
    booleans as 0/1, integers as they are, texts trimmed and lower-cased, then numbered by one
    label encoder fitted on the first text column it meets (the gold's, when it is text)."""

    def __init__(self) -> None:
        from sklearn.preprocessing import LabelEncoder

        self.encoder = LabelEncoder()
        self.fitted = False
        self.errors: list[str] = []

    def __call__(self, values: Any) -> Any:
        import pandas as pd

        if isinstance(values, pd.DataFrame):
            return {column: self(values[column]) for column in values.columns}
        kind = str(values.dtype)
        if "float" in kind:
            return list(values.astype(int))
        if "int" in kind:
            return list(values)
        if "bool" in kind.lower():
            return list(values.astype(int))
        try:
            texts = [item.lower().strip() for item in values]
            if self.fitted:
                return self.encoder.transform(texts)
            encoded = self.encoder.fit_transform(texts)
            self.fitted = True
            return encoded
        except Exception as exc:  # any label it cannot read or has not seen
            self.errors.append(f"cannot encode the labels: {exc}")
            return None


def _accuracy(result: Any, gold: Any, kind: str, options: dict) -> float:
    import numpy as np
    from sklearn.metrics import accuracy_score

    encode = _Encoder()
    gold, result = encode(gold), encode(result)
    if isinstance(result, np.ndarray):
        if result.ndim > 2 or (result.ndim == 2 and result.shape[-1] > 1):
            raise Refused("the predictions are not one column")
        result = result.reshape(-1) if result.ndim == 2 else result
    if isinstance(gold, np.ndarray):
        if gold.ndim > 2 or (gold.ndim == 2 and gold.shape[-1] > 1):
            raise ValueError("the gold is not one column")
        gold = result  # DA-Code's own slip: encoded gold labels are replaced by the predictions
    try:
        return float(accuracy_score(gold, result))
    except Exception as exc:
        raise Refused(f"cannot compute accuracy: {exc}") from exc


def _f1(result: Any, gold: Any, kind: str, options: dict) -> float:
    import pandas as pd
    from sklearn.metrics import f1_score

    gold = gold.iloc[:, 0] if isinstance(gold, pd.DataFrame) else gold
    result = result.iloc[:, 0] if isinstance(result, pd.DataFrame) else result
    encode = _Encoder()
    gold, result = encode(gold), encode(result)
    try:
        return float(f1_score(gold, result, average=options.get("average") or "weighted"))
    except Exception as exc:
        raise Refused(f"cannot compute f1: {exc}") from exc


def _arrays(result: Any, gold: Any) -> tuple[Any, Any]:
    try:
        given = result.to_numpy()
    except Exception as exc:
        raise Refused(f"the predictions cannot be read as an array: {exc}") from exc
    return given, gold.to_numpy()


def _guarded(name: str, compute: Any) -> float:
    try:
        return float(compute())
    except Exception as exc:  # DA-Code scores any failure inside a metric 0, with its reason
        raise Refused(f"cannot compute {name}: {exc}") from exc


def _columns(array: Any) -> Any:
    if array.ndim > 2:
        raise ValueError(f"expected a 1D or 2D array, got {array.ndim}D")
    return array.reshape(-1, 1) if array.ndim == 1 else array


def _r2(result: Any, gold: Any, kind: str, options: dict) -> float:
    import numpy as np
    from sklearn.metrics import r2_score

    given, truth = _arrays(result, gold)
    if not np.issubdtype(given.dtype, np.number):
        raise Refused("the predictions hold values that are not numbers")
    return _guarded("r2", lambda: r2_score(truth, given))


def _roc_auc(result: Any, gold: Any, kind: str, options: dict) -> float:
    import numpy as np
    from sklearn.metrics import roc_auc_score

    given, truth = _arrays(result, gold)
    if kind == "binary":
        given, truth = _columns(given), _columns(truth)
        return _guarded("roc_auc_score", lambda: sum(
            roc_auc_score(truth[:, c], given[:, c]) for c in range(truth.shape[1])
        ) / truth.shape[1])  # fmt: skip
    if kind == "multi":
        if len(np.argwhere(np.sum(truth == 1, axis=1) == 1)) != truth.shape[0]:
            raise ValueError("each gold row needs exactly one 1")
        if given.ndim != 2 or given.shape[-1] < 3:
            raise ValueError("the predictions need three or more probability columns")
        if not np.allclose(np.sum(given, axis=1), 1):
            raise ValueError("a row's probabilities do not sum to 1")
        classes = np.argmax(truth == 1, axis=1)
        return _guarded("roc_auc_score", lambda: roc_auc_score(classes, given))
    raise TypeError(f"roc_auc_score is defined for binary and multi tasks, not {kind}")


def _probabilities(result: Any, gold: Any, total: bool) -> tuple[Any, Any]:
    import numpy as np

    given, truth = _arrays(result, gold)
    if total:
        given = given / (given.sum(axis=1, keepdims=True) + CLIP)
    else:
        given = given / given.sum(axis=0 if given.ndim == 1 else 1, keepdims=True)
    given = np.clip(given, CLIP, 1 - CLIP)
    if given.shape != truth.shape:
        raise Refused("the predictions and the gold have different shapes")
    return given, truth


def _log_terms(given: Any, truth: Any) -> Any:
    """Per class: the sum of log2 of the probability given where the gold marks the class."""
    import numpy as np

    logs = np.zeros_like(given, dtype=float)
    marked = np.where(truth * given != 0)
    logs[marked] = np.log2(given[marked])
    return np.sum(logs, axis=0)


def _logloss_class(result: Any, gold: Any, kind: str, options: dict) -> float:
    import numpy as np

    given, truth = _probabilities(result, gold, total=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _guarded("logloss", lambda: -np.sum(
            _log_terms(given, truth) / np.count_nonzero(truth, axis=0)) / 2)  # fmt: skip


def _logloss_total(result: Any, gold: Any, kind: str, options: dict) -> float:
    import numpy as np

    given, truth = _probabilities(result, gold, total=True)
    return _guarded("logloss", lambda: -np.sum(_log_terms(given, truth) / truth.shape[0]) / 2)


def _qwk(result: Any, gold: Any, kind: str, options: dict) -> float:
    import numpy as np
    from sklearn.metrics import confusion_matrix

    given, truth = _arrays(result, gold)
    given, truth = given.reshape(-1), truth.reshape(-1)

    def compute() -> float:
        nonlocal given, truth
        if truth.dtype != given.dtype:
            given = given.astype(truth.dtype)
        count = len(np.unique(truth))
        observed = confusion_matrix(truth, given, labels=np.arange(count))  # labels unshifted
        grid = np.arange(1, count + 1)
        weights = (grid[:, None] - grid[None, :]) ** 2 / ((count - 1) ** 2)
        if count == 1:
            raise ZeroDivisionError("one class: no kappa")
        if min(truth) != min(given) or max(truth) != max(given):
            raise Refused("the predictions' label range is not the gold's")
        low = min(truth)
        truth, given = (truth - low, given - low) if low else (truth, given)
        expected = np.outer(np.bincount(truth, minlength=count),
                            np.bincount(given, minlength=count))  # fmt: skip
        expected = expected / expected.sum() * observed.sum()
        return 1 - np.sum(weights * observed) / np.sum(weights * expected)

    try:
        return float(compute())
    except Refused:
        raise
    except Exception as exc:
        raise Refused(f"cannot compute quadratic_weighted_kappa: {exc}") from exc


def _error_metric(name: str) -> Any:
    def metric(result: Any, gold: Any, kind: str, options: dict) -> float:
        import numpy as np
        from sklearn import metrics

        given, truth = _arrays(result, gold)
        if name == "rmsle":
            given = _guarded_array(lambda: np.clip(given, 0, None))
            return _guarded(name, lambda: metrics.mean_squared_log_error(truth, given))
        if name == "rmse":
            return _guarded(name, lambda: math.sqrt(metrics.mean_squared_error(truth, given)))
        if name == "mse":
            return _guarded(name, lambda: metrics.mean_squared_error(truth, given))
        if name == "mae":
            return _guarded(name, lambda: metrics.mean_absolute_error(truth, given))
        if truth.ndim > 2 or given.ndim > 2:
            raise ValueError(f"{name} needs a 1D or 2D array")
        if name == "medae":
            return _guarded(name, lambda: metrics.median_absolute_error(truth, given))
        return _guarded(name, lambda: _smape(_columns(given), _columns(truth)))

    return metric


def _guarded_array(compute: Any) -> Any:
    try:
        return compute()
    except Exception as exc:
        raise Refused(f"the predictions cannot be read as numbers: {exc}") from exc


def _smape(given: Any, truth: Any) -> float:
    import numpy as np

    size = (np.abs(given) + np.abs(truth)) / 2.0
    size[size == 0] = np.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        parts = np.where(np.isnan(size), 0, np.abs(given - truth) / size)
    return float(np.nanmean(parts)) * 100


def silhouette(features: Any, labels: Any) -> float:
    """DA-Code's silhouette: a point's own-cluster mean distance counts the point itself;
    a negative mean counts as 0."""
    import numpy as np
    from sklearn.metrics import pairwise_distances

    labels = np.asarray(labels)
    if len(np.unique(labels)) == 1:
        raise Refused("the answer has a single cluster; a silhouette needs two or more")
    try:
        if len(labels) > SAMPLE:
            from sklearn.utils import resample

            features, labels = resample(features, labels, n_samples=SAMPLE, random_state=42,
                                        stratify=labels)  # fmt: skip
        clusters = np.unique(labels)
        if len(clusters) == 1:
            raise ValueError("a single cluster in the sample")
        distances = pairwise_distances(features)
        means = np.stack([distances[:, labels == c].mean(axis=1) for c in clusters], axis=1)
        own = np.searchsorted(clusters, labels)
        rows = np.arange(len(labels))
        inside = means[rows, own]
        means[rows, own] = np.inf
        nearest = means.min(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = float(np.mean((nearest - inside) / np.maximum(inside, nearest)))
    except Exception as exc:
        raise Refused(f"cannot compute the silhouette: {exc}") from exc
    return 0.0 if score < 0 else score


def encoded(frame: Any) -> Any:
    """Text columns label-encoded, as DA-Code does before a silhouette."""
    import pandas as pd
    from sklearn.preprocessing import LabelEncoder

    frame = frame.copy()
    for column in frame.columns:
        try:
            pd.to_numeric(frame[column])
        except ValueError:
            try:
                frame[column] = LabelEncoder().fit_transform(frame[column])
            except Exception as exc:
                raise Refused(f"column {column!r} holds values that cannot be encoded") from exc
    return frame


METRICS = {
    "accuracy": _accuracy, "f1": _f1, "r2": _r2, "roc_auc_score": _roc_auc,
    "logloss_class": _logloss_class, "logloss_total": _logloss_total,
    "quadratic_weighted_kappa": _qwk, "silhouette": None,
    **{name: _error_metric(name) for name in ("rmsle", "rmse", "mse", "mae", "medae", "smape")},
}  # fmt: skip


def metric(name: str) -> Any:
    try:
        return METRICS[name]
    except KeyError:
        raise AttributeError(f"DA-Code has no metric {name!r}") from None
