"""One vocabulary for how a round was judged and how a run ended.

Stored JSON keeps its booleans (`"sufficient": true` in verdict.json, `"verdict": true` in
the round table) because scripts read them; every label a person reads comes from here.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ANSWERED", "Status", "Verdict", "verdict_label"]


class Verdict(StrEnum):
    """The verifier's decision on a round."""

    SUFFICIENT = "sufficient"
    NOT_SUFFICIENT = "not sufficient"

    @classmethod
    def of(cls, sufficient: bool) -> Verdict:
        return cls.SUFFICIENT if sufficient else cls.NOT_SUFFICIENT

    @property
    def sufficient(self) -> bool:
        return self is Verdict.SUFFICIENT


class Status(StrEnum):
    """How a run stands or ended (`status` in run.json and in `--json` output)."""

    RUNNING = "running"
    VERIFIED = "verified"  # the verifier accepted a round
    MAX_ROUNDS = "max_rounds"  # the rounds ran out; the last plan was finalized anyway
    ACCEPTED = "accepted"  # a person accepted the current plan; it was finalized
    # The planner concluded that the files cannot answer the question; the finalyzer states
    # the guidelines' "Not Applicable" (or what they say instead).
    NOT_APPLICABLE = "not_applicable"
    STOPPED = "stopped"  # a person stopped the run: no answer, everything so far kept
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # SIGINT or SIGTERM: `dsstar resume` continues it
    # The next model call would have passed the ceiling (max_cost, max_tokens): everything
    # so far kept; `dsstar resume --max-cost N` continues with a higher one.
    OVER_BUDGET = "over_budget"
    # A report (`dsstar report`) was written from its sub-questions' answers: its answer is
    # the report, and how each sub-question's run ended is in its references.
    REPORTED = "reported"


# The statuses of a run that produced an answer (exit code 0).
ANSWERED = frozenset(
    {Status.VERIFIED, Status.MAX_ROUNDS, Status.ACCEPTED, Status.NOT_APPLICABLE, Status.REPORTED}
)


def verdict_label(sufficient: bool | None) -> str:
    """The label shown for a stored verdict: "sufficient", "not sufficient", or "-" when the
    round was never judged."""
    return "-" if sufficient is None else Verdict.of(bool(sufficient)).value
