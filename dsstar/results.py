"""What the Python API (`dsstar.api`) returns: typed, frozen records of the JSON objects that
`dsstar run --json`, `dsstar describe --json` and `dsstar runs list --json` print."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from dsstar.algorithm.verdict import ANSWERED

__all__ = ["Answer", "FileDescription", "RunSummary"]


@dataclass(frozen=True)
class Answer:
    """One run's result, as `dsstar run --json` prints it. `status` is "verified" (the
    verifier accepted the plan), "max_rounds" (the rounds ran out; answered anyway),
    "accepted" (a person accepted it), "not_applicable" (the files cannot answer it),
    "stopped" (a person stopped it: no answer), "over_budget" or "failed" (see `error`);
    `dsstar resume RUN_ID` continues the last two."""

    run_id: str
    status: str
    answer: str | None
    rounds: int
    plan: tuple[str, ...]
    artifacts_uri: str
    solution_uri: str | None
    llm_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None  # None when some model has no known price
    flow_run_id: str | None
    reused_from: str | None = None  # the run whose verified solution answered it again
    error: str | None = None
    # The files the final script wrote (deliverables), as `--json` lists them: each
    # {"name", "bytes", "uri", "media_type"} and, for a chart, "chart" (its description's URI).
    outputs: tuple[dict[str, Any], ...] = ()
    outputs_error: str | None = None  # the bound that left some files out

    @property
    def answered(self) -> bool:
        """Whether the run produced an answer (an empty one counts)."""
        return self.status in ANSWERED

    @classmethod
    def from_result(cls, result: dict[str, Any]) -> Answer:
        """From the JSON result of a run (`dsstar.views.report.run_result`)."""
        values = _known(cls, result)
        values["plan"] = tuple(result.get("plan") or ())
        values["outputs"] = tuple(dict(entry) for entry in result.get("outputs") or ())
        return cls(**values)


@dataclass(frozen=True)
class RunSummary:
    """One row of `dsstar runs list`."""

    run_id: str
    question: str
    answer: str | None
    status: str | None  # "stale": it was running, and its process is gone
    rounds: int
    cost_usd: float | None
    started_at: str | None

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> RunSummary:
        return cls(**_known(cls, row))


@dataclass(frozen=True)
class FileDescription:
    """One file of `dsstar describe`: its path relative to the data root, its format, and
    its description, or the reason it was skipped (`error`)."""

    path: str
    format: str
    description: str | None
    error: str | None = None

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> FileDescription:
        return cls(**_known(cls, row))


def _known(cls: type, row: dict[str, Any]) -> dict[str, Any]:
    """The values of `row` for the fields of `cls` (None where absent); other keys are left."""
    return {f.name: row.get(f.name) for f in fields(cls)}
