"""DA-Code as a benchmark: its tasks, and each of its scorers on the slice's real gold files
(score 1) and on altered copies of them (lower scores, in the ways DA-Code's rules define)."""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import forked_cli
import numpy as np
import pandas as pd
import pytest
from PIL import Image
from shared_data import DACODE, needs_dacode

from dsstar.bench import dacode_tasks, score, score_files
from dsstar.bench.dacode_charts import same_data, same_property
from dsstar.bench.dacode_ml import scale, silhouette
from dsstar.bench.dacode_suite import collect, read_answers, read_truth
from dsstar.bench.dacode_tables import compare_sqlite
from dsstar.bench.dacode_text import compare_text, read_answer
from dsstar.bench.suites import BenchTask
from dsstar.errors import UsageError
from dsstar.storage import Store

pytestmark = needs_dacode
GOLD = DACODE / "gold"


def finished(folder: Path, result: str, done: bool = True) -> None:
    """dabench/result.json as DA-Code's runner writes it (the keys its evaluator reads)."""
    (folder / "dabench").mkdir(parents=True, exist_ok=True)
    (folder / "dabench" / "result.json").write_text(json.dumps({
        "finished": done, "steps": 1, "result": result, "trajectory": [],
        "result_files": {"added_files": [], "changed_files": []}}))  # fmt: skip


def gold_result(task_id: str) -> str:
    """What an agent that got the task right ends with: the gold JSON for a task answered in
    text, else the names of the files it wrote."""
    config = next(t["eval"] for t in read_truth(DACODE) if t["task_id"] == task_id)
    spec = config["result"][0]
    if "number" in spec:
        return json.dumps(spec["number"][0])
    names = spec["file"] if isinstance(spec["file"], list) else [spec["file"]]
    return " ".join(n for n in names if not n.startswith("dabench/"))


def gold_answers(folder: Path) -> Path:
    """DA-Code's output layout built from the gold files: a folder per task, chart data under
    dabench/, dabench/result.json naming the answer; ml-cluster-002 (no gold: a clustering is
    scored on its own file) gets a real clustering of its data."""
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    for gold in GOLD.iterdir():
        task = folder / gold.name
        (task / "dabench").mkdir(parents=True)
        for file in gold.iterdir():
            chart_data = gold.name.startswith("plot") and file.suffix in (".json", ".npy")
            shutil.copy(file, task / "dabench" / file.name if chart_data else task / file.name)
    wine = pd.read_csv(DACODE / "source" / "ml-cluster-002" / "wine-clustering.csv")
    points = PCA(2).fit_transform(StandardScaler().fit_transform(wine))
    answer = pd.DataFrame(points, columns=["Feature_1", "Feature_2"])
    answer["Cluster"] = KMeans(3, n_init=10, random_state=0).fit_predict(points)
    (folder / "ml-cluster-002").mkdir()
    answer.to_csv(folder / "ml-cluster-002" / "result.csv", index=False)
    for task in folder.iterdir():
        finished(task, gold_result(task.name))
    return folder


@pytest.fixture(scope="module")
def gold_folder(tmp_path_factory) -> Path:
    return gold_answers(tmp_path_factory.mktemp("gold") / "answers")


@pytest.fixture()
def answers(gold_folder: Path, tmp_path: Path) -> Path:
    """A copy of the gold answers for one test to alter."""
    return Path(shutil.copytree(gold_folder, tmp_path / "answers"))


def task_score(answers: Path, task_id: str) -> dict:
    truth = [t for t in read_truth(DACODE) if t["task_id"] == task_id]
    given = [r for r in read_answers(answers) if r["task_id"] == task_id]
    return score("dacode", given, truth)["tasks"][0]


def edit_csv(path: Path, change) -> None:
    frame = pd.read_csv(path)
    change(frame)
    frame.to_csv(path, index=False)


# --- the tasks -------------------------------------------------------------------------------


def test_the_slice_reads_as_tasks_with_their_source_folder_and_truth():
    tasks = dacode_tasks(DACODE)
    assert len(tasks) == 14
    first = tasks[0]
    assert first.task_id == "data-sa-001" and first.data == str(DACODE / "source" / "data-sa-001")
    assert first.question.startswith("Calculate the p-value") and first.level == "hard"
    assert first.domain == "data-sa" and first.truth["eval"]["func"] == ["compare_csv"]
    assert "working directory" in first.guidelines


def test_the_repository_layout_reads_the_same_tasks(tmp_path):
    repo = tmp_path / "da-code"
    root = repo / "da_code"
    (root / "configs" / "eval").mkdir(parents=True)
    (root / "configs" / "task").mkdir(parents=True)
    shutil.copy(DACODE / "eval.jsonl", root / "configs" / "eval" / "eval_all.jsonl")
    shutil.copy(DACODE / "tasks.jsonl", root / "configs" / "task" / "all.jsonl")
    (root / "configs" / "task" / "ml.jsonl").write_text("not read: all.jsonl is there\n")
    shutil.copytree(DACODE / "gold", root / "gold")
    (root / "source").mkdir()
    shutil.copytree(DACODE / "source" / "di-text-001", root / "source" / "di-text-001")
    for where in (root, repo):  # the da_code/ folder, or the repository's root
        tasks = dacode_tasks(where)
        assert [t.task_id for t in tasks] == ["di-text-001"]  # only tasks with their data
        assert len(read_truth(where)) == 14
    with pytest.raises(UsageError, match="not a DA-Code folder"):
        dacode_tasks(tmp_path)


# --- the whole slice, and bench score ---------------------------------------------------------


def test_the_gold_scores_1_on_every_task(answers):
    result = score_files("dacode", answers, DACODE)
    scores = {row["task_id"]: row["score"] for row in result["tasks"]}
    assert len(scores) == 14 and set(scores.values()) == {1.0}, scores
    summary = result["summary"]
    assert summary["all"]["score"] == 100.0
    assert set(summary["by_category"]) == {"data-sa", "di-text", "dm-csv", "ml-binary",
                                           "ml-cluster", "ml-competition", "ml-regression",
                                           "plot-bar"}  # fmt: skip
    assert set(summary["by_hardness"]) == {"medium", "hard"}


def test_a_missing_task_folder_and_an_unfinished_run_score_0(answers):
    shutil.rmtree(answers / "data-sa-043")
    finished(answers / "dm-csv-010", "avg_units_sold.csv", done=False)
    (answers / "dm-csv-050" / "dabench" / "result.json").unlink()
    rows = {row["task_id"]: row for row in score_files("dacode", answers, DACODE)["tasks"]}
    assert rows["data-sa-043"]["score"] == 0.0 and rows["data-sa-043"]["missing"]
    assert rows["dm-csv-010"]["score"] == 0.0 and "did not finish" in rows["dm-csv-010"]["why"]
    # DA-Code's evaluator leaves a folder without result.json out; here it scores 0, missing
    assert rows["dm-csv-050"]["missing"] and "result.json" in rows["dm-csv-050"]["why"]


def test_the_answer_text_names_the_files_that_are_scored(answers):
    folder = answers / "dm-csv-010"
    (folder / "avg_units_sold.csv").rename(folder / "averages.csv")
    assert task_score(answers, "dm-csv-010")["score"] == 0.0  # the config's name: not there
    finished(folder, "I saved the averages to /workspace/averages.csv.")
    assert task_score(answers, "dm-csv-010")["score"] == 1.0  # the one file the text names
    # A decimal in the text reads as a file name too: two names for one gold file, so the
    # config's name counts again; one such name alone is looked for and not found.
    finished(folder, "Saved averages.csv; the largest average is 36.5")
    assert task_score(answers, "dm-csv-010")["score"] == 0.0
    finished(folder, "The largest average is 36.5")
    row = task_score(answers, "dm-csv-010")
    assert row["score"] == 0.0 and "no 36.5 delivered" in row["why"]


# --- tables -----------------------------------------------------------------------------------


def test_csv_columns_count_by_their_values_not_their_names(answers):
    path = answers / "dm-csv-010" / "avg_units_sold.csv"
    edit_csv(path, lambda f: f.rename(columns={"Average Units Sold": "avg"}, inplace=True))
    assert task_score(answers, "dm-csv-010")["score"] == 1.0
    edit_csv(path, lambda f: f.__setitem__("avg", f["avg"] + 0.005))  # within 0.01
    assert task_score(answers, "dm-csv-010")["score"] == 1.0
    edit_csv(path, lambda f: f.loc.__setitem__((0, "avg"), 36.0))
    assert task_score(answers, "dm-csv-010")["score"] == 0.0  # its one counted column differs


def test_csv_row_order_counts_unless_the_task_ignores_it(answers):
    path = answers / "dm-csv-010" / "avg_units_sold.csv"
    edit_csv(path, lambda f: f.sort_values("Category", ascending=False, inplace=True))
    assert task_score(answers, "dm-csv-010")["score"] == 0.0
    ufc = answers / "dm-csv-001" / "undefeated.csv"  # ignore_order, score_rule all
    frame = pd.read_csv(ufc).sample(frac=1, random_state=1)
    frame.to_csv(ufc, index=False)
    assert task_score(answers, "dm-csv-001")["score"] == 1.0


def test_csv_score_rule_all_or_the_share_of_gold_columns_found(answers):
    ufc = answers / "dm-csv-001" / "undefeated.csv"  # all: one wrong count fails the task
    edit_csv(ufc, lambda f: f.loc.__setitem__((0, "fighter_num"), 99))
    assert task_score(answers, "dm-csv-001")["score"] == 0.0
    returns = answers / "dm-csv-050" / "result.csv"  # divide over gold columns 1, 2, 3
    edit_csv(returns, lambda f: f.__setitem__("Cumulative_EW", f["Cumulative_EW"] + 1))
    assert task_score(answers, "dm-csv-050")["score"] == pytest.approx(2 / 3)
    stats = answers / "data-sa-001" / "result.csv"  # no options: divide over every column
    stats.write_text("p_val,result\n1.2550753214652693e-78, Reject \n")  # any case, trimmed
    assert task_score(answers, "data-sa-001")["score"] == 1.0
    stats.write_text("p_val,result\n1.2550753214652693e-78,fail to reject\n")
    assert task_score(answers, "data-sa-001")["score"] == 0.5


def test_csv_options_dacode_does_not_know_are_ignored(answers):
    # data-sa-029 spells `conditon_cols`: DA-Code reads no condition, so all three columns count
    path = answers / "data-sa-029" / "result.csv"
    edit_csv(path, lambda f: f.__setitem__("conf", "[0, 1]"))
    assert task_score(answers, "data-sa-029")["score"] == pytest.approx(2 / 3)


def test_an_empty_or_missing_csv_scores_0(answers):
    (answers / "data-sa-043" / "result.csv").write_text("")
    assert task_score(answers, "data-sa-043")["score"] == 0.0
    (answers / "data-sa-043" / "result.csv").unlink()
    assert task_score(answers, "data-sa-043")["score"] == 0.0


def test_sqlite_tables_compare_one_by_one_and_the_worst_counts(tmp_path):
    def database(path: Path, tables: dict[str, pd.DataFrame]) -> Path:
        with sqlite3.connect(path) as conn:
            for name, frame in tables.items():
                frame.to_sql(name, conn, index=False)
        return path

    ufc = pd.read_csv(GOLD / "dm-csv-001" / "undefeated.csv")
    units = pd.read_csv(GOLD / "dm-csv-010" / "avg_units_sold.csv")
    gold = database(tmp_path / "gold.db", {"ufc": ufc, "units": units})
    same = database(tmp_path / "same.db", {"units": units, "ufc": ufc.iloc[::-1]})
    options = {"ignore_order": [True, True]}
    assert compare_sqlite(same, gold, options) == 1.0
    assert compare_sqlite(same, gold, {}) == 0.0  # ufc rows reversed: the worst table counts
    altered = units.assign(**{"Average Units Sold": units["Average Units Sold"] * 2})
    half = database(tmp_path / "half.db", {"ufc": ufc, "units": altered})
    assert compare_sqlite(half, gold, options) == 0.5  # units: one column of two
    lacking = database(tmp_path / "lacking.db", {"ufc": ufc})
    assert compare_sqlite(lacking, gold, options) == 0.0
    assert compare_sqlite(tmp_path / "none.db", gold, options) == 0.0


# --- text -------------------------------------------------------------------------------------


def test_text_answers_read_from_the_answer_text_with_numeric_tolerance():
    gold = [{"highest country": ["Uruguay"], "Agriculytural Land %": [82.6]}]
    said = (
        'The answer is:\n```json\n{"highest country": "uruguay ", "Agriculytural Land %": %s}\n```'
    )
    assert compare_text([said.replace("%s", "82.605")], gold, {}) == 1.0
    assert compare_text(['{"v": "82.6"}'], [{"v": 82.6}], {}) == 1.0  # read as a number
    # ...but a one-item list's item is compared as it is: text against a number fails
    assert compare_text([said.replace("%s", '"82.6"')], gold, {}) == 0.0
    assert compare_text([said.replace("%s", "82.7")], gold, {}) == 0.0
    assert compare_text([said.replace("%s", "82.7")], gold, {"score_rule": ["devide"]}) == 0.5
    with pytest.raises(ValueError, match="score_rule"):  # DA-Code knows only its own spelling
        compare_text([said.replace("%s", "82.7")], gold, {"score_rule": ["divide"]})
    assert compare_text(["{'highest country': ['Uruguay'], 'agriculytural land %': [82.6],}"],
                        gold, {}) == 1.0  # JSON5: single quotes, a trailing comma  # fmt: skip
    assert compare_text(['{"highest country": ["Uruguay"]}'], gold, {}) == 0.0  # a key missing
    assert compare_text(["Uruguay, 82.6"], gold, {}) is None  # no JSON at all: scored 0
    with pytest.raises(ValueError):  # Python's True is not JSON5: DA-Code's evaluator fails
        compare_text(["{'highest country': True}"], gold, {})
    assert compare_text(['{"v": 3.9}'], [{"v": 3}], {}) == 1.0  # read as the gold's integer
    assert read_answer("[1, 2]") is None


def test_text_tasks_score_the_answer_text_or_the_json_file_it_names(answers):
    assert task_score(answers, "di-text-001")["score"] == 1.0
    folder = answers / "di-text-001"
    finished(folder, 'Done. {"Highest Country": ["monaco"], "lowest country": ["Mongolia"]}')
    assert task_score(answers, "di-text-001")["score"] == 1.0
    (folder / "answer.json").write_text('{"highest country": ["Mongolia"], "lowest country": '
                                        '["Monaco"]}')  # fmt: skip
    finished(folder, "The answer is in answer.json")  # ends like a file name: that file
    row = task_score(answers, "di-text-001")
    assert row["score"] == 0.0 and "differ from the gold's for" in row["why"]
    finished(folder, "Monaco and Mongolia")
    assert "no JSON answer" in task_score(answers, "di-text-001")["why"]


def test_text_lists_need_the_same_items_in_order_unless_ignored():
    gold = [{"top": ["a", "b"]}]
    assert compare_text(['{"top": ["b", "a"]}'], gold, {}) == 0.0
    assert compare_text(['{"top": ["b", "a"]}'], gold, {"ignore_order": True}) == 1.0
    assert compare_text(['{"top": ["a"]}'], gold, {}) == 0.0


# --- machine learning -------------------------------------------------------------------------


def test_classification_f1_scaled_between_the_bounds(answers):
    from sklearn.metrics import f1_score

    path = answers / "ml-binary-016" / "defaulter.csv"
    truth = pd.read_csv(path)["IsDefaulter"]
    flipped = truth.copy()
    flipped.iloc[:600] = 1 - flipped.iloc[:600]
    pd.DataFrame({"isdefaulter": flipped}).to_csv(path, index=False)  # the name's case aside
    row = task_score(answers, "ml-binary-016")
    f1 = f1_score(truth, flipped, average="weighted")
    assert row["parts"][0]["metric_value"] == pytest.approx(f1)
    assert row["score"] == pytest.approx((f1 - 0.6) / (1.0 - 0.6)) and 0 < row["score"] < 1
    pd.DataFrame({"IsDefaulter": flipped[:100]}).to_csv(path, index=False)
    row = task_score(answers, "ml-binary-016")
    assert row["score"] == 0.0 and "rows" in row["parts"][0]["error"]


def test_regression_r2_scaled_and_the_target_column_found_by_a_loose_name(answers):
    from sklearn.metrics import r2_score

    path = answers / "ml-regression-011" / "result.csv"
    truth = pd.read_csv(path).iloc[:, 0]
    noisy = truth + np.random.default_rng(0).normal(0, truth.std() * 0.5, len(truth))
    pd.DataFrame({"id": range(len(truth)), "biogas_generation_estimate_cuftday": noisy}).to_csv(
        path, index=False
    )  # the instruction's name, and an id column set aside
    row = task_score(answers, "ml-regression-011")
    r2 = r2_score(truth, noisy)
    assert row["score"] == pytest.approx(min(max((r2 - 0.5) / 0.4, 0), 1)) and row["score"] < 1


def test_clustering_silhouette_from_the_delivered_features(answers):
    path = answers / "ml-cluster-013" / "cluster.csv"
    frame = pd.read_csv(path)
    value = silhouette(frame, frame["Cluster"])  # the features and labels the answer wrote
    row = task_score(answers, "ml-cluster-013")
    assert row["parts"][0]["metric_value"] == pytest.approx(value)
    shuffled = frame.assign(Cluster=frame["Cluster"].sample(frac=1, random_state=0).to_numpy())
    shuffled.to_csv(path, index=False)
    assert task_score(answers, "ml-cluster-013")["score"] < 0.2  # labels that fit no features
    frame.assign(Cluster=0).to_csv(path, index=False)
    row = task_score(answers, "ml-cluster-013")
    assert row["score"] == 0.0 and "single cluster" in row["parts"][0]["error"]


def test_competition_kappa_with_rows_matched_by_id(answers):
    path = answers / "ml-competition-006" / "submission.csv"
    gold = pd.read_csv(path)
    gold.sample(frac=1, random_state=3).to_csv(path, index=False)  # any row order
    assert task_score(answers, "ml-competition-006")["score"] == 1.0
    worse = gold.copy()
    middle = worse["quality"].between(5, 6)
    worse.loc[middle, "quality"] = 11 - worse.loc[middle, "quality"]  # 5 <-> 6
    worse.to_csv(path, index=False)
    row = task_score(answers, "ml-competition-006")
    # Grades run 3..8: DA-Code's observed matrix counts only the labels 0..5 as they are, so
    # every pair with a 6 in it is left out and its kappa stays 1; the textbook's falls.
    assert row["score"] == 1.0 and row["parts"][0]["metric_value"] == 1.0
    assert row["parts"][0]["corrected"]["metric_value"] < 0.59674
    assert row["corrected_score"] == 0.0
    gold.assign(Id=gold["Id"] + 100000).to_csv(path, index=False)
    assert task_score(answers, "ml-competition-006")["score"] == 0.0  # not the gold's ids
    gold.assign(extra=1).to_csv(path, index=False)
    assert task_score(answers, "ml-competition-006")["score"] == 0.0  # not the gold's columns
    gold.assign(quality=gold["quality"].clip(upper=7)).to_csv(path, index=False)
    assert task_score(answers, "ml-competition-006")["score"] == 0.0  # label range differs


def test_scaling_between_bounds_upwards_for_every_metric():
    assert scale(0.8, 0.6, 1.0) == pytest.approx(0.5)
    assert scale(1.2, 0.5, 0.9) == 1 and scale(0.1, 0.5, 0.9) == 0
    assert scale(0.0, 0.0, 0.190548) == 0  # an error of 0 scores 0 in DA-Code...
    assert scale(31.0, 51.87777777777777, 11.52231111111111) == pytest.approx(0.517347, abs=1e-6)


# --- charts -----------------------------------------------------------------------------------


def test_a_chart_scores_by_its_data_and_properties_when_the_image_differs(answers):
    folder = answers / "plot-bar-004"
    (folder / "result.png").unlink()
    assert task_score(answers, "plot-bar-004")["score"] == 1.0
    data = np.load(folder / "dabench" / "result.npy")
    np.save(folder / "dabench" / "result.npy", data * 3)  # the same shares
    assert task_score(answers, "plot-bar-004")["score"] == 1.0
    np.save(folder / "dabench" / "result.npy", data.T)
    assert task_score(answers, "plot-bar-004")["score"] == 0.0
    np.save(folder / "dabench" / "result.npy", data)
    props = json.loads((folder / "dabench" / "plot.json").read_text())
    for key, value, expected in [
        ("graph_title", "Sex vs Pclass Survival Comparisons", 1.0),  # 90 % alike is enough
        ("graph_title", "Survival by sex", 0.0),
        ("labels", ["1", "2"], 0.0),
        ("xtick_labels", ["Male", "Female"], 1.0),
        ("figsize", [10.0, 6.0], 0.0),
        ("color", ["#000000"], 1.0),  # not among the task's keys
    ]:
        (folder / "dabench" / "plot.json").write_text(json.dumps(props | {key: value}))
        assert task_score(answers, "plot-bar-004")["score"] == expected, (key, value)
    (folder / "dabench" / "plot.json").unlink()
    assert task_score(answers, "plot-bar-004")["score"] == 0.0


def test_chart_property_and_data_rules():
    gold = {"color": ["#e9d4d0", "#a16f8d"], "type": "bar", "y_label": "Survived"}
    assert same_property("color", {"color": ["#e9d4d5"]}, gold)
    assert not same_property("color", {"color": ["#00ff00"]}, gold)
    assert same_property("type", {"type": "BAR"}, gold)
    assert not same_property("y_label", {"y_label": ""}, gold)
    assert same_data([3, 1, 2], [1, 2, 3.005])  # each column compared sorted
    assert not same_data([1, 2, 3], [1, 2, 3.5])


# --- a run's deliverables as an answer folder --------------------------------------------------


def test_collect_lays_a_runs_deliverables_out_as_dacodes_answer_folder(tmp_path):
    """A run folder fabricated in the shape of the deliverables contract (final/outputs/,
    final/charts/<name>.json, `outputs` in run.json): collected, then scored as `bench score`
    scores it."""
    store = Store(str(tmp_path / "runs-store"))
    props = json.loads((GOLD / "plot-bar-004" / "plot.json").read_text())
    series = np.load(GOLD / "plot-bar-004" / "result.npy").tolist()
    run = "bench-plot-bar-004"
    image = io.BytesIO()
    Image.new("RGB", (40, 30), "white").save(image, format="PNG")  # not the gold's image
    store.write_bytes(f"runs/{run}/final/outputs/result.png", image.getvalue())
    store.write_json(f"runs/{run}/final/charts/result.png.json", props | {"series": series})
    store.write_bytes(f"runs/{run}/final/outputs/tables/extra.csv", b"a\n1\n")
    png = len(image.getvalue())  # run.json says what each file holds: no more is read
    record = {"run_id": run, "status": "verified", "answer": "Saved result.png",
              "outputs": [{"name": "result.png", "bytes": png, "media_type": "image/png",
                           "uri": store.uri(f"runs/{run}/final/outputs/result.png"),
                           "chart": store.uri(f"runs/{run}/final/charts/result.png.json")},
                          {"name": "tables/extra.csv", "bytes": 4, "media_type": "text/csv",
                           "uri": store.uri(f"runs/{run}/final/outputs/tables/extra.csv")},
                          {"name": "../escape.txt", "bytes": 1, "media_type": "text/plain",
                           "uri": "x"}]}  # fmt: skip
    truth = next(t for t in read_truth(DACODE) if t["task_id"] == "plot-bar-004")
    task = BenchTask(task_id="plot-bar-004", question="", data="", truth=truth)
    out = tmp_path / "bench-out"
    collected = collect(task, record, store, out)
    folder = Path(collected["answer_dir"])
    assert folder == out / "answers" / "plot-bar-004" and collected["finished"] is True
    assert (folder / "tables" / "extra.csv").read_text() == "a\n1\n"
    assert not (out / "answers" / "escape.txt").exists()
    assert "series" not in json.loads((folder / "dabench" / "plot.json").read_text())
    assert np.load(folder / "dabench" / "result.npy").shape == (3, 2)
    kept = json.loads((folder / "dabench" / "result.json").read_text())
    assert kept["result"] == "result.png" and kept["answer"] == "Saved result.png"
    assert kept["finished"] is True and kept["steps"] == len(kept["trajectory"]) == 1
    assert kept["trajectory"][-1]["action"] == 'Terminate(output="result.png")'
    assert sorted(kept["result_files"]["added_files"]) == [
        str(folder / "result.png"), str(folder / "tables" / "extra.csv")]  # fmt: skip
    assert kept["result_files"]["changed_files"] == []
    assert (
        score("dacode", [{"task_id": "plot-bar-004", **collected}], [truth])["tasks"][0]["score"]
        == 1.0
    )
    assert score_files("dacode", out / "answers", DACODE)["tasks"][-1]["score"] == 1.0

    text_truth = next(t for t in read_truth(DACODE) if t["task_id"] == "di-text-002")
    text_task = BenchTask(task_id="di-text-002", question="", data="", truth=text_truth)
    failed = collect(text_task, {"run_id": "r2", "status": "failed"}, store, out)
    answer = '{"highest country": ["Uruguay"], "Agriculytural Land %": [82.6]}'
    done = collect(text_task, {"run_id": "r2", "status": "verified", "answer": answer}, store, out)
    assert failed["finished"] is False and done["finished"] is True
    rows = score_files("dacode", out / "answers", DACODE)["tasks"]
    assert next(r for r in rows if r["task_id"] == "di-text-002")["score"] == 1.0


# --- the command line and the report ----------------------------------------------------------


def dsstar(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSSTAR_")}
    return forked_cli.run([sys.executable, "-m", "dsstar", *args], capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip


def test_bench_score_lists_each_tasks_score_without_running_anything(answers):
    done = dsstar("bench", "score", "--suite", "dacode", "--answers", str(answers),
                  "--truth", str(DACODE), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {row["task_id"]: row["score"] for row in result["tasks"]} == {
        task.task_id: 1.0 for task in dacode_tasks(DACODE)
    }
    (answers / "plot-bar-004" / "result.png").unlink()
    np.save(answers / "plot-bar-004" / "dabench" / "result.npy", np.zeros((3, 2)))
    shutil.rmtree(answers / "di-text-002")
    done = dsstar("bench", "score", "--suite", "dacode", "--answers", str(answers),
                  "--truth", str(DACODE))  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = {line.split("\t")[0]: line.split("\t")[1:] for line in done.stdout.splitlines()}
    assert float(lines["plot-bar-004"][0]) == 0.0 and float(lines["di-text-002"][0]) == 0.0
    assert float(lines["data-sa-001"][0]) == 1.0 and lines["data-sa-001"][1:] == []
    # every 0 says why
    assert lines["plot-bar-004"][-1] == "why: the chart does not match the gold (image, data)"
    assert lines["di-text-002"][-1].startswith("why: no answer folder")
    assert '"by_category"' in done.stderr


def test_bench_run_dacode_needs_a_dacode_folder(tmp_path):
    done = dsstar("bench", "run", "--suite", "dacode", "--root", str(tmp_path),
                  "--model", "openai/x")  # fmt: skip
    assert done.returncode == 2 and "not a DA-Code folder" in done.stderr


def test_the_report_has_scores_calls_tokens_and_cost_per_category_and_hardness(answers):
    from dsstar.bench.report import render_report

    scores = score_files("dacode", answers, DACODE)
    outcomes = [{"task_id": row["task_id"], "run_id": f"b-{row['task_id']}",
                 "status": "verified", "llm_calls": 4, "input_tokens": 1000,
                 "output_tokens": 100, "cost_usd": 0.01} for row in scores["tasks"]]  # fmt: skip
    report = render_report("dacode benchmark", outcomes, scores, {})
    assert "## Per category" in report and "## Per level (difficulty)" in report
    assert "| category | tasks | score | llm_calls | input_tokens | output_tokens | cost_usd |" in (
        report
    )
    assert "| data\\-sa | 3 | 100.0 | 12 | 3000 | 300 | 0.03 |" in report  # text escaped
    assert "| hard | 8 | 100.0 | 32 | 8000 | 800 | 0.08 |" in report
