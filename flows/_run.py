"""The bookkeeping of one run: its stored objects, Prefect artifacts, rounds and totals."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from dsstar.tasks.agents import AgentCalls, Script
from dsstar.tasks.record import publish_round, publish_rounds_table, publish_summary, write_objects
from prefect.runtime import flow_run

from dsstar import progress
from dsstar.agents.router import Route
from dsstar.ledger import Ledger, RunRow, question_key
from dsstar.notebook import build_notebook
from dsstar.report import run_result
from dsstar.scratch import owner
from dsstar.settings import Settings
from dsstar.storage import Store, analysis_key, check_run_id, round_key

__all__ = ["Run"]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Run:
    run_id: str
    store: Store
    record: dict[str, Any]
    rounds: list[dict[str, Any]] = field(default_factory=list)
    ledger: Ledger | None = None
    calls: AgentCalls | None = None
    analysis_calls: list[dict[str, Any]] = field(default_factory=list)
    _round_start: tuple[int, float] = field(default_factory=lambda: (0, time.monotonic()))

    @classmethod
    def start(cls, run_id: str, settings: Settings, params: dict[str, Any]) -> Run:
        check_run_id(run_id)
        store = Store(settings.storage)
        store.check()  # an unreachable bucket fails here, before the first LLM call
        record = {
            "run_id": run_id,
            **params,
            "status": "running",
            "started_at": _now(),
            "heartbeat_at": _now(),
            **owner(),  # host, pid: `runs list` and `resume` tell a dead run by them
            "flow_run_id": str(flow_run.id) if flow_run.id else None,
            # Secrets never reach storage: the API key and the database URL (which may hold a
            # password) are left out; a resumed run reads them from its environment again.
            "settings": settings.model_dump(mode="json", exclude={"api_key", "database_url"}),
        }
        run = cls(run_id=run_id, store=store, record=record, ledger=Ledger(settings.database_url))
        run._save({"run.json": record}, "run")
        return run

    @property
    def prefix(self) -> str:
        return f"runs/{self.run_id}"

    def _save(self, objects: dict[str, Any], label: str) -> list[str]:
        return write_objects(
            label, self.store.url, {f"{self.prefix}/{k}": v for k, v in objects.items()}
        )

    def previous_solution(self) -> RunRow | None:
        """The last verified solution of this question over this data root, if any."""
        key = question_key(self.record["question"], self.record["guidelines"])
        return self.ledger.last_verified(key, self.record["data"]) if self.ledger else None

    def record_reuse_attempt(self, script: Script, verdict: bool, reply: str) -> None:
        """Keep a rejected reuse attempt beside the rounds (round 00 belongs to the new plan)."""
        self._save(
            {
                "reuse/code.py": script.code,
                "reuse/output.txt": script.result.output,
                "reuse/verdict.json": {
                    "sufficient": verdict,
                    "reply": reply,
                    "ok": script.result.ok,
                },
            },
            "reuse",
        )

    def track(self, calls: AgentCalls) -> None:
        self.calls = calls

    def note(self, **fields: Any) -> None:
        self.record.update(fields)

    # -- analysis ----------------------------------------------------------------------------

    def record_analyses(self, analyses: list[dict[str, Any]]) -> None:
        objects: dict[str, Any] = {}
        for item in analyses:
            folder = f"analysis/{analysis_key(item['path'])}"
            objects[f"{folder}/script.py"] = item["script"]
            objects[f"{folder}/output.txt"] = item["description"]
            objects[f"{folder}/attempts.json"] = {
                k: item[k] for k in ("path", "format", "sha256", "source", "error", "attempts")
            } | {"analyzed_in_run": item["run_id"]}
            if item["run_id"] == self.run_id:  # reused analyses were paid for by an earlier run
                self.analysis_calls.extend(item["calls"])
        self.note(
            files=len(analyses),
            reused_analyses=sum(a["run_id"] != self.run_id for a in analyses),
            heartbeat_at=_now(),
        )
        self._save({**objects, "run.json": self.record}, "analysis")
        self._round_start = (self._call_count(), time.monotonic())

    # -- rounds ------------------------------------------------------------------------------

    def open_round(self, number: int, route: Route) -> None:
        self._save(
            {
                f"rounds/{round_key(number)}/route.json": {
                    "decision": route.label,
                    "reply": route.reply,
                }
            },
            f"route {round_key(number)}",
        )

    def record_round(
        self,
        number: int,
        plan: list[str],
        script: Script,
        sufficient: bool,
        verifier_reply: str,
        route_label: str | None,
    ) -> None:
        start_calls, start_time = self._round_start
        calls = self._calls()[start_calls:]
        item = {
            "number": number,
            "plan": list(plan),
            "code": script.code,
            "output": script.result.output,
            "ok": script.result.ok,
            "verdict": sufficient,
            "route": route_label,
            "debug_attempts": max(0, len(script.attempts) - 1),
            **_usage(calls),
            "seconds": time.monotonic() - start_time,
        }
        self.rounds.append(item)
        self.note(
            round_table=[_summary(r) for r in self.rounds], heartbeat_at=_now(), **self.totals()
        )
        folder = f"rounds/{round_key(number)}"
        uris = self._save(
            {
                f"{folder}/plan.json": item["plan"],
                f"{folder}/code.py": script.code,
                f"{folder}/output.txt": script.result.output,
                f"{folder}/verdict.json": {
                    "sufficient": sufficient,
                    "reply": verifier_reply,
                    "execution_ok": script.result.ok,
                    "attempts": script.attempts,
                },
                "run.json": self.record,  # so `dsstar runs show` follows a run as it goes
            },
            f"round {round_key(number)}",
        )
        publish_round(self.run_id, item, uris[1])
        publish_rounds_table(self.run_id, self.rounds)
        progress.emit("round", number=number, sufficient=sufficient, **self.totals())
        self._round_start = (self._call_count(), time.monotonic())

    # -- the end -----------------------------------------------------------------------------

    def finish(
        self, status: str, plan: list[str], final: Script, reused: bool = False
    ) -> dict[str, Any]:
        answer = final.result.stdout.strip() if final.result.ok else None
        if answer is None:
            status = "failed"
            self.note(error="the final script did not run: " + final.result.output[-500:])
        elif not answer:  # an empty answer is never verified, whatever the verifier said
            status, answer = "failed", None
            self.note(error="the final script printed nothing: there is no answer")
        notebook = build_notebook(
            question=self.record["question"],
            rounds=self.rounds,
            solution=final.code,
            answer=answer,
            status=status,
        )
        uris = self._save(
            {
                "final/solution.py": final.code,
                "final/answer.json": {"answer": answer, "status": status, "plan": plan},
                "final/notebook.ipynb": notebook,
            },
            "final",
        )
        self.note(
            status=status, answer=answer, plan=plan, solution_uri=uris[0], reused_solution=reused
        )
        result = self._close(solution=final.code)
        publish_summary(
            self.run_id,
            self.record,
            {
                "run folder": self.store.uri(self.prefix),
                "solution": uris[0],
                "answer": uris[1],
                "notebook": uris[2],
            },
        )
        return result

    def fail(self, exc: BaseException) -> None:
        self.note(status="failed", error=f"{type(exc).__name__}: {exc}")
        try:
            self._close()
        except Exception:  # storage itself may be what failed; the flow still reports exc
            pass

    def interrupt(self, exc: BaseException) -> None:
        """SIGINT or SIGTERM stopped the run: `dsstar resume` continues it."""
        signum = getattr(exc, "signum", None) or getattr(exc, "signal", None)  # ours, Prefect's
        reason = signal.Signals(signum).name if signum else type(exc).__name__
        self.note(status="interrupted", error=f"interrupted by {reason}")
        try:
            self._close()
        except Exception:  # the stop goes on; the CLI marks run.json itself if this failed
            pass

    def _close(self, solution: str | None = None) -> dict[str, Any]:
        self.note(finished_at=_now(), rounds=len(self.rounds), **self.totals())
        self.record.setdefault("plan", self.rounds[-1]["plan"] if self.rounds else [])
        self._save({"run.json": self.record}, "run")
        if self.ledger:
            ledger_record = {**self.result(), **self.record, "solution": solution}
            self.ledger.record(ledger_record, self.record.get("round_table") or [], self._calls())
        return self.result()

    def result(self) -> dict[str, Any]:
        """The JSON contract of `dsstar run --json`."""
        return run_result(self.record, self.store.uri(self.prefix))

    def totals(self) -> dict[str, Any]:
        return {"llm_calls": self._call_count(), **_usage(self._calls())}

    def _calls(self) -> list[dict[str, Any]]:
        return self.analysis_calls + (self.calls.calls if self.calls else [])

    def _call_count(self) -> int:
        return len(self._calls())


def _summary(item: dict[str, Any]) -> dict[str, Any]:
    """One row of the round table in run.json."""
    return {
        "round": item["number"],
        "step": item["plan"][-1] if item["plan"] else "",
        "plan_length": len(item["plan"]),
        "route": item["route"],
        "verdict": item["verdict"],
        "execution_ok": item["ok"],
        "input_tokens": item["input_tokens"],
        "output_tokens": item["output_tokens"],
        "cost_usd": item["cost_usd"],
        "seconds": round(item["seconds"], 2),
    }


def _usage(calls: list[dict[str, Any]]) -> dict[str, Any]:
    costs = [c["cost_usd"] for c in calls if c.get("cost_usd") is not None]
    return {
        "input_tokens": sum(c["input_tokens"] for c in calls),
        "output_tokens": sum(c["output_tokens"] for c in calls),
        "cost_usd": round(sum(costs), 6) if costs else (0.0 if not calls else None),
    }
