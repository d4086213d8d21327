"""The DA-Code suite: tasks whose answers are files (a table, a JSON answer, predictions, a
chart), scored against gold files as DA-Code's evaluator scores them (dacode_eval, with
dacode_tables, dacode_text, dacode_ml, dacode_metrics and dacode_charts).

A DA-Code folder is either this project's slice layout (`tasks.jsonl`, `eval.jsonl`,
`source/<id>/`, `gold/<id>/`) or the DA-Code repository's `da_code/` (`configs/task/*.jsonl`,
`configs/eval/*.jsonl`, `source/<id>/`, `gold/<id>/`; the repository root works too). A task's
instruction is the question and its source folder the data.

Answers are a folder per task id, DA-Code's own output layout: the delivered files, chart data
under `dabench/` (`plot.json`, `result.npy`), and `dabench/result.json` whose `result` is the
agent's final answer (text, or the names of the files it wrote) and `finished` whether it
finished (an unfinished task scores 0). `bench run` writes such a folder from each run's
deliverables (`collect`), so a run and another agent's output are scored by the same code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from dsstar.algorithm.verdict import ANSWERED
from dsstar.bench import dacode_eval, registry
from dsstar.bench.suites import BenchTask
from dsstar.errors import DSStarError, UsageError
from dsstar.keys import chart, final_object, in_run, output, round_object

__all__ = [
    "DacodeLayout",
    "collect",
    "dacode_tasks",
    "layout",
    "read_answers",
    "read_truth",
    "trajectory",
]

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
        found = dacode_eval.read_result(path)
        if found is not None:
            record["agent_answer"] = found.get("answer", found.get("result"))
            record["finished"] = found.get("finished", True)
        records.append(record)
    return records


def _score_task(truth: dict[str, Any], record: dict[str, Any] | None, judge: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"category": truth["category"], "task": truth["task"],
                           "level": truth["hardness"]}  # fmt: skip
    folder = Path(record["answer_dir"]) if record and record.get("answer_dir") else None
    return row | dacode_eval.score_folder(truth["eval"], Path(truth["gold"]).parent, folder)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The mean score in percent over all tasks, by category (the id's prefix: data-sa,
    ml-binary, plot-bar...), by DA-Code's task group and by hardness; `corrected` is the
    mean with each task's corrected score where it has one (dacode_ml)."""
    fixed = [row.get("corrected_score", row["score"]) for row in rows]
    return {
        "all": registry.group(rows),
        "corrected": round(100 * sum(fixed) / len(fixed), 2) if fixed else 0.0,
        "by_category": registry.by(rows, "category"),
        "by_task": registry.by(rows, "task"),
        "by_hardness": registry.by(rows, "level"),
    }


_CHART_BYTES = 16 << 20  # a chart's description: its labels and plotted values
_TEXT_BYTES = 16 << 20  # a round's plan, code or output (scripts' output is capped far lower)


def _read_stored(store: Any, key: str, most: int) -> bytes:
    """The stored object, no larger than `most` bytes (what run.json says it holds)."""
    return store.read_bytes(key, most=most)


def _stored_text(store: Any, run_id: str, key: str) -> str:
    try:
        data = _read_stored(store, in_run(run_id, key), _TEXT_BYTES)
        return data.decode("utf-8", errors="replace")
    except (OSError, DSStarError):
        return ""


def _safe_name(name: str) -> PurePosixPath | None:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return None
    return path


def _step(code_key: str, code: str, thought: str, observation: str) -> dict[str, Any]:
    """One step of DA-Code's trajectory: a Python action (its script) and what preceded it."""
    return {"observation": observation, "thought": thought, "code": code, "response": "",
            "action": f'Python(file_path="{code_key}"):\n```python\n{code}\n```'}  # fmt: skip


def trajectory(record: dict[str, Any], store: Any, result: str) -> list[dict[str, Any]]:
    """The run as DA-Code's trajectory: each round's script, the final script, then the
    Terminate action with the result; each step's observation is the output before it."""
    run_id = record.get("run_id") or ""
    steps: list[dict[str, Any]] = []
    seen = ""
    for number in range(int(record.get("rounds") or 0)):
        code = _stored_text(store, run_id, round_object(number, "code.py"))
        if not code:
            continue
        plan = _stored_text(store, run_id, round_object(number, "plan.json"))
        steps.append(_step(round_object(number, "code.py"), code, plan, seen))
        seen = _stored_text(store, run_id, round_object(number, "output.txt"))
    final = _stored_text(store, run_id, final_object("solution.py"))
    if final:
        steps.append(_step(final_object("solution.py"), final, "", seen))
        seen = _stored_text(store, run_id, final_object("output.txt"))
    steps.append({"observation": seen, "thought": "", "code": "", "response": "",
                  "action": f'Terminate(output="{result}")'})  # fmt: skip
    return steps


def _answers_in_text(task: BenchTask) -> bool:
    """Whether DA-Code scores the task on the answer text (its gold is a `number`)."""
    specs = ((task.truth or {}).get("eval") or {}).get("result") or [{}]
    specs = specs if isinstance(specs, list) else [specs]
    return not specs or "number" in (specs[0] or {}) or not task.truth


def collect(task: BenchTask, record: dict[str, Any], store: Any, out: Path) -> dict[str, Any]:
    """Lay a finished run's deliverables out as DA-Code's answer folder for the task:
    `<out>/answers/<task id>/` with every delivered file, `dabench/plot.json` and
    `dabench/result.npy` from the chart's description, and `dabench/result.json` as DA-Code's
    own runner writes it: `finished`, `steps`, `result` (the answer text for a task answered
    in text, else the names of the delivered files, as DA-Code's agent ends with them),
    `result_files` (`added_files`, `changed_files`, `post_process_files`, `error`), `Task`,
    `system_message` and `trajectory` (dsstar's rounds as Python steps); the run's id, status
    and answer text are kept beside them."""
    folder = out / "answers" / task.task_id
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "dabench").mkdir(parents=True)
    run_id = record.get("run_id") or ""
    delivered, errors, extracted = _deliver(task, record, store, folder)
    finished = record.get("status") in ANSWERED
    answer = str(record.get("answer") or "")
    top = [name for name in delivered if "/" not in name]
    result = answer if _answers_in_text(task) else " ".join(top) or answer
    steps = trajectory(record, store, result)
    saved = {
        "finished": finished,
        "steps": len(steps),
        "result": result,
        "result_files": {
            "added_files": [str(folder / name) for name in delivered],
            "changed_files": [],
            "post_process_files": [str(folder / name) for name in extracted],
            "error": errors,
        },  # fmt: skip
        "Task": task.question,
        "system_message": "DS-STAR: analyzer, planner, coder, verifier, router, debugger and "
        "finalyzer agents; each step is one round's script",
        "trajectory": steps,
        "run_id": run_id,
        "status": record.get("status"),
        "answer": answer,
    }
    (folder / "dabench" / "result.json").write_text(json.dumps(saved, indent=2))
    return {"answer_dir": str(folder), "finished": finished}


def _deliver(task: BenchTask, record: dict[str, Any], store: Any,
             folder: Path) -> tuple[list[str], list[str], list[str]]:  # fmt: skip
    """Copy the run's delivered files into `folder` and extract its chart's description;
    returns the files' names, the errors, and the extracted files' names."""
    import numpy as np

    run_id = record.get("run_id") or ""
    outputs = [o for o in record.get("outputs") or [] if isinstance(o, dict)]
    delivered, errors, charts, extracted = [], [], [], []
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
        delivered.append(str(name))
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
            extracted.append("dabench/plot.json")
            if series is not None:
                try:
                    np.save(folder / "dabench" / "result.npy", np.asarray(series, dtype=float))
                    extracted.append("dabench/result.npy")
                except (TypeError, ValueError) as exc:  # ragged series: no array to compare
                    errors.append(f"chart {chosen} series: {exc}")
    return delivered, errors, extracted


def _chart_name(task: BenchTask) -> str:
    """The chart image the task's eval config names ('' if none)."""
    specs = ((task.truth or {}).get("eval") or {}).get("result") or []
    for spec in specs if isinstance(specs, list) else [specs]:
        names = spec.get("file") or [] if isinstance(spec, dict) else []
        for name in names if isinstance(names, list) else [names]:
            if str(name).endswith((".png", ".jpg")):
                return PurePosixPath(str(name)).name
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
