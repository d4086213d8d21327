"""Text that is safe to store, send and show, whatever bytes it came from.

Replies, script outputs, file names and data can hold lone surrogates (from a JSON escape such
as ``\\ud800`` or from a file name decoded with ``surrogateescape``) and invalid UTF-8. Such a
string cannot be encoded, so it would fail later, far from its source: in a prompt hash, a
storage write, an HTTP request or a database row. Text is therefore made valid once, where it
enters (the model's reply, script output), and again where it leaves (storage, the ledger,
artifacts), replacing what cannot be represented with U+FFFD.

Terminal output is a separate concern: what a script or a model printed must not drive the
terminal, so escape and control sequences are shown as visible placeholders.

Markdown is a third. The Prefect UI renders as markdown (GitHub's dialect: raw HTML, and bare
`https://`, `www.` and e-mail addresses made links) a markdown artifact, every artifact's
description, and each text cell of a table artifact. Text a script, a model, a file or a stored
run wrote is put there through `md_text`, which escapes every character markdown gives a
meaning to, so no link, image, HTML, emphasis or heading can come from it; or as code
(`md_code`, `fenced`), which nothing inside can close. dsstar writes markdown syntax only
around such text, and link or image syntax only for targets it built itself.

The UI's Logs tab and a state message are plain text, but the Logs tab colours ANSI codes and
makes every `https://` address a link: text shown there goes through `log_text`.

A cost is shown the same way everywhere (the command line, the answer card, the nightly
table): dollars, or `unknown` when some model had no known price (`money`).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

__all__ = [
    "clean",
    "clean_bytes",
    "clean_deep",
    "digest",
    "fenced",
    "for_database",
    "for_terminal",
    "log_text",
    "md_code",
    "md_text",
    "money",
]

REPLACEMENT = "\ufffd"


def clean(text: str) -> str:
    """`text` as valid Unicode: surrogate pairs are joined, lone surrogates become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 with surrogatepass joins a split but valid pair and replaces a lone half.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def clean_bytes(data: bytes) -> str:
    """Bytes of unknown quality as text; invalid UTF-8 becomes U+FFFD."""
    return data.decode("utf-8", errors="replace")


def clean_deep(value: Any) -> Any:
    """`clean` applied to every string (keys included) in nested dicts, lists and tuples."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, bytes):
        return clean_bytes(value)
    if isinstance(value, dict):
        return {clean_deep(k): clean_deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_deep(v) for v in value]
    return value


def for_database(value: Any) -> Any:
    """`clean_deep`, and NUL characters (which PostgreSQL refuses in text) replaced."""
    if isinstance(value, str):
        return clean(value).replace("\x00", REPLACEMENT)
    if isinstance(value, dict):
        return {for_database(k): for_database(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [for_database(v) for v in value]
    return clean_deep(value)


# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte escapes, and the 8-bit CSI.
_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b.?"
    r"|\x9b[0-?]*[ -/]*[@-~]?"
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?",
    re.DOTALL,
)
# C0 and C1 controls except tab and newline; DEL; and the bidirectional overrides that can
# make shown text read differently from what it is.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def for_terminal(text: Any) -> str:
    """`text` safe to print: escape sequences and control characters (other than newline and
    tab) are replaced by a visible placeholder, and the text is valid Unicode."""
    shown = clean(str(text)).replace("\r\n", "\n")
    shown = _ESCAPE.sub("\N{REPLACEMENT CHARACTER}", shown)
    return _CONTROL.sub("\N{REPLACEMENT CHARACTER}", shown)


def digest(*parts: Any) -> str:
    """A short stable hash of JSON-safe values."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def fenced(text: str, info: str = "") -> str:
    """`text` as a markdown code block whose fence is longer than any run of backticks in it,
    so that nothing the text holds (a script's output printing three backticks) can close
    the block early and be read as markdown."""

    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


# Every ASCII punctuation character may be backslash-escaped in CommonMark, and an escaped one
# is always literal. Escaping them all also breaks what a renderer would turn into a link by
# itself (GFM's bare `https://...`, `www.` and `a@b.c`): the escaped `:`, `.` and `@` no longer
# read as one.
_MD_SPECIAL = re.compile(r"""([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])""")
# Indentation starts a code block, which would show the escapes; a paragraph drops it anyway.
_INDENT = re.compile(r"^[ \t]+", re.MULTILINE)
_BREAKS = re.compile(r"\s*\n\s*")


def md_text(value: Any, *, line: bool = False) -> str:
    """`value` (what a script printed, a model wrote, a file was named) as markdown that
    renders as exactly that text: every markdown character escaped, control characters shown
    as placeholders (`for_terminal`). Line breaks are kept, or with `line` made spaces (for a
    heading, a list item or a cell of a markdown table)."""
    shown = for_terminal(value)
    shown = _BREAKS.sub(" ", shown.strip()) if line else _INDENT.sub("", shown)
    return _MD_SPECIAL.sub(r"\\\1", shown)


def md_code(value: Any) -> str:
    """`value` (a name, a URI) as inline markdown code, on one line, that nothing it holds can
    close early: the backtick fence is longer than any run of backticks inside. Renders as
    exactly that text (line breaks as spaces); "" for empty text."""
    shown = _BREAKS.sub(" ", for_terminal(value))
    if not shown.strip():
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", shown)), default=0) + 1)
    pad = " " if shown[0] == "`" or shown[-1] == "`" else ""  # one space each side is dropped
    return f"{fence}{pad}{shown}{pad}{fence}"


# What the Logs tab makes a link (its pattern is `(https?|ftp)://...`), and what a chat tool
# receiving an alert would.
_ADDRESS = re.compile(r"\b(https?|ftp)://", re.IGNORECASE)


def log_text(value: Any) -> str:
    """`value` for a place the Prefect UI shows as plain text (a log line, a state message):
    no escape or control sequence (`for_terminal`: the Logs tab colours ANSI codes), and no
    address it would make a link: `https://x` reads `https[:]//x`."""
    return _ADDRESS.sub(r"\1[:]//", for_terminal(value))


def money(value: float | None) -> str:
    """A cost in USD as people read it: `$0.0123`, or `unknown` (None: a model without a
    known price took part, so no total can be given)."""
    return "unknown" if value is None else f"${value:.4f}"
