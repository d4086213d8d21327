"""Router: after a No, decides whether to add a step or to go back to a wrong one.

A reply is read as the paper means it:
- an explicit "Step N is wrong" (or "incorrect"), not negated, goes back to step N;
- otherwise any "add step" means Add Step;
- a bare "Step N" or "N" goes back to step N only when it is the whole reply;
- anything else is unclear: the caller asks once more, then adds a step.
A step number outside the plan counts as Add Step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..llm import Message
from ._base import GUIDANCE_CHARS, PROMPT_OUTPUT_CHARS, FileInfo, clip
from ._base import render as _render

__all__ = ["Route", "parse", "render", "render_again"]

# "Step 2 is wrong", "step #2 was incorrect", "Step 2: wrong", and the negations to skip:
# "Step 2 is not wrong", "Step 2 isn't incorrect", "Step 2 is never wrong".
_WRONG = re.compile(
    r"\bstep\s*#?\s*(?P<n>\d+)\b[\s:,*_-]*"
    r"(?:(?:is|was|seems|looks)(?P<nt>n['\u2019]?t)?\s+)?"
    r"(?P<neg>(?:not|never|no\s+longer)\s+)?"
    r"(?:(?!not\b|never\b)\w+\s+)?"  # one adverb: "is also wrong", "is not really wrong"
    r"(?:wrong|incorrect)\b",
    re.I,
)
# A negation just before a directive: "I don't think step 2 is wrong", "do not add a step".
_NEGATED_BEFORE = re.compile(r"(?:\bnot|n['\u2019]t|\bnever|\bno)\s+(?:\w+\s+){0,2}$", re.I)
_ADD = re.compile(r"\badd(?:ing)?\s+(?:a\s+|an\s+|another\s+|new\s+|one\s+more\s+)*step\b", re.I)
_BARE = re.compile(r"(?:step\s*#?\s*)?(\d+)", re.I)
_SCAN_CHARS = 20_000
_DECORATION = "\"'`*_#>.,:;!?()[]{}- \t\r\n"


@dataclass(frozen=True)
class Route:
    """`wrong_step` None means Add Step; N (1-based) means step N is wrong and is dropped.
    `clear` is False when the reply said neither (it then reads as Add Step)."""

    wrong_step: int | None
    reply: str
    clear: bool = True

    @property
    def label(self) -> str:
        return "Add Step" if self.wrong_step is None else f"Step {self.wrong_step}"


def render(
    *,
    question: str,
    plan: list[str],
    output: str,
    files: list[FileInfo],
    max_output_chars: int = PROMPT_OUTPUT_CHARS,
    guidance: str = "",
) -> list[Message]:
    """Ask: Add Step, or which step is wrong? (with the user's guidance, when given)"""
    return _render(
        "router",
        question=question,
        plan=plan,
        output=clip(output, max_output_chars),
        files=files,
        guidance=clip(guidance, GUIDANCE_CHARS),
    )


def render_again(messages: list[Message], reply: str, plan_length: int) -> list[Message]:
    """The same request with the unclear reply and a reminder of the two allowed answers."""
    reminder = _render("router_again", reply=clip(reply, 2000), plan_length=plan_length)
    return [*messages, {"role": "assistant", "content": clip(reply, 2000)}, *reminder]


def parse(text: str, plan_length: int) -> Route:
    """The decision in `text` (see the module docstring); never raises."""
    reply = (text or "").strip()
    # A decision is short; a long reply (reasoning first) is read at its head and its tail.
    scanned = clip(reply, _SCAN_CHARS)
    wrong = [
        int(m.group("n"))
        for m in _WRONG.finditer(scanned)
        if not (m.group("nt") or m.group("neg") or _negated(scanned, m.start()))
    ]
    if wrong:  # with several, the first wrong step of the plan is the one to go back to
        return _backtrack(min(wrong), reply, plan_length)
    if any(not _negated(scanned, m.start()) for m in _ADD.finditer(scanned)):
        return Route(None, reply)
    bare = _BARE.fullmatch(reply.strip(_DECORATION))
    if bare:
        return _backtrack(int(bare.group(1)), reply, plan_length)
    return Route(None, reply, clear=False)


def _negated(reply: str, start: int) -> bool:
    return bool(_NEGATED_BEFORE.search(reply[max(0, start - 40) : start]))


def _backtrack(step: int, reply: str, plan_length: int) -> Route:
    return Route(step if 1 <= step <= plan_length else None, reply)
