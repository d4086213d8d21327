"""The run form: what one run of the ds-star flow is given, as one typed pydantic model.

`RunForm` is the flow's parameters (so the Prefect UI renders it as a form with descriptions
and bounds), and what `dsstar run`, `dsstar resume`, the nightly batch and the benchmark build
to start a run. First the question, its data, the answer's guidelines and the model; then
every other setting in four sections (limits, retrieval, execution, advanced; see
`fields.py`), which Prefect's UI shows as groups. The settings are derived from `Settings`,
never written twice: every setting except the secrets (`api_key`, `database_url`, read from
the worker's environment) and the worker's policy over forms (`form_allow`, `data_roots`, the
interpreter scripts run in, `script_python`, how long its storage keeps cached results and
how long a silent run lives on; see `trust.py`), with the same type, bounds and description,
and a bound on every length. An option left unset (None, or an empty
`model`) takes the setting of the process that runs the flow (its `DSSTAR_*` variables, then
the default), so a deployment's form never overrides a worker's environment by accident.

Settings may also be given by name, flat (`RunForm(question=..., data=..., max_rounds=3)`):
each goes to its section. `chosen()` and `settings()` read them flat again.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)

from dsstar.errors import UsageError
from dsstar.inputs.fields import (
    NOT_SETTINGS,
    OPTION_FIELDS,
    SECRET_FIELDS,
    SECTIONS,
    TEXT_CHARS,
    VALUE_CHARS,
    WORKER_FIELDS,
    default_text,
    section_of,
    shown_unset,
    unset_field,
)
from dsstar.settings import Settings, value_range

__all__ = [
    "OPTION_FIELDS",
    "SECRET_FIELDS",
    "SECTIONS",
    "WORKER_FIELDS",
    "PreparedRun",
    "RunForm",
    "RunOptions",
    "default_text",
    "explain",
    "form_parameters",
    "grouped",
    "kept_out",
    "options_form",
    "refuse_kept",
    "refuse_unknown",
    "run_id_in",
]


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


def grouped(values: Mapping[str, Any], form: type[BaseModel]) -> dict[str, Any]:
    """`values` (a form's fields, settings among them by name) as `form` holds them: each
    setting given flat moved into its section. A name that is neither stays, for the form
    to refuse."""
    moved: dict[str, Any] = {}
    flat: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        section = section_of(name) if name in _PLACEABLE else None
        if name in form.model_fields or section not in form.model_fields:
            moved[name] = value
        else:
            flat.setdefault(section, {})[name] = value
    for section, settings in flat.items():
        inner = moved.get(section)
        if isinstance(inner, BaseModel):
            inner = inner.model_dump(exclude_none=True)
        if not isinstance(inner, dict | None):
            continue  # not a section: the form refuses it
        inner = dict(inner or {})
        twice = [n for n, v in settings.items() if n in inner and inner[n] != v]
        if twice:
            raise UsageError(f"{', '.join(twice)} given twice: flat and in {section}")
        moved[section] = inner | settings
    return moved


_PLACEABLE = frozenset(OPTION_FIELDS) | NOT_SETTINGS


def refuse_unknown(parameters: dict[str, Any], form: type[BaseModel]) -> None:
    """Refuse parameters that are neither fields of `form` nor settings it holds by name,
    each with its reason: a secret or the worker's policy is never a form's to set
    (`kept_out`), and anything else is a typo. Prefect's own signature check would fail the
    run with a list of names and no reason."""
    parameters = grouped(parameters, form)
    unknown = sorted(set(parameters) - set(form.model_fields))
    why = kept_out({name: parameters[name] for name in unknown})
    why += [
        f"{name} is not a field of the {form.__name__}"
        for name in unknown
        if name not in SECRET_FIELDS | WORKER_FIELDS
    ]
    if why:
        raise UsageError("; ".join(why))


def run_id_in(parameters: Mapping[str, Any]) -> str | None:
    """The run id a flow run's parameters give (in `advanced`, or flat), if any."""
    advanced = parameters.get("advanced")
    given = advanced.get("run_id") if isinstance(advanced, dict) else None
    given = given or getattr(advanced, "run_id", None) or parameters.get("run_id")
    return given if isinstance(given, str) and given else None


class _NoSecrets(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, values: Any) -> Any:
        why = kept_out(values) if isinstance(values, dict) else []
        if why:
            raise ValueError("; ".join(why))
        return values


class _Section(_NoSecrets):
    """A group of settings of a form: each unset (None) unless given."""

    @model_serializer(mode="wrap")
    def _given_only(self, handler: Any) -> dict[str, Any]:
        # Unset fields are not written: a flow run records, and the UI shows, what was set.
        return {k: v for k, v in handler(self).items() if v is not None}

    def given(self) -> dict[str, Any]:
        """The settings this section sets, by name."""
        return {
            name: getattr(self, name)
            for name in type(self).model_fields
            if name not in NOT_SETTINGS and getattr(self, name) is not None
        }


def _section(name: str, **extra: Any) -> type[_Section]:
    fields = {n: unset_field(n) for n in OPTION_FIELDS if section_of(n) == name}
    title = f"{name.capitalize()}{'Run' if extra else ''}"
    return create_model(title, __base__=_Section, __doc__=SECTIONS[name], **extra, **fields)


def _valid_run_id(value: str | None) -> str | None:
    from dsstar.storage import check_run_id

    if value is not None:
        try:
            check_run_id(value)
        except UsageError as exc:
            raise ValueError(str(exc)) from None
    return value


_RUN_ID = (
    Annotated[str | None, Field(max_length=VALUE_CHARS), AfterValidator(_valid_run_id)],
    Field(
        None,
        description="Name a new run, or continue a stored one with its own question, data"
        " and settings (anything else is refused). Empty: derived from the flow run, so a"
        " retry of the flow run resumes it (and finds its finished work).",
        json_schema_extra=shown_unset,
    ),
)
_SECTION_MODELS = {name: _section(name) for name in SECTIONS}
_RUN_SECTIONS = _SECTION_MODELS | {"advanced": _section("advanced", run_id=_RUN_ID)}


def _no_model(value: Any) -> Any:
    return "" if value is None else value


_MODEL = (
    Annotated[str, Field(max_length=VALUE_CHARS), BeforeValidator(_no_model)],
    Field(
        "",
        description=Settings.model_fields["model"].description.replace("<name>", "`<name>`")
        + " Empty: DSSTAR_MODEL where the flow runs.",
    ),
)


class _Options(_NoSecrets):
    """What every form shares: building the run's Settings from its sections."""

    _sections: ClassVar[tuple[str, ...]] = tuple(SECTIONS)

    @model_validator(mode="before")
    @classmethod
    def _grouped(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        try:
            return grouped(values, cls)
        except UsageError as exc:
            raise ValueError(str(exc)) from None

    def chosen(self) -> dict[str, Any]:
        """The settings this form sets, flat, by name (unset ones are left to the
        environment)."""
        model = getattr(self, "model", "")
        chosen = {"model": model} if model else {}
        for section in self._sections:
            chosen |= getattr(self, section).given()
        return dict(sorted(chosen.items(), key=lambda item: OPTION_FIELDS.index(item[0])))

    def settings(self) -> Settings:
        """The run's Settings: this form's options over `DSSTAR_*` variables and defaults.
        Raises pydantic's ValidationError (see `explain`) for a value Settings refuses."""
        return Settings(**self.chosen())

    def parameters(self) -> dict[str, Any]:
        """The flow's keyword arguments: what is set, grouped as the form is (unset fields
        and empty sections left out: the flow's defaults apply)."""
        given = self.model_dump(mode="json", exclude_none=True)
        return {k: v for k, v in given.items() if v not in ({}, "") or k in self._kept}

    _kept: ClassVar[frozenset[str]] = frozenset()


def _sections(models: dict[str, type[_Section]]) -> dict[str, Any]:
    return {
        name: (model, Field(default_factory=model, description=SECTIONS[name]))
        for name, model in models.items()
    }


def options_form(name: str, doc: str, **first: Any) -> type[_Options]:
    """A form model named `name`: the fields in `first` (pydantic `(type, Field)` pairs),
    then the model and every other run setting in its section."""
    return create_model(
        name, __base__=_Options, __doc__=doc, **first, model=_MODEL, **_sections(_SECTION_MODELS)
    )


RunOptions = options_form("RunOptions", "Every run setting but the secrets.")


class _Question(_Options):
    question: str = Field(
        max_length=TEXT_CHARS,
        description="The question to answer, e.g. 'Which region had the highest revenue?'.",
    )
    data: str = Field(
        min_length=1,
        max_length=VALUE_CHARS,
        description="Folder, single file or URL (s3://bucket/prefix) holding the data files.",
    )
    guidelines: str = Field(
        "",
        max_length=TEXT_CHARS,
        description="How the answer must be formatted, e.g. 'a number with 2 decimals'.",
    )
    _kept: ClassVar[frozenset[str]] = frozenset({"guidelines"})

    @field_validator("question")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question is empty")
        return value

    @property
    def run_id(self) -> str | None:
        """The run's id (the `advanced` section's), None when the flow run chooses it."""
        return self.advanced.run_id  # type: ignore[attr-defined]

    def with_run_id(self, run_id: str) -> Any:
        """This form with `run_id` as its run id."""
        advanced = self.advanced.model_copy(update={"run_id": run_id})  # type: ignore[attr-defined]
        return self.model_copy(update={"advanced": advanced})

    @classmethod
    def for_question(
        cls, question: dict[str, Any], run_id: str | None, settings: dict[str, Any]
    ) -> Any:
        """The form of one question run with every setting of `settings` (a Settings dump,
        as a batch shares it, flat); keys that are not run options are left out."""
        chosen = {k: v for k, v in settings.items() if k in OPTION_FIELDS and v is not None}
        return cls(**question, run_id=run_id, **chosen)


RunForm = create_model(
    "RunForm",
    __base__=_Question,
    __doc__="One run of the ds-star flow: the question, its data and the settings it runs with.",
    model=_MODEL,
    **_sections(_RUN_SECTIONS),
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
    parameter schema, the form of the UI, from the model: a section is a group of fields."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        params = []
        for name, field in form.model_fields.items():
            if field.is_required():
                default = inspect.Parameter.empty
            else:
                default = field.get_default(call_default_factory=True)
            annotation = field.annotation
            if field.metadata:
                annotation = Annotated[annotation, *field.metadata]
            params.append(
                inspect.Parameter(
                    name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
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
    flag, a key); a setting is named alone, without its section."""
    parts = []
    for error in exc.errors():
        loc = [str(p) for p in error["loc"]]
        if len(loc) > 1 and loc[0] in SECTIONS:
            loc = loc[1:]
        field = ".".join(loc)
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
