"""The run form's fields, made from `Settings`: where each setting sits in the form, its type
with bounds on both sides, and how Prefect's UI shows it.

Every setting a form may set is a field of one section (`SECTIONS`): limits, retrieval,
execution or advanced; `model` stands first, beside the question. A setting placed in none
below goes to limits when it is a cap (`dsstar.caps.is_cap`), else to advanced, so a new
setting needs no edit here. Its form field has the setting's type and bounds, and also a
bound on every length (`TEXT_CHARS`, `VALUE_CHARS`, `AGENT_MODELS`): no field takes
arbitrary JSON, so Prefect's server refuses an oversized or deeply nested value against
the deployment's schema before it stores a flow run. A type without such a bound is refused
at import.

A field left unset (None) takes the setting of the process that runs the flow. The schema
shows it as its plain type, without Prefect's "None" choice: no default, so Prefect's UI
leaves it empty and sends nothing, and Prefect's server accepts null for it; a yes/no
setting is a choice of true or false that starts empty (a switch would start at false).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin

from pydantic import AllowInfNan, BeforeValidator, Field
from pydantic.fields import FieldInfo

from dsstar.caps import is_cap
from dsstar.settings import Settings

__all__ = [
    "AGENT_MODELS",
    "NOT_SETTINGS",
    "OPTION_FIELDS",
    "SECRET_FIELDS",
    "SECTIONS",
    "TEXT_CHARS",
    "VALUE_CHARS",
    "WORKER_FIELDS",
    "default_text",
    "form_type",
    "section_of",
    "unset_field",
]

SECRET_FIELDS = frozenset({"api_key", "database_url"})
# The worker's policy over forms (see trust.py): a form choosing it would be no policy. The
# scripts' interpreter is the worker's too: a form naming one would run any program there.
# So is how long the storage keeps cached results (a form could delete other runs' work), and
# how long a silent run lives on (the server's, for every run on it). How often a process
# writes its progress lines (`progress_interval`, where that setting exists) is that
# process's own (its terminal or log), not a run's.
WORKER_FIELDS = frozenset(
    {
        "form_allow",
        "data_roots",
        "script_python",
        "cache_max_age_days",
        "cache_max_mb",
        "heartbeat_timeout",
        "progress_interval",
    }
)

TEXT_CHARS = 200_000  # a question or guidelines (Prefect stores at most 512 KB of parameters)
VALUE_CHARS = 4096  # any other text: a model name, a path, a URL, a run id
AGENT_MODELS = 16  # most entries of agent_models (there are eight agents)

# The sections of a form, in its order, with what each says of itself in the UI.
SECTIONS = {
    "limits": "What a run may spend: rounds, money, tokens, time, memory, disk. Empty fields"
    " take the worker's settings; a form may lower a cap, not raise it.",
    "retrieval": "How files are read, described and ranked for the agents: top-k, embeddings,"
    " description and context sizes, archives, the offline profiler.",
    "execution": "Where and how scripts run: sandbox, parallelism, task runner, cluster.",
    "advanced": "Run id, reuse, human guidance, storage, the model's endpoint and retries.",
}
# Where each setting sits, first to last within its section. `run_id` is a form's, no setting.
_PLACED = {
    "limits": ("max_rounds", "max_cost", "max_tokens", "max_debug_attempts", "exec_timeout",
               "exec_memory_mb", "exec_cpu_seconds", "exec_disk_mb", "exec_processes",
               "exec_output_bytes", "exec_outputs", "exec_outputs_mb", "llm_timeout",
               "human_timeout", "slot_wait", "max_crash_retries", "max_question_chars",
               "max_output_chars"),
    "retrieval": ("top_k", "embedding_model", "embedding_api_base", "embedding_input_type",
                  "embedding_cache_dir", "context_tokens", "max_description_chars",
                  "max_document_chars", "archive_max_bytes", "archive_max_members",
                  "archive_max_depth", "profile_timeout", "profile_max_bytes", "read_timeout",
                  "read_memory_mb"),
    "execution": ("sandbox", "exec_pool", "max_parallel", "llm_concurrency", "llm_rpm",
                  "task_runner", "task_workers", "dask_address", "ray_address", "work_dir",
                  "exec_uid_base"),
    "advanced": ("run_id", "reuse", "ask_human", "storage", "api_base", "agent_models",
                 "temperature", "llm_retries", "llm_retry_delay", "ask_ahead", "read_charts",
                 "summarize_over_chars", "storage_retry_delay"),
}  # fmt: skip
_SECTION_OF = {name: section for section, names in _PLACED.items() for name in names}
NOT_SETTINGS = frozenset({"run_id"})  # fields of a section that are not run settings
_FIRST = ("model",)  # the settings beside the question, not in a section


def section_of(name: str) -> str | None:
    """The section of the form that holds `name` (None: `model`, which stands first)."""
    if name in _FIRST:
        return None
    return _SECTION_OF.get(name) or ("limits" if is_cap(name) else "advanced")


def _order(name: str) -> tuple[int, int]:
    section = section_of(name)
    if section is None:
        return (-1, 0)
    placed = _PLACED[section]
    return (list(SECTIONS).index(section), placed.index(name) if name in placed else len(placed))


OPTION_FIELDS = tuple(
    sorted((n for n in Settings.model_fields if n not in SECRET_FIELDS | WORKER_FIELDS), key=_order)
)


def default_text(name: str) -> str | None:
    """The default of setting `name` as shown to people (None when it has none worth showing)."""
    value = Settings.model_fields[name].get_default(call_default_factory=True)
    if value is None or value == {}:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def _bounded_text(chars: int) -> Any:
    return Annotated[str, Field(max_length=chars)]


def form_type(field: FieldInfo) -> Any:
    """The form's type of a setting: its type with its bounds (ge, gt, ...) and a bound on
    every length. A number is also finite and not a boolean: pydantic reads "nan", "inf" and
    true as numbers, and no bound compares with NaN (a NaN timeout passed every cap)."""
    kind = _kind(field.annotation)
    metadata = list(field.metadata)
    if kind in (int, float):
        metadata += [AllowInfNan(False), BeforeValidator(_not_boolean)]
    elif kind in (str, Path):
        return _bounded_text(VALUE_CHARS)  # a path is given as text; Settings makes it a Path
    elif kind is bool or get_origin(kind) is Literal:  # a choice: bounded by its values
        pass
    elif get_origin(kind) is dict and get_args(kind) == (str, str):
        kind = dict[_bounded_text(64), _bounded_text(VALUE_CHARS)]  # type: ignore[misc]
        metadata.append(Field(max_length=AGENT_MODELS))
    else:  # a new kind of setting: say how a form bounds it before it reaches one
        raise TypeError(f"no bounded form type for a setting of type {field.annotation}")
    return Annotated[kind, *metadata] if metadata else kind


def _kind(annotation: Any) -> Any:
    """The type of a setting without its None (`int | None` -> int)."""
    if get_origin(annotation) in (Union, type(int | None)):
        [kind] = [a for a in get_args(annotation) if a is not type(None)]
        return kind
    return annotation


def _not_boolean(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"should be a number, not {str(value).lower()}")
    return value


def unset_field(name: str) -> tuple[Any, FieldInfo]:
    """Setting `name` as a form field: its bounded type or None (unset, the default), with
    its description and what unset means."""
    field = Settings.model_fields[name]
    shown = default_text(name)
    unset = f"Empty: DSSTAR_{name.upper()} where the flow runs"
    unset += f", else {shown}." if shown else "."
    # The UI renders descriptions as Markdown: a placeholder such as <name> goes in a code span.
    text = re.sub(r"'?(\S*<[a-z-]+>\S*?)'?(?=[\s,.]|$)", r"`\1`", field.description or name)
    described = Field(None, description=f"{text} {unset}", json_schema_extra=shown_unset)
    return Optional[form_type(field)], described  # noqa: UP045


def shown_unset(schema: dict[str, Any]) -> None:
    """The JSON schema of a field that is unset by default, as Prefect's form shows it well:
    its type alone (no "None" choice, no default), a yes/no as a choice that starts empty.
    Prefect's server accepts null for a field with a type and no default."""
    branches = schema.pop("anyOf", None)
    if branches:
        [kept] = [b for b in branches if b.get("type") != "null"]
        schema.update(kept)
    schema.pop("default", None)
    if schema.get("type") == "boolean":
        del schema["type"]
        schema["enum"] = [True, False]
