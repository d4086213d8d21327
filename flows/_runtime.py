"""The flow's side of the core algorithm's `Runtime`: agent calls, scripts and file analyses
as cached, retried Prefect tasks; rounds, routes and guidance stored and shown as Prefect
artifacts; the story told in the flow run's logs."""

from __future__ import annotations

import logging
from typing import Any

from dsstar import progress
from dsstar.algorithm.agents.router import Route
from dsstar.algorithm.guidance import Checkpoint, Guidance
from dsstar.algorithm.runtime import Round, Script, Solved
from dsstar.algorithm.spec import RunSpec
from dsstar.algorithm.verdict import Verdict
from dsstar.data.sources import DataSource
from dsstar.events import (
    Analyzed,
    Event,
    HumanAnswered,
    HumanAsked,
    Retrieved,
    Reused,
    RoundDone,
    details,
)
from dsstar.keys import in_run, round_key
from dsstar.records.record import (
    guidance_key,
    guidance_objects,
    read_guidance,
    reuse_objects,
    route_objects,
)
from flows import _story as story
from flows._analysis import analyze_files
from flows._contracts import check_contracts
from flows._guidance import ask_human, publish_guidance
from flows._run import Run
from tasks.agents import TaskCalls
from tasks.record import publish_round, publish_rounds_table

__all__ = ["FlowRuntime"]


class FlowRuntime(TaskCalls):
    """`ask` and `execute` are tasks (see `TaskCalls`); every reply counts in `run`'s totals."""

    def __init__(self, run: Run, spec: RunSpec) -> None:
        super().__init__(spec, replies=run.calls)
        self.run = run
        self.run_id = run.run_id
        self._route_replies: dict[int, str] = {}  # the router's reasoning, by round it opened

    # -- steps 0 to 2 ------------------------------------------------------------------------

    def check_contracts(self, source: DataSource) -> dict[str, Any]:
        return check_contracts(self.run, source)

    def previous_solution(self) -> Solved | None:
        row = self.run.previous_solution()
        return Solved(row.run_id, list(row.plan), row.solution) if row else None

    def analyze_files(self, source: DataSource, fresh: set[str]) -> list[dict[str, Any]]:
        return analyze_files(self.spec, source, fresh=fresh)

    def record_analyses(self, analyses: list[dict[str, Any]]) -> None:
        self.run.record_analyses(analyses)

    def note(self, **fields: Any) -> None:
        self.run.note(**fields)

    def say(self, event: Event) -> None:
        match event:
            case Reused(previous_run=previous_run):
                story.reused(previous_run)
            case Analyzed(files=files):
                story.analyzed(files, self.run_id)
            case Retrieved(paths=paths, total=total):
                story.retrieved(paths, total)
            case _:  # a line the story has no words of its own for
                story.say("%s: %s", type(event).__name__, details(event), level=logging.INFO)
        progress.emit(event)  # the story is also progress: whoever follows the run hears it

    # -- steps 3 to 5 ------------------------------------------------------------------------

    def record_round(self, round: Round) -> None:
        item, uris = self.run.add_round(round)
        reasons = {"reply": round.reply, "route_reply": self._route_replies.get(round.number)}
        publish_round(self.run_id, item | reasons, uris[1])  # uris[1]: the round's code.py
        publish_rounds_table(self.run_id, self.run.rounds)
        story.round_done(round.number, round.plan, round.verdict.sufficient, round.script.result.ok)
        progress.emit(RoundDone(round.number, round.verdict.sufficient, **self.run.totals()))

    def record_route(self, number: int, route: Route) -> None:
        plan = self.run.rounds[-1]["plan"] if self.run.rounds else []
        story.route(number, route.label, len(plan))
        self._route_replies[number] = route.reply
        self.run.save(route_objects(number, route), f"route {round_key(number)}")

    def record_guidance(self, number: int, guidance: Guidance) -> None:
        self.run.save(guidance_objects(number, guidance), f"guidance {round_key(number)}")
        publish_guidance(self.run_id, number, guidance)

    def record_reuse(self, script: Script, verdict: Verdict, reply: str) -> None:
        self.run.save(reuse_objects(script, verdict, reply), "reuse")

    def asks_human(self) -> bool:
        return self.spec.ask_human

    def ask_human(self, checkpoint: Checkpoint) -> Guidance | None:
        if not self.asks_human():
            return None
        key = in_run(self.run.run_id, guidance_key(checkpoint.round))
        try:  # a resumed run: the earlier answer stands, so the guided calls are cached
            return read_guidance(self.run.store.read_json(key))
        except FileNotFoundError:
            pass
        # The Prefect UI's form (the run pauses), or the terminal prompt of `dsstar run`.
        progress.emit(HumanAsked(checkpoint.round, timeout_s=self.spec.human_timeout))
        guidance = ask_human(checkpoint, self.spec.human_timeout)
        progress.emit(HumanAnswered(checkpoint.round, choice=str(guidance.choice)))
        return guidance
