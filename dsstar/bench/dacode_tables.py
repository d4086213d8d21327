"""DA-Code's table scorers: a delivered CSV (or SQLite database) against the gold one.

The comparison is by columns, not by headers: every gold column, read as the list of its
values, must appear among the delivered columns. Names do not count, extra delivered columns
do not hurt. Values match when both are missing, numbers within 0.01 of each other, or texts
equal once trimmed and lower-cased.

Options (the task's eval config):

- `condition_cols`: indices of the gold columns that count (all when empty);
- `ignore_order`: each column's values are compared as sorted lists (row order free);
- `score_rule`: `divide` (the default) scores the share of gold columns found; `all` scores
  1 only when every one is found, else 0;
- several gold files are several acceptable answers: the best one counts.

Only the first 10,000 rows of either file are read, as DA-Code does. Options DA-Code does not
know are ignored as it ignores them (one slice task spells `conditon_cols`: all its gold
columns count).

A SQLite answer is compared table by table (the gold's tables, or `condition_tabs`), each as
a CSV with its own `condition_cols` and `ignore_order`; a gold table the answer lacks scores 0,
else the worst table's score counts.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["compare_csv", "compare_frames", "compare_sqlite"]

TOLERANCE = 1e-2
MAX_ROWS = 10_000


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: Any) -> bool:
    return isinstance(value, int | float)  # True and False count as 1 and 0


def _same(a: Any, b: Any) -> bool:
    if _missing(a) and _missing(b):
        return True
    if _number(a) and _number(b):
        return math.isclose(float(a), float(b), abs_tol=TOLERANCE)
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return a == b


def _order_key(value: Any) -> tuple:
    # Missing values first, then by text: the order DA-Code sorts a column in before comparing.
    if _missing(value):
        return (0, "")
    return (1, str(value))


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
) -> float:
    """The score (0..1) of a delivered table against a gold table (pandas frames)."""
    if given.empty or gold.empty:
        return 0.0
    if condition_cols:
        gold = gold.iloc[:, list(condition_cols)]
    gold_columns = gold.head(MAX_ROWS).transpose().values.tolist()
    given_columns = given.head(MAX_ROWS).transpose().values.tolist()
    found = [
        any(_columns_match(column, other, ignore_order) for other in given_columns)
        for column in gold_columns
    ]
    if score_rule == "all":
        return float(all(found))
    return sum(found) / len(found) if found else 0.0


def _read_csv(path: Path) -> Any:
    import pandas as pd

    try:
        return pd.read_csv(path, low_memory=False, nrows=MAX_ROWS)
    except (OSError, ValueError, pd.errors.ParserError):
        return None  # EmptyDataError is a ValueError: nothing readable scores 0


def compare_csv(given: Path, golds: list[Path], options: dict[str, Any]) -> float:
    """The best score of the delivered CSV against any of the gold CSVs."""
    if not given.is_file():
        return 0.0
    frame = _read_csv(given)
    if frame is None or frame.empty:
        return 0.0
    scores = []
    for index, gold_path in enumerate(golds):
        gold = _read_csv(gold_path)
        if gold is None or gold.empty:
            scores.append(0.0)
            continue
        scores.append(
            compare_frames(
                frame,
                gold,
                condition_cols=_nth(options.get("condition_cols"), index, len(golds)),
                score_rule=_nth(options.get("score_rule"), index, len(golds)) or "divide",
                ignore_order=bool(_nth(options.get("ignore_order"), index, len(golds))),
            )
        )
    return max(scores, default=0.0)


def _nth(option: Any, index: int, count: int) -> Any:
    """An option given once for one gold file, or as a list with one entry per gold file."""
    if count > 1 and isinstance(option, list) and option and not isinstance(option[0], int):
        return option[index] if index < len(option) else None
    return option


def _tables(path: Path, names: list[str] | None) -> dict[str, Any] | None:
    import pandas as pd

    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            if not names:
                rows = conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
                names = [row[0] for row in rows]
            return {
                name: pd.read_sql_query(
                    f'SELECT * FROM "{name.replace(chr(34), chr(34) * 2)}" LIMIT {MAX_ROWS}', conn
                )
                for name in names
            }
    except (sqlite3.Error, pd.errors.DatabaseError):
        return None


def compare_sqlite(given: Path, gold: Path, options: dict[str, Any]) -> float:
    """The worst table's score of the delivered database against the gold one."""
    wanted = options.get("condition_tabs") or None
    gold_tables = _tables(gold, wanted)
    if not given.is_file() or not gold_tables:
        return 0.0
    given_tables = _tables(given, list(gold_tables))  # a gold table missing: nothing to compare
    if given_tables is None or len(given_tables) != len(gold_tables):
        return 0.0
    conditions = options.get("condition_cols") or [[]] * len(gold_tables)
    orders = options.get("ignore_order") or [False] * len(gold_tables)
    scores = []
    for index, (gold_frame, frame) in enumerate(
        zip(gold_tables.values(), given_tables.values(), strict=True)
    ):
        scores.append(
            compare_frames(
                frame,
                gold_frame,
                condition_cols=conditions[index] if index < len(conditions) else [],
                ignore_order=bool(orders[index]) if index < len(orders) else False,
            )
        )
    return min(scores, default=0.0)
