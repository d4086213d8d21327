"""What a run tells whoever follows it, as small typed records: one frozen class per kind.

Two streams carry them. The story of a run's decisions (`Reused`, `Analyzed`, `Retrieved`)
is told by the algorithm through `Runtime.say`; the flow's runtime writes it to the flow
run's logs and emits it with the rest. Progress (stages, model calls, rounds, a person asked,
slots waited for, benchmark tasks) is emitted by the flow and its tasks through
`dsstar.progress`. A listener (the CLI's live line, the benchmark's bar, the handler given
to `dsstar.ask(on_event=...)`) handles each by its class, e.g. with
`match event: case RoundDone(number=n): ...`, and passes over the kinds it has no use for:
a new kind of event is found here, by its class, never by reading every listener.

Fields are plain values (the lists and dicts are the run's own: read them, never change
them). Nothing here imports Prefect.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "AnalysisStarted",
    "Analyzed",
    "BenchStarted",
    "BenchTaskDone",
    "Event",
    "Executing",
    "FileAnalyzed",
    "HumanAnswered",
    "HumanAsked",
    "LLMCall",
    "LLMFailed",
    "LLMReplied",
    "Retrieved",
    "Reused",
    "RoundDone",
    "SlotWait",
    "StoryEvent",
    "Unprofiled",
    "details",
]


@dataclass(frozen=True)
class Event:
    """What every event is: a listener's argument."""


def details(event: Event) -> dict[str, Any]:
    """The fields of `event` by name, as they are (not copied, unlike `dataclasses.asdict`:
    `Analyzed.files` holds every file's record)."""
    return {f.name: getattr(event, f.name) for f in fields(event)}


# -- the story: what the algorithm decided (`Runtime.say`) ------------------------------------


@dataclass(frozen=True)
class Reused(Event):
    """Step 0: the verified solution of `previous_run` still answers on today's data."""

    previous_run: str


@dataclass(frozen=True)
class Analyzed(Event):
    """Step 1 done: the catalog record (with its "description") of every file."""

    files: list[dict[str, Any]]


@dataclass(frozen=True)
class Retrieved(Event):
    """Step 2: the files (`paths`) shown to the agents, of `total` described."""

    paths: list[str]
    total: int


StoryEvent = Reused | Analyzed | Retrieved  # what `Runtime.say` is told


# -- progress: what the flow and its tasks are doing (`dsstar.progress.emit`) -----------------


@dataclass(frozen=True)
class AnalysisStarted(Event):
    """File analysis begins: `total` files, `cached` of them described before."""

    total: int
    cached: int = 0


@dataclass(frozen=True)
class FileAnalyzed(Event):
    """One more file described: the `done`th of the `total` that needed it."""

    done: int
    total: int


@dataclass(frozen=True)
class Unprofiled(Event):
    """Files with no offline profile to group them by, each analyzed alone: their reasons
    by path."""

    reasons: dict[str, str]

    @property
    def count(self) -> int:
        return len(self.reasons)


@dataclass(frozen=True)
class LLMCall(Event):
    """A model call is about to be made (or answered from the run's kept replies)."""

    agent: str
    label: str  # e.g. "planner r01"


@dataclass(frozen=True)
class LLMReplied(Event):
    """A model call was answered, with its tokens and cost (None: the model has no known
    price)."""

    agent: str
    label: str
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> LLMReplied:
        """The event of a reply's record (`tasks.llm.ask`'s, kept in the run's store)."""
        return cls(
            agent=reply.get("agent", ""),
            label=reply.get("label", ""),
            model=reply.get("model", ""),
            input_tokens=reply["input_tokens"],
            output_tokens=reply["output_tokens"],
            cost_usd=reply.get("cost_usd"),
        )


@dataclass(frozen=True)
class LLMFailed(Event):
    """A model call ended without a reply (`error`: why, in one line): it is no longer in
    flight."""

    agent: str
    label: str
    error: str


@dataclass(frozen=True)
class Executing(Event):
    """A script starts in the sandbox (`label`: e.g. "execute r01")."""

    label: str


@dataclass(frozen=True)
class SlotWait(Event):
    """Still waiting, `waited` seconds so far, for a slot of the global `limit` ("llm",
    "sandbox", ...); `detail` says what holds them."""

    limit: str
    detail: str
    waited: float


@dataclass(frozen=True)
class HumanAsked(Event):
    """After round `round`, a person is asked how to go on, for at most `timeout_s`."""

    round: int
    timeout_s: float


@dataclass(frozen=True)
class HumanAnswered(Event):
    """A person's choice after round `round`: "continue", "guide", "accept" or "stop"."""

    round: int
    choice: str


@dataclass(frozen=True)
class RoundDone(Event):
    """Round `number` was executed and judged (`sufficient`: the verifier's verdict, None
    when it gave none), with the run's totals so far."""

    number: int
    sufficient: bool | None
    llm_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


@dataclass(frozen=True)
class BenchStarted(Event):
    """A benchmark of `total` tasks, `done` of them finished by an earlier call."""

    total: int
    done: int


@dataclass(frozen=True)
class BenchTaskDone(Event):
    """A benchmark task finished (`skipped`: by an earlier call), with its score (None:
    the task has no truth to score against)."""

    task_id: str
    status: str
    score: float | None
    cost_usd: float
    skipped: bool
