"""DA-Code's table scorers: a delivered CSV (or SQLite database) against the gold one, as
DA-Code's evaluator scores it.

The comparison is by columns, not by headers: every gold column, read as the list of its
values, must appear among the delivered columns. Names do not count, extra delivered columns
do not hurt. Two columns match when

- their values, normalised (numbers rounded to the nearest 0.01 step, texts trimmed and
  lower-cased, missing values alike) are the same (sorted by their text first when the order
  is free), or
- value by value: both missing, numbers within 0.01 of each other, or texts equal once trimmed
  and lower-cased (sorted first when the order is free: missing values first, then by text).

Options (the task's eval config):

- `condition_cols`: indices of the gold columns that count (all when empty);
- `ignore_order`: each column's values are compared as sorted lists (row order free);
- `score_rule`: `divide` (the default) scores the share of gold columns found; `all` scores
  1 only when every one is found, else 0; any other rule is an error (the part scores 0);
- `total_scores`: what a found column is worth (1);
- several gold files are several acceptable answers: the best one counts, each with its own
  entry of every option.

Only the first 10,000 rows of either file are read, as DA-Code does. Options DA-Code does not
know are ignored as it ignores them (one slice task spells `conditon_cols`: all its gold
columns count).

A SQLite answer is compared table by table (the gold's tables, or `condition_tabs`), each
written to CSV and read back (as DA-Code does, so the values are typed as a CSV types them)
and scored as a CSV with its own `condition_cols` and `ignore_order`; when the answer lacks a
table it scores 0, else the worst table's score counts.
"""

from __future__ import annotations

import io
import math
import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["compare_csv", "compare_frames", "compare_sqlite"]

TOLERANCE = 1e-2
MAX_ROWS = 10_000
_NA = "__NA__"


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: Any) -> bool:
    return isinstance(value, int | float)  # True and False count as 1 and 0


def _same(a: Any, b: Any) -> bool:
    import pandas as pd

    if pd.isna(a) and pd.isna(b):
        return True
    if _number(a) and _number(b):
        return math.isclose(float(a), float(b), abs_tol=TOLERANCE)
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return a == b


def _order_key(value: Any) -> tuple:
    # Missing values first, then by text (a number after a text of the same spelling).
    if _missing(value):
        return (0, "", False)
    return (1, str(value), _number(value))


def _normal(value: Any) -> Any:
    import pandas as pd

    if pd.isna(value):
        return _NA
    if isinstance(value, float):
        return round(value / TOLERANCE) * TOLERANCE
    if isinstance(value, str):
        return value.lower().strip()
    return value


def _fingerprint(values: list, ignore_order: bool) -> tuple:
    """A column's normalised values, sorted by their text when the order is free (missing
    values last): two columns with the same fingerprint match."""
    normal = [_normal(value) for value in values]
    if ignore_order:
        normal = sorted(normal, key=lambda v: (v == _NA, str(v)))
    return tuple(normal)


def _columns_match(gold: list, given: list, ignore_order: bool) -> bool:
    if len(gold) != len(given):
        return False
    if ignore_order:
        gold, given = sorted(gold, key=_order_key), sorted(given, key=_order_key)
    return all(_same(a, b) for a, b in zip(gold, given, strict=True))


def compare_frames(
    given: Any,
    gold: Any,
    condition_cols: list[int] | None = None,
    score_rule: str = "divide",
    ignore_order: bool = False,
    total: float = 1,
) -> float:
    """The score of a delivered table against a gold table (pandas frames, both non-empty)."""
    if condition_cols:
        gold = gold.iloc[:, list(condition_cols)]
    gold_columns = gold.head(MAX_ROWS).transpose().values.tolist()
    given_columns = given.head(MAX_ROWS).transpose().values.tolist()
    prints = {_fingerprint(column, ignore_order) for column in given_columns}

    def found(column: list) -> bool:
        return _fingerprint(column, ignore_order) in prints or any(
            _columns_match(column, other, ignore_order) for other in given_columns
        )

    if score_rule == "all":
        return total if all(found(column) for column in gold_columns) else 0
    if score_rule == "divide":
        hits = sum(total for column in gold_columns if found(column))
        return hits / len(gold_columns) if gold_columns else 0
    raise ValueError(f"unknown score_rule {score_rule!r}")


def _read_csv(path: Path | io.StringIO) -> Any:
    """The first rows of a CSV; None when pandas finds nothing or cannot parse it (a missing
    file raises, as in DA-Code)."""
    import pandas as pd

    try:
        return pd.read_csv(path, low_memory=False, nrows=MAX_ROWS)
    except (pd.errors.EmptyDataError, pd.errors.ParserError):
        return None


def compare_csv(given: Path | io.StringIO, golds: Any, options: dict[str, Any]) -> float:
    """The best score of the delivered CSV against the gold CSV, or against each of a list of
    gold CSVs (then every option is a list, one entry per gold file)."""
    several = isinstance(golds, list)
    golds = golds if several else [golds]
    count = len(golds)

    def option(name: str, default: Any) -> list:
        if several:
            return options.get(name, [default] * count)
        return [options.get(name, default)]

    conditions, rules = option("condition_cols", []), option("score_rule", "divide")
    orders, totals = option("ignore_order", False), option("total_scores", 1)
    if isinstance(given, Path) and not given.exists():
        return 0
    frame = _read_csv(given)
    if frame is None or frame.empty:
        return 0
    scores = []
    for index, gold_path in enumerate(golds):
        gold = _read_csv(gold_path)
        if gold is None or gold.empty:
            scores.append(0)
            continue
        scores.append(compare_frames(frame, gold, conditions[index], rules[index],
                                     orders[index], totals[index]))  # fmt: skip
    return max(scores) if scores else 0


def _names(path: Path) -> list[str]:
    if not path.exists():
        raise AssertionError(f"no database {path}")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]


def _as_csvs(path: Path, names: list[str]) -> list[io.StringIO]:
    """Each table's first rows as CSV text, until a table cannot be read (DA-Code stops
    there)."""
    import pandas as pd

    found: list[io.StringIO] = []
    if not path.exists():
        return found
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        for name in names:
            try:
                frame = pd.read_sql_query(f"SELECT * FROM {name} LIMIT {MAX_ROWS}", conn)
            except (sqlite3.Error, pd.errors.DatabaseError):
                break
            found.append(io.StringIO(frame.to_csv(index=False)))
    return found


def compare_sqlite(given: Path, gold: Path, options: dict[str, Any]) -> float:
    """The worst table's score of the delivered database against the gold one."""
    tables = options.get("condition_tabs", []) or _names(gold)
    gold_tables = _as_csvs(gold, tables)
    given_tables = _as_csvs(given, tables)
    if len(given_tables) != len(gold_tables):
        return 0
    conditions = options.get("condition_cols", [[]] * len(gold_tables))
    orders = options.get("ignore_order", [False] * len(gold_tables))
    scores = [
        compare_csv(mine, theirs, {"condition_cols": conditions[i], "ignore_order": orders[i]})
        for i, (mine, theirs) in enumerate(zip(given_tables, gold_tables, strict=True))
    ]
    return min(scores) if scores else 0
