"""dsstar's side of a flow run's Logs tab: stages, rounds, verdicts, routes and the answer.

Without these lines the Prefect UI shows only Prefect's half of a run ("Finished in state
Completed()"). Each line goes through Prefect's run logger, so it reaches the API (the Logs
tab) whatever the console shows; the CLI keeps its console quiet unless --verbose. Lines start
with a fixed word (`stage`, `round`, `route`, `answer`, ...) so that they can be filtered.

A line carries a question, a step, an answer or an error line, written by a form, a model or a
script: it is plain text in the Logs tab, but that tab colours ANSI codes and makes every
`https://` address a link, so each line goes through `log_text` (neither happens).
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from prefect import get_run_logger
from prefect.exceptions import MissingContextError

from dsstar.algorithm.verdict import verdict_label
from dsstar.text import log_text

__all__ = ["analyzed", "answered", "failed", "reused", "retrieved", "route", "round_done", "say"]

_MOST = 300  # a line holds a step or an answer up to this many characters


def say(
    message: str, *args: Any, level: int = logging.INFO, exc: BaseException | None = None
) -> None:
    """Log to the current flow or task run (the UI), else to dsstar's own logger; with the
    traceback of `exc`, if given."""
    try:
        logger: Any = get_run_logger()
    except MissingContextError:  # called outside a run (a unit test of a helper)
        logger = logging.getLogger("dsstar.flows")
    # A file name that is not UTF-8 (surrogate-escaped) would fail Prefect's request for the
    # line's whole batch of logs: the line, and the traceback (which repeats the error's
    # message), are made valid text first (`log_text` does).
    line = message % args if args else message
    if exc is not None:
        line += "\n" + "".join(traceback.format_exception(exc)).rstrip()
    logger.log(level, log_text(line))


def _short(text: Any) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MOST else text[: _MOST - 3] + "..."


def analyzed(files: list[dict[str, Any]], run_id: str) -> None:
    reused = sum(f["run_id"] != run_id for f in files)
    failed = sum(1 for f in files if f.get("error"))
    say(
        "stage analyze: %d files described (%d reused from earlier runs%s)",
        len(files), reused, f", {failed} with errors" if failed else "",
    )  # fmt: skip


def retrieved(paths: list[str], total: int) -> None:
    say("stage retrieve: %d of %d files shown to the agents", len(paths), total)


def round_done(number: int, plan: list[str], sufficient: bool | None, ok: bool | None) -> None:
    step = _short(plan[-1]) if plan else "(no step)"
    ran = {True: "ran ok", False: "script failed"}.get(ok, "not run")
    say("round %02d: verdict %s · %s · step %d: %s", number, verdict_label(sufficient), ran,
        len(plan), step)  # fmt: skip


def route(number: int, label: str, plan_length: int) -> None:
    dropped = ""
    if label.startswith("Step "):
        wrong = int(label.split()[1])
        dropped = (
            f" (steps {wrong}..{plan_length} dropped)"
            if wrong <= plan_length
            else " (outside the plan: read as Add Step)"  # as the loop reads it
        )
    say("route into round %02d: %s%s", number, label, dropped)


def reused(previous_run: str) -> None:
    say("stage reuse: the verified solution of run %s still answers on today's data",
        previous_run)  # fmt: skip


def answered(status: str, rounds: int, answer: str | None, error: str | None = None) -> None:
    if answer is None:
        say("answer: none (%s after %d rounds)%s", status, rounds,
            f": {_short(error)}" if error else "", level=logging.WARNING)  # fmt: skip
        return
    say("answer (%s, %d rounds): %s", status, rounds, _short(answer))


def failed(error: str, exc: BaseException | None = None) -> None:
    say("failed: %s", _short(error), level=logging.ERROR, exc=exc)
