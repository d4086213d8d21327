"""DA-Code's chart scorer: a chart counts by what it holds, read from the figure (`plot.json`:
its properties; `result.npy`: its plotted data), or by its image when that is the gold's own,
as DA-Code's evaluator scores it.

A chart scores 1 when

- its image (the delivered file whose path holds the gold image's name) equals the gold image
  pixel for pixel (grey levels; the raw channels when the task checks `color`; at the gold's
  size, else resized to it unless the task checks `figsize`), or
- its data matches and, when both sides have a `plot.json`, every property the task checks
  matches.

Data: both arrays as columns (a flat array is one column), of the same shape, equal within
0.01 once each column is sorted, either as they are or each divided by the array's total (a
chart of shares matches one of counts).

Properties (`keys` in the task's options, else every key of the gold `plot.json`):

- `figsize`: equal lists; `type`: equal, any case;
- `graph_title`, `x_label`, `y_label`, `legend_title`: a similarity ratio (python-Levenshtein's,
  in percent, rounded) of at least 90, any case (an empty one fails where the gold has one);
- `labels`, `xtick_labels`, `ytick_labels`: as many as the gold's, each above 95 alike to one
  of the gold's, any case;
- `color`: every colour within 15 (RGB distance) of one of the gold's;
- any other key is an error (the chart scores 0).

Otherwise the chart scores 0. One difference remains: an image of another size than the gold's
is resized here by Pillow (bilinear), by OpenCV in DA-Code; a resized image almost never
equals the gold pixel for pixel in either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["compare_image", "same_data", "same_property"]

TEXT_KEYS = ("graph_title", "x_label", "y_label", "legend_title")
LIST_KEYS = ("labels", "xtick_labels", "ytick_labels")


def _alike(a: str, b: str) -> int:
    """Similarity in percent as DA-Code's fuzzy ratio gives it: python-Levenshtein's ratio,
    rounded; equal texts 100, an empty one 0."""
    from rapidfuzz import fuzz

    if a == b:
        return 100
    return round(fuzz.ratio(a, b)) if a and b else 0


def _rgb(colour: str) -> tuple[int, ...]:
    text = str(colour).lstrip("#")
    return tuple(int(text[i : i + 2], 16) for i in (0, 2, 4))


def same_property(key: str, given: dict[str, Any], gold: dict[str, Any]) -> bool:
    """Whether the delivered chart's property `key` matches the gold's; raises ValueError
    for a key DA-Code does not define."""
    key = key.lower()
    if key in ("figsize", "color", *LIST_KEYS):
        mine, theirs = list(given.get(key, [])), list(gold.get(key, []))
    else:
        mine, theirs = given.get(key, ""), gold.get(key, "")
    if key == "figsize":
        return mine == theirs
    if key == "type":
        return mine.lower() == theirs.lower()
    if key in TEXT_KEYS:
        if not mine and theirs:
            return False
        return _alike(mine.lower(), theirs.lower()) >= 90
    if key in LIST_KEYS:
        if len(mine) != len(theirs):
            return False
        mine, theirs = [x.lower() for x in mine], [x.lower() for x in theirs]
        return all(any(_alike(x, y) > 95 for y in theirs) for x in mine)
    if key == "color":
        golds = [_rgb(c) for c in theirs]
        return all(
            any(sum((a - b) ** 2 for a, b in zip(_rgb(c), g, strict=True)) ** 0.5 <= 15
                for g in golds)
            for c in mine
        )  # fmt: skip
    raise ValueError(f"no chart property {key!r}")


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


def _image(path: Path, colour: bool) -> Any:
    import numpy as np
    from PIL import Image

    with Image.open(path) as image:
        return np.array(image if colour else image.convert("L"))


def _same_image(given: Path, gold: Path, colour: bool, sized: bool) -> bool:
    import numpy as np
    from PIL import Image

    mine, theirs = _image(given, colour), _image(gold, colour)
    if theirs.ndim == 3 and (mine.ndim != 3 or mine.shape[-1] != theirs.shape[-1]):
        return False
    if sized:
        return mine.shape == theirs.shape and bool(np.allclose(mine, theirs, atol=1e-2))
    if mine.shape[:2] != theirs.shape[:2]:
        size = (theirs.shape[1], theirs.shape[0])
        mine = np.array(Image.fromarray(mine).resize(size, Image.Resampling.BILINEAR))
    return bool(np.allclose(mine, theirs, atol=1e-2))


def _images_match(results: list[str], golds: list[str], keys: list[str]) -> bool:
    for gold in golds:
        if not Path(gold).exists():
            raise ValueError(f"no gold image {gold}")
        name = Path(gold).name
        given = next((path for path in results if name in path), "")
        if not given or not Path(given).exists():
            return False
        if not _same_image(Path(given), Path(gold), "color" in keys, "figsize" in keys):
            return False
    return True


def _data_match(given: str, gold: str) -> bool:
    import numpy as np

    if not Path(given).exists():
        return False
    if not Path(gold).exists():
        raise ValueError(f"no gold data {gold}")
    return same_data(np.load(given, allow_pickle=True), np.load(gold, allow_pickle=True))


def _properties_match(given: str, gold: str, keys: list[str]) -> bool:
    if not Path(given).exists():
        return False
    if not Path(gold).exists():
        raise ValueError(f"no gold properties {gold}")
    mine = json.loads(Path(given).read_text())
    theirs = json.loads(Path(gold).read_text())
    return all([same_property(key, mine, theirs) for key in keys or list(theirs)])


def compare_image(results: Any, expected: Any, options: dict[str, Any]) -> dict[str, Any]:
    """Score a chart: `results` and `expected` are lists of paths (the image, `plot.json` and
    `result.npy`, told apart by their suffixes). Raises where DA-Code's evaluator raises (the
    gold lacks an image or data, a property it does not define)."""
    if not isinstance(expected, list):
        raise TypeError("a chart's gold is a list of files")
    results = [str(p) for p in (results if isinstance(results, list) else [results])]
    expected = [str(p) for p in expected]
    keys = list(options.get("keys", []))

    def of(paths: list[str], *suffixes: str) -> list[str]:
        return [p for p in paths if p.endswith(suffixes)]

    gold_images, gold_npy = of(expected, ".png", "jpg"), of(expected, ".npy")
    if not gold_npy or not gold_images:
        raise ValueError("the gold has no image or no result.npy")
    checks: dict[str, bool] = {"image": _images_match(of(results, ".png", "jpg"), gold_images,
                                                      keys)}  # fmt: skip
    if checks["image"]:
        return {"score": 1.0, "checks": checks}
    checks["data"] = _data_match(of(results, ".npy")[0], gold_npy[0])
    gold_json, given_json = of(expected, ".json"), of(results, ".json")
    if gold_json and given_json:
        checks["properties"] = _properties_match(given_json[0], gold_json[0], keys)
    return {"score": float(all(v for k, v in checks.items() if k != "image")), "checks": checks}
