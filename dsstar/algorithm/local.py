"""A `Runtime` in this process, without Prefect: model calls through litellm
(`dsstar.model.llm`), scripts in the sandbox, one after another, and everything the algorithm
records kept in memory, to read afterwards (a notebook, a test, a debugging session).

What it leaves to the Prefect runtime: task caching and retries, the run's ceiling, stored
rounds and files, and the ledger (the files its scripts wrote stay in its results, in
memory). File descriptions go into the catalog of the spec's storage, as the flow's do, so
either runtime finds what the other described; like files are each analyzed.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dsstar.algorithm import analysis
from dsstar.algorithm.agents.router import Route
from dsstar.algorithm.guidance import Checkpoint, Guidance
from dsstar.algorithm.runtime import Round, Script, Solved
from dsstar.algorithm.spec import RunSpec
from dsstar.algorithm.verdict import Verdict
from dsstar.data.contracts import check_source
from dsstar.data.previews import with_previews
from dsstar.data.sources import DataSource
from dsstar.events import StoryEvent, details
from dsstar.execution.sandbox import ExecResult, Limits, run_script
from dsstar.model.config import LLMConfig
from dsstar.model.llm import Message, complete, sees_images
from dsstar.settings import api_key_here
from dsstar.storage import Store

__all__ = ["LocalRuntime"]

log = logging.getLogger(__name__)

# A person's answer at a checkpoint; None: go on as planned.
Asker = Callable[[Checkpoint], Guidance | None]


@dataclass
class LocalRuntime:
    """Algorithm 1's runtime in this process (see the module). `spec` says the models, the
    sandbox and the data folder; `api_key` is sent to the model server (default: the
    DSSTAR_API_KEY of this environment); `previous` is a verified solution to try first
    (step 0); `ask_person` answers after a round that was not sufficient (None: nobody is
    asked)."""

    spec: RunSpec
    api_key: str | None = None
    previous: Solved | None = None
    ask_person: Asker | None = None
    labels: list[str] = field(default_factory=list)  # every call and execution, in order
    replies: list[dict[str, Any]] = field(default_factory=list)  # with tokens and cost
    analyses: list[dict[str, Any]] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    routes: dict[int, Route] = field(default_factory=dict)
    guidance: dict[int, Guidance] = field(default_factory=dict)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    reuses: list[tuple[Script, Verdict, str]] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    story: list[StoryEvent] = field(default_factory=list)  # what `say` was told, in order

    @property
    def run_id(self) -> str:
        return self.spec.run_id

    # -- calls -------------------------------------------------------------------------------

    def ask(self, agent: str, label: str, messages: list[Message]) -> str:
        self.labels.append(label)
        key = self.api_key or api_key_here()
        config = LLMConfig(**self.spec.llm[agent])
        reply = complete(
            config, messages, agent=agent, run_id=self.run_id, label=label, api_key=key
        )
        self.replies.append({"agent": agent, "label": label, **reply.to_dict()})
        return reply.text

    def execute(self, label: str, code: str, files: Sequence[str] | None = None) -> ExecResult:
        self.labels.append(label)
        work_dir = Path(self.spec.work_dir) if self.spec.work_dir else None
        # The tables it wrote are previewed in the bounded reader; the files stay in memory.
        return with_previews(self._run(code, self.spec.limits, files), work_dir)

    def image(self, agent: str, output: dict[str, Any]) -> bytes | None:
        if not sees_images(self.spec.llm[agent]["model"]):
            return None
        return base64.b64decode(output["data"])  # this runtime keeps the files in memory

    def _run(self, code: str, limits: Limits, files: Sequence[str] | None = None) -> ExecResult:
        work_dir = self.spec.work_dir
        return run_script(
            code,
            data_dir=Path(self.spec.data_dir),
            limits=limits,
            mode=self.spec.sandbox,
            work_root=Path(work_dir) if work_dir else None,
            files=files,
            python=self.spec.script_python,
        )

    # -- steps 0 to 2 ------------------------------------------------------------------------

    def check_contracts(self, source: DataSource) -> dict[str, Any]:
        report = check_source(Store(self.spec.storage), source)
        self.note(contracts=report)
        return report

    def previous_solution(self) -> Solved | None:
        return self.previous

    def analyze_files(self, source: DataSource, fresh: set[str]) -> list[dict[str, Any]]:
        files, found, missing = analysis.known_analyses(self.spec, source, fresh)
        calls = _WithoutFigures(self)  # an analyzer prints; a chart it saves is dropped
        for file in missing:
            first = len(self.replies)
            record = analysis.analyze_file(calls, asdict(file), self.spec)
            record["calls"] = self.replies[first:]
            analysis.keep(record, self.spec)
            found[file.path] = record
        return [found[f.path] for f in files]

    def record_analyses(self, analyses: list[dict[str, Any]]) -> None:
        self.analyses = list(analyses)
        self.note(files=len(analyses))

    def note(self, **fields: Any) -> None:
        self.notes.update(fields)

    def say(self, event: StoryEvent) -> None:
        self.story.append(event)
        told = {k: v for k, v in details(event).items() if k != "files"}
        log.info("%s: %s", type(event).__name__.lower(), told)

    # -- steps 3 to 5 ------------------------------------------------------------------------

    def record_round(self, round: Round) -> None:
        self.rounds.append(round)

    def record_route(self, number: int, route: Route) -> None:
        self.routes[number] = route

    def record_guidance(self, number: int, guidance: Guidance) -> None:
        self.guidance[number] = guidance

    def record_reuse(self, script: Script, verdict: Verdict, reply: str) -> None:
        self.reuses.append((script, verdict, reply))

    def ask_human(self, checkpoint: Checkpoint) -> Guidance | None:
        self.checkpoints.append(checkpoint)
        return self.ask_person(checkpoint) if self.ask_person else None

    def asks_human(self) -> bool:
        return self.ask_person is not None


@dataclass
class _WithoutFigures:
    """The runtime's calls for file analysis: its scripts keep no files."""

    runtime: LocalRuntime

    def ask(self, agent: str, label: str, messages: list[Message]) -> str:
        return self.runtime.ask(agent, label, messages)

    def execute(self, label: str, code: str, files: Sequence[str] | None = None) -> ExecResult:
        self.runtime.labels.append(label)
        return self.runtime._run(code, self.runtime.spec.without_outputs().limits, files)

    def image(self, agent: str, output: dict[str, Any]) -> bytes | None:
        return None  # its scripts keep no files
