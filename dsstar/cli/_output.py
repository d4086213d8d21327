"""How commands report: the result of a run, and the progress of a run on stderr.

Everything shown comes from outside (answers, errors, file names, model replies), so it goes
through `shown`, and consoles never read rich markup (`_app.console`): escape and control
sequences never reach the terminal raw, and brackets are text. JSON output stays exact and
valid (only made encodable).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from rich.text import Text

from dsstar.algorithm.verdict import verdict_label
from dsstar.cli._app import console, err, plural
from dsstar.events import (
    AnalysisStarted,
    Event,
    FileAnalyzed,
    HumanAnswered,
    HumanAsked,
    LLMCall,
    LLMFailed,
    LLMReplied,
    RoundDone,
    SlotWait,
    Unprofiled,
)
from dsstar.records.record import total_cost
from dsstar.text import clean_deep, for_terminal, money

__all__ = ["LiveProgress", "heading", "json_line", "report", "shown"]


def shown(value: Any) -> str:
    """`value` as text that is safe to print (no escape or control sequences)."""
    return for_terminal(value)


def heading(out: Any, title: str) -> None:
    """A section title: a rule across a terminal; piped, `── title ──` on a line of its own,
    since a rule fitted to 80 columns would cut a long title (a file path) with an ellipsis."""
    if out.is_terminal:
        out.rule(title)
    else:
        out.print(Text(f"── {title} ──"), crop=False)


def json_line(data: Any) -> str:
    """One line of JSON that can always be encoded (lone surrogates replaced)."""
    return json.dumps(clean_deep(data), ensure_ascii=False, default=str) + "\n"


def report(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json_line(result))
        if result.get("error"):  # whoever reads only the logs still learns why it failed
            err.print(Text.assemble(("error:", "red"), f" {shown(result['error'])}"))
        return
    colour = {"verified": "green", "accepted": "green", "not_applicable": "green",
              "reported": "green", "max_rounds": "yellow", "stopped": "yellow"}  # fmt: skip
    colour = colour.get(result["status"], "red")
    recorded = result.get("replies") in ("recorded", "mixed")
    calls = f"{result['llm_calls']} recorded repl{'y' if result['llm_calls'] == 1 else 'ies'}"
    written = _is_report(result)
    steps = plural(len(result["plan"]), "sub-question") if written else None
    err.print(
        Text.assemble(
            (shown(result["status"]), colour),
            f" · run {shown(result['run_id'])} · {steps or plural(result['rounds'], 'round')} ·"
            f" {calls if recorded else plural(result['llm_calls'], 'LLM call')} ·"
            f" {result['input_tokens']}+{result['output_tokens']} tokens ·"
            f" cost {money(result['cost_usd'])}",
        )
    )
    if recorded:  # never to pass for a model's answer
        which = "recorded" if result["replies"] == "recorded" else "some recorded"
        err.print(
            Text.assemble(
                (f"replies: {which}", "yellow"),
                f" from {shown(result.get('recorded_from') or '?')}; no model was asked"
                + (" for them" if which != "recorded" else ""),
            )
        )
    if result.get("error"):
        err.print(Text.assemble(("error:", "red"), f" {shown(result['error'])}"))
    err.print(Text(f"artifacts: {shown(result['artifacts_uri'])}"))  # Text: never markup
    if result.get("answer") is None:
        return
    out = console()
    if written and out.is_terminal:  # a report, read as rendered markdown
        from rich.markdown import Markdown

        out.print(Markdown(shown(result["answer"]), hyperlinks=False))
    else:  # piped: the text as stored (a report's markdown, for a file or another tool)
        out.print(Text(shown(result["answer"])))


def _is_report(result: dict[str, Any]) -> bool:
    """Whether `result` is a report's (`dsstar report`): its outputs are the report."""
    return any(o.get("name") == "report.md" for o in result.get("outputs") or [])


# What the live line says once a person answered after a round.
_GUIDED = {"continue": "continued by a person", "guide": "guided by a person",
           "accept": "accepted by a person", "stop": "stopped by a person"}  # fmt: skip


class LiveProgress:
    """The progress of a run on stderr: stage or round, agent, elapsed, tokens, cost.

    On a terminal, one live line redrawn in place (unless `enabled` is False, as with
    --json). Elsewhere (a log file, CI, a pipe) one plain line per stage and per round, as it
    happens, with or without --json, and the line again whenever `interval` seconds passed
    without one: a log shows how far a run got, not only its end, and a slow model call is
    never taken for a hang. While a model call is in flight the line names it and says for
    how long (the oldest, when several are)."""

    def __init__(self, enabled: bool, interval: float = 60.0) -> None:
        self.live = enabled and err.is_terminal
        self.lines = not err.is_terminal
        self.started = time.monotonic()
        self.state: dict[str, Any] = {"where": "starting", "agent": "", "tokens": 0}
        self.costs: list[float | None] = []
        self.interval = interval
        self._flight: dict[str, float] = {}  # calls in flight: label -> when it was asked
        self._lock = threading.Lock()  # events come from the tasks' threads
        self._said = self.started  # when the last line was written (where lines are)
        self._done = threading.Event()

    def __enter__(self) -> LiveProgress:
        from dsstar import progress

        if self.live:
            self.status = err.status(self)  # rendered through __rich__ at every refresh
            self.status.__enter__()
        if self.live or self.lines:
            self.stop = progress.listen(self._on_event)
        if self.lines:
            self._ticker = threading.Thread(target=self._tick, daemon=True, name="dsstar-progress")
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live or self.lines:
            self.stop()
        if self.lines:
            self._done.set()
            self._ticker.join(timeout=5)
        if self.live:
            self.status.__exit__(None, None, None)

    def pause(self) -> None:
        """Hide the line while something else uses the terminal (the guidance prompt)."""
        if self.live:
            self.status.stop()

    def resume(self) -> None:
        if self.live:
            self.status.start()

    def _tick(self) -> None:
        """Where lines are written: the line again once `interval` passed without one."""
        while not self._done.wait(min(self.interval, 1.0)):
            if time.monotonic() - self._said >= self.interval:
                self._say()

    def _say(self) -> None:
        self._said = time.monotonic()
        err.print(Text(self.line()), crop=False)

    def _on_event(self, event: Event) -> None:
        where = None  # set: a line of its own where the line is not redrawn
        notice = None  # a line of its own, redrawn line or not; the state stays as it was
        match event:
            case AnalysisStarted(total=total, cached=cached):
                cached_part = f", {cached} cached" if cached else ""
                where = self.state["where"] = f"analyzing {total} files{cached_part}"
            case FileAnalyzed(done=done, total=total):
                self.state["where"] = f"analyzed {done}/{total} files"
                if done == total:
                    where = self.state["where"]
            case Unprofiled(count=count):
                notice = f"{count} files have no offline profile: each is analyzed alone"
            case LLMCall(label=label):
                self.state["agent"] = label
                with self._lock:
                    self._flight[label] = time.monotonic()
            case LLMReplied(label=label):
                self.state["tokens"] += event.input_tokens + event.output_tokens
                self.costs.append(event.cost_usd)
                with self._lock:
                    self._flight.pop(label, None)
            case LLMFailed(label=label):
                with self._lock:
                    self._flight.pop(label, None)
            case SlotWait(limit=limit, detail=detail, waited=waited):
                where = self.state["where"] = (
                    f"waiting {int(waited)} s for a {limit} slot ({detail})"
                )
            case HumanAsked(round=number):
                self.state["where"] = f"round {number:02d} waiting for a person"
            case HumanAnswered(round=number, choice=choice):
                said = _GUIDED.get(choice, choice)
                where = self.state["where"] = f"round {number:02d} {said}"
            case RoundDone(number=number, sufficient=sufficient):
                where = self.state["where"] = f"round {number:02d} {verdict_label(sufficient)}"
        if where and self.lines:
            self._say()
        if notice:  # printed above a redrawn line, which goes on below it
            err.print(Text(shown(notice)), crop=False)

    def line(self) -> str:
        """The state as one line of plain text."""
        now = time.monotonic()
        s = self.state
        return shown(
            f"{s['where']} · {self._in_flight(now) or s['agent'] or '-'} ·"
            f" {_clock(now - self.started)} · {s['tokens']:,} tokens ·"
            f" cost {money(total_cost(self.costs))}"
        ).replace("\n", " ")

    def _in_flight(self, now: float) -> str:
        """The call in flight longest, and for how long; empty when none is."""
        with self._lock:
            flight = dict(self._flight)
        if not flight:
            return ""
        label, asked = min(flight.items(), key=lambda item: item[1])
        more = f" (+{len(flight) - 1} more)" if len(flight) > 1 else ""
        return f"{label} in flight {_clock(now - asked)}{more}"

    def __rich__(self) -> Text:
        return Text(self.line())  # a Text: a label holds a file name, never read as markup


def _clock(seconds: float) -> str:
    """Seconds as mm:ss (hours as more minutes)."""
    whole = int(seconds)
    return f"{whole // 60:02d}:{whole % 60:02d}"
