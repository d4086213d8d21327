"""Flows whose parameters are a run form (`dsstar.inputs.form`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from functools import cache
from typing import Any

from prefect import Flow, get_client
from prefect.context import FlowRunContext
from prefect.deployments.runner import RunnerDeployment
from prefect.exceptions import PrefectHTTPStatusError
from prefect.runtime import flow_run
from prefect.utilities.callables import ParameterSchema
from pydantic import BaseModel, ConfigDict
from pydantic_core import to_jsonable_python

from dsstar.errors import ForbiddenError
from dsstar.inputs.form import (
    OPTION_FIELDS,
    SECRET_FIELDS,
    WORKER_FIELDS,
    form_parameters,
    grouped,
    refuse_unknown,
)
from dsstar.inputs.trust import check_job_variables, check_retry_policy
from dsstar.text import clean

__all__ = ["close_forms", "closed_schema", "form_deployment", "form_flow", "given_name"]

# Names a form flow takes besides its form's fields: every setting by name, flat, and the
# run id (each goes to its section; `ds_star(question=..., data=..., max_rounds=3)`), and
# the names a form must never carry, to be refused with their reason.
_FLAT = frozenset(OPTION_FIELDS) | {"run_id"}
_REFUSED = SECRET_FIELDS | WORKER_FIELDS


class _FormFlow(Flow):
    """A flow that refuses a parameter outside its form with the reason (a secret, the
    worker's policy, a typo) instead of crashing on Prefect's signature check."""

    form: type[BaseModel]

    def validate_parameters(self, parameters: dict[str, Any]) -> dict[str, Any]:
        # Prefect's engine calls this first of the flow's code: from here on no failure of
        # the run, this check's refusals included, is retried on the flow run's own terms.
        _keep_retry_policy(self)
        # The names beside the form's fields arrive with their default (None) when unset.
        given = {
            k: v for k, v in parameters.items() if k in self.form.model_fields or v is not None
        }
        refuse_unknown(given, self.form)
        return super().validate_parameters(grouped(given, self.form))

    def serialize_parameters(self, parameters: dict[str, Any]) -> dict[str, Any]:
        """The parameters as the flow run records them: JSON values, by pydantic's encoder.
        Prefect's own uses FastAPI's, whose import (0.2 s of CPU, FastAPI's only use in a
        run's process) would come just before the run's first model request. A value that
        is no JSON is recorded as its type's name, as Prefect does. The names beside the
        form's fields are recorded only when given."""
        recorded: dict[str, Any] = {}
        for name, value in parameters.items():
            if value is None and name not in self.form.model_fields:
                continue
            try:
                recorded[name] = to_jsonable_python(value)
            except (TypeError, ValueError, RecursionError):
                recorded[name] = f"<{type(value).__name__}>"
        return recorded


def form_flow(form: type[BaseModel], **options: Any) -> Callable[[Callable[..., Any]], Flow]:
    """`@flow(**options)` over a function of `**fields` that takes the fields of `form`.

    Prefect matches a flow run's parameters against the function's signature before any
    validation, and crashes the run with a bare list of names on a stranger. The function
    it calls therefore also accepts every setting by name (`validate_parameters` moves each
    into its section, where it is typed) and the names a form must never carry (secrets,
    the worker's policy), so that `validate_parameters` can refuse them with the reason; the
    schema, the UI's form, still comes from `form` alone."""

    def decorate(fn: Callable[..., Any]) -> Flow:
        made = _FormFlow(fn=form_parameters(form)(fn), **options)
        made.form = form
        made.fn = _also_accepting(made.fn, (_FLAT | _REFUSED) - set(form.model_fields))
        return made

    return decorate


def _keep_retry_policy(flow: Flow) -> None:
    """Refuse (ForbiddenError) a flow run whose own retry policy (Prefect's `empirical_policy`,
    which whoever creates a flow run may set) is wider than `flow`'s, after setting it back to
    the flow's: Prefect's server would retry the refusal itself, and its engine waits in the
    worker's process for the retry's time, so a delay of days would hold one of the worker's
    slots. A nested run (a subflow) is created by its parent's process with its flow's policy."""
    run_id = flow_run.id  # outside any flow run context: the process's own flow run, if any
    if FlowRunContext.get() is not None or not run_id:
        return
    own_delay = int(flow.retry_delay_seconds or 0)
    with get_client(sync_client=True) as client:
        policy = client.read_flow_run(run_id).empirical_policy
        try:
            check_retry_policy(policy.retries, policy.retry_delay, flow.retries, own_delay)
        except ForbiddenError:
            own = {"retries": flow.retries, "retry_delay": own_delay}
            client.update_flow_run(run_id, empirical_policy=policy.model_copy(update=own))
            raise


def _also_accepting(fn: Callable[..., Any], names: frozenset[str]) -> Callable[..., Any]:
    def call(**fields: Any) -> Any:  # Prefect passes every name, with None when unset
        try:
            # First of all, before any model call: a flow run's job variables may have set
            # the worker's policy (its env) for this run; the pool's template is the first
            # guard, this the second (docs/workers.md#who-may-choose-what).
            check_job_variables(flow_run.job_variables)
            return fn(**{k: v for k, v in fields.items() if k not in names or v is not None})
        except Exception as exc:
            # Prefect sends the message to its API as the run's final state: a file name that
            # is not UTF-8 (surrogate-escaped) in it would fail that request, and the run would
            # stay Running. Made valid text here, once for every form flow.
            exc.args = tuple(clean(a) if isinstance(a, str) else a for a in exc.args)
            raise

    signature = inspect.signature(fn)
    extra = [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None) for n in sorted(names)
    ]
    call.__signature__ = signature.replace(parameters=[*signature.parameters.values(), *extra])  # type: ignore[attr-defined]
    for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):  # its entrypoint
        setattr(call, attribute, getattr(fn, attribute))
    return call


class _ClosedSchema(ParameterSchema):
    """A flow's parameter schema that may say more than Prefect's model of one holds."""

    model_config = ConfigDict(extra="allow")


def closed_schema(schema: ParameterSchema) -> ParameterSchema:
    """`schema` refusing every parameter it does not name. Prefect builds a flow's schema
    without that, so its server stores any other name with any JSON value under it; a value
    nested deeper than its serializer goes (about 255 levels) then fails every read of the
    flow run, the run list and a worker's poll included. The sections of a form are closed
    already (their models forbid extra fields)."""
    return _ClosedSchema(**schema.model_dump(exclude_unset=True), additionalProperties=False)


def form_deployment(flow: Flow, **options: Any) -> RunnerDeployment:
    """`flow.to_deployment(**options)` whose parameters Prefect's server checks against the
    form before it stores a flow run (`enforce_parameter_schema`), with a closed schema."""
    deployment = flow.to_deployment(**options)
    deployment.enforce_parameter_schema = True
    deployment._parameter_openapi_schema = closed_schema(deployment._parameter_openapi_schema)
    return deployment


# The flows whose parameters are a run form, as `prefect deploy` finds them by name.
FORM_FLOWS = ("ds-star", "ds-star-nightly", "ds-star-report")


def close_forms(only: Collection[str] | None = None) -> list[str]:
    """Close the run form of every deployment of a form flow on the server (made by `prefect
    deploy`, which builds an open schema), or of those of them named in `only`
    ("flow/deployment"): its schema refuses every parameter it does not name, and Prefect's
    server checks it before it stores a flow run. Returns one line per deployment changed
    or left open (its own parameters are no form: the line says why); a form closed already
    is left as it is."""
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    said = []
    with get_client(sync_client=True) as client:
        named = FlowFilter(name=FlowFilterName(any_=list(FORM_FLOWS)))
        for deployment in client.read_deployments(flow_filter=named):
            schema = deployment.parameter_openapi_schema or {}
            if schema.get("additionalProperties") is False and deployment.enforce_parameter_schema:
                continue
            name = f"{client.read_flow(deployment.flow_id).name}/{deployment.name}"
            if only is not None and name not in only:
                continue
            closed = {**schema, "additionalProperties": False}
            try:  # Prefect's client model of an update has no schema: the API's has
                client.request(
                    "PATCH",
                    "/deployments/{id}",
                    path_params={"id": deployment.id},
                    json={"parameter_openapi_schema": closed, "enforce_parameter_schema": True},
                )
            except PrefectHTTPStatusError as exc:  # its own parameters are outside the form
                why = exc.response.json().get("detail", exc.response.text)
                said.append(f"deployment {name}: its form left open: {clean(str(why))}")
                continue
            said.append(f"deployment {name}: its form closed (no other parameter is taken)")
    return said


def given_name() -> str | None:
    """The name a person gave this flow run when creating it from a deployment (the Run
    Name of the UI's form, `run_deployment(flow_run_name=...)`), which its flow keeps; None
    for a flow run Prefect named, or one started in this process."""
    context = FlowRunContext.get()
    made = context.flow_run if context else None
    if made is None or made.deployment_id is None or not made.name:
        return None
    return None if _prefect_named(made.name) else made.name


def _prefect_named(name: str) -> bool:
    """Whether `name` is one Prefect's server gives a flow run created without a name: two
    random words from coolname's lists, an adjective and an animal ('spiffy-tiger')."""
    adjectives, animals = _prefect_words()
    return any(
        name[:i] in adjectives and name[i + 1 :] in animals for i, c in enumerate(name) if c == "-"
    )


@cache
def _prefect_words() -> tuple[frozenset[str], frozenset[str]]:
    from coolname.data import config  # the word lists of Prefect's generate_slug(2)

    def words(name: str) -> frozenset[str]:
        entry = config[name]
        if "words" in entry:
            return frozenset(entry["words"])
        return frozenset().union(*(words(n) for n in entry["lists"]))

    [pair] = config["2"]["lists"]
    first, second = config[pair]["lists"]
    return words(first), words(second)
