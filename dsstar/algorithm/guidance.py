"""Human guidance between rounds: what a person may answer when a round is judged not
sufficient, and what the loop does with it. Free of Prefect: the flow asks through the
Prefect UI (a paused run with a form), the CLI through a terminal prompt."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["Checkpoint", "Choice", "Guidance"]


class Choice(StrEnum):
    """The four answers a person can give after a round that was not sufficient."""

    CONTINUE = "continue"  # go on as planned: route, plan the next step
    GUIDE = "guide"  # go on, with guidance text for the next planner and router prompts
    ACCEPT = "accept"  # the current result is good enough: finalize it now
    STOP = "stop"  # end the run now, without an answer; everything so far is kept


@dataclass(frozen=True)
class Checkpoint:
    """What the person sees before choosing: the round, its plan, output and verdict."""

    run_id: str
    round: int
    plan: list[str]
    output: str
    verdict: str  # the verifier's reply


@dataclass(frozen=True)
class Guidance:
    """A person's answer. `text` is used only with Choice.GUIDE; `timed_out` marks the
    CONTINUE given when nobody answered in time."""

    choice: Choice = Choice.CONTINUE
    text: str = ""
    timed_out: bool = False
    meta: dict[str, str] = field(default_factory=dict)  # e.g. who answered, from where

    @property
    def text_for_prompts(self) -> str:
        return self.text.strip() if self.choice is Choice.GUIDE else ""
