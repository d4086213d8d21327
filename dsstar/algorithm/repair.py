"""The repair loop shared by file analysis and solution scripts: execute, and while the
script fails, have the debugger fix it from the (summarized) error, a bounded number of
times."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from dsstar.algorithm import agents
from dsstar.algorithm.answer import states_answer
from dsstar.algorithm.runtime import NO_CODE, Budget, Calls, Script
from dsstar.execution.sandbox import ExecResult
from dsstar.model.llm import Message

__all__ = [
    "FINAL",
    "Fix",
    "delivers",
    "holds_files",
    "keeps_files",
    "run_with_repair",
    "summarize",
]

FINAL = "final"  # the label of the final script (step 5), whose files are the deliverables

# Builds the debugger's request from the failing script and its (summarized) error.
Fix = Callable[[str, str], list[Message]]


def run_with_repair(calls: Calls, label: str, code: str | None, fix: Fix, budget: Budget) -> Script:
    """Execute `code`; while it fails, ask the debugger (with the messages `fix(code, error)`
    builds) for a repaired script, at most `budget.max_debug_attempts` times.

    A debugger reply without code counts as a failed attempt that ran nothing: the script
    and the real error it gave stay, so the next attempt (and the round, when attempts run
    out) sees that error, never a "no code" placeholder in its place."""
    result = _execute(calls, f"execute {label}", code)
    attempts = [_attempt(code, result)]
    error, summarized = "", None  # the same error is summarized once
    for n in range(1, budget.max_debug_attempts + 1):
        if result.ok:
            break
        if summarized is not result:
            error, summarized = summarize(calls, f"{label} #{n}", result.output, budget), result
        reply = calls.ask("debugger", f"debugger {label} #{n}", fix(code or "", error))
        fixed = agents.debugger.parse(reply)
        if fixed is None:
            attempts.append({"code": None, "ok": False, "output": NO_CODE.output})
            continue
        code = fixed
        result = _execute(calls, f"execute {label} #{n}", fixed)
        attempts.append(_attempt(fixed, result))
    return Script(code=code or "", result=result, attempts=attempts)


def delivers(label: str) -> bool:
    """Whether the execution `label` (as `run_with_repair` names them) is of the final script
    or a repair of it: the script whose files are the run's deliverables. A runtime that
    stores files keeps all of these, and of others what `keeps_files` says."""
    return re.fullmatch(rf"execute {FINAL}(?: #\d+)?", label) is not None


def keeps_files(label: str, stdout: str) -> bool:
    """Whether a runtime that stores files keeps every file the execution `label` wrote, not
    only its figures: those that may be the run's deliverables. The final script's
    (`delivers`); an earlier run's solution run again (`loop.reuse`: when accepted, it is the
    final script); and a round's script whose output states an answer already, which the
    finalyzer may return unchanged, its run then the final run (`loop.finalize`)."""
    round_run = re.fullmatch(r"execute r\d+(?: #\d+)?", label) is not None
    return delivers(label) or label == "execute reuse" or (round_run and states_answer(stdout))


def holds_files(result: ExecResult) -> bool:
    """Whether every file `result` lists is still at hand: its bytes, or the key they were
    stored under (a runtime that stores files keeps a round's tables only as `keeps_files`
    says)."""
    return all("data" in item or item.get("key") for item in result.outputs)


def summarize(calls: Calls, label: str, error: str, budget: Budget) -> str:
    """`error` as the debugger sees it: a long one summarized by the summarizer agent (or
    clipped to head and tail when the summary comes back empty)."""
    if len(error) <= budget.summarize_over_chars:
        return error
    request = agents.summarizer.render(error=error)
    summary = agents.summarizer.parse(calls.ask("summarizer", f"summarizer {label}", request))
    return summary or agents.clip(error, budget.summarize_over_chars)


def _execute(calls: Calls, label: str, code: str | None) -> ExecResult:
    return NO_CODE if code is None else calls.execute(label, code)


def _attempt(code: str | None, result: ExecResult) -> dict[str, Any]:
    return {"code": code, "ok": result.ok, "output": result.output}
