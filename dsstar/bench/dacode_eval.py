"""One task's answer folder scored the way DA-Code's evaluator scores it: which files are the
answer, which scorer sees which file, and how the parts make the task's score.

- `dabench/result.json` says whether the task finished (an unfinished one scores 0) and what
  the agent answered (`result`). A folder without it is left out by DA-Code's evaluator; here
  it scores 0, marked missing.
- A task answered in text (its eval config gives the gold as `number`) is scored on the
  `result` text itself, unless that text ends like a file name (.txt, .json, .png, .jpg, .csv,
  .npy): then on the files it names.
- A task answered in files is scored on the files the `result` text names (every word that
  looks like `name.ext`, taken as a file at the top of the folder; a chart adds
  `dabench/plot.json` and `dabench/result.npy`), when it names as many as the gold has; else
  on the files by the names the eval config gives.
- The scorers (`func`), their options and the files are paired in order; a list of one goes
  with every file. A missing gold file scores that part 0; any other failure scores it 0 and
  ends the task's scoring (the parts after it are not scored, and do not count).
- The parts combine by the config's `conj`: avg (the default), max, min, and (1 when no part
  is 0) or or (1 when some part is not 0).

Beside the score, `corrected_score` combines the parts' corrected figures (dacode_ml) where a
part has one, and `why` says why a task scores 0.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from dsstar.bench import dacode_charts, dacode_ml, dacode_tables, dacode_text

__all__ = ["read_result", "score_folder"]

OUTPUT_SUFFIXES = (".txt", ".json", ".png", ".jpg", ".csv", ".npy")
NAMED = re.compile(r"\b(?:[\w/\-_]+/)?([\w\-_]+(\.\w+)+)\b")  # a file name, path aside
CHART_DATA = ("dabench/plot.json", "dabench/result.npy")


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def read_result(folder: Path) -> dict[str, Any] | None:
    """`dabench/result.json` of an answer folder (None when absent or unreadable)."""
    try:
        found = json.loads((folder / "dabench" / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _config_files(specs: list[dict], folder: str, gold: bool) -> tuple[str, list]:
    """('number', [the gold values]) or ('file', [a path, or a list of paths when `multi`]):
    the files by the eval config's names, in `folder` (the gold's: by their base names)."""
    if "number" in specs[0]:
        return "number", [specs[0]["number"]]
    found: list[Any] = []
    for spec in specs:
        names = [str(name) for name in _listed(spec["file"])]
        paths = [os.path.join(folder, os.path.basename(n) if gold else n) for n in names]
        if spec.get("multi", False):
            found.append(paths)
        else:
            found.extend(paths)
    return "file", found


def _named_files(folder: str, text: str, chart: bool) -> list:
    """The files the answer text names, at the top of the folder (a chart: with its data)."""
    names = [match[0] for match in NAMED.findall(text)]
    if not names:
        return []
    paths = [os.path.join(folder, name) for name in names]
    if chart:
        return [paths + [os.path.join(folder, name) for name in CHART_DATA]]
    return paths


def _answers(record: dict[str, Any], specs: list[dict], folder: str, chart: bool,
             gold_count: int, kind: str) -> list:  # fmt: skip
    text = str(record.get("result") or "")
    if kind == "number":
        return [text] if not text.endswith(OUTPUT_SUFFIXES) else _named_files(folder, text, chart)
    found = _named_files(folder, text, chart)
    if len(found) != gold_count:
        found = _config_files(specs, folder, gold=False)[1]
    return found


def _paired(config: dict[str, Any], answers: list, golds: list) -> list[tuple[str, Any, Any, dict]]:
    """(scorer, answer, gold, options) for each part, spread and cut as DA-Code pairs them."""
    funcs = [str(f) for f in _listed(config["func"])]
    options = config.get("options", [{}] * len(funcs))
    options = [dict(o or {}) for o in _listed(options)]
    lists = [funcs, answers, golds, options]
    longest = max(len(answers), len(golds), len(funcs))
    lists = [items * longest if len(items) == 1 and longest > 1 else items for items in lists]
    shortest = min(len(items) for items in lists)
    return list(zip(*(items[:shortest] for items in lists), strict=True))


def _scorer(func: str) -> Any:
    def csv(given: Any, gold: Any, options: dict) -> Any:
        if isinstance(given, list):
            raise TypeError("a CSV answer is one file")
        golds = [Path(g) for g in gold] if isinstance(gold, list) else Path(gold)
        return dacode_tables.compare_csv(Path(given), golds, options)

    def sqlite(given: Any, gold: Any, options: dict) -> Any:
        return dacode_tables.compare_sqlite(Path(given), Path(gold), options)

    scorers = {"compare_csv": csv, "compare_sqlite": sqlite,
               "compare_text": dacode_text.compare_text,
               "compare_image": dacode_charts.compare_image,
               "compare_ml": dacode_ml.compare_ml,
               "compare_competition_ml": dacode_ml.compare_competition_ml}  # fmt: skip
    if func not in scorers:
        raise ValueError(f"unknown scorer {func!r} (DA-Code's evaluator stops on it)")
    return scorers[func]


def _number(value: Any) -> float:
    """A part's score as the evaluator counts it: a Python number, else 0."""
    return value if isinstance(value, float | int) else 0.0


def _why(func: str, given: Any, gold: Any, part: dict[str, Any]) -> str:
    if part.get("error"):
        return str(part["error"])
    if func == "compare_text":
        try:
            return dacode_text.explain(given, gold)
        except Exception:  # an answer the scorer could not read either
            return "no JSON answer in the result text"
    files = [p for p in _listed(given) if isinstance(p, str)]
    missing = [os.path.basename(p) for p in files if not os.path.exists(p)]
    if missing and func != "compare_image":
        return f"no {', '.join(missing)} delivered"
    if func == "compare_image":
        failed = [name for name, passed in (part.get("checks") or {}).items() if not passed]
        return f"the chart does not match the gold ({', '.join(failed)})"
    return "no gold column is among the delivered ones" if func == "compare_csv" else "score 0"


def _score_parts(config: dict[str, Any], pairs: list) -> list[dict[str, Any]]:
    parts = []
    task_config = config.get("config", {})
    for func, given, gold, options in pairs:
        options = options | ({"config": task_config} if task_config else {})
        part: dict[str, Any] = {"scorer": func}
        try:
            returned = _scorer(func)(given, gold, options)
        except FileNotFoundError as exc:  # DA-Code: this part 0, the next ones still scored
            parts.append(part | {"score": 0.0, "error": f"missing: {exc}"})
            continue
        except Exception as exc:  # DA-Code: this part 0, and the task's scoring ends here
            parts.append(part | {"score": 0.0, "error": f"{type(exc).__name__}: {exc}"})
            break
        if isinstance(returned, dict):
            part |= returned
            part["score"] = _number(returned.get("score", 0.0))
        else:
            part |= {"score": _number(returned), "found": returned}
        if part["score"] == 0:
            part["why"] = _why(func, given, gold, part)
        part.pop("found", None)
        parts.append(part)
    return parts


def _combine(scores: list[float], conj: str) -> float:
    if not scores:
        return 0.0
    if conj == "max":
        return float(max(scores))
    if conj == "min":
        return float(min(scores))
    if conj == "and":
        return float(all(score != 0 for score in scores))
    if conj == "or":
        return float(any(score != 0 for score in scores))
    return float(sum(scores) / len(scores))


def score_folder(config: dict[str, Any], gold_root: Path, folder: Path | None) -> dict[str, Any]:
    """The task's `score`, its `parts`, `corrected_score` where a part has a corrected figure,
    and `why` when the score is 0."""
    record = read_result(folder) if folder is not None else None
    if record is None:
        absent = folder is None or not folder.is_dir()
        where = "no answer folder" if absent else "no dabench/result.json"
        return {"score": 0.0, "missing": True, "why": f"{where} (DA-Code leaves the task out)"}
    if record.get("finished", True) is False or record.get("finished") == 0:
        return {"score": 0.0, "why": "the run did not finish (result.json: finished false)"}
    specs = [dict(s) for s in _listed(config["result"])]
    task = (config.get("config") or {}).get("task", "")
    kind, golds = _config_files(specs, str(gold_root / str(config["id"])), gold=True)
    answers = _answers(record, specs, str(folder), task == "data visualization", len(golds), kind)
    parts = _score_parts(config, _paired(config, answers, golds))
    conj = str(config.get("conj") or "avg")
    row: dict[str, Any] = {"score": _combine([p["score"] for p in parts], conj), "parts": parts}
    if any("corrected" in p for p in parts):
        fixed = [p["corrected"]["score"] if "corrected" in p else p["score"] for p in parts]
        row["corrected_score"] = _combine(fixed, conj)
    if row["score"] == 0:
        row["why"] = "; ".join(p.get("why") or p.get("error") or "score 0" for p in parts)
    return row
