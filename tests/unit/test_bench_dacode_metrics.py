"""DA-Code's metrics as its evaluator computes them, against figures worked out by hand, and
the corrected figure beside each where DA-Code's definition is odd (the loss direction, RMSLE
without its root, log-losses in base 2, the kappa's label offset, accuracy on text labels)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from dsstar.bench.dacode_ml import best_match, compare_competition_ml, compare_ml, silhouette

# Hand figures (each worked out on paper; log2(0.8) = -0.321928, ln(2) = 0.693147...).
# Balanced log-loss, DA-Code's way: -(1/2) * sum over classes of the mean log2 probability
# of that class's rows: rows of class 0 given 0.8 and 0.6, the row of class 1 given 0.7:
# -((log2 .8 + log2 .6) / 2 + log2 .7) / 2 = 0.522010; in natural log, balanced over the two
# classes (the textbook's): 0.361830.
LOGLOSS_CLASS, LOGLOSS_CLASS_LN = 0.5220100087, 0.3618297657
# Total log-loss, DA-Code's way: -(1/2) * mean log2 of the true class's probability (0.7,
# 0.8, 0.6) = 0.262244; the textbook's, in natural log: 0.363548.
LOGLOSS_TOTAL, LOGLOSS_TOTAL_LN = 0.2622444770, 0.3635480397
# Gold 1, 3 and 5, predictions 0 (from -5, clipped), 7 and 5: log1p differences of size
# ln 2 = 0.693147, ln 8 - ln 4 = 0.693147 and 0, so the mean squared log error is
# 2 * 0.480453 / 3 = 0.320302 (DA-Code's "rmsle") and its root 0.565952.
MSLE, RMSLE = 0.3203020093, 0.5659524


def frame_file(path: Path, columns: dict) -> Path:
    pd.DataFrame(columns).to_csv(path, index=False)
    return path


def competition(tmp_path: Path, metric: str, kind: str, gold: dict, given: dict,
                lower: float, upper: float, **options) -> dict:  # fmt: skip
    config = {"type": kind, "metric": metric, "lower_bound": lower, "upper_bound": upper}
    return compare_competition_ml(
        str(frame_file(tmp_path / "submission.csv", given)),
        [str(frame_file(tmp_path / "gold.csv", gold))],
        options | {"config": config},
    )


def ml(tmp_path: Path, metric: str, kind: str, gold: dict | None, given: dict, lower: float,
       upper: float, **options) -> dict:  # fmt: skip
    config = {"type": kind, "metric": metric, "lower_bound": lower, "upper_bound": upper}
    expected = str(frame_file(tmp_path / "gold.csv", gold)) if gold else []
    return compare_ml(str(frame_file(tmp_path / "result.csv", given)), expected,
                      options | {"config": config})  # fmt: skip


def test_balanced_log_loss_in_base_2_over_two_and_its_corrected_figure(tmp_path):
    gold = {"id": [1, 2, 3], "class_0": [1, 1, 0], "class_1": [0, 0, 1]}
    given = {"id": [3, 1, 2], "class_0": [0.3, 0.8, 0.6], "class_1": [0.7, 0.2, 0.4]}
    part = competition(tmp_path, "logloss_class", "binary classification", gold, given,
                       0.24804, 4.7274192)  # fmt: skip
    assert part["metric_value"] == pytest.approx(LOGLOSS_CLASS)
    # DA-Code scales a loss upwards: a larger loss would score more.
    assert part["score"] == pytest.approx((LOGLOSS_CLASS - 0.24804) / (4.7274192 - 0.24804))
    fixed = part["corrected"]
    assert fixed["metric_value"] == pytest.approx(LOGLOSS_CLASS_LN)
    assert fixed["score"] == pytest.approx((4.7274192 - LOGLOSS_CLASS) / (4.7274192 - 0.24804))
    assert fixed["upper_bound"] == pytest.approx(4.7274192 * math.log(2))


def test_total_log_loss_and_probabilities_renormalised(tmp_path):
    gold = {"id": [1, 2, 3], "a": [1, 0, 0], "b": [0, 1, 0], "c": [0, 0, 1]}
    given = {"id": [1, 2, 3], "a": [1.4, 0.1, 0.2], "b": [0.4, 0.8, 0.2], "c": [0.2, 0.1, 0.6]}
    part = competition(tmp_path, "logloss_total", "multi classification", gold, given,
                       0.31671, 0.4057209)  # fmt: skip
    assert part["metric_value"] == pytest.approx(LOGLOSS_TOTAL)  # row 1: 1.4 of 2.0 is 0.7
    assert part["score"] == 0  # below the lower bound: DA-Code's least
    assert part["corrected"]["metric_value"] == pytest.approx(LOGLOSS_TOTAL_LN)
    assert part["corrected"]["score"] == 1.0  # a loss below both bounds: the best


def test_rmsle_is_the_mean_squared_log_error_and_its_root_beside_it(tmp_path):
    gold = {"id": [10, 11, 12], "count": [1, 3, 5]}
    given = {"id": [10, 11, 12], "count": [-5, 7, 5]}
    part = competition(tmp_path, "rmsle", "regression", gold, given, 0.0, 0.9)
    assert part["metric_value"] == pytest.approx(MSLE)
    assert part["score"] == pytest.approx(MSLE / 0.9)
    fixed = part["corrected"]
    assert fixed["metric_value"] == pytest.approx(RMSLE)
    assert fixed["score"] == pytest.approx((math.sqrt(0.9) - RMSLE) / math.sqrt(0.9))


def test_an_error_metric_scales_upwards_and_its_corrected_score_downwards(tmp_path):
    # MAE of 1.4 between bounds 1.334286 and 1.44342 (ml-competition-010's)
    gold = {"id": [1, 2, 3, 4, 5], "y": [10.0, 10.0, 10.0, 10.0, 10.0]}
    given = {"id": [1, 2, 3, 4, 5], "y": [11.4, 8.6, 11.4, 8.6, 11.4]}
    part = competition(tmp_path, "mae", "regression", gold, given, 1.334286, 1.44342)
    assert part["metric_value"] == pytest.approx(1.4)
    assert part["score"] == pytest.approx(0.6021404878)
    assert part["corrected"]["score"] == pytest.approx(0.3978595122)


def test_smape_medae_and_roc_auc(tmp_path):
    part = competition(tmp_path, "smape", "regression", {"id": [1, 2, 3], "y": [100, 0, 50]},
                       {"id": [1, 2, 3], "y": [110, 0, 50]}, 4.93137, 52.893)  # fmt: skip
    assert part["metric_value"] == pytest.approx(10 / 105 / 3 * 100)  # 0/0 counts as 0
    part = competition(tmp_path, "medae", "regression", {"id": [1, 2, 3], "y": [1, 2, 3]},
                       {"id": [1, 2, 3], "y": [1, 4, 6]}, 0.25002, 0.675)  # fmt: skip
    assert part["metric_value"] == 2.0 and part["score"] == 1 and part["corrected"]["score"] == 0
    part = competition(tmp_path, "roc_auc_score", "binary classification",
                       {"id": [1, 2, 3, 4], "p": [0, 0, 1, 1]},
                       {"id": [1, 2, 3, 4], "p": [0.1, 0.4, 0.35, 0.8]}, 0.5, 1.0)  # fmt: skip
    assert part["metric_value"] == pytest.approx(0.75) and part["score"] == pytest.approx(0.5)
    assert "corrected" not in part


def test_f1_weighted_over_classes_and_micro_when_the_task_says(tmp_path):
    # class 0: precision 1/2, recall 1/2; class 1: 2/3 and 2/3: weighted by support 2 and 3,
    # (2 * 0.5 + 3 * 2/3) / 5 = 0.6
    gold = {"id": list(range(5)), "label": [0, 0, 1, 1, 1]}
    given = {"id": list(range(5)), "label": [0, 1, 1, 1, 0]}
    part = ml(tmp_path, "f1", "binary classification", gold, given, 0.5, 1.0,
              target_column="label")  # fmt: skip
    assert part["metric_value"] == pytest.approx(0.6) and part["score"] == pytest.approx(0.2)
    part = competition(tmp_path, "f1", "multi classification", gold, given, 0.0, 1.0,
                       average="micro")  # fmt: skip
    assert part["metric_value"] == pytest.approx(3 / 5)


def test_accuracy_and_dacodes_slip_on_text_labels(tmp_path):
    part = ml(tmp_path, "accuracy", "binary classification", {"y": [1, 0, 1, 1]},
              {"y": [1, 1, 1, 0]}, 0.0, 1.0)  # fmt: skip
    assert part["metric_value"] == 0.5 and part["corrected"]["metric_value"] == 0.5
    # Text labels: DA-Code compares the encoded predictions with themselves.
    part = ml(tmp_path, "accuracy", "binary classification", {"y": ["yes", "no", "yes"]},
              {"y": ["Yes ", "yes", "no"]}, 0.0, 1.0)  # fmt: skip
    assert part["metric_value"] == 1.0 and part["score"] == 1.0
    assert part["corrected"]["metric_value"] == pytest.approx(1 / 3)


def test_r2_scaled_and_the_target_found_by_name(tmp_path):
    # residuals 0, 0, 0, 1 against deviations 2.25, 0.25, 0.25, 2.25: r2 = 1 - 1/5 = 0.8
    part = ml(tmp_path, "r2", "regression", {"Id": [7, 8, 9, 10], "Price": [1, 2, 3, 4]},
              {"Id": [7, 8, 9, 10], "price_": [1.0, 2.0, 3.0, 5.0]}, 0.5, 0.9,
              target_column="price")  # fmt: skip
    assert part["metric_value"] == pytest.approx(0.8) and part["score"] == pytest.approx(0.75)
    assert "corrected" not in part


def test_silhouette_counts_the_point_itself_and_the_label_column(tmp_path):
    # x = 0, 1 | 10, 11: a point's own-cluster mean is 0.5 (itself counted), the other
    # cluster's 10.5 or 9.5: (10/10.5 + 9/9.5) / 2 = 0.949875 (scikit-learn's: 0.899749)
    assert silhouette(pd.DataFrame({"x": [0, 1, 10, 11]}), [0, 0, 1, 1]) == pytest.approx(
        0.949874686716792
    )
    # The delivered file's columns are the features, its Cluster column among them: the
    # points are (0, 0), (1, 0), (10, 1), (11, 1) and the silhouette 0.950127.
    part = ml(tmp_path, "silhouette", "cluster", None,
              {"x": [0, 1, 10, 11], "Cluster": [0, 0, 1, 1]}, 0.0, 0.5)  # fmt: skip
    assert part["metric_value"] == pytest.approx(0.9501271645765489) and part["score"] == 1
    part = ml(tmp_path, "silhouette", "cluster", None, {"x": [0, 1, 10, 11], "Cluster": [2] * 4},
              0.0, 0.5)  # fmt: skip
    assert part["score"] == 0.0 and "single cluster" in part["error"]


def test_quadratic_weighted_kappa_and_dacodes_label_offset(tmp_path):
    # Labels 0, 1, 2, 2 against 0, 2, 2, 1: observed weight 0.25 + 0.25 = 0.5, expected
    # 5.5 / 4 = 1.375: kappa 1 - 0.5 / 1.375 = 0.636364
    gold = {"id": [1, 2, 3, 4], "grade": [0, 1, 2, 2]}
    part = competition(tmp_path, "quadratic_weighted_kappa", "multi classification", gold,
                       {"id": [1, 2, 3, 4], "grade": [0, 2, 2, 1]}, 0.0, 1.0)  # fmt: skip
    assert part["metric_value"] == pytest.approx(7 / 11)
    assert part["corrected"]["metric_value"] == pytest.approx(7 / 11)
    # The same grades as 1, 2, 3: DA-Code's observed matrix counts labels 0..2 unshifted
    # (only the pair 1-1), its expected one the shifted labels: a perfect 1.0.
    shifted = {"id": [1, 2, 3, 4], "grade": [1, 2, 3, 3]}
    part = competition(tmp_path, "quadratic_weighted_kappa", "multi classification", shifted,
                       {"id": [1, 2, 3, 4], "grade": [1, 3, 3, 2]}, 0.0, 1.0)  # fmt: skip
    assert part["metric_value"] == 1.0
    assert part["corrected"]["metric_value"] == pytest.approx(7 / 11)
    part = competition(tmp_path, "quadratic_weighted_kappa", "multi classification", gold,
                       {"id": [1, 2, 3, 4], "grade": [0, 1, 1, 1]}, 0.0, 1.0)  # fmt: skip
    assert part["score"] == 0.0 and "label range" in part["error"]


def test_competition_rows_by_identifier_and_the_gold_columns(tmp_path):
    gold = {"id": [1, 2, 3], "y": [1.0, 2.0, 3.0]}
    part = competition(tmp_path, "mse", "regression", gold, {"id": [1, 2], "y": [1.0, 2.0]},
                       0, 1)  # fmt: skip
    assert part["score"] == 0.0 and "rows" in part["error"]
    part = competition(tmp_path, "mse", "regression", gold,
                       {"id": [1, 2, 3], "y": [1.0, 2.0, 3.0], "z": [0, 0, 0]}, 0, 1)  # fmt: skip
    assert part["score"] == 0.0 and "columns" in part["error"]


def test_names_are_matched_as_fuzzywuzzy_matches_them():
    assert best_match("binary classification", ["binary classification", "cluster"]) == (
        "binary classification", 100)  # fmt: skip
    assert best_match("IsDefaulter", ["id", "is_defaulter"])[1] > 90
    assert best_match("Cluster", ["Feature_1", "Clusters"])[1] > 90
    assert best_match("price", ["carat", "cut"])[1] <= 90
