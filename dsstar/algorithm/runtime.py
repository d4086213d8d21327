"""What DS-STAR needs from the world around it, as two small protocols.

The algorithm (`steps`, `loop`) decides; a runtime does. The Prefect flow supplies one (tasks
with caching and retries, stored artifacts, the UI); `local.LocalRuntime` is one in this
process, without Prefect. Nothing here imports Prefect.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dsstar.algorithm.agents.router import Route
from dsstar.algorithm.guidance import Checkpoint, Guidance
from dsstar.algorithm.verdict import Verdict
from dsstar.events import StoryEvent
from dsstar.execution.sandbox import ExecResult
from dsstar.model.llm import Message
from dsstar.settings import default

if TYPE_CHECKING:  # only annotations: the data side is not loaded with the loop's types
    from dsstar.data.sources import DataSource

__all__ = ["NO_CODE", "Asked", "Budget", "Calls", "Round", "Runtime", "Script", "Solved"]


class Calls(Protocol):
    """The model and the sandbox: all the repair loop needs (file analysis uses just this)."""

    def ask(self, agent: str, label: str, messages: list[Message]) -> str:
        """The reply of `agent`'s model to `messages`. `label` names the call (e.g.
        "planner r01"): a runtime that caches keys its cache on it."""
        ...

    def execute(self, label: str, code: str, files: Sequence[str] | None = None) -> ExecResult:
        """Run `code` in the sandbox with the data files under `data/`: all of them, or only
        `files` (paths relative to the data root; see `dsstar.algorithm.scope`)."""
        ...

    def image(self, agent: str, output: dict[str, Any]) -> bytes | None:
        """The bytes of a figure a script saved (one of an ExecResult's outputs), read back
        bounded, to show `agent`'s model; None when that model cannot see images."""
        ...


class Runtime(Calls, Protocol):
    """Calls, plus the work of steps 0 to 2 (contracts, an earlier solution, file analysis),
    where the algorithm's decisions are recorded and told, and how a person is asked."""

    run_id: str

    def check_contracts(self, source: DataSource) -> dict[str, Any]:
        """Every file of `source` against its stored data contract (new files get one).
        Returns the report, {"checked", "failed", "created", "files"}, kept in the run's
        record."""
        ...

    def previous_solution(self) -> Solved | None:
        """The last verified solution of this question over this data, if any."""
        ...

    def analyze_files(self, source: DataSource, fresh: set[str]) -> list[dict[str, Any]]:
        """Step 1: a catalog record (with its "description") for every file of `source`;
        files described before are not analyzed again, except those in `fresh`. A call
        refused at the run's ceiling raises OverBudget with the finished records on it."""
        ...

    def record_analyses(self, analyses: list[dict[str, Any]]) -> None:
        """The file analyses of this run (analysis/), finished or cut short."""
        ...

    def note(self, **fields: Any) -> None:
        """Facts about the run for its record (run.json), e.g. the files the agents saw."""
        ...

    def say(self, event: StoryEvent) -> None:
        """A line of the run's story for whoever watches it: `Reused`, `Analyzed` or
        `Retrieved` (`dsstar.events`)."""
        ...

    def record_round(self, round: Round) -> None:
        """A round was executed and judged (rounds/NN/plan.json, code.py, output.txt,
        verdict.json)."""
        ...

    def record_route(self, number: int, route: Route) -> None:
        """The router's decision that opens round `number` (rounds/NN/route.json)."""
        ...

    def record_guidance(self, number: int, guidance: Guidance) -> None:
        """A person's answer after round `number` (rounds/NN/guidance.json)."""
        ...

    def record_reuse(self, script: Script, verdict: Verdict, reply: str) -> None:
        """A stored solution tried first and rejected (reuse/)."""
        ...

    def ask_human(self, checkpoint: Checkpoint) -> Guidance | None:
        """A person's answer after a round that was not sufficient; None: nobody is asked."""
        ...

    def asks_human(self) -> bool:
        """Whether `ask_human` may ask a person (or read back what one answered); False: it
        returns None without asking, so the router and the planner can be asked before the
        verifier has replied (`Budget.ask_ahead`)."""
        ...


@dataclass(frozen=True)
class Solved:
    """A verified solution of an earlier run: tried first on today's data (step 0)."""

    run_id: str
    plan: list[str]
    solution: str | None


@dataclass(frozen=True)
class Budget:
    """The loop's bounds (the settings of the same names; built by `dsstar.inputs.spec`)."""

    max_rounds: int = default("max_rounds")
    max_debug_attempts: int = default("max_debug_attempts")
    summarize_over_chars: int = default("summarize_over_chars")
    max_output_chars: int = default("max_output_chars")
    ask_ahead: bool = default("ask_ahead")
    read_charts: bool = default("read_charts")


@dataclass
class Script:
    """A script after the repair loop: the last version tried and what running it gave."""

    code: str
    result: ExecResult
    attempts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Asked:
    """A model call that was answered: its agent, label and request (`prompt_hash` of its
    messages, as the call's record and cache key have it)."""

    agent: str
    label: str
    request: str


@dataclass(frozen=True)
class Round:
    """One executed and judged round. `route` is the decision that opened it (None for
    round 00). `unused`: replies asked together with the verifier's and then discarded (the
    verifier said Yes, or the router backtracked): paid for, kept, not followed."""

    number: int
    plan: list[str]
    script: Script
    verdict: Verdict
    reply: str  # the verifier's
    route: str | None = None
    unused: tuple[Asked, ...] = ()


# What "running" a reply without a code block gives: a failure the debugger can read.
NO_CODE = ExecResult(
    ok=False,
    exit_code=None,
    output="[dsstar] The reply contained no ```python code block, so nothing was run.",
    timed_out=False,
    duration_s=0.0,
    truncated=False,
    sandbox="none",
)
