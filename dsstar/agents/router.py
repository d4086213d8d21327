"""Router: after a No, decides whether to add a step or to go back to a wrong one."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..llm import Message
from ._base import FileInfo, clip
from ._base import render as _render

__all__ = ["Route", "parse", "render"]

_WRONG = re.compile(r"\bstep\s*#?\s*(\d+)\s+is\s+(?:wrong|incorrect)", re.I)
_STEP = re.compile(r"\bstep\s*#?\s*(\d+)", re.I)
_ADD = re.compile(r"\badd\s+(?:a\s+|another\s+|new\s+)*step\b", re.I)


@dataclass(frozen=True)
class Route:
    """`wrong_step` None means Add Step; N (1-based) means step N is wrong and is dropped."""

    wrong_step: int | None
    reply: str

    @property
    def label(self) -> str:
        return "Add Step" if self.wrong_step is None else f"Step {self.wrong_step}"


def render(*, question: str, plan: list[str], output: str, files: list[FileInfo]) -> list[Message]:
    """Ask: Add Step, or which step is wrong?"""
    return _render("router", question=question, plan=plan, output=clip(output), files=files)


def parse(text: str, plan_length: int) -> Route:
    """ "Add Step", "Step N" or "Step N is wrong!"; a number outside the plan counts as Add Step."""
    reply = (text or "").strip()
    # An explicit "Step N is wrong" wins; otherwise whichever directive comes first.
    match = _WRONG.search(reply)
    if not match:
        add, step = _ADD.search(reply), _STEP.search(reply)
        if add and (not step or add.start() <= step.start()):
            return Route(None, reply)
        match = step
    if match and 1 <= int(match.group(1)) <= plan_length:
        return Route(int(match.group(1)), reply)
    return Route(None, reply)
