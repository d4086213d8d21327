"""Router: after a No, decides whether to add a step or to go back to a wrong one.

A reply is read as the paper means it, wherever the model put its decision:
- thinking blocks are left out;
- a decision given as JSON, in \\boxed{}, or after a label ("Decision: Step 2 is wrong!");
- else the lines that are only a decision ("**Add Step**", "Step 2 is wrong!");
- else an explicit "Step N is wrong" (or "incorrect"), neither negated ("nothing suggests step
  2 is wrong") nor hypothetical ("if step 1 were wrong"), goes back to step N;
- otherwise any "add step" means Add Step;
- a bare "Step N" or "N" goes back to step N only when it is the whole reply;
- anything else is unclear: the caller asks once more, then adds a step.
Step numbers may be spelled out ("step two", "the second step"). A step number outside the
plan counts as Add Step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dsstar.algorithm.agents._base import GUIDANCE_CHARS, PROMPT_OUTPUT_CHARS, Agent, FileInfo, clip
from dsstar.algorithm.agents._base import render as _render
from dsstar.algorithm.agents._reading import split_thinking, strip_decoration, structured_value
from dsstar.model.llm import Message

__all__ = ["AGENT", "Route", "parse", "render", "render_again"]

# "Step 2 is wrong", "step #2 was incorrect", "Step 2: wrong", and the negations to skip:
# "Step 2 is not wrong", "Step 2 isn't incorrect", "Step 2 is never wrong".
_WRONG = re.compile(
    r"\bstep\s*#?\s*(?P<n>\d+)\b[\s:,*_-]*"
    r"(?:(?P<hyp>were|would\s+be|could\s+be|might\s+be|may\s+be|if)\s+"
    r"|(?:is|was|seems|looks)(?P<nt>n['\u2019]?t)?\s+)?"
    r"(?P<neg>(?:not|never|no\s+longer)\s+)?"
    r"(?:(?!not\b|never\b)\w+\s+)?"  # one adverb: "is also wrong", "is not really wrong"
    r"(?:wrong|incorrect)\b",
    re.I,
)
# A negation or a condition just before a directive: "I don't think step 2 is wrong", "do not
# add a step", "nothing suggests step 2 is wrong", "if step 1 were wrong", "whether step 2 is".
_NEGATED_BEFORE = re.compile(
    r"(?:\bnot|n['\u2019]t|\bnever|\bno|\bnothing|\bnone|\bif|\bwhether|\bunless)"
    r"\s+(?:\w+\s+){0,2}$",
    re.I,
)
_ADD = re.compile(r"\badd(?:ing)?\s+(?:a\s+|an\s+|another\s+|new\s+|one\s+more\s+)*step\b", re.I)
_BARE = re.compile(r"(?:step\s*#?\s*)?(\d+)", re.I)
_SCAN_CHARS = 20_000
_DECORATION = "\"'`*_#>.,:;!?()[]{}- \t\r\n"
_ROUTE_KEYS = ("decision", "route", "routing", "answer", "action", "next", "wrong_step", "step")
# "Decision: Step 2 is wrong!", "**Final answer:** Add Step".
_LABEL = re.compile(
    r"\b(?:final\s+decision|final\s+answer|decision|answer|route|routing|verdict|action)"
    r"[*_`]*\s*[:=\-\u2014]\s*(?P<said>[^\n]+)",
    re.I,
)
# A line that is a decision and nothing else.
_ONLY = re.compile(
    r"(?:add(?:ing)?\s+(?:a\s+|an\s+|another\s+|new\s+|one\s+more\s+)*step"
    r"|step\s*#?\s*\d+(?:\s+is\s+(?:wrong|incorrect))?)",
    re.I,
)
_WORDS = {
    w: i
    for i, ws in enumerate(
        [(), ("one", "first"), ("two", "second"), ("three", "third"), ("four", "fourth"),
         ("five", "fifth"), ("six", "sixth"), ("seven", "seventh"), ("eight", "eighth"),
         ("nine", "ninth"), ("ten", "tenth")]
    )
    for w in ws
}  # fmt: skip
_NUMBER_WORD = "|".join(sorted(_WORDS, key=len, reverse=True))
_STEP_WORD = re.compile(rf"\bstep\s+({_NUMBER_WORD})\b", re.I)
_ORDINAL_STEP = re.compile(rf"\bthe\s+({_NUMBER_WORD})\s+step\b", re.I)
_WRONG_IS = re.compile(
    rf"\b(?:wrong|incorrect|faulty)\s+step\s+is\s+(?:step\s+)?(?:the\s+)?(\d+|{_NUMBER_WORD})\b",
    re.I,
)


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
    visible = _spell_numbers(split_thinking(reply)[0])
    for said in _stated(visible):
        route = _read(said, reply, plan_length)
        if route.clear:
            return route
    return _read(visible, reply, plan_length)


def _stated(visible: str) -> list[str]:
    """Where a model states its decision on its own: a JSON field or \\boxed{}, the last
    label, the lines that are only a decision. Most telling first."""
    found: list[str] = []
    value = structured_value(visible, _ROUTE_KEYS)
    if isinstance(value, int) and not isinstance(value, bool):
        found.append(f"Step {value} is wrong")
    elif isinstance(value, str):
        found.append(value.replace("_", " "))
    labels = _LABEL.findall(visible)
    if labels:
        found.append(labels[-1])
    # Lines that are only a decision are read together (an explicit wrong step wins there too).
    only = [line for line in visible.splitlines() if _ONLY.fullmatch(strip_decoration(line))]
    if only:
        found.append("\n".join(only))
    return found


def _read(said: str, reply: str, plan_length: int) -> Route:
    # A decision is short; a long reply (reasoning first) is read at its head and its tail.
    scanned = clip(said, _SCAN_CHARS)
    wrong = [
        int(m.group("n"))
        for m in _WRONG.finditer(scanned)
        if not (m.group("nt") or m.group("neg") or m.group("hyp"))
        and not _negated(scanned, m.start())
    ]
    wrong += [int(m.group(1)) for m in _WRONG_IS.finditer(scanned)]
    if wrong:  # with several, the first wrong step of the plan is the one to go back to
        return _backtrack(min(wrong), reply, plan_length)
    if any(not _negated(scanned, m.start()) for m in _ADD.finditer(scanned)):
        return Route(None, reply)
    bare = _BARE.fullmatch(said.strip(_DECORATION))
    if bare:
        return _backtrack(int(bare.group(1)), reply, plan_length)
    return Route(None, reply, clear=False)


def _spell_numbers(text: str) -> str:
    """ "step two" and "the second step" as "step 2", so that one pattern reads them all."""
    text = _STEP_WORD.sub(lambda m: f"step {_WORDS[m.group(1).lower()]}", text)
    text = _ORDINAL_STEP.sub(lambda m: f"step {_WORDS[m.group(1).lower()]}", text)
    return _WRONG_IS.sub(
        lambda m: m.group().replace(m.group(1), str(_WORDS.get(m.group(1).lower(), m.group(1)))),
        text,
    )


def _negated(reply: str, start: int) -> bool:
    return bool(_NEGATED_BEFORE.search(reply[max(0, start - 40) : start]))


def _backtrack(step: int, reply: str, plan_length: int) -> Route:
    return Route(step if 1 <= step <= plan_length else None, reply)


AGENT = Agent("router", ("router", "router_again"), parse)
