"""DA-Code's own evaluator beside `dsstar bench score --suite dacode`, task by task.

The check behind docs/benchmarks.md's claim that every task's score is the one DA-Code's
`evaluate.py` computes.

DA-Code's `evaluate.py` runs as it ships, as a program, in an interpreter with DA-Code's
requirements (`--python`; they pin pandas 2, so a virtual environment of its own), over an
answer folder; the same folder is scored with `dsstar.bench.score_files`, which is what
`dsstar bench score --suite dacode --answers FOLDER --truth DACODE` runs. Per task it prints
DA-Code's score, dsstar's, dsstar's corrected score where it has one (docs/benchmarks.md,
"DA-Code's score and the corrected score"), the difference and, for a 0, dsstar's why; per
folder the tasks compared, the worst |difference| and how many differ by more than 1e-6.
It exits 1 when any does (or DA-Code's evaluator fails), 2 when an argument is missing or is
not what it should be.

The folders are those given with `--answers` (what `dsstar bench run --suite dacode` wrote:
its --out, or the answers/ in it), compared as they are; without `--answers`, five built from
the gold files DA-Code publishes (59 of its 500 tasks), each task written as `bench run`
writes one (the files by name, a chart's data in dabench/plot.json and dabench/result.npy,
and dabench/result.json with `finished`, `result`, `result_files` and the trajectory):

- gold: the gold files as published; a JSON answer after a sentence, in a fenced block, and a
  task answered in files ends with the files' names;
- light: predictions and tables rewritten with a little noise (10 % of the labels or cluster
  ids redrawn, regression targets and competition figures times 1 + N(0, 0.1), probabilities
  a tenth noise), the chart images dropped (their data and properties decide) and the chart
  data times 3 (the same shares);
- mid: as light at 30 %, a target column renamed in lower case, one table value moved by 0.004
  (inside DA-Code's 0.01), chart data times 1.5 and a title with one letter more; JSON answers
  written as JSON5 (single quotes, a trailing comma, a one-item list as its item);
- heavy: as mid at 50 %, the table value moved by 1 and the rows shuffled, chart data plus 1;
  the JSON answer's first value wrong;
- wild: as heavy at 70 %; the result text of a task answered in files says nothing, or names
  a file that is not there (`p=0.05`), or one more than the gold has; a JSON answer given as
  a sentence with no JSON; every task whose id ends in 9 not finished.

DA-Code's evaluator gets 300 s a task (its default is 10 s, and a slower task scores 0 there
while `bench score` has no limit: on a busy machine that would be a difference of time, not of
rules). Nothing of DA-Code's is copied here: its checkout is read and its program run.

    .venv/bin/python benchmarks/dacode_parity.py --dacode da-code \\
        --python da-code/.venv/bin/python [--answers OUT ...] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dsstar.bench import score_files  # noqa: E402
from dsstar.bench.dacode_suite import layout, read_truth  # noqa: E402
from dsstar.errors import UsageError  # noqa: E402

TOLERANCE = 1e-6
EVAL_TIMEOUT_S = 300
VARIANTS = {"gold": 0.0, "light": 0.1, "mid": 0.3, "heavy": 0.5, "wild": 0.7}


# -- the arguments ---------------------------------------------------------------------------


class Checkout:
    """A DA-Code checkout: its folder (with evaluate.py), eval config and gold folder."""

    def __init__(self, folder: Path) -> None:
        if not (folder / "evaluate.py").is_file():
            raise UsageError(
                f"--dacode {folder}: no evaluate.py (give the folder of a checkout of "
                "github.com/yiyihum/da-code)"
            )
        found = layout(folder)  # UsageError without da_code/configs/eval
        evals = [path for path in found.evals if path.name == "eval_all.jsonl"]
        if not evals or not found.gold.is_dir():
            raise UsageError(f"--dacode {folder}: no da_code/configs/eval/eval_all.jsonl and gold/")
        self.folder, self.evals, self.gold = folder, evals[0], found.gold


def check_python(python: Path, checkout: Checkout) -> None:
    """`python` runs and imports DA-Code's evaluator (its requirements are installed)."""
    if not python.is_file() or not os.access(python, os.X_OK):
        raise UsageError(f"--python {python}: no such interpreter")
    done = subprocess.run(
        [str(python), "-c", "import da_agent.evaluators.evaluation"],
        cwd=checkout.folder, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise UsageError(
            f"--python {python}: cannot import DA-Code's evaluator ({said}); install what it "
            "imports into it (docs/benchmarks.md, DA-Code)"
        )


def answer_folder(path: Path) -> Path:
    """The folder of task folders in `path`: itself, or the answers/ of a `bench run` --out."""
    if (path / "answers").is_dir():
        path = path / "answers"
    if not path.is_dir():
        raise UsageError(f"--answers {path}: no such folder")
    if not any((task / "dabench" / "result.json").is_file() for task in path.iterdir()):
        raise UsageError(
            f"--answers {path}: no task folder with dabench/result.json (give what "
            "`dsstar bench run --suite dacode` wrote)"
        )
    return path


# -- answer folders built from DA-Code's gold ------------------------------------------------


def _listed(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def gold_json(config: dict[str, Any]) -> dict[str, Any] | None:
    """The gold answer of a task answered in JSON (its eval config's `number`), else None."""
    first = _listed(config["result"])[0]
    return dict(first["number"][0]) if "number" in first else None


def file_names(config: dict[str, Any]) -> str:
    """The names a run states for a task answered in files (the chart's data aside)."""
    names = [str(n) for spec in _listed(config["result"]) for n in _listed(spec["file"])]
    return " ".join(name for name in names if not name.startswith("dabench/"))


def json_answer(gold: dict[str, Any], level: float) -> str:
    """The JSON answer as a model might give it: right and fenced, JSON5, wrong, or prose."""
    if level < 0.2:
        return "Here is what the data says.\n```json\n" + json.dumps(gold) + "\n```"
    if level < 0.4:
        items = []
        for key, value in gold.items():
            one = value[0] if isinstance(value, list) and len(value) == 1 else value
            items.append("'" + key.replace("'", "\\'") + "': " + json.dumps(one))
        return "{" + ", ".join(items) + ",}"
    if level < 0.6:
        first = next(iter(gold))
        wrong = ["nothing"] if isinstance(gold[first], list) else "nothing"
        return json.dumps(gold | {first: wrong})
    return "I found " + ", ".join(str(value) for value in gold.values()) + "."


def deliver_gold(gold: Path, folder: Path, chart: bool) -> None:
    """The gold files into `folder` as a run delivers them: a chart's data under dabench/."""
    for path in sorted(gold.iterdir()):
        where = folder / "dabench" if chart and path.suffix in (".json", ".npy") else folder
        where.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            shutil.copytree(path, where / path.name)
        else:
            shutil.copyfile(path, where / path.name)


def perturb_chart(folder: Path, level: float) -> None:
    """The images gone (the data and properties decide), the data scaled (the same shares) or
    shifted, from mid on the title one letter longer."""
    for image in [*folder.glob("*.png"), *folder.glob("*.jpg")]:
        image.unlink()
    data, props_file = folder / "dabench" / "result.npy", folder / "dabench" / "plot.json"
    if data.is_file():
        values = np.load(data)
        np.save(data, values * (3 if level < 0.2 else 1.5) if level < 0.4 else values + 1)
    if props_file.is_file():
        props = json.loads(props_file.read_text())
        if props.get("graph_title") and level > 0.2:
            props["graph_title"] += "s"
        props_file.write_text(json.dumps(props))


def _some(frame: pd.DataFrame, level: float, rng: np.random.Generator) -> np.ndarray:
    return rng.random(len(frame)) < level


def competition(frame: pd.DataFrame, metric: str, level: float, rng: np.random.Generator):
    """A submission with noise, its rows in another order (DA-Code matches them by id)."""
    key = next((c for c in frame.columns if "id" in c.lower()), None)
    columns = [c for c in frame.columns if c != key]
    if metric.startswith("logloss"):
        noise = rng.random((len(frame), len(columns)))
        frame[columns] = (1 - level) * frame[columns].to_numpy(dtype=float) + level * noise
    elif metric == "quadratic_weighted_kappa":
        grade, some = columns[0], _some(frame, level, rng)
        drawn = rng.integers(frame[grade].min(), frame[grade].max() + 1, some.sum())
        frame.loc[some, grade] = drawn
    else:
        for column in columns:
            if pd.api.types.is_numeric_dtype(frame[column]):
                spread = 1 + rng.normal(0, level, len(frame))
                frame[column] = frame[column].astype(float) * spread
    return frame.sample(frac=1, random_state=rng)


def clusters(frame: pd.DataFrame, metric: str, level: float, rng: np.random.Generator):
    """Some rows' cluster ids swapped among themselves."""
    column, some = frame.columns[-1], _some(frame, level, rng)
    frame.loc[some, column] = rng.permutation(frame.loc[some, column].to_numpy())
    return frame


def labels(frame: pd.DataFrame, metric: str, level: float, rng: np.random.Generator):
    """Some predicted classes redrawn; from mid on, the target column named in lower case."""
    named = [c for c in frame.columns if "id" not in c.lower()] or list(frame.columns)
    target, some = named[-1], _some(frame, level, rng)
    classes = np.asarray(frame[target].unique())
    frame.loc[some, target] = rng.choice(classes, some.sum())
    if level > 0.3:
        frame = frame.rename(columns={target: target.lower().replace(" ", "_")})
    return frame


def regression(frame: pd.DataFrame, metric: str, level: float, rng: np.random.Generator):
    """The last numeric column (the target) times 1 + N(0, level)."""
    numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])]
    if numeric:
        spread = 1 + rng.normal(0, level, len(frame))
        frame[numeric[-1]] = frame[numeric[-1]].astype(float) * spread
    return frame


def table(frame: pd.DataFrame, metric: str, level: float, rng: np.random.Generator):
    """One value moved (within 0.01 at mid, by 1 above); from heavy on, the rows shuffled."""
    numeric = [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])]
    if numeric and len(frame) and level > 0.2:
        column = numeric[0]
        frame[column] = frame[column].astype(float)
        frame.loc[frame.index[0], column] += 0.004 if level < 0.4 else 1
    return frame.sample(frac=1, random_state=rng) if level > 0.45 else frame


PERTURB = {"ml-competition": competition, "ml-cluster": clusters, "ml-binary": labels,
           "ml-multi": labels, "ml-regression": regression}  # fmt: skip


def perturb_table(task_id: str, config: dict[str, Any], folder: Path, level: float,
                  rng: np.random.Generator) -> None:  # fmt: skip
    tables = sorted(folder.glob("*.csv"))
    if not tables:
        return
    change = PERTURB.get(task_id.rpartition("-")[0], table)
    metric = str((config.get("config") or {}).get("metric") or "")
    change(pd.read_csv(tables[0]), metric, level, rng).to_csv(tables[0], index=False)


def wild_text(names: str, index: int) -> str:
    """What a run that lost track says at the end: nothing, a figure, or a name too many."""
    return ("", "saved it. p=0.05", names + " and 3.14")[index % 3]


def write_result(folder: Path, result: str, finished: bool) -> None:
    """dabench/result.json with the keys `bench run` writes (DA-Code's runner's)."""
    delivered = sorted(p for p in folder.rglob("*") if p.is_file())
    end = {"observation": "", "thought": "", "code": "", "response": "",
           "action": f'Terminate(output="{result}")'}  # fmt: skip
    saved = {
        "finished": finished,
        "steps": 1,
        "result": result,
        "result_files": {
            "added_files": [str(p) for p in delivered if p.parent == folder],
            "changed_files": [],
            "post_process_files": [str(p) for p in delivered if p.parent != folder],
            "error": [],
        },
        "trajectory": [end],
    }
    (folder / "dabench").mkdir(parents=True, exist_ok=True)
    (folder / "dabench" / "result.json").write_text(json.dumps(saved, indent=2))


def build_task(item: dict[str, Any], folder: Path, level: float, wild: bool, index: int) -> None:
    """One task's answer folder from its gold files, perturbed as `level` says."""
    config, gold = item["eval"], Path(item["gold"])
    folder.mkdir(parents=True)
    answer = gold_json(config)
    if answer is not None:
        result = json_answer(answer, level)
    else:
        chart = (config.get("config") or {}).get("task") == "data visualization"
        deliver_gold(gold, folder, chart)
        rng = np.random.default_rng([7, round(10 * level), index])
        if chart and level > 0:
            perturb_chart(folder, level)
        elif level > 0:
            perturb_table(item["task_id"], config, folder, level, rng)
        result = wild_text(file_names(config), index) if wild else file_names(config)
    write_result(folder, result, finished=not (wild and item["task_id"].endswith("9")))


def build(checkout: Checkout, root: Path) -> list[Path]:
    """The five variants' answer folders under `root`, from the tasks with published gold."""
    truth = sorted(read_truth(checkout.folder), key=lambda item: item["task_id"])
    published = [item for item in truth if Path(item["gold"]).is_dir()]
    if not published:
        raise UsageError(f"--dacode {checkout.folder}: no gold folder under {checkout.gold}")
    folders = []
    for variant, level in VARIANTS.items():
        out = root / variant
        shutil.rmtree(out, ignore_errors=True)
        for index, item in enumerate(published):
            build_task(item, out / item["task_id"], level, variant == "wild", index)
        folders.append(out)
    return folders


# -- the two scorers -------------------------------------------------------------------------


def dacode_scores(python: Path, checkout: Checkout, folder: Path, results: Path) -> dict:
    """DA-Code's evaluate.py over `folder`, run as it ships: its total_score by task id."""
    results.mkdir(parents=True, exist_ok=True)
    command = [str(python), "evaluate.py", "--output_dir", str(folder),
               "--gold_dir", str(checkout.gold), "--eval_json", str(checkout.evals),
               "--result_dir", str(results), "--timeout_seconds", str(EVAL_TIMEOUT_S)]  # fmt: skip
    done = subprocess.run(command, cwd=checkout.folder, capture_output=True, text=True)
    written = results / f"{folder.name}.json"  # evaluate.py names it after the folder
    if done.returncode != 0 or not written.is_file():
        said = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"DA-Code's evaluate.py failed on {folder} (exit "
                           f"{done.returncode}):\n{said}")  # fmt: skip
    scores = {}
    for row in json.loads(written.read_text())["results"]:
        value = row.get("total_score")
        scores[str(row["id"])] = math.nan if value is None else float(value)
    return scores


def dsstar_rows(folder: Path, checkout: Checkout) -> dict[str, dict[str, Any]]:
    """`dsstar bench score --suite dacode --answers folder --truth checkout`'s rows by task."""
    return {row["task_id"]: row for row in score_files("dacode", folder, checkout.folder)["tasks"]}


def difference(theirs: float, ours: float) -> float:
    if math.isnan(theirs) or math.isnan(ours):
        return 0.0 if math.isnan(theirs) and math.isnan(ours) else math.inf
    return abs(theirs - ours)


def compare(name: str, theirs: dict[str, float], ours: dict[str, dict[str, Any]]) -> dict:
    """Print a line per task DA-Code scored and the folder's summary; return the figures."""
    print(f"\n== {name} ==")
    print(f"{'task':22} {'DA-Code':>9} {'dsstar':>9} {'corrected':>9} {'|diff|':>8}  why (dsstar)")
    diffs = []
    for task_id in sorted(set(theirs) & set(ours)):
        row = ours[task_id]
        diff = difference(theirs[task_id], row["score"])
        diffs.append(diff)
        corrected = row.get("corrected_score")
        shown = "" if corrected is None else f"{corrected:9.6f}"
        why = " ".join(str(row.get("why") or "").split())[:70]
        flag = "  DIFFERS" if diff > TOLERANCE else ""
        print(f"{task_id:22} {theirs[task_id]:9.6f} {row['score']:9.6f} {shown:>9} "
              f"{diff:8.1e}{flag}  {why}")  # fmt: skip
    figures = {"tasks": len(diffs), "worst": max(diffs, default=0.0),
               "differ": sum(d > TOLERANCE for d in diffs)}  # fmt: skip
    left_out = [t for t, row in ours.items() if t not in theirs and not row.get("missing")]
    note = f"; {len(left_out)} scored by dsstar only: {', '.join(left_out)}" if left_out else ""
    print(f"{name}: {figures['tasks']} tasks compared, worst |difference| {figures['worst']:.2e},"
          f" {figures['differ']} differ by more than {TOLERANCE:g}{note}")  # fmt: skip
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dacode", type=Path, required=True,
                        help="a checkout of github.com/yiyihum/da-code (the folder with "
                        "evaluate.py)")  # fmt: skip
    parser.add_argument("--python", type=Path, required=True,
                        help="an interpreter with DA-Code's requirements installed")  # fmt: skip
    parser.add_argument("--answers", type=Path, nargs="+", default=[],
                        help="folders `dsstar bench run --suite dacode` wrote, compared as "
                        "they are (default: five built from DA-Code's gold)")  # fmt: skip
    parser.add_argument("--work", type=Path, default=None,
                        help="where built folders and DA-Code's results go (default: a "
                        "temporary folder, removed)")  # fmt: skip
    args = parser.parse_args()
    python = args.python.expanduser().absolute()  # not resolved: a venv's python is a link
    try:
        checkout = Checkout(args.dacode.expanduser().absolute())
        answers = [answer_folder(path.expanduser().absolute()) for path in args.answers]
        check_python(python, checkout)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    work = args.work.expanduser().absolute() if args.work else None
    root = work or Path(tempfile.mkdtemp(prefix="dsstar-dacode-parity-"))
    try:
        folders = answers or build(checkout, root / "built")
        totals = []
        for number, folder in enumerate(folders):
            results = root / "dacode-results" / f"{number:02d}-{folder.name}"
            theirs = dacode_scores(python, checkout, folder, results)
            name = folder.name if not answers else str(folder)
            totals.append(compare(name, theirs, dsstar_rows(folder, checkout)))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if work is None:
            shutil.rmtree(root, ignore_errors=True)
    differ = sum(t["differ"] for t in totals)
    print(f"\nall: {sum(t['tasks'] for t in totals)} tasks in {len(totals)} folders, worst "
          f"|difference| {max(t['worst'] for t in totals):.2e}, {differ} differ by more than "
          f"{TOLERANCE:g}")  # fmt: skip
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
