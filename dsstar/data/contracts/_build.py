"""A Great Expectations 1.x suite derived from a table's profile.

GX 1.x ships no profiler, so the expectations are chosen here, from the canonical frame of
`_read`: the columns in order, each column's kind, not-null where nothing was missing,
numeric ranges widened by a margin, value sets for low-cardinality text, uniqueness for
identifier-like columns where it held, and a band around the row count. The suite is written
directly in GX's JSON form (no GX import needed to build it; GX loads it to validate)."""

from __future__ import annotations

import math
import re
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from dsstar.data.contracts._read import Table

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MAX_SET_SIZE", "build_suite", "gx_version", "kind_of", "suite_name"]

MAX_SET_SIZE = 20  # text columns with at most this many distinct values get a value set
MARGIN = 0.25  # numeric ranges widen by this share of the observed span (or magnitude)
_ID_NAME = re.compile(r"(^|[_\s-])(id|key|uuid|code)$|id$", re.IGNORECASE)
_TYPE = {"number": "float64", "bool": "bool", "datetime": "datetime64", "text": "str"}


def gx_version() -> str:
    """The installed Great Expectations version, recorded beside every suite."""
    return version("great_expectations")


def kind_of(series: pd.Series) -> str:
    """number, bool, datetime or text: the canonical kinds a contract tells apart."""
    import pandas as pd  # here, not above: commands that only read stored contracts skip it

    if pd.api.types.is_bool_dtype(series):
        return "bool"
    if pd.api.types.is_numeric_dtype(series):
        return "number"
    if pd.api.types.is_datetime64_any_dtype(series):
        return "datetime"
    return "text"


def suite_name(path: str, table: str | None) -> str:
    """A suite's name: the file's path, and after '#' its sheet or database table."""
    return path if table is None else f"{path}#{table}"


def build_suite(name: str, table: Table) -> dict[str, Any]:
    """The suite (GX JSON form) that `table` satisfies today, with room for ordinary growth."""
    frame = table.frame
    expectations = [
        _expect("expect_table_columns_to_match_ordered_list", column_list=list(frame.columns)),
        _row_band(len(frame), table.truncated),
    ]
    for column in frame.columns:
        expectations += _column_expectations(column, frame[column], len(frame))
    return {
        "name": name,
        "expectations": expectations,
        "meta": {"great_expectations_version": gx_version(), "made_by": "dsstar"},
        "notes": None,
    }


def _expect(kind: str, **kwargs: Any) -> dict[str, Any]:
    return {"type": kind, "kwargs": kwargs, "meta": {}}


def _row_band(rows: int, truncated: bool) -> dict[str, Any]:
    """Refreshed data may shrink to half or grow well past today's size; only the lower
    bound applies when the file had more rows than were read."""
    upper = None if truncated else max(2 * rows, rows + 1000)
    return _expect("expect_table_row_count_to_be_between", min_value=rows // 2, max_value=upper)


def _column_expectations(column: str, series: pd.Series, rows: int) -> list[dict[str, Any]]:
    kind = kind_of(series)
    found = [_expect("expect_column_values_to_be_of_type", column=column, type_=_TYPE[kind])]
    present = series.dropna()
    if rows and len(present) == rows:
        found.append(_expect("expect_column_values_to_not_be_null", column=column))
    if present.empty:
        return found
    if kind == "number":
        found.append(_range(column, float(present.min()), float(present.max())))
    distinct = present.nunique()
    if kind == "text" and distinct <= MAX_SET_SIZE and len(present) >= 2 * distinct:
        values = sorted(str(v) for v in present.unique())
        found.append(_expect("expect_column_values_to_be_in_set", column=column, value_set=values))
    identifier = _ID_NAME.search(column) is not None or rows >= 50
    if kind in {"number", "text"} and identifier and distinct == len(present) > 1:
        found.append(_expect("expect_column_values_to_be_unique", column=column))
    return found


def _range(column: str, low: float, high: float) -> dict[str, Any]:
    """[low, high] widened by the margin; a column that was never negative stays >= 0."""
    margin = MARGIN * (high - low) or MARGIN * max(abs(low), abs(high)) or 1.0
    lower, upper = low - margin, high + margin
    if low >= 0:
        lower = max(0.0, lower)
    if float(low).is_integer() and float(high).is_integer():
        lower, upper = math.floor(lower), math.ceil(upper)
    return _expect(
        "expect_column_values_to_be_between", column=column, min_value=lower, max_value=upper
    )
