"""The report flow's side of `dsstar.research.loop.ReportRuntime`: its own agent calls as the
cached, retried `llm` task, and each sub-question answered by a DS-STAR run that is a child
flow run of the report's (its own rounds, cards and stored folder), all of a pass at once.

Every sub-run counts on the report's meter (`dsstar.model.ceiling.share`): the report's
ceiling, less the room its writer keeps, bounds them all together. A sub-run that finished
before (a resumed or retried report) is read back from its run.json, its spending counted
again and nothing asked; one that did not is resumed under its own run id, its finished
calls read back from its caches.
"""

from __future__ import annotations

import contextvars
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from prefect import Flow

from dsstar.algorithm.agents.critic import Critique
from dsstar.algorithm.spec import RunSpec
from dsstar.algorithm.verdict import Status
from dsstar.errors import DSStarError
from dsstar.inputs.form import SECRET_FIELDS, RunForm
from dsstar.keys import critique, draft, run_folder, run_record
from dsstar.model.ceiling import Ceiling, call_id, meter, share
from dsstar.model.llm import Message
from dsstar.records.record import total_cost
from dsstar.research.subs import SubAnswer, SubQuestion, sub_run_id
from dsstar.settings import Settings
from dsstar.storage import Store
from dsstar.text import clean
from dsstar.views.report import finished_result, run_result
from flows import _story as story
from flows._run import Run
from flows.ds_star import completed_result, own_flow
from tasks.agents import TaskCalls

__all__ = ["ReportRun", "ReportRuntime"]

# The agents a report asks itself; its sub-runs ask the others (they reuse its analysis).
_OWN = frozenset({"analyzer", "decomposer", "writer", "critic"})
# A failure outside dsstar (the Prefect API busy) is tried again this often, resuming the run.
_ORCHESTRATION_RETRIES = 2


@dataclass
class ReportRun(Run):
    """A report's record: its own calls (analysis, decomposer, writer, critic) and, in its
    totals, those of its sub-runs (by run id): one budget, one bill."""

    sub_totals: dict[str, dict[str, Any]] = field(default_factory=dict)

    def _spent(self) -> list[dict[str, Any]]:
        """The report's own replies: those recorded, and those of its file analysis that the
        meter counted but the analysis did not record (cut short). The meter is shared with
        the sub-runs, whose calls are theirs (their run.json, their ledger rows) and count in
        `totals` through `sub_totals`."""
        recorded = self._calls()
        seen = {call_id(call) for call in recorded}
        counted = meter(self.run_id).calls()
        return recorded + [c for c in counted if c.get("agent") in _OWN and call_id(c) not in seen]

    def totals(self) -> dict[str, Any]:
        own = super().totals()
        subs = list(self.sub_totals.values())
        # What each part that asked a model cost (unknown for a model without a price); a
        # part that asked nothing cost nothing.
        costs = [own["cost_usd"]] if own["llm_calls"] else []
        costs += [s.get("cost_usd") for s in subs if s.get("llm_calls")]
        return {
            "llm_calls": own["llm_calls"] + sum(s.get("llm_calls") or 0 for s in subs),
            "input_tokens": own["input_tokens"] + sum(s.get("input_tokens") or 0 for s in subs),
            "output_tokens": own["output_tokens"] + sum(s.get("output_tokens") or 0 for s in subs),
            "cost_usd": total_cost(costs) if costs else 0.0,
        }


class ReportRuntime:
    """The runtime of one report (see the module). `lower` is the ceiling of everything but
    the writer: the report's, less the room the writer keeps."""

    def __init__(
        self,
        run: ReportRun,
        spec: RunSpec,
        lower: Ceiling,
        settings: Settings,
        data: str,
        policy: Settings | None = None,
    ) -> None:
        self.run, self.spec, self.data = run, spec, data
        # The sub-runs' forms are the report's own making, judged as the report's form was.
        self.flow = own_flow(policy)
        self.own = TaskCalls(replace(spec, ceiling=lower), replies=run.calls)
        self.writer = TaskCalls(spec, replies=run.calls)  # the whole ceiling: its room is kept
        self.lower = lower
        self.meter = meter(run.run_id)
        shared = settings.model_dump(mode="json", exclude=SECRET_FIELDS)
        # Each sub-run: the report's settings, threads for its own fan-out (it runs in this
        # process, a child of the report's flow run), and the report's lowered ceiling, on
        # the report's meter.
        limits = {"max_cost": lower.max_cost, "max_tokens": lower.max_tokens}
        self.settings = shared | {"task_runner": "thread"} | limits
        self.store = Store(settings.storage)
        self._stop: str | None = None
        if any(v is not None and v <= 0 for v in limits.values()):
            self._stop = "the ceiling leaves no room beyond what the report's writer needs"

    # -- ReportRuntime ---------------------------------------------------------------------

    def ask(self, agent: str, label: str, messages: list[Message]) -> str:
        calls = self.writer if agent == "writer" else self.own
        return calls.ask(agent, label, messages)

    def stop_reason(self) -> str | None:
        if self._stop is None and self.meter.stopped:
            self._stop = "the report's spending ceiling was reached"
        return self._stop

    def answer(self, subs: list[SubQuestion]) -> list[SubAnswer]:
        if not subs:
            return []
        story.say("sub-questions: %d asked: %s", len(subs),
                  " · ".join(f"[{s.number}] {s.question}" for s in subs))  # fmt: skip
        with ThreadPoolExecutor(len(subs), thread_name_prefix="sub-question") as pool:
            # Each thread runs in a copy of this flow run's context: the runs are its children.
            futures = [pool.submit(contextvars.copy_context().run, self._one, s) for s in subs]
            answers = [future.result() for future in futures]
        self._keep(answers)
        return answers

    def drafted(self, round: int, body: str | None, critique_: Critique | None) -> None:
        objects: dict[str, Any] = {draft(round): body or "(no draft: see run.json)"}
        if critique_ is not None:
            objects[critique(round)] = {"issues": critique_.issues,
                                        "sub_questions": critique_.sub_questions}  # fmt: skip
        self.run.save(objects, f"draft {round:02d}")
        story.say("draft %02d: %s", round, "written" if body else "none")

    # -- one sub-question --------------------------------------------------------------------

    def _one(self, sub: SubQuestion) -> SubAnswer:
        run_id = sub_run_id(self.run.run_id, sub.number)
        finished = finished_result(self.store, run_id)
        if finished is not None:  # answered by an earlier attempt: read back, not asked again
            self.meter.charge(_spent(run_id, finished))
            return SubAnswer.of(sub, finished)
        reason = self.stop_reason()
        if reason is not None:
            return SubAnswer.skipped(sub, run_id, f"not started: {reason}")
        share(run_id, self.run.run_id)
        result = _answered(self.flow, sub, run_id, self.data, self.settings)
        answer = SubAnswer.of(sub, result)
        story.say("sub-question [%d] %s: %s · %s", sub.number, run_id, answer.status,
                  (answer.answer or answer.error or "")[:200])  # fmt: skip
        return answer

    def _keep(self, answers: list[SubAnswer]) -> None:
        """Count each sub-run's totals in the report's (from its run.json: a failed one
        spent too)."""
        for answer in answers:
            if answer.status == "skipped":
                continue
            record = _stored(self.store, answer.run_id) or answer.to_dict()
            self.run.sub_totals[answer.run_id] = {
                k: record.get(k) for k in ("llm_calls", "input_tokens", "output_tokens", "cost_usd")
            }


def _stored(store: Store, run_id: str) -> dict[str, Any] | None:
    try:
        return store.read_json(run_record(run_id))
    except (FileNotFoundError, DSStarError):
        return None


def _spent(run_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """A finished sub-run's spending as one call the meter counts once."""
    return {"agent": "sub-run", "label": f"sub-run {run_id}", "model": "", "request": run_id,
            "cost_usd": result.get("cost_usd") or 0.0,
            "input_tokens": result.get("input_tokens") or 0,
            "output_tokens": result.get("output_tokens") or 0}  # fmt: skip


def _answered(
    flow: Flow, sub: SubQuestion, run_id: str, data: str, settings: dict[str, Any]
) -> dict[str, Any]:
    """The result of sub-question `sub`'s ds-star flow run of `flow` (a child of the current
    flow run); a run that fails is a result with its status, never an exception."""
    question = {"question": sub.question, "data": data, "guidelines": sub.guidelines}
    error: BaseException | None = None
    try:
        form = RunForm.for_question(question, run_id, settings)
    except Exception as exc:  # noqa: BLE001 - a sub-question the form refuses is a failed one
        return {"run_id": run_id, "status": Status.FAILED.value, "error": clean(str(exc))}
    for attempt in range(_ORCHESTRATION_RETRIES + 1):
        try:
            state = flow(**form.parameters(), return_state=True)
            return completed_result(state, settings.get("storage"), run_id)
        except DSStarError as exc:  # the run's own failure (model, data): it would fail again
            error = exc
            break
        except Exception as exc:  # noqa: BLE001 - the flow run could not be created or read
            error = exc
            story.say("sub-question [%d]: %s; trying again", sub.number, exc,
                      level=logging.WARNING)  # fmt: skip
            time.sleep(2 * (attempt + 1))
    store = Store(settings.get("storage") or Settings().storage)
    record = _stored(store, run_id) or {"run_id": run_id}
    record |= {"status": Status.FAILED.value}
    record["error"] = record.get("error") or f"{type(error).__name__}: {error}"
    return run_result(record, store.uri(run_folder(run_id)))
