"""The run form: what one run of the ds-star flow is given, as one typed pydantic model.

`RunForm` is the flow's parameters (so the Prefect UI renders it as a form with descriptions
and bounds), and what `dsstar run`, `dsstar resume`, the nightly batch and the benchmark build
to start a run. Its option fields are derived from `Settings`, never written twice: every
setting except the secrets (`api_key`, `database_url`, read from the worker's environment)
and the worker's policy over forms (`form_allow`, `data_roots`, the interpreter scripts run
in, `script_python`, and how long its storage keeps cached results; see `trust.py`),
with the same type, bounds and description. An option left unset (None) takes the setting of
the process that runs the flow (its `DSSTAR_*` variables, then the default), so a deployment's
form never overrides a worker's environment by accident.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Optional
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from dsstar.errors import UsageError
from dsstar.settings import Settings, value_range

__all__ = [
    "OPTION_FIELDS",
    "SECRET_FIELDS",
    "WORKER_FIELDS",
    "PreparedRun",
    "RunForm",
    "RunOptions",
    "default_text",
    "explain",
    "form_parameters",
    "kept_out",
    "options_form",
    "refuse_kept",
    "refuse_unknown",
]

SECRET_FIELDS = frozenset({"api_key", "database_url"})
# The worker's policy over forms (see trust.py): a form choosing it would be no policy. The
# scripts' interpreter is the worker's too: a form naming one would run any program there.
# So is how long the storage keeps cached results (a form could delete other runs' work), and
# how long a silent run lives on (the server's, for every run on it).
WORKER_FIELDS = frozenset(
    {
        "form_allow",
        "data_roots",
        "script_python",
        "cache_max_age_days",
        "cache_max_mb",
        "heartbeat_timeout",
    }
)
# The form shows these first: what a person starting one run most often changes.
_FIRST = ("model", "max_rounds", "storage", "reuse", "ask_human")
OPTION_FIELDS = tuple(
    [n for n in _FIRST if n in Settings.model_fields]
    + [
        n
        for n in Settings.model_fields
        if n not in SECRET_FIELDS | WORKER_FIELDS and n not in _FIRST
    ]
)


def kept_out(values: Mapping[str, Any]) -> list[str]:
    """Why each of `values` (a run's parameters or settings, by name) is never given to a
    run, where it would be recorded (a flow run's parameters in Prefect, run.json): a secret,
    the worker's policy, or a URL with a password in it. Empty when every value may be given.
    The one check of the run form, the form flows and every function of the Python API."""
    why = []
    for name, value in values.items():
        if name in SECRET_FIELDS:
            why.append(
                f"{name} is a secret and cannot be given here: a run's parameters are recorded"
                f" (in Prefect, in run.json); set DSSTAR_{name.upper()} in the environment of"
                " the process that runs it (for a deployment: the worker's environment)"
            )
        elif name in WORKER_FIELDS:
            why.append(
                f"{name} is the worker's policy and cannot be given here: only"
                f" DSSTAR_{name.upper()} in the worker's environment sets it"
            )
        elif name not in _FREE_TEXT and _password_in(value):
            why.append(
                f"{name} holds a password ({_masked(value)}) and cannot be given here: a run's"
                " parameters are recorded (in Prefect, in run.json); credentials come from the"
                " environment of the process that runs it (DSSTAR_API_KEY, AWS_*, a provider's"
                " own variables)"
            )
    return why


def refuse_kept(values: Mapping[str, Any]) -> None:
    """Raise UsageError naming every value of `values` that `kept_out` refuses."""
    why = kept_out(values)
    if why:
        raise UsageError("; ".join(why))


# Free text, not a location: a question may quote a URL without handing it to anything.
_FREE_TEXT = frozenset({"question", "guidelines"})


def _password_in(value: Any) -> bool:
    if not isinstance(value, str) or "@" not in value:
        return False
    try:
        return bool(urlsplit(value.strip()).password)
    except ValueError:  # not a URL (an unbalanced bracket, a bad port)
        return False


def _masked(url: str) -> str:
    """`url` with its password replaced by ***, to name it in a message."""
    parts = urlsplit(url.strip())
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def refuse_unknown(parameters: dict[str, Any], form: type[BaseModel]) -> None:
    """Refuse parameters that are not fields of `form`, each with its reason: a secret or
    the worker's policy is never a form's to set (`kept_out`), and anything else is a typo.
    Prefect's own signature check would fail the run with a list of names and no reason."""
    unknown = sorted(set(parameters) - set(form.model_fields))
    why = kept_out({name: parameters[name] for name in unknown})
    why += [
        f"{name} is not a field of the {form.__name__}"
        for name in unknown
        if name not in SECRET_FIELDS | WORKER_FIELDS
    ]
    if why:
        raise UsageError("; ".join(why))


def default_text(name: str) -> str | None:
    """The default of setting `name` as shown to people (None when it has none worth showing)."""
    value = Settings.model_fields[name].get_default(call_default_factory=True)
    if value is None or value == {}:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def _option(name: str, field: FieldInfo) -> tuple[Any, Any]:
    """Setting `name` as an optional form field: its type and bounds, None by default."""
    shown = default_text(name)
    unset = f"Unset: DSSTAR_{name.upper()} where the flow runs"
    unset += f", else {shown}." if shown else "."
    # The UI renders descriptions as Markdown: a placeholder such as <name> goes in a code span.
    text = re.sub(r"'?(\S*<[a-z-]+>\S*?)'?(?=[\s,.]|$)", r"`\1`", field.description or name)
    return _unset_or(_typed(field)), Field(None, description=f"{text} {unset}")


def _unset_or(kind: Any) -> Any:
    """`kind` or None (unset). The Prefect UI shows such a field with a type picker whose
    "None" (unset, the default) leaves the setting to the worker."""
    return Optional[kind]  # noqa: UP045


def _typed(field: FieldInfo) -> Any:
    """The field's type with its bounds (ge, gt, ...) attached, as a parameter annotation.
    A number is also finite and not a boolean: pydantic reads "nan", "inf" and true as
    numbers, and no bound compares with NaN (a NaN timeout passed every cap)."""
    metadata = list(field.metadata)
    if _numeric(field.annotation):
        metadata += [AllowInfNan(False), BeforeValidator(_not_boolean)]
    return Annotated[field.annotation, *metadata] if metadata else field.annotation


def _numeric(annotation: Any) -> bool:
    """Whether a field of this type holds a number (an int or float, optional or not)."""
    kinds = set(getattr(annotation, "__args__", (annotation,)))
    return annotation is not bool and bool(kinds & {int, float})


def _not_boolean(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"should be a number, not {str(value).lower()}")
    return value


class _Options(BaseModel):
    """What every form shares: building the run's Settings."""

    model_config = ConfigDict(extra="forbid")

    def chosen(self) -> dict[str, Any]:
        """The settings this form sets (None: left to the environment)."""
        chosen = {name: getattr(self, name) for name in OPTION_FIELDS}
        return {name: value for name, value in chosen.items() if value is not None}

    def settings(self) -> Settings:
        """The run's Settings: this form's options over `DSSTAR_*` variables and defaults.
        Raises pydantic's ValidationError (see `explain`) for a value Settings refuses."""
        return Settings(**self.chosen())

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, values: Any) -> Any:
        why = kept_out(values) if isinstance(values, dict) else []
        if why:
            raise ValueError("; ".join(why))
        return values


_OPTION_DEFS = {name: _option(name, Settings.model_fields[name]) for name in OPTION_FIELDS}


def options_form(name: str, doc: str, **first: Any) -> type[BaseModel]:
    """A form model named `name`: the fields in `first` (pydantic `(type, Field)` pairs),
    then every run setting as an optional field."""
    return create_model(name, __base__=_Options, __doc__=doc, **first, **_OPTION_DEFS)


RunOptions = options_form("RunOptions", "Every run setting but the secrets.")


class _Question(_Options):
    question: str = Field(
        description="The question to answer, e.g. 'Which region had the highest revenue?'."
    )
    data: str = Field(
        min_length=1,
        description="Folder, single file or URL (s3://bucket/prefix) holding the data files.",
    )
    guidelines: str = Field(
        "", description="How the answer must be formatted, e.g. 'a number with 2 decimals'."
    )

    @field_validator("question")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question is empty")
        return value

    @field_validator("run_id", check_fields=False)
    @classmethod
    def _valid_run_id(cls, value: str | None) -> str | None:
        from dsstar.storage import check_run_id

        if value is not None:
            try:
                check_run_id(value)
            except UsageError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="before")
    @classmethod
    def _legacy_options(cls, values: Any) -> Any:
        """Deployments made before the form passed other settings as an `options` dict;
        they still work: its entries fill the fields left unset."""
        if isinstance(values, dict) and isinstance(values.get("options"), dict):
            legacy = values["options"]
            values = {k: v for k, v in values.items() if k != "options"}
            values |= {k: v for k, v in legacy.items() if values.get(k) is None}
        return values

    def parameters(self) -> dict[str, Any]:
        """The flow's keyword arguments (unset fields left out: the flow's defaults apply)."""
        return self.model_dump(mode="json", exclude_none=True, exclude={"options"})

    @classmethod
    def for_question(
        cls, question: dict[str, Any], run_id: str | None, settings: dict[str, Any]
    ) -> Any:
        """The form of one question run with every setting of `settings` (a Settings dump,
        as a batch shares it); keys that are not run options are left out."""
        chosen = {k: v for k, v in settings.items() if k in OPTION_FIELDS and v is not None}
        return cls(**question, run_id=run_id, **chosen)


RunForm = create_model(
    "RunForm",
    __base__=_Question,
    __doc__="One run of the ds-star flow: the question, its data and the settings it runs with.",
    **_OPTION_DEFS,
    run_id=(
        _unset_or(str),
        Field(
            None,
            description="Name a new run, or continue a stored one with its own question, data"
            " and settings (anything else is refused). Unset: derived from the flow run, so a retry"
            " of the flow run resumes it (and finds its finished work).",
        ),
    ),
    options=(
        _unset_or(dict[str, Any]),
        Field(
            None,
            description="Deprecated (older deployments): settings by name, e.g."
            ' {"exec_timeout": 60}; the fields above are the same settings, typed.',
        ),
    ),
)


@dataclass(frozen=True)
class PreparedRun:
    """A run built and checked in this process, ready to start (`dsstar.api.prepare_run`):
    its form (the flow's parameters, with its run id) validated, its settings built, its
    question checked and its preflight passed. The flow it starts takes both as they are;
    parameters from elsewhere never make one.

    `policy` judges its form as a worker judges one (`dsstar.inputs.trust`): None when the
    form is the local user's own (`dsstar run`, `dsstar.ask`), the Settings of this
    process's environment and its user's own flags when it was taken from storage
    (`dsstar resume`, `dsstar replay`: `dsstar.inputs.stored`)."""

    form: Any  # a RunForm (a model built at import: no annotation can name it)
    settings: Settings
    policy: Settings | None


def form_parameters(form: type[BaseModel]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a function that takes `**fields` the signature of `form`: one keyword parameter
    per field, with its type, bounds and default, and its description in the docstring's
    Args (where Prefect reads parameter descriptions). Prefect then builds the flow's
    parameter schema, the form of the UI, from the model."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        params = []
        for name, field in form.model_fields.items():
            default = inspect.Parameter.empty if field.is_required() else field.default
            params.append(
                inspect.Parameter(
                    name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=_typed(field)
                )
            )
        returns = inspect.signature(fn).return_annotation
        fn.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
        fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
        args = "\n".join(
            f"    {name}: {' '.join((field.description or name).split())}"
            for name, field in form.model_fields.items()
        )
        fn.__doc__ = f"{inspect.cleandoc(fn.__doc__ or '')}\n\nArgs:\n{args}\n"
        return fn

    return decorate


_OUT_OF_RANGE = {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}


def explain(exc: ValidationError, name: Callable[[str], str] = str) -> str:
    """A validation error as one readable line, e.g. "--max-rounds 0: should be greater than
    or equal to 1 (allowed: 1 to 100)". `name` turns a field name into what the user typed (a
    flag, a key)."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"])
        message = error["msg"].removeprefix("Value error, ").removeprefix("Input ")
        if error["type"] == "extra_forbidden":
            message = "no such setting"
        allowed = value_range(field) if error["type"] in _OUT_OF_RANGE else ""
        if " to " in allowed or ", " in allowed:  # both ends: the message names one
            message += f" (allowed: {allowed})"
        given = error.get("input")
        shown = "" if error["type"] == "missing" or isinstance(given, dict) else f" {given!r}"
        parts.append(f"{name(field)}{shown}: {message}" if field else message)
    return "; ".join(parts)
