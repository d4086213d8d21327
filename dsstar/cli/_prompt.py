"""The terminal prompt of `dsstar run --ask-human`: the same four choices as the Prefect UI
form, asked on stderr and read from stdin, with the same timeout."""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from typing import TextIO

from rich.console import Console

from dsstar.algorithm.agents import clip
from dsstar.algorithm.guidance import Checkpoint, Choice, Guidance
from dsstar.text import clean, for_terminal

__all__ = ["TerminalAsker"]

_OUTPUT_CHARS, _STEP_CHARS = 1500, 300
_KEYS = {"c": Choice.CONTINUE, "g": Choice.GUIDE, "a": Choice.ACCEPT, "s": Choice.STOP}


class TerminalAsker:
    """Asks on `console` and reads lines from `stdin` (a TTY). `pause` and `resume` hide the
    live progress line while the prompt is shown."""

    def __init__(
        self,
        console: Console,
        stdin: TextIO,
        pause: Callable[[], None] = lambda: None,
        resume: Callable[[], None] = lambda: None,
    ) -> None:
        self.console, self.fd = console, stdin.fileno()
        self.pause, self.resume = pause, resume
        self.pending = b""  # read past the last line (typed ahead, or a pipe)

    def __call__(self, checkpoint: Checkpoint, timeout_s: float) -> Guidance:
        self.pause()
        try:
            return self._ask(checkpoint, time.monotonic() + timeout_s, timeout_s)
        finally:
            self.resume()

    def _ask(self, checkpoint: Checkpoint, deadline: float, timeout_s: float) -> Guidance:
        self._show(checkpoint, timeout_s)
        while True:
            self._say("[c]ontinue, [g]uide, [a]ccept, [s]top? ")
            line = self._line(deadline)
            if line is None:
                self._say("\nno answer in time: continuing\n")
                return Guidance(timed_out=True, meta={"via": "terminal"})
            choice = _KEYS.get(line.strip().lower()[:1]) if line.strip() else Choice.CONTINUE
            if choice is None:
                self._say("please answer c, g, a or s\n")
                continue
            if choice is not Choice.GUIDE:
                return Guidance(choice=choice, meta={"via": "terminal"})
            self._say("guidance for the next step (one line): ")
            text = self._line(deadline)
            if text is None or not text.strip():  # no text: go on as planned
                return Guidance(timed_out=text is None, meta={"via": "terminal"})
            return Guidance(choice=Choice.GUIDE, text=clean(text).strip(), meta={"via": "terminal"})

    def _show(self, checkpoint: Checkpoint, timeout_s: float) -> None:
        plan = "\n".join(
            f"  {n}. {' '.join(clip(step, _STEP_CHARS).split())}"
            for n, step in enumerate(checkpoint.plan, 1)
        )
        output = clip(checkpoint.output.strip(), _OUTPUT_CHARS)
        verdict = " ".join(checkpoint.verdict.split())[:300]
        self._say(
            f"\nround {checkpoint.round:02d} is not sufficient yet (verifier: {verdict})\n"
            f"plan:\n{plan or '  (empty)'}\nlast output:\n{output}\n"
            f"continue as planned, guide the next step, accept this plan's answer, or stop"
            f" (no answer within {max(1, round(timeout_s / 60))} min: continue)\n"
        )

    def _say(self, text: str) -> None:
        # Model and script text: never markup, never raw escape sequences.
        self.console.print(for_terminal(text), end="", markup=False, highlight=False)
        self.console.file.flush()

    def _line(self, deadline: float) -> str | None:
        """One line from stdin, or None at the deadline or the end of input."""
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, 4096)
            if not chunk:  # end of input: what is left, if anything, is the last line
                line, self.pending = self.pending, b""
                return line.decode("utf-8", "replace") if line else None
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode("utf-8", "replace")
