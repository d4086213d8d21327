"""What makes a run the run it is: its question, guidelines, data and the settings it was
given. A run id continues only its own run: a form or a `--run-id` naming a stored run with
another question, data or settings is refused by name before anything is written (the run's
folder would mix two runs' analyses and rounds, and run.json would hold the newer question).

    RunIdentity.of(question, data, guidelines, given)   what a starting run asks for
    refuse_other_run(run_id, record, identity)          RunIdInUse naming what differs

Continuing a run may change what `dsstar resume` lets a person change (the model, its server,
the ceilings) and where and how fast an attempt runs (the machine's: parallelism, scratch
folders, timeouts of the model's replies, the task runner): a flow run retried on another
worker, or a nightly batch's question resumed under the batch's ceiling less what it spent,
is the same run. Every other setting a run is given must be the one it was started with; a
setting the run is not given (left to the environment) is not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsstar.errors import RunIdInUse
from dsstar.settings import ATTEMPT_FIELDS

__all__ = ["CONTINUE_MAY_CHANGE", "RunIdentity", "differences", "refuse_other_run"]

CONTINUE_MAY_CHANGE = (
    # what `dsstar resume` may change
    frozenset({"model", "api_base", "max_cost", "max_tokens"})
    # where and how fast an attempt runs: the worker's, not the run's
    | ATTEMPT_FIELDS
)


@dataclass(frozen=True)
class RunIdentity:
    """What a starting run asks for: its question, guidelines and data (as run.json records
    them) and the settings it was given, as JSON values (as run.json's `settings`)."""

    question: str
    data: str
    guidelines: str
    given: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, params: dict[str, Any], given: dict[str, Any] | None = None) -> RunIdentity:
        """From a run's recorded parameters (question, data, guidelines) and the settings
        its form or flags set."""
        return cls(params["question"], params["data"], params.get("guidelines") or "", given or {})


def differences(record: dict[str, Any], identity: RunIdentity) -> list[str]:
    """What `identity` asks for that the stored run (its run.json `record`) is not: "question",
    "guidelines", "data", then each setting as "name (X given, Y in the run)". Empty for the
    same run, and for a record that holds no question yet (its first attempt died before
    storing one)."""
    if "question" not in record:
        return []
    differ = [
        name
        for name in ("question", "guidelines", "data")
        if (record.get(name) or "") != getattr(identity, name)
    ]
    stored = record.get("settings") or {}
    for name, value in sorted(identity.given.items()):
        if name not in CONTINUE_MAY_CHANGE and name in stored and stored[name] != value:
            differ.append(f"{name} ({value!r} given, {stored[name]!r} in the run)")
    return differ


def refuse_other_run(run_id: str, record: dict[str, Any], identity: RunIdentity | None) -> None:
    """Raise RunIdInUse when the stored run `record` is not the run `identity` asks for."""
    differ = differences(record, identity) if identity is not None else []
    if differ:
        raise RunIdInUse(
            f"run {run_id} is another run (what differs: {', '.join(differ)}); a run id"
            f" continues only its own run: `dsstar resume {run_id}` (or the same form again)"
            " continues it as it was started, or choose a new run id"
        )
