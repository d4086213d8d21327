"""Validation of canonical frames against stored suites in an ephemeral GX context.

Great Expectations is imported here, lazily (importing it takes seconds), and only when a
contract is actually checked. One in-memory context serves the whole process; no GX project
is ever written to disk."""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any

from dsstar.errors import ContractError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Failure", "validate_frame"]

_LOCK = threading.Lock()  # GX contexts are not thread-safe; validations are short
_STATE: dict[str, Any] = {}

Failure = dict[str, Any]  # {"path", "expectation", "observed"}


def _context() -> Any:
    if "context" not in _STATE:
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        _STATE["gx"] = gx
        _STATE["context"] = context
        _STATE["source"] = context.data_sources.add_pandas("dsstar")
    return _STATE["context"]


def load_suite(document: dict[str, Any]) -> Any:
    """The GX suite of a stored JSON document; a malformed (e.g. hand-edited) one raises
    ContractError naming the problem."""
    _context()
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )

    fields = {k: v for k, v in document.items() if k in {"name", "expectations", "meta", "notes"}}
    # GX would log and drop an invalid expectation; a contract must not shrink silently.
    for item in fields.get("expectations") or []:
        try:
            ExpectationConfiguration(
                type=item["type"], kwargs=item.get("kwargs") or {}, meta=item.get("meta")
            ).to_domain_obj()
        except Exception as exc:
            raise ContractError(f"invalid expectation {item.get('type')!r}: {exc}") from exc
    try:
        return _STATE["gx"].ExpectationSuite(**fields)
    except Exception as exc:  # GX raises its own families for unknown types and bad kwargs
        raise ContractError(f"invalid suite {document.get('name')!r}: {exc}") from exc


def validate_frame(
    path: str, suite_document: dict[str, Any], frame: pd.DataFrame
) -> tuple[list[Failure], dict[str, Any]]:
    """Failed expectations (each with its observed value) and GX's statistics."""
    with _LOCK:
        suite = load_suite(suite_document)
        asset = _STATE["source"].add_dataframe_asset(f"t-{uuid.uuid4().hex}")
        try:
            batch = asset.add_batch_definition_whole_dataframe("whole").get_batch(
                batch_parameters={"dataframe": frame}
            )
            result = batch.validate(suite)
        finally:
            _STATE["source"].delete_asset(asset.name)
    failures = [
        {"path": path, "expectation": _label(item), "observed": _observed(item, frame)}
        for item in result.results
        if not item.success
    ]
    return failures, dict(result.statistics)


def _label(item: Any) -> str:
    """e.g. expect_column_values_to_be_between(column=units, min_value=0, max_value=32)."""
    config = item.expectation_config
    shown = {k: v for k, v in config.kwargs.items() if k not in {"batch_id", "result_format"}}
    listed = ", ".join(f"{k}={_short(v)}" for k, v in shown.items())
    return f"{config.type}({listed})"


def _observed(item: Any, frame: pd.DataFrame) -> Any:
    """The most telling part of a result: the observed value, else the unexpected values;
    for a column that is gone or changed kind (GX then reports an error), say that."""
    result = item.result or {}
    column = item.expectation_config.kwargs.get("column")
    if column is not None and column not in frame.columns:
        return f"column {column!r} is missing"
    if "observed_value" in result:
        return _jsonable(result["observed_value"])
    unexpected = result.get("partial_unexpected_list")
    if unexpected:
        return {
            "unexpected_count": result.get("unexpected_count"),
            "examples": _jsonable(unexpected[:5]),
        }
    if result.get("unexpected_count") is not None:
        return {"unexpected_count": result["unexpected_count"]}
    if column is not None:  # GX could not compute the metric: the values changed kind
        return f"column {column!r} holds {frame[column].dtype} values"
    return "error: the expectation could not be evaluated"


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _jsonable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)
