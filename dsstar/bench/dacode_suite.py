"""The DA-Code suite: tasks whose answers are files (a table, a JSON answer, predictions, a
chart), scored against gold files by DA-Code's rules (dacode_tables, dacode_text, dacode_ml,
dacode_charts).

A DA-Code folder is either this project's slice layout (`tasks.jsonl`, `eval.jsonl`,
`source/<id>/`, `gold/<id>/`) or the DA-Code repository's `da_code/` (`configs/task/*.jsonl`,
`configs/eval/*.jsonl`, `source/<id>/`, `gold/<id>/`; the repository root works too). A task's
instruction is the question and its source folder the data.

Answers are a folder per task id, DA-Code's own output layout: the delivered files by the names
the eval config gives, chart data under `dabench/` (`plot.json`, `result.npy`), and optionally
`dabench/result.json` whose `result` is the agent's final answer text and `finished` whether
it finished (an unfinished task scores 0). `bench run` writes such a folder from each run's
deliverables (`collect`), so a run and another agent's output are scored by the same code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from dsstar.algorithm.verdict import ANSWERED
from dsstar.bench import dacode_charts, dacode_ml, dacode_tables, dacode_text, registry
from dsstar.bench.suites import BenchTask
from dsstar.errors import DSStarError, UsageError
from dsstar.keys import chart, in_run, output

__all__ = ["DacodeLayout", "collect", "dacode_tasks", "layout", "read_answers", "read_truth"]

GUIDELINES = (
    "Write every file the question asks for into the current working directory, under exactly "
    "the name it gives (a chart: save the matplotlib figure with savefig under that name). "
    "When the question asks for a JSON or text answer, give that JSON as the answer."
)


class DacodeLayout:
    """Where a DA-Code folder keeps its task and eval configs, sources and gold files."""

    def __init__(self, tasks: list[Path], evals: list[Path], source: Path, gold: Path) -> None:
        self.tasks, self.evals, self.source, self.gold = tasks, evals, source, gold


def _configs(folder: Path, preferred: str) -> list[Path]:
    if (folder / preferred).is_file():
        return [folder / preferred]
    return sorted(folder.glob("*.jsonl"))


def layout(root: str | Path) -> DacodeLayout:
    """The layout of `root`: the slice's, the `da_code/` folder's, or the repository's."""
    root = Path(root).expanduser().resolve()
    if (root / "eval.jsonl").is_file():
        tasks = [root / "tasks.jsonl"] if (root / "tasks.jsonl").is_file() else []
        return DacodeLayout(tasks, [root / "eval.jsonl"], root / "source", root / "gold")
    configs = root / "configs"
    if (configs / "eval").is_dir():
        return DacodeLayout(
            _configs(configs / "task", "all.jsonl"),
            _configs(configs / "eval", "eval_all.jsonl"),
            root / "source",
            root / "gold",
        )
    if (root / "da_code").is_dir():
        return layout(root / "da_code")
    raise UsageError(
        f"{root}: not a DA-Code folder (tasks.jsonl and eval.jsonl, or da_code/configs/eval)"
    )


def _jsonl(paths: list[Path]) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
            for line in lines:
                if line.strip():
                    record = json.loads(line)
                    records.setdefault(str(record["id"]), record)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"cannot read {path}: {exc}") from exc
    return records


def _category(task_id: str) -> str:
    """DA-Code's fine category, from the id: data-sa, di-text, ml-binary, plot-bar..."""
    head, _, tail = task_id.rpartition("-")
    return head if head and tail.isdigit() else task_id


def _truth(record: dict[str, Any], gold: Path) -> dict[str, Any]:
    config = record.get("config") or {}
    return {
        "task_id": str(record["id"]),
        "category": _category(str(record["id"])),
        "task": str(config.get("task") or "unknown"),
        "hardness": str(config.get("hardness") or "unknown").lower(),
        "eval": record,
        "gold": str(gold / str(record["id"])),
    }


def read_truth(root: Path) -> list[dict[str, Any]]:
    """A truth record per eval config of the DA-Code folder `root`."""
    found = layout(root)
    return [_truth(record, found.gold) for record in _jsonl(found.evals).values()]


def dacode_tasks(root: str | Path) -> list[BenchTask]:
    """The tasks of a DA-Code folder that have a source folder, in the tasks file's order."""
    found = layout(root)
    if not found.tasks:
        raise UsageError(f"{root}: no tasks file (tasks.jsonl or configs/task/*.jsonl)")
    evals = _jsonl(found.evals)
    tasks = []
    for task_id, record in _jsonl(found.tasks).items():
        data = found.source / task_id
        if not data.is_dir():
            continue  # DA-Code ships some tasks' data apart; only those here can run
        truth = _truth(evals[task_id], found.gold) if task_id in evals else None
        tasks.append(
            BenchTask(
                task_id=task_id,
                question=str(record.get("instruction") or ""),
                data=str(data),
                guidelines=GUIDELINES,
                level=str(record.get("hardness") or "unknown").lower(),
                domain=_category(task_id),
                truth=truth,
            )
        )
    if not tasks:
        raise UsageError(f"{root}: no task has a source folder under {found.source}")
    return tasks


def read_answers(folder: Path) -> list[dict[str, Any]]:
    """An answer record per task folder of `folder` (DA-Code's output layout)."""
    if not folder.is_dir():
        raise UsageError(f"--answers {folder}: no such folder (a folder per task id)")
    records = []
    for path in sorted(p for p in folder.iterdir() if p.is_dir()):
        record: dict[str, Any] = {"task_id": path.name, "answer_dir": str(path)}
        trajectory = path / "dabench" / "result.json"
        if trajectory.is_file():
            try:
                found = json.loads(trajectory.read_text(encoding="utf-8"))
            except ValueError:
                found = {}
            if isinstance(found, dict):
                record["agent_answer"] = found.get("result")
                record["finished"] = found.get("finished", True)
        records.append(record)
    return records


def _delivered(folder: Path, name: str) -> Path:
    """The delivered file `name`: at that path, else the first file of that name below."""
    direct = folder / name
    if direct.exists():
        return direct
    base = PurePosixPath(name).name
    return next(iter(sorted(folder.rglob(base))), direct) if folder.is_dir() else direct


def _files(spec: dict[str, Any]) -> list[str]:
    files = spec.get("file") or []
    return [str(f) for f in (files if isinstance(files, list) else [files])]


def _pairs(record: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(scorer, result spec, options) for each part of the task's score, as DA-Code spreads
    a scorer and its options over several result files."""
    funcs = record.get("func") or []
    funcs = funcs if isinstance(funcs, list) else [funcs]
    specs = record.get("result") or []
    specs = specs if isinstance(specs, list) else [specs]
    options = record.get("options") or [{}]
    options = options if isinstance(options, list) else [options]
    parts: list[dict[str, Any]] = []
    for spec in specs:
        if "number" in spec or spec.get("multi"):
            parts.append(spec)
        else:
            parts.extend({"file": name} for name in _files(spec))
    count = max(len(parts), len(funcs), 1)
    funcs = funcs * count if len(funcs) == 1 else funcs
    options = options * count if len(options) == 1 else options
    parts = parts * count if len(parts) == 1 else parts
    return [(str(f), s, dict(o or {})) for f, s, o in zip(funcs, parts, options, strict=False)]


def _answers_text(record: dict[str, Any], folder: Path | None) -> list[Any]:
    """What a text task's answer may be: the answer text, and any delivered .json file."""
    found: list[Any] = []
    if record.get("agent_answer"):
        found.append(str(record["agent_answer"]))
    if folder is not None and folder.is_dir():
        found.extend(sorted(folder.glob("*.json")))
    return found


def _score_part(
    func: str, spec: dict[str, Any], options: dict[str, Any], truth: dict[str, Any],
    record: dict[str, Any], folder: Path | None,
) -> dict[str, Any]:  # fmt: skip
    gold = Path(truth["gold"])
    config = truth["eval"].get("config") or {}
    if func == "compare_text":
        golds = list(spec["number"]) if "number" in spec else [gold / PurePosixPath(f).name
                                                                for f in _files(spec)]  # fmt: skip
        return {"score": dacode_text.compare_text(_answers_text(record, folder), golds, options)}
    if folder is None or not folder.is_dir():
        return {"score": 0.0, "error": "no answer folder: the task delivered no files"}
    answers = folder
    names = _files(spec)
    if not names:
        return {"score": 0.0, "error": f"{func}: the eval config names no file"}
    if func == "compare_image":
        image = next((n for n in names if n.endswith((".png", ".jpg"))), "result.png")
        by_kind = {"image": image, "json": "plot.json", "npy": "result.npy"}
        for name in names:
            kind = "json" if name.endswith(".json") else "npy" if name.endswith(".npy") else ""
            if kind:
                by_kind[kind] = PurePosixPath(name).name
        gold_files = {kind: gold / PurePosixPath(name).name for kind, name in by_kind.items()}
        return dacode_charts.compare_image(
            _delivered(answers, image), answers / "dabench" / "plot.json",
            answers / "dabench" / "result.npy", gold_files, options,
        )  # fmt: skip
    given, gold_file = _delivered(answers, names[0]), gold / PurePosixPath(names[0]).name
    if func == "compare_csv":
        return {"score": dacode_tables.compare_csv(given, [gold_file], options)}
    if func == "compare_sqlite":
        return {"score": dacode_tables.compare_sqlite(given, gold_file, options)}
    if func == "compare_ml":
        return dacode_ml.compare_ml(given, gold_file if gold_file.is_file() else None, options,
                                    config)  # fmt: skip
    if func == "compare_competition_ml":
        if not gold_file.is_file():
            return {"score": 0.0, "error": f"no gold file {gold_file}"}
        return dacode_ml.compare_competition_ml(given, gold_file, options, config)
    return {"score": 0.0, "error": f"unknown scorer {func!r}"}


def _combine(scores: list[float], conj: str) -> float:
    if not scores:
        return 0.0
    if conj == "max":
        return max(scores)
    if conj == "min":
        return min(scores)
    if conj == "and":
        return float(all(scores))
    if conj == "or":
        return float(any(scores))
    return sum(scores) / len(scores)


def _score_task(truth: dict[str, Any], record: dict[str, Any] | None, judge: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"category": truth["category"], "task": truth["task"],
                           "level": truth["hardness"]}  # fmt: skip
    if record is None:
        return row | {"score": 0.0}
    if record.get("finished") is False:
        return row | {"score": 0.0, "error": "the run did not finish"}
    folder = Path(record["answer_dir"]) if record.get("answer_dir") else None
    parts = []
    for func, spec, options in _pairs(truth["eval"]):
        try:
            parts.append({"scorer": func} | _score_part(func, spec, options, truth, record, folder))
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a malformed answer or config
            parts.append({"scorer": func, "score": 0.0, "error": f"{type(exc).__name__}: {exc}"})
    for part in parts:
        part["score"] = float(part["score"])
        if part.get("metric_value") is not None:
            part["metric_value"] = float(part["metric_value"])
    score = _combine([p["score"] for p in parts], str(truth["eval"].get("conj") or "avg"))
    return row | {"score": score, "parts": parts}


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean score in percent over all tasks, by category (the id's prefix: data-sa,
    ml-binary, plot-bar...), by DA-Code's task group and by hardness."""
    return {
        "all": registry.group(rows),
        "by_category": registry.by(rows, "category"),
        "by_task": registry.by(rows, "task"),
        "by_hardness": registry.by(rows, "level"),
    }


_CHART_BYTES = 16 << 20  # a chart's description: its labels and plotted values


def _read_stored(store: Any, key: str, most: int) -> bytes:
    """The stored object, no larger than `most` bytes (what run.json says it holds)."""
    return store.read_bytes(key, most=most)


def _safe_name(name: str) -> PurePosixPath | None:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return None
    return path


def collect(task: BenchTask, record: dict[str, Any], store: Any, out: Path) -> dict[str, Any]:
    """Lay a finished run's deliverables out as DA-Code's answer folder for the task:
    `<out>/answers/<task id>/` with every delivered file, `dabench/plot.json` and
    `dabench/result.npy` from the chart's description, and `dabench/result.json` with the
    answer text and whether the run finished."""
    import numpy as np

    folder = out / "answers" / task.task_id
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "dabench").mkdir(parents=True)
    run_id = record.get("run_id") or ""
    outputs = [o for o in record.get("outputs") or [] if isinstance(o, dict)]
    errors = []
    charts = []
    for entry in outputs:
        name = _safe_name(str(entry.get("name") or ""))
        if name is None:
            continue
        try:
            data = _read_stored(store, in_run(run_id, output(str(name))), int(entry["bytes"]))
        except (OSError, ValueError, TypeError, KeyError, DSStarError) as exc:
            errors.append(f"{name}: {exc}")
            continue
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
        if entry.get("chart"):
            charts.append(str(name))
    wanted = _chart_name(task)
    chosen = next((c for c in charts if PurePosixPath(c).name == wanted), None)
    chosen = chosen or (charts[0] if charts else None)
    if chosen is not None:
        try:
            stored = _read_stored(store, in_run(run_id, chart(chosen)), _CHART_BYTES)
            description = json.loads(stored)
        except (OSError, ValueError, DSStarError) as exc:
            errors.append(f"chart {chosen}: {exc}")
        else:
            series = description.pop("series", None)
            (folder / "dabench" / "plot.json").write_text(json.dumps(description, indent=2))
            if series is not None:
                try:
                    np.save(folder / "dabench" / "result.npy", np.asarray(series, dtype=float))
                except (TypeError, ValueError) as exc:  # ragged series: no array to compare
                    errors.append(f"chart {chosen} series: {exc}")
    finished = record.get("status") in ANSWERED
    result = {"finished": finished, "result": record.get("answer") or "", "run_id": run_id,
              "status": record.get("status"), "collect_errors": errors}  # fmt: skip
    (folder / "dabench" / "result.json").write_text(json.dumps(result, indent=2))
    return {"answer_dir": str(folder), "finished": finished}


def _chart_name(task: BenchTask) -> str:
    for func, spec, _ in _pairs((task.truth or {}).get("eval") or {}):
        if func == "compare_image":
            return next((PurePosixPath(n).name for n in _files(spec)
                         if n.endswith((".png", ".jpg"))), "")  # fmt: skip
    return ""


def _tasks(source: registry.TaskSource) -> list[BenchTask]:
    if not source.root:
        raise UsageError("--suite dacode needs --root (a DA-Code folder)")
    return dacode_tasks(source.root)


registry.register(
    registry.Suite(
        name="dacode",
        tasks=_tasks,
        score_task=_score_task,
        summarize=_summary,
        read_answers=read_answers,
        read_truth=read_truth,
        collect=collect,
    )
)
