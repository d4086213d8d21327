"""How commands report: the result of a run, and the live progress line.

Everything shown comes from outside (answers, errors, file names, model replies), so it goes
through `shown` (or `markup`, where rich markup surrounds it): escape and control sequences
never reach the terminal raw. JSON output stays exact and valid (only made encodable).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ..text import clean_deep, for_terminal
from ..verdict import verdict_label
from ._app import (
    err,
    money,
)

__all__ = ["LiveProgress", "json_line", "markup", "report", "shown"]


def shown(value: Any) -> str:
    """`value` as text that is safe to print (no escape or control sequences)."""
    return for_terminal(value)


def markup(value: Any) -> str:
    """`value` safe to print and to embed in rich markup (brackets escaped)."""
    return escape(for_terminal(value))


def json_line(data: Any) -> str:
    """One line of JSON that can always be encoded (lone surrogates replaced)."""
    return json.dumps(clean_deep(data), ensure_ascii=False, default=str) + "\n"


def report(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json_line(result))
        return
    out = Console(soft_wrap=True)
    colour = {"verified": "green", "accepted": "green", "max_rounds": "yellow"}.get(
        result["status"], "red"
    )
    err.print(
        f"[{colour}]{markup(result['status'])}[/{colour}] · run {markup(result['run_id'])} ·"
        f" {result['rounds']} rounds · {result['llm_calls']} LLM calls ·"
        f" {result['input_tokens']}+{result['output_tokens']} tokens ·"
        f" cost {money(result['cost_usd'])}",
        highlight=False,
    )
    if result.get("error"):
        err.print(f"[red]error:[/red] {markup(result['error'])}", highlight=False)
    err.print(f"artifacts: {markup(result['artifacts_uri'])}", highlight=False)
    if result.get("answer") is not None:
        out.print(shown(result["answer"]), highlight=False, markup=False)


class LiveProgress:
    """A one-line live display on stderr: stage or round, agent, elapsed, tokens, cost."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.started = time.monotonic()
        self.state: dict[str, Any] = {"where": "starting", "agent": "", "tokens": 0, "cost": 0.0}

    def __enter__(self) -> LiveProgress:
        if self.enabled:
            from .. import progress

            self.status = err.status(self)  # rendered through __rich__ at every refresh
            self.status.__enter__()
            self.stop = progress.listen(self._on_event)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.stop()
            self.status.__exit__(None, None, None)

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "stage":
            cached = f", {event['cached']} cached" if event.get("cached") else ""
            self.state["where"] = f"analyzing {event['total']} files{cached}"
        elif kind == "analyzed":
            self.state["where"] = f"analyzed {event['done']}/{event['total']} files"
        elif kind == "llm":
            self.state["agent"] = event["label"]
        elif kind == "llm_done":
            self.state["tokens"] += event["input_tokens"] + event["output_tokens"]
            self.state["cost"] += event.get("cost_usd") or 0.0
        elif kind == "round":
            verdict = verdict_label(event["sufficient"])
            self.state["where"] = f"round {event['number']:02d} {verdict}"

    def __rich__(self) -> Text:
        elapsed = int(time.monotonic() - self.started)
        s = self.state
        # Text, not a str: a label holds a file name, which must not be read as markup.
        return Text(
            shown(
                f"{s['where']} · {s['agent'] or '-'} · {elapsed // 60:02d}:{elapsed % 60:02d}"
                f" · {s['tokens']:,} tokens · ${s['cost']:.4f}"
            ).replace("\n", " ")
        )
