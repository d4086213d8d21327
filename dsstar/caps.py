"""Which settings are caps, and the bound each sets here.

A cap bounds resource use or spending: a run form may lower it, never raise it (see
dsstar/inputs/trust.py). Numeric settings named like one are caps without a marker;
`json_schema_extra=CAP` (dsstar.settings.CAP) marks others, `{"cap": False}` exempts one, so a
new setting is covered without further edits.
"""

from __future__ import annotations

import re

from dsstar.settings import Settings

__all__ = ["cap_value", "is_cap"]

_CAP_NAMES = re.compile(
    r"(exec|archive|profile|read|max)_\w+|\w+_(timeout|retries|tokens|wait|workers|concurrency"
    r"|rpm|seconds|cost)"
)


def is_cap(name: str) -> bool:
    """Whether setting `name` bounds resource use or spending."""
    field = Settings.model_fields[name]
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if "cap" in extra:
        return bool(extra["cap"])
    numeric = {int, float} & set(getattr(field.annotation, "__args__", (field.annotation,)))
    return bool(numeric) and field.annotation is not bool and bool(_CAP_NAMES.fullmatch(name))


def cap_value(settings: Settings, name: str) -> float | None:
    """The bound cap `name` sets in `settings` (None: unbounded); an unset CPU time is the
    exec timeout + 2, as the sandbox applies it."""
    value = getattr(settings, name)
    if name == "exec_cpu_seconds" and value is None:
        return settings.exec_timeout + 2
    return value
