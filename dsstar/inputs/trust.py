"""Who may choose what: the worker's policy over what a run form asks for.

A flow run created through the Prefect API carries parameters chosen by whoever can reach
that API, and Prefect's server has no authentication unless it is given one. So the process
that runs the flow (a worker, `dsstar serve`) decides, from its own environment:

- settings that weaken isolation or send the worker's credentials or data elsewhere
  (`GUARDED`) may be set by a form only to what the worker would use anyway, unless the
  worker lists them in `DSSTAR_FORM_ALLOW`;
- settings that bound resource use or spending (the caps, `dsstar.caps.is_cap`) may be
  set by a form only at or below the worker's own value, unless `DSSTAR_FORM_ALLOW` names
  them;
- a form's data location must lie under one of `DSSTAR_DATA_ROOTS`, after every link in it
  is resolved (a link under a root that points out of it is refused). The check opens the
  location and judges what it opened (`hold_data_location`); the run then reads the data
  only through that opening, so swapping a folder for a link after the check changes nothing.

How the worker starts the run is its pool's, not the run's: a flow run's job variables (Prefect's
per-run overrides of the pool's job template: env, command, image, volumes, ...) would set the
worker's policy itself (`env: {DSSTAR_FORM_ALLOW: "*"}`). dsstar's pool templates
(`deployments/*/base-job-template.json`) accept only `RUN_JOB_VARIABLES`; `check_job_variables`
refuses the rest again when the flow starts, for a pool made without them. Prefect also lets
whoever creates a flow run give it a retry policy of its own (`empirical_policy`: retries and
the delay between them, honoured by Prefect's server and engine); `check_retry_policy` refuses
one wider than the flow's, which would hold a worker's slot in AwaitingRetry for days.

Who chose a form is an argument of every check, never the state of the process: each takes
the `worker` Settings that judge it, or None for a form that is the local user's own (what the
person at the command line or the caller of `dsstar.ask` chose: nothing here limits it).
Parameters that arrive through Prefect are always judged by the Settings of the worker's own
environment; a run taken from storage (`dsstar resume`, `replay`) by the resuming process's
policy (`dsstar.inputs.stored`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from dsstar.caps import cap_value, is_cap
from dsstar.data.lake.root import DataRoot, inside
from dsstar.errors import DataError, ForbiddenError
from dsstar.locations import is_remote, local_path, normalize_location
from dsstar.model.recorded import recorded_location
from dsstar.settings import Settings, value_range

__all__ = [
    "GUARDED",
    "RUN_JOB_VARIABLES",
    "check_job_variables",
    "check_data_location",
    "check_form",
    "check_question_set",
    "check_retry_policy",
    "hold_data_location",
    "refusals",
]

# Each guarded setting and what a form choosing it could do with the worker's authority.
GUARDED = {
    "sandbox": "runs generated code without isolation, as the worker's user",
    "exec_uid_base": "runs generated code as uids that another dsstar process on this host"
    " may run its scripts as, and whose processes each then kills",
    "api_base": "sends the worker's model key and the prompts to another server",
    "embedding_api_base": "sends the worker's embedding key and file texts to another server",
    "model": "routes prompts (and that provider's key) to a provider the worker does not use",
    "agent_models": "routes an agent's prompts to a provider the worker does not use",
    "embedding_model": "routes file texts to a provider the worker does not use",
    "storage": "writes run artifacts where the form says, with the worker's credentials",
    "work_dir": "makes the worker create and delete folders where the form says",
    "embedding_cache_dir": "makes the worker write files where the form says",
    "dask_address": "ships tasks and data to another cluster",
    "ray_address": "ships tasks and data to another cluster",
}

# The job variables a flow run may set: they name and label its process, container or Job.
RUN_JOB_VARIABLES = frozenset({"name", "labels"})


def check_form(chosen: dict[str, Any], worker: Settings | None) -> None:
    """Refuse (ForbiddenError) the settings of `chosen` (a form's set options) that `worker`
    (the Settings of the worker's own environment) does not allow: a guarded setting other
    than the worker's own, a cap above the worker's own value. `worker` None: the form is
    the local user's own, and nothing limits it."""
    if worker is None:
        return
    refused = refusals(chosen, worker)
    if refused:
        names = ",".join(name for name, _ in refused)
        raise ForbiddenError(
            "this worker does not let a run form choose "
            + "; ".join(text for _, text in refused)
            + ". Leave it unset (the worker's own) or within what is allowed, or allow it where"
            f" the worker runs: DSSTAR_FORM_ALLOW={names}"
        )
    # A model the worker lets a form choose may be a recording (recorded/<location>), which
    # the worker reads and whose scripts it runs: that location is data, under the data roots
    # (unless it is the worker's own model).
    models = [chosen.get("model"), *dict(chosen.get("agent_models") or {}).values()]
    own = {worker.model, *worker.agent_models.values()}
    for location in filter(None, map(recorded_location, [m for m in models if m not in own])):
        check_data_location(location, worker, "recorded replies")


def refusals(chosen: dict[str, Any], worker: Settings) -> list[tuple[str, str]]:
    """Each setting of `chosen` that `worker` does not let a form choose, by name, with why
    in words (`name=value (what it would do): allowed ...`); empty when the worker allows
    them all."""
    allowed = set(worker.form_allow)
    asked = {n: v for n, v in chosen.items() if "*" not in allowed and n not in allowed}
    return [(name, why) for name, value in asked.items() if (why := _refusal(name, value, worker))]


def check_job_variables(variables: dict[str, Any] | None) -> None:
    """Refuse (ForbiddenError, naming each one) the job variables of a flow run other than
    `RUN_JOB_VARIABLES`: env, command, image, volumes and the rest are the pool's. An empty
    value sets nothing and passes. Applies to the CLI's user too: a run started at the
    command line has no job variables."""
    refused = []
    for name, value in sorted((variables or {}).items()):
        if name in RUN_JOB_VARIABLES or value in (None, {}, [], ""):
            continue
        if isinstance(value, dict):
            refused += [f"{name}.{key}" for key in sorted(value)]  # e.g. env.DSSTAR_FORM_ALLOW
        else:
            refused.append(name)
    if refused:
        raise ForbiddenError(
            "this flow run's job variables set "
            + ", ".join(refused)
            + ": a flow run may set only "
            + " and ".join(sorted(RUN_JOB_VARIABLES))
            + "; how the worker runs it (command, env, image, volumes, resources) is its work"
            " pool's template (docs/workers.md#who-may-choose-what)"
        )


def check_retry_policy(
    retries: int | None, retry_delay: float | None, own_retries: int, own_delay: float
) -> None:
    """Refuse (ForbiddenError, naming each) a flow run's own retry policy that retries more
    often, or waits longer between tries, than its flow's (`own_retries`, `own_delay`).
    Unset (None) is the flow's. Applies to the CLI's user too: the runs it starts carry their
    flow's policy."""
    refused = [
        f"empirical_policy.{name}={value} (the flow's own: {own})"
        for name, value, own in (
            ("retries", retries, own_retries),
            ("retry_delay", retry_delay, own_delay),
        )
        if value is not None and value > own
    ]
    if refused:
        raise ForbiddenError(
            "this flow run's retry policy sets "
            + ", ".join(refused)
            + ": how often and how late a failed run is tried again is its flow's, not the"
            " flow run's (docs/workers.md#who-may-choose-what)"
        )


def _refusal(name: str, value: Any, worker: Settings) -> str | None:
    """Why a form may not set `name` to `value` on this worker, with what it may set; None
    when it may."""
    if name in GUARDED:
        if not _differs(name, value, worker):
            return None
        return f"{name}={_shown(value)} ({GUARDED[name]}): allowed {_allowed(name, worker)}"
    if not is_cap(name) or not _raises(name, value, worker):
        return None
    own = cap_value(worker, name)
    allowed = value_range(name, own)
    return f"{name}={_shown(value)} (above this worker's own {name}={own}): allowed {allowed}"


def _allowed(name: str, worker: Settings) -> str:
    """What a form may set guarded setting `name` to on this worker, in words. Addresses and
    folders are not shown: the worker's own is the one value allowed, and leaving it unset
    gives it."""
    own = getattr(worker, name)
    if name == "sandbox":
        from dsstar.execution.sandbox.modes import isolates
        from dsstar.sandbox_names import known

        isolating = [m for m in known() if isolates(m)]
        return f"a mode that isolates ({', '.join(isolating)}) or this worker's own ({own})"
    if name in {"model", "embedding_model", "agent_models"}:
        routes = ", ".join(sorted(_routes(worker)))
        return "this worker's own model" + (f", or another of a provider it uses: {routes}"
                                            if routes else "")  # fmt: skip
    if name == "exec_uid_base":
        return f"only this worker's own, {own}"
    return f"only this worker's own {name}"


def _raises(name: str, value: Any, worker: Settings) -> bool:
    """Whether the form's `value` for cap `name` is above the worker's bound."""
    own = cap_value(worker, name)
    return own is not None and value > own


def check_data_location(location: str, worker: Settings | None, what: str = "data") -> str:
    """The location a form gave, resolved (links followed, so where it really is), when it
    lies under one of the worker's data roots; ForbiddenError otherwise. The local user's
    own (`worker` None): the location as given. A run reads its data through
    `hold_data_location` instead."""
    if worker is None:
        return location
    checked = hold_data_location(location, worker, what)
    if isinstance(checked, DataRoot):
        checked.close()
        return checked.path
    return checked


def hold_data_location(
    location: str, worker: Settings | None, what: str = "data"
) -> str | DataRoot:
    """A form's data location as the run will read it: a URL under the worker's data roots,
    or the local folder or file opened and judged by what was opened (its real path under a
    root). ForbiddenError when it lies elsewhere, DataError when it cannot be opened. The
    local user's own (`worker` None): a local location is opened as given, unjudged."""
    if worker is None:
        return location if is_remote(location) else DataRoot.open(location)
    roots = list(worker.data_roots)
    hint = "the worker's DSSTAR_DATA_ROOTS"
    if not roots:
        raise ForbiddenError(
            f"{what} {location}: this worker accepts no data location from a run form; set"
            " DSSTAR_DATA_ROOTS (folders or s3:// prefixes, comma-separated) where it runs"
        )
    if is_remote(location):
        url = location.rstrip("/")
        if "/../" in url + "/":  # object stores may read '..' literally, or not: refused
            raise ForbiddenError(f"{what} {location}: '..' is not allowed in a data URL")
        if any(_under_url(url, root) for root in roots if is_remote(root)):
            return url
        raise ForbiddenError(f"{what} {location} is not under {hint} ({', '.join(roots)})")

    def refused(real: str) -> ForbiddenError:
        return ForbiddenError(
            f"{what} {location} (resolved: {real}) is not under {hint} ({', '.join(roots)})"
        )

    local_roots = [os.path.realpath(local_path(r)) for r in roots if not is_remote(r)]
    # First by its path (what lies outside is never opened), then by what was opened: the
    # descriptor is judged, and it is what the run reads through.
    real = _resolved(location, what)
    if not any(inside(real, root) for root in local_roots):
        raise refused(real)
    held = DataRoot.open(real, fence=tuple(local_roots))
    if not any(inside(held.path, root) for root in local_roots):
        held.close()
        raise refused(held.path)
    return held


def _resolved(location: str, what: str) -> str:
    """The real path of a form's local location. A link swapped while it is resolved (read
    as a link, then no longer one: realpath's readlink fails) is refused in words."""
    try:
        return os.path.realpath(local_path(location))
    except OSError as exc:
        raise DataError(
            f"{what} {location} changed while it was being checked ({exc.strerror}): a link"
            " in its path was replaced; run it again once the path stays put"
        ) from None


def check_question_set(path: str, worker: Settings | None) -> str:
    """A nightly form's question set, resolved: in the project's deployments/ folder (where
    `dsstar serve` finds its own) or under the worker's data roots; ForbiddenError otherwise.
    The local user's own (`worker` None): the path as given."""
    if worker is None:
        return path
    from dsstar.inputs.questions import PROJECT_DIR

    real = _resolved(path, "question set")
    if inside(real, os.path.realpath(PROJECT_DIR / "deployments")):
        return real
    return check_data_location(path, worker, what="question set")


def _differs(name: str, value: Any, worker: Settings) -> bool:
    """Whether the form's `value` for `name` goes beyond what the worker would use anyway."""
    own = getattr(worker, name)
    if name == "sandbox":
        from dsstar.execution.sandbox.modes import isolates, resolve_mode

        mode = resolve_mode(value, probe=False)
        return not isolates(mode) and mode != own
    if name in {"model", "embedding_model"}:
        return value != own and _route(value) not in _routes(worker)
    if name == "agent_models":
        return any(
            m != worker.model_for(agent) and _route(m) not in _routes(worker)
            for agent, m in (value or {}).items()
        )
    if name == "storage":
        return normalize_location(str(value)) != normalize_location(str(own))
    if name in {"work_dir", "embedding_cache_dir"}:
        try:
            return os.path.realpath(str(value)) != (os.path.realpath(str(own)) if own else None)
        except OSError:  # a link swapped while it was resolved: not the worker's own folder
            return True
    return value != own


def _route(model: str) -> str:
    """The provider a litellm model name is sent to: its prefix ('openai' in openai/gpt-4o);
    a bare name is its own route (only the same name matches it)."""
    return model.split("/", 1)[0].lower() if "/" in model else model


def _routes(worker: Settings) -> set[str]:
    models: Iterable[str | None] = [
        worker.model,
        worker.embedding_model,
        *worker.agent_models.values(),
    ]
    return {_route(m) for m in models if m}


def _under_url(url: str, root: str) -> bool:
    base = root.rstrip("/")
    return url == base or url.startswith(base + "/")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
