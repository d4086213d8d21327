"""The context the agents see, as the paper gives it and within a budget.

DS-STAR credits its rich file descriptions for much of its accuracy, and the documentation
files matter most: DABStep's manual.md (22 KB) holds the fee rules every hard task needs, such
as "a null field of a fee rule applies to all values". A summary of it loses exactly those
rules. So:

- `whole_documents`: a documentation file (Markdown, text, README, HTML prose) reaches the
  agents as its own text, whole up to a per-file budget (`max_document_chars`, sized for
  DABStep's manual), instead of the analyzer's summary;
- `fit`: the descriptions of one prompt share a total token budget (`context_tokens`), counted
  with litellm's tokenizer for the configured model. Every file keeps a floor; the rest of the
  room goes to files by relevance; a cut file says so, and the caller records what was left
  out;
- `check_question`: a question or guidelines too long for any prompt is refused before any
  call.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsstar.algorithm.agents import FileInfo
from dsstar.data.formats import NamesWhere
from dsstar.errors import UsageError

__all__ = ["DOCUMENT_FORMATS", "Fitted", "check_question", "fit", "whole_documents"]

log = logging.getLogger(__name__)

# The formats registered as documentation (`dsstar.data.formats`): Markdown, text, HTML.
DOCUMENT_FORMATS = NamesWhere(lambda fmt: fmt.document)
# What the line saying a description was cut costs, in tokens: taken from the cut file's share.
_NOTE_TOKENS = 25
_TAGS = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.I | re.DOTALL)


def whole_documents(
    files: list[dict[str, Any]], data_dir: Path | None, max_chars: int
) -> list[dict[str, Any]]:
    """`files` (analysis records) with each documentation file's description replaced by its
    own text (HTML as prose), whole up to `max_chars`. Files that cannot be read, and HTML
    pages that hold tables (data, not prose), keep their description."""
    if data_dir is None:
        return files
    shown = []
    for record in files:
        if record.get("format") in DOCUMENT_FORMATS:
            text = _read(Path(data_dir) / record["path"], record.get("format"))
            if text is not None:
                whole = _document(text, max_chars)
                record = {**record, "description": whole, "shown_chars": len(whole)}
        shown.append(record)
    return shown


def _read(path: Path, format: str | None) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:  # the analyzer's description still stands
        log.warning("cannot read %s for the agents: %s", path, exc)
        return None
    if format == "html" or path.suffix.lower() in (".html", ".htm"):
        if re.search(r"<table\b", text, re.I):  # a data table: the analyzer's schema serves better
            return None
        text = html.unescape(_TAGS.sub(" ", text))
        text = re.sub(r"[ \t]+", " ", re.sub(r"\n\s*\n+", "\n\n", text))
    return text.strip()


def _document(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return f"Documentation file, shown whole ({len(text):,} characters):\n\n{text}"
    return (
        f"Documentation file, its first {max_chars:,} of {len(text):,} characters:\n\n"
        f"{text[:max_chars]}\n... [{len(text) - max_chars:,} characters left out]"
    )


@dataclass(frozen=True)
class Fitted:
    """The files as shown, and for each file that was cut, what was left out."""

    files: list[FileInfo]
    left_out: list[dict[str, Any]]


def fit(files: list[FileInfo], budget_tokens: int, count: Callable[[str], int]) -> Fitted:
    """Cut the descriptions of `files` (most relevant first) to share `budget_tokens`.

    Each file keeps at least a floor (an equal share of half the budget, at most its own
    size); the other half goes, in order of relevance, to files whole where it can. A cut
    description ends with a line saying how much of it is shown."""
    needs = [count(f.description) for f in files]
    if sum(needs) <= budget_tokens or not files:
        return Fitted(list(files), [])
    floor = max(1, budget_tokens // (2 * len(files)))
    given = [min(need, floor) for need in needs]
    room = max(0, budget_tokens - sum(given))
    for i, need in enumerate(needs):  # by relevance: the first files get the room first
        extra = min(need - given[i], room)
        given[i] += extra
        room -= extra
    shown, left_out = [], []
    for f, need, allowed in zip(files, needs, given, strict=True):
        if allowed >= need:
            shown.append(f)
            continue
        chars = max(0, len(f.description) * (allowed - _NOTE_TOKENS) // max(need, 1))
        note = (
            f"\n... [cut to fit the prompt: {allowed:,} of {need:,} tokens of this description"
            " are shown]"
        )
        shown.append(FileInfo(f.path, f.description[:chars] + note))
        left_out.append({"path": f.path, "tokens": need, "shown_tokens": allowed})
    return Fitted(shown, left_out)


def check_question(question: str, guidelines: str, max_chars: int) -> None:
    """Refuse a question or guidelines too long to go into every prompt (UsageError, before
    any call); warn when they are long."""
    for name, text in (("question", question), ("guidelines", guidelines)):
        if len(text) > max_chars:
            raise UsageError(
                f"the {name} is {len(text):,} characters, more than the {max_chars:,} a prompt"
                f" can carry (DSSTAR_MAX_QUESTION_CHARS): put the long part in a file of the"
                " data and refer to it."
            )
        if len(text) > max_chars // 4:
            log.warning("the %s is %s characters long; it goes into every prompt", name, len(text))
