"""A stored run is data, not policy: what `dsstar resume` and `dsstar replay` take from a
run's record (runs/<run_id>/run.json).

Whoever can write the storage (a team's shared bucket) can write any run.json. Taken as it
is, a record would configure the process that continues it: `sandbox: none`, an `api_base`
that receives the operator's key, a `data` location in a folder only the operator may read.
So a run taken from storage is judged as a run form is (`dsstar.inputs.trust`), by the policy
of the process that runs it: the Settings of its environment (DSSTAR_*) with its user's own
flags over them, which are the user's choice and taken as they are.

- The settings of an attempt (`ATTEMPT_FIELDS`: storage, work folders, uids, clusters,
  concurrency, timeouts) are the process's own; the record's are never read.
- Secrets and the worker's policy (keys, DSSTAR_DATA_ROOTS, DSSTAR_FORM_ALLOW, the scripts'
  interpreter) are never in a record, and never taken from one.
- Every other setting a form may set is taken as the record has it when the policy would let
  a form choose it; otherwise the run is refused, naming each such setting and how the user
  chooses it themselves (a flag, or DSSTAR_<NAME>).
- The data location must lie under DSSTAR_DATA_ROOTS, as a form's must; with no roots set,
  or outside them, the user names it themselves (`--data`), which makes it theirs.
- The question and guidelines are text, checked as a form's are. The replies, scripts and
  cached results in storage run in the sandbox under the process's caps, as a model's do.

    StoredRun.of(run_id, record)         what a record holds that a run may take from it
    judged(stored, own, data, flag)      the options, policy and data location to run it with
    resume_arguments(run_id, data)       what to type after `dsstar resume` to continue a run
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from dsstar.errors import DSStarError, ForbiddenError, UsageError
from dsstar.inputs.form import OPTION_FIELDS, RunForm, explain
from dsstar.inputs.trust import check_data_location, check_form, refusals
from dsstar.locations import normalize_location
from dsstar.settings import ATTEMPT_FIELDS, Settings

__all__ = ["StoredRun", "judged", "resume_arguments"]

_HOW = "docs/sandbox.md#what-a-writer-of-the-storage-can-do"


@dataclass(frozen=True)
class StoredRun:
    """What a stored run's record offers to a run that continues or repeats it: its question,
    data location and guidelines, and the settings a form may set (the attempt's own left
    out), as stored; nothing here is judged yet."""

    run_id: str
    question: str
    data: str
    guidelines: str = ""
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, run_id: str, record: Mapping[str, Any]) -> StoredRun:
        """Read from a run.json; UsageError when it holds no question or data as text."""
        texts = {"question": record.get("question"), "data": record.get("data"),
                 "guidelines": record.get("guidelines") or ""}  # fmt: skip
        for name, value in texts.items():
            if not isinstance(value, str) or (name != "guidelines" and not value):
                raise UsageError(
                    f"run {run_id}: its record (run.json) holds no {name} as text, so it is no"
                    " run dsstar stored"
                )
        stored = record.get("settings")
        settings = {
            name: value
            for name, value in (stored if isinstance(stored, dict) else {}).items()
            if name in OPTION_FIELDS and name not in ATTEMPT_FIELDS and value is not None
        }
        return cls(run_id, settings=settings, **texts)


def judged(
    stored: StoredRun,
    own: Mapping[str, Any],
    data: str | None = None,
    flag: Callable[[str], str | None] = lambda name: None,
) -> tuple[dict[str, Any], Settings, str]:
    """The options, the policy and the data location a run taken from `stored` runs with:
    the stored settings with `own` over them (the user's own choices, their flags, and what
    the command sets itself; None: this process's own, whatever the record says); the
    policy that judges them (this process's Settings with `own`); the stored data location,
    or `data` when the user named it (then theirs, a data root of the policy).

    ForbiddenError, naming each and how the user would choose it (`flag(name)`: its flag,
    if the command has one), when the policy refuses a stored setting or the data location;
    UsageError when the record holds what no form could."""
    given = {name: value for name, value in own.items() if value is not None}
    try:
        policy = Settings(**given)
        if data:  # named by the user: theirs to read, as a data root of this run's policy
            policy = Settings(**given, data_roots=[*policy.data_roots, data])
        # Typed as a form's (a record may hold anything): what a form could not hold is refused.
        form = RunForm(question=stored.question, data=stored.data,
                       guidelines=stored.guidelines, **stored.settings)  # fmt: skip
    except ValidationError as exc:
        raise UsageError(f"run {stored.run_id}: {explain(exc, _flag_or_name(flag))}") from exc
    taken = {name: value for name, value in form.chosen().items() if name not in own}
    refused = refusals(taken, policy)
    if refused:
        hints = [_hint(name, taken[name], flag) for name, _ in refused]
        raise ForbiddenError(
            f"run {stored.run_id} asks in its record (run.json) for "
            + "; ".join(text for _, text in refused)
            + ". A run taken from storage chooses only what a run form could choose here."
            f" If the run should, choose it yourself: {', '.join(hints)} ({_HOW})"
        )
    options = {**taken, **given}
    check_form(options, policy)  # recorded replies the record names: data, under the roots
    return options, policy, data or _stored_data(stored, policy)


def _stored_data(stored: StoredRun, policy: Settings) -> str:
    """The record's data location when it lies under the policy's data roots."""
    shown = _quoted(stored.data)
    yours = f"name it yourself: --data {shown}"
    if not policy.data_roots:
        raise ForbiddenError(
            f"run {stored.run_id} reads its data from {shown}, a location its record"
            " (run.json) names: this process takes one from storage only under"
            f" DSSTAR_DATA_ROOTS, and none is set. If that is the run's data, {yours}, or set"
            f" DSSTAR_DATA_ROOTS to the folders runs may read ({_HOW})"
        )
    try:
        check_data_location(stored.data, policy, f"run {stored.run_id}'s data (from run.json)")
    except ForbiddenError as exc:
        raise ForbiddenError(f"{exc}. If that is the run's data, {yours} ({_HOW})") from None
    return stored.data


def resume_arguments(run_id: str, data: str) -> str:
    """`RUN_ID`, and `--data DATA` when this process's DSSTAR_DATA_ROOTS would not take the
    run's data (`data`, as the run was given it) from its record: the arguments of the
    `dsstar resume` that continues the run, for a hint to paste back."""
    try:
        check_data_location(data, Settings())
        return run_id
    except DSStarError:  # outside the roots, no roots, or not there at all now
        return f"{run_id} --data {_quoted(normalize_location(data))}"


def _flag_or_name(flag: Callable[[str], str | None]) -> Callable[[str], str]:
    return lambda name: flag(name) or name


def _hint(name: str, value: Any, flag: Callable[[str], str | None]) -> str:
    given = _quoted(value if isinstance(value, str) else json.dumps(value))
    option = flag(name)
    return f"{option} {given}" if option else f"DSSTAR_{name.upper()}={given}"


def _quoted(text: str) -> str:
    """`text` as a shell word, control and other unprintable characters escaped (a record
    is anyone's text, and this goes to a terminal), at most 200 characters."""
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return shlex.quote(text if len(text) <= 200 else text[:197] + "...")
