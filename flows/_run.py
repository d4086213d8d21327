"""The record of one run: run.json and the objects stored beside it, its rounds and LLM
calls with their totals, and its row in the ledger when it ends."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prefect.runtime import flow_run

from dsstar import keys
from dsstar.algorithm.runtime import Round, Script
from dsstar.algorithm.verdict import Status
from dsstar.errors import OverBudget
from dsstar.execution.failure import exception_line
from dsstar.execution.scratch import owner
from dsstar.inputs.form import SECRET_FIELDS
from dsstar.inputs.preflight import used_models
from dsstar.model.ceiling import Ceiling, call_id, meter, spent_line
from dsstar.model.recorded import replies_source
from dsstar.records.claim import Claim, claim_run
from dsstar.records.identity import RunIdentity
from dsstar.records.ledger import Ledger, RunRow, question_key
from dsstar.records.record import (
    analysis_objects,
    figure_entries,
    output_entries,
    round_item,
    round_objects,
    round_row,
    usage,
)
from dsstar.settings import Settings
from dsstar.storage import Store, check_run_id
from dsstar.views.report import run_result
from flows._settle import settle
from tasks.record import publish_ending, storage_writer

__all__ = ["Run"]

_log = logging.getLogger("dsstar.flows")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Run:
    run_id: str
    store: Store
    record: dict[str, Any]
    rounds: list[dict[str, Any]] = field(default_factory=list)
    ledger: Ledger | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)  # the loop's LLM replies
    analysis_calls: list[dict[str, Any]] = field(default_factory=list)
    claim: Claim | None = None  # this process's hold on the run id (see dsstar.records.claim)
    storage_retry_delay: float = 1.0  # DSSTAR_STORAGE_RETRY_DELAY
    _round_start: tuple[int, float] = field(default_factory=lambda: (0, time.monotonic()))

    @classmethod
    def start(
        cls,
        run_id: str,
        settings: Settings,
        params: dict[str, Any],
        given: Collection[str] = (),
    ) -> Run:
        """Claim `run_id` and store the run's first run.json. `params` are its question,
        data and guidelines; `given` the names of the settings its form or flags set, which
        a stored run under the id must have been started with (see records/identity.py)."""
        check_run_id(run_id)
        store = Store(settings.storage)
        store.check()  # an unreachable bucket fails here, before the first LLM call
        # Before anything is written: a run id in use, finished, or another run's is refused.
        chosen = settings.model_dump(mode="json", include=set(given) - SECRET_FIELDS)
        identity = RunIdentity.of(params, chosen)
        this_flow_run = str(flow_run.id) if flow_run.id else None
        claim = claim_run(store, run_id, this_flow_run, identity)
        held = claim.replaced or {}
        if held.get("flow_run_id") not in (None, this_flow_run):  # its attempt died unseen
            dead = {"run_id": run_id, "flow_run_id": held["flow_run_id"], "status": "running"}
            cause = f"its process (pid {held.get('pid')} on {held.get('host')}) is gone"
            # Its card comes from its run.json: settled before this attempt writes its own.
            continues = f"run {run_id} continues in flow run {this_flow_run}"
            settle(dead, cause, next_step=continues, storage=store.url)
        record = {
            "run_id": run_id,
            **params,
            "status": Status.RUNNING.value,
            "started_at": _now(),
            "heartbeat_at": _now(),
            **owner(),  # host, pid: `runs list` and `resume` tell a dead run by them
            "flow_run_id": str(flow_run.id) if flow_run.id else None,
            # Who answers: a model, or replies recorded earlier (never to pass for a model's).
            **replies_source(used_models(settings)),
            # Secrets never reach storage: the API key and the database URL (which may hold a
            # password) are left out; a resumed run reads them from its environment again.
            "settings": settings.model_dump(mode="json", exclude=SECRET_FIELDS),
        }
        ledger = Ledger(settings.database_url, store.url)
        run = cls(
            run_id=run_id,
            store=store,
            record=record,
            ledger=ledger,
            claim=claim,
            storage_retry_delay=settings.storage_retry_delay,
        )
        try:
            run.save({keys.RUN_RECORD: record}, "run")
        except BaseException:
            run.release()
            raise
        return run

    def release(self) -> None:
        """Give the run id back (the run ended, however): a resume may claim it next."""
        if self.claim is not None:
            try:
                self.claim.release()
            except Exception:  # storage may be what failed; a dead holder is stale anyway
                pass
            self.claim = None

    @property
    def prefix(self) -> str:
        return keys.run_folder(self.run_id)

    def save(self, objects: dict[str, Any], label: str) -> list[str]:
        """Write `objects` (keys relative to the run's folder); returns their URIs."""
        return storage_writer(self.storage_retry_delay)(
            label, self.store.url, {keys.in_run(self.run_id, k): v for k, v in objects.items()}
        )

    def note(self, **fields: Any) -> None:
        self.record.update(fields)

    def previous_solution(self) -> RunRow | None:
        """The last verified solution of this question over this data root, if any."""
        key = question_key(self.record["question"], self.record["guidelines"])
        return self.ledger.last_verified(key, self.record["data"]) if self.ledger else None

    def record_analyses(self, analyses: list[dict[str, Any]]) -> None:
        for item in analyses:
            if item["run_id"] == self.run_id:  # reused analyses were paid for by an earlier run
                self.analysis_calls.extend(item["calls"])
        self.note(
            files=len(analyses),
            reused_analyses=sum(a["run_id"] != self.run_id for a in analyses),
            heartbeat_at=_now(),
        )
        self.save({**analysis_objects(analyses), keys.RUN_RECORD: self.record}, "analysis")
        self._round_start = (self._call_count(), time.monotonic())

    def add_round(self, round: Round) -> tuple[dict[str, Any], list[str]]:
        """Keep a judged round: its objects and the updated run.json are stored. Returns the
        round as kept (with the calls and seconds it took since the last one) and the URIs."""
        start_calls, start_time = self._round_start
        calls = self._calls()[start_calls:]
        discarded = {(asked.label, asked.request) for asked in round.unused}
        for call in calls:  # counted like any other, marked as not followed
            if (call.get("label"), call.get("request")) in discarded:
                call["unused"] = True
        item = round_item(round, calls, time.monotonic() - start_time)
        item["figures"] = self.add_figures(keys.round_folder(round.number), round.script)
        self.rounds.append(item)
        self.note(
            round_table=[round_row(r) for r in self.rounds], heartbeat_at=_now(), **self.totals()
        )
        uris = self.save(
            # run.json too, so `dsstar runs show` follows a run as it goes
            {**round_objects(round), keys.RUN_RECORD: self.record},
            f"round {keys.round_key(round.number)}",
        )
        self._round_start = (self._call_count(), time.monotonic())
        return item, uris

    def add_figures(self, folder: str, script: Script) -> list[dict[str, Any]]:
        """List the figures `script` saved (stored under <folder>/figures/) in run.json."""
        entries = figure_entries(
            folder, script.result, lambda k: self.store.uri(keys.in_run(self.run_id, k))
        )
        kept = [f for f in self.record.get("saved_figures") or [] if f["where"] != folder]
        self.note(saved_figures=kept + entries)  # a resumed run replaces a round's list
        return entries

    def add_outputs(self, final: Script | None) -> list[dict[str, Any]]:
        """List the files the final script wrote (stored under final/outputs/) in run.json,
        with the bound that left any out (outputs_error)."""
        result = final.result if final is not None else None
        entries = (
            output_entries(result, lambda k: self.store.uri(keys.in_run(self.run_id, k)))
            if result
            else []
        )
        self.note(outputs=entries, outputs_error=(result.outputs_error if result else "") or None)
        return entries

    # -- the end -----------------------------------------------------------------------------

    def fail(self, exc: BaseException) -> None:
        self.note(status=Status.FAILED.value, error=exception_line(exc))
        try:
            self.close()
        except Exception:  # storage itself may be what failed; the flow still reports exc
            pass
        self.show_ending()

    def over_budget(self, exc: OverBudget, ceiling: Ceiling) -> dict[str, Any]:
        """The next model call would have passed `ceiling`: the run stops with what it has
        stored; run.json's error is the line that says what was spent and what remains."""
        self.note(**self.totals())
        line = spent_line(self.record, ceiling, exc.need)
        self.note(status=Status.OVER_BUDGET.value, error=line)
        result = self.close()
        self.show_ending()
        return result

    def interrupt(self, exc: BaseException) -> None:
        """SIGINT or SIGTERM stopped the run: `dsstar resume` continues it."""
        signum = getattr(exc, "signum", None) or getattr(exc, "signal", None)  # ours, Prefect's
        reason = signal.Signals(signum).name if signum else type(exc).__name__
        self.note(status=Status.INTERRUPTED.value, error=f"interrupted by {reason}")
        try:
            self.close()
        except Exception:  # the stop goes on; the CLI marks run.json itself if this failed
            pass
        self.show_ending()

    def show_ending(self) -> None:
        """The card of a run that ended without an answer, in the flow run's Artifacts tab:
        why, where it stopped, what it spent, where it is stored, how to continue. A card
        is a view: a server that cannot take it never changes how the run ends."""
        try:
            publish_ending(self.run_id, self.record, self.store.uri(self.prefix))
        except Exception as exc:
            _log.warning("the ending card of run %s was not published: %s", self.run_id, exc)

    def close(self, solution: str | None = None) -> dict[str, Any]:
        """Final totals into run.json and the run into the ledger; returns the result."""
        self.note(finished_at=_now(), rounds=len(self.rounds), **self.totals())
        self.record.setdefault("plan", self.rounds[-1]["plan"] if self.rounds else [])
        self.save({keys.RUN_RECORD: self.record}, "run")
        if self.ledger:
            ledger_record = {**self.result(), **self.record, "solution": solution}
            self.ledger.record(ledger_record, self.record.get("round_table") or [], self._spent())
        return self.result()

    def result(self) -> dict[str, Any]:
        """The JSON contract of `dsstar run --json`."""
        return run_result(self.record, self.store.uri(self.prefix))

    def totals(self) -> dict[str, Any]:
        """Calls, tokens and cost of every reply this run received so far."""
        spent = self._spent()
        return {"llm_calls": len(spent), **usage(spent)}

    def _calls(self) -> list[dict[str, Any]]:
        """The replies recorded with the analyses and rounds they belong to."""
        return self.analysis_calls + self.calls

    def _spent(self) -> list[dict[str, Any]]:
        """Every reply received: those recorded, and those of file analyses not finished
        (still running, or cut short by a stop or a failure), which the run's meter counted
        as they came: paid for all the same."""
        recorded = self._calls()
        seen = {call_id(call) for call in recorded}
        return recorded + [c for c in meter(self.run_id).calls() if call_id(c) not in seen]

    def _call_count(self) -> int:
        return len(self._calls())
