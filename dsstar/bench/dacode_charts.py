"""DA-Code's chart scorer: a chart counts by what it holds, read from the figure (`plot.json`:
its properties; `result.npy`: its plotted data), or by its image when that is the gold's own.

A chart scores 1 when

- its image equals the gold image pixel for pixel (grey levels; colours when the task checks
  `color`; at the gold's size, else resized to it unless the task checks `figsize`), or
- its data matches and every property the task checks matches.

Data: both arrays as columns (a flat array is one column), of the same shape, equal within
0.01 once each column is sorted, either as they are or each divided by its total (a chart of
shares matches one of counts).

Properties (`keys` in the task's options, else every key of the gold `plot.json`):

- `figsize`: equal lists; `type`: equal, any case;
- `graph_title`, `x_label`, `y_label`, `legend_title`: at least 90 % alike, any case (an empty
  one fails where the gold has one);
- `labels`, `xtick_labels`, `ytick_labels`: as many as the gold's, each more than 95 % alike to
  one of the gold's, any case;
- `color`: every colour within 15 (RGB distance) of one of the gold's.

Otherwise the chart scores 0.
"""

from __future__ import annotations

import json
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

__all__ = ["compare_image", "same_data", "same_property"]

TEXT_KEYS = ("graph_title", "x_label", "y_label", "legend_title")
LIST_KEYS = ("labels", "xtick_labels", "ytick_labels")


def _alike(a: str, b: str) -> float:
    """Similarity in percent, as the fuzzy ratio DA-Code uses (0..100)."""
    return round(100 * SequenceMatcher(None, a, b).ratio())


def _rgb(colour: str) -> tuple[int, ...]:
    text = str(colour).lstrip("#")
    return tuple(int(text[i : i + 2], 16) for i in (0, 2, 4))


def same_property(key: str, given: dict[str, Any], gold: dict[str, Any]) -> bool:
    """Whether the delivered chart's property `key` matches the gold's."""
    key = key.lower()
    mine, theirs = given.get(key), gold.get(key)
    if key == "figsize":
        return list(mine or []) == list(theirs or [])
    if key == "type":
        return str(mine or "").lower() == str(theirs or "").lower()
    if key in TEXT_KEYS:
        if not mine and theirs:
            return False
        return _alike(str(mine or "").lower(), str(theirs or "").lower()) >= 90
    if key in LIST_KEYS:
        mine, theirs = [str(x).lower() for x in mine or []], [str(x).lower() for x in theirs or []]
        if len(mine) != len(theirs):
            return False
        return all(any(_alike(x, y) > 95 for y in theirs) for x in mine)
    if key == "color":
        try:
            golds = [_rgb(c) for c in theirs or []]
            return all(
                any(sum((a - b) ** 2 for a, b in zip(_rgb(c), g, strict=True)) ** 0.5 <= 15
                    for g in golds)
                for c in mine or []
            )  # fmt: skip
        except ValueError:
            return False
    return mine == theirs  # a key DA-Code does not define: equal values


def _as_columns(array: Any) -> Any:
    return array.reshape(-1, 1) if array.ndim == 1 else array


def same_data(given: Any, gold: Any) -> bool:
    """Whether two plotted arrays match, as values or as shares of their totals."""
    import numpy as np

    try:
        given, gold = (
            _as_columns(np.asarray(given, dtype=float)),
            _as_columns(np.asarray(gold, dtype=float)),
        )
    except (TypeError, ValueError):
        return False
    if given.shape != gold.shape:
        return False

    def close(a: Any, b: Any) -> bool:
        return bool(np.allclose(np.sort(a, axis=0), np.sort(b, axis=0), atol=1e-2, equal_nan=True))

    with np.errstate(divide="ignore", invalid="ignore"):
        return close(given, gold) or close(given / given.sum(), gold / gold.sum())


def _same_image(given: Path, gold: Path, colour: bool, sized: bool) -> bool:
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(given) as mine, Image.open(gold) as theirs:
            mode = None if colour else "L"
            mine_img = mine.convert(mode) if mode else mine.copy()
            theirs_img = theirs.convert(mode) if mode else theirs.copy()
    except (OSError, UnidentifiedImageError):
        return False
    if mine_img.mode != theirs_img.mode:
        return False
    if not sized:
        mine_img = mine_img.resize(theirs_img.size)
    a, b = np.asarray(mine_img), np.asarray(theirs_img)
    return a.shape == b.shape and bool(np.allclose(a, b, atol=1e-2))


def _load_json(path: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def compare_image(
    image: Path, plot_json: Path, data: Path, gold: dict[str, Path], options: dict[str, Any]
) -> dict[str, Any]:
    """Score a chart: `image`, `plot_json` and `data` delivered; `gold` has `image`, `json`
    and `npy` (the last two may be absent from the gold)."""
    import numpy as np

    keys = [str(k) for k in options.get("keys") or []]
    checks: dict[str, Any] = {}
    if image.is_file() and gold.get("image") and gold["image"].is_file():
        checks["image"] = _same_image(image, gold["image"], "color" in keys, "figsize" in keys)
        if checks["image"]:
            return {"score": 1.0, "checks": checks}
    gold_npy = gold.get("npy")
    if gold_npy is None or not gold_npy.is_file():
        return {"score": 0.0, "checks": checks, "error": "the gold has no result.npy"}
    try:
        delivered = np.load(data, allow_pickle=False) if data.is_file() else None
    except (OSError, ValueError):
        delivered = None
    checks["data"] = delivered is not None and same_data(delivered, np.load(gold_npy))
    gold_props = _load_json(gold["json"]) if gold.get("json") else None
    if gold_props is not None:
        given_props = _load_json(plot_json) or {}
        for key in keys or list(gold_props):
            checks[key] = bool(given_props) and same_property(key, given_props, gold_props)
    passed = all(value for name, value in checks.items() if name != "image")
    return {"score": float(passed), "checks": checks}
