"""Asking a person how the run goes on, after a round the verifier found not sufficient.

Inside a flow run the flow pauses (Prefect's `pause_flow_run`) and waits for a typed form
in the Prefect UI, which shows the plan, the last output and the verdict; `resume_flow_run`
with `run_input` answers it through the API. `dsstar run` on a terminal registers its own
asker instead (`answer_in_terminal`), so a local run asks on the terminal. Nobody answering
within the timeout means: continue, unguided.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prefect import get_client, get_run_logger
from prefect.context import FlowRunContext
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run, resume_flow_run
from prefect.input import RunInput
from prefect.states import Running
from pydantic import Field

from dsstar.algorithm.agents import clip
from dsstar.algorithm.guidance import Checkpoint, Choice, Guidance
from dsstar.keys import round_key
from dsstar.text import clean, fenced, md_text
from tasks.cache_keys import artifact_key

__all__ = [
    "Asker",
    "HumanAnswer",
    "answer_in_terminal",
    "ask_human",
    "describe",
    "publish_guidance",
]

Asker = Callable[[Checkpoint, float], Guidance]

# The server's own pause deadline is later than ours: the flow resumes itself at the
# timeout (an answer of "continue"), so the server never fails a run nobody answered.
_GRACE_S = 120
_POLL_S = 2  # how often the paused flow looks for an answer
# What the form's description shows at most (it is markdown over model and script text).
_OUTPUT_CHARS, _STEP_CHARS, _VERDICT_CHARS, _STEPS = 3000, 600, 600, 20

_terminal: Asker | None = None


class HumanAnswer(RunInput):
    """How the run goes on after a round the verifier found not sufficient."""

    choice: Choice = Field(
        Choice.CONTINUE,
        title="Choice",
        description="continue: go on as planned · guide: go on, with the guidance below ·"
        " accept: finalize the current plan now · stop: end the run without an answer",
    )
    guidance: str = Field(
        "",
        title="Guidance",
        description="With 'guide': what the next step should do, in plain words; the planner"
        " and the router read it.",
    )

    def to_guidance(self, **meta: str) -> Guidance:
        text = clean(self.guidance).strip()
        choice = Choice.CONTINUE if self.choice is Choice.GUIDE and not text else self.choice
        return Guidance(choice=choice, text=text, meta=meta)


@contextmanager
def answer_in_terminal(asker: Asker) -> Iterator[None]:
    """While inside, `ask_human` asks with `asker` (the CLI's terminal prompt) instead of
    pausing the flow run: only a local run in this process can be answered that way."""
    global _terminal
    previous, _terminal = _terminal, asker
    try:
        yield
    finally:
        _terminal = previous


def ask_human(checkpoint: Checkpoint, timeout_s: float) -> Guidance:
    """A person's answer at `checkpoint`: on the terminal when the CLI registered one, else
    from the Prefect UI form of the paused flow run. No answer in `timeout_s` seconds (or no
    flow run to pause) gives Guidance(CONTINUE, timed_out=True)."""
    if _terminal is not None:
        return _terminal(checkpoint, timeout_s)
    context = FlowRunContext.get()
    if context is None or context.flow_run is None:
        return Guidance(timed_out=True, meta={"via": "nobody (no flow run to pause)"})
    # A retried flow run asks again: Prefect refuses a pause key the flow run has used.
    key = f"guidance-{round_key(checkpoint.round)}-try{context.flow_run.run_count}"
    return _pause(context.flow_run.id, checkpoint, timeout_s, key)


def _pause(flow_run_id: Any, checkpoint: Checkpoint, timeout_s: float, key: str) -> Guidance:
    form = HumanAnswer.with_initial_data(description=describe(checkpoint, timeout_s))
    watchdog = _SelfResume(flow_run_id, timeout_s)
    _logger().info(
        "waiting up to %.0f s for a person's answer: the Resume form of %s",
        timeout_s,
        _url(flow_run_id),
    )
    watchdog.start()
    try:
        answer = pause_flow_run(
            wait_for_input=form,
            timeout=int(timeout_s) + _GRACE_S,
            poll_interval=_POLL_S,
            key=key,
        )
    except FlowPauseTimeout:  # the self-resume failed too: take the run back ourselves
        _back_to_running(flow_run_id)
        return Guidance(timed_out=True, meta={"via": "prefect"})
    finally:
        watchdog.cancel()
    if watchdog.fired:
        return Guidance(timed_out=True, meta={"via": "prefect"})
    return answer.to_guidance(via="prefect")


class _SelfResume:
    """At the timeout, resume the paused run with the answer "continue". Exactly one resume
    can succeed, so `fired` tells a timeout from a person who answered just in time."""

    def __init__(self, flow_run_id: Any, timeout_s: float) -> None:
        self.flow_run_id = flow_run_id
        self.fired = False
        context = contextvars.copy_context()  # the Prefect settings (API URL) of this run
        self.timer = threading.Timer(timeout_s, context.run, args=(self._resume,))
        self.timer.daemon = True

    def start(self) -> None:
        self.timer.start()

    def cancel(self) -> None:
        """Stop the timer, or wait for its resume to finish, so `fired` is final."""
        self.timer.cancel()
        self.timer.join(30)

    def _resume(self) -> None:
        try:
            resume_flow_run(self.flow_run_id, run_input={"choice": "continue", "guidance": ""})
            self.fired = True
        except Exception as exc:  # answered meanwhile (not paused any more), or the API failed
            _logger().info("no self-resume after the guidance timeout: %s", exc)


def _url(flow_run_id: Any) -> str:
    from prefect.settings import PREFECT_UI_URL

    base = PREFECT_UI_URL.value()
    return f"{base}/runs/flow-run/{flow_run_id}" if base else f"flow run {flow_run_id}"


def _back_to_running(flow_run_id: Any) -> None:
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(flow_run_id).state
        if state and (state.is_cancelling() or state.is_cancelled()):
            raise FlowPauseTimeout("the run was cancelled while it waited for a person")
        client.set_flow_run_state(flow_run_id, Running(), force=True)


def publish_guidance(run_id: str, number: int, guidance: Guidance) -> None:
    """A person's answer after round `number` as a markdown artifact in the Prefect UI."""
    from tasks.cards import publish_markdown

    said = "(no answer in time)" if guidance.timed_out else str(guidance.choice)
    text = f"\n\n{_fenced(guidance.text)}" if guidance.text else ""
    heading = f"### Human guidance after round {round_key(number)}"
    publish_markdown(
        artifact_key(f"{run_id}-guidance-{round_key(number)}"),
        f"{heading}\n\n**Choice:** {said}{text}\n",
        f"DS-STAR {run_id}: a person's answer after round {round_key(number)}",
    )


def describe(checkpoint: Checkpoint, timeout_s: float) -> str:
    """The form's description (markdown): the round's plan, verdict and output, bounded, with
    every piece of model or script text made inert (escaped, or inside a code fence)."""
    steps = checkpoint.plan[-_STEPS:]
    first = len(checkpoint.plan) - len(steps) + 1
    plan = (
        "\n".join(
            f"{n}. {md_text(clip(step, _STEP_CHARS), line=True)}"
            for n, step in enumerate(steps, first)
        )
        or "(empty)"
    )
    minutes = max(1, round(timeout_s / 60))
    return (
        f"### Round {round_key(checkpoint.round)} of run {md_text(checkpoint.run_id)}"
        " is not sufficient yet\n\n"
        "Choose how the run goes on: **continue** as planned; **guide** it with the text in"
        " *Guidance* (the next planner and router prompts get it); **accept** the current"
        " plan and finalize its answer now; or **stop** the run without an answer (everything"
        f" so far stays stored). Without an answer within {minutes} min the run continues"
        " by itself.\n\n"
        f"**Plan**\n\n{plan}\n\n"
        f"**Verdict**\n\n{_fenced(clip(checkpoint.verdict, _VERDICT_CHARS))}\n\n"
        f"**Last output**\n\n{_fenced(clip(checkpoint.output, _OUTPUT_CHARS))}\n"
    )


def _fenced(text: str) -> str:
    """`text` as a plain-text code block (`fenced`): nothing inside can close it."""
    return fenced(clean(text).rstrip(), "text")


def _logger() -> Any:
    import logging

    try:
        return get_run_logger()
    except Exception:  # outside a run context (the watchdog's thread may have none)
        return logging.getLogger("dsstar")
