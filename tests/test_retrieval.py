"""Retrieval: the file whose path and description match the question ranks first."""

from __future__ import annotations

from dsstar.retrieval import rank, tokenize

DOCS = {
    "data/orders_2024.csv": "Sales orders: order_id, region, revenue in EUR, order date.",
    "data/staff.xlsx": "Employees with their salaries, departments and hiring dates.",
    "data/regions.json": "Region codes with region names and country.",
    "README.md": "Notes about where the data came from.",
}


def test_matching_description_ranks_first() -> None:
    assert rank("What was the total revenue of sales orders?", DOCS)[0][0] == "data/orders_2024.csv"
    assert rank("Average salaries per department?", DOCS)[0][0] == "data/staff.xlsx"


def test_path_words_count() -> None:
    docs = {"a/regions.json": "", "b/cities.json": "", "c/other.csv": "region names"}
    assert rank("which file is regions", docs)[0][0] == "a/regions.json"


def test_all_keys_returned_best_first_with_scores_in_range() -> None:
    ranked = rank("revenue per region", DOCS)
    assert sorted(key for key, _ in ranked) == sorted(DOCS)
    scores = [score for _, score in ranked]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= score <= 1.0 for score in scores)
    assert scores[0] > 0 and dict(ranked)["README.md"] == 0.0


def test_deterministic_and_independent_of_insertion_order() -> None:
    question = "revenue by region and country"
    first = rank(question, DOCS)
    assert rank(question, DOCS) == first
    assert rank(question, dict(reversed(DOCS.items()))) == first


def test_ties_are_broken_by_key() -> None:
    docs = {"zeta.csv": "same words", "alpha.csv": "same words", "mid.csv": "same words"}
    assert [key for key, _ in rank("unrelated question", docs)] == [
        "alpha.csv",
        "mid.csv",
        "zeta.csv",
    ]


def test_empty_inputs() -> None:
    assert rank("anything at all", {}) == []
    assert rank("", {"a.csv": "text"}) == [("a.csv", 0.0)]
    assert rank("?!", {"a.csv": ""}) == [("a.csv", 0.0)]


def test_tokenize_splits_paths_and_underscores() -> None:
    assert tokenize("data/Orders_2024.CSV") == ["data", "orders", "2024", "csv"]
