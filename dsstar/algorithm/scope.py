"""What a file's analysis sees: its own file under `data/`, with the files its format says a
reader opens with it (`Format.needs`, a shapefile's parts), and nothing else of the lake.

A description is kept in the catalog by the file's content and path and reused by any run
whose lake holds the same file, so it must be made from that file alone: an analyzer script
that printed every file under `data/` would otherwise carry one lake's rows into another's
prompts. The analyzer's script, its debugger's and like files' scripts all run through
`Scoped`; the solution rounds see the whole lake.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsstar.algorithm.runtime import Calls
from dsstar.execution.sandbox import ExecResult
from dsstar.model.llm import Message

__all__ = ["Scoped", "own_files"]


def own_files(file: dict[str, Any]) -> list[str]:
    """The paths a file's analysis sees under `data/`: the file, then what it needs."""
    return [file["path"], *(path for path, _sha in file.get("needs") or ())]


@dataclass
class Scoped:
    """`calls` whose scripts see only `files` under `data/`."""

    calls: Calls
    files: list[str]

    def ask(self, agent: str, label: str, messages: list[Message]) -> str:
        return self.calls.ask(agent, label, messages)

    def execute(self, label: str, code: str, files: Sequence[str] | None = None) -> ExecResult:
        narrower = self.files if files is None else [f for f in files if f in self.files]
        return self.calls.execute(label, code, files=narrower)

    def image(self, agent: str, output: dict[str, Any]) -> bytes | None:
        return self.calls.image(agent, output)
