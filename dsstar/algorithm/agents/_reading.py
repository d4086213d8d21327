"""Reading replies the way real models write them.

Models do not answer in the dialect a prompt asks for. GPT-4o puts a label before its
verdict ("Verdict: Yes"), Gemini 2.5 reasons first and concludes last, Claude bolds its
answer, reasoning models open with a thinking block, and code comes in ``` or ~~~ fences
tagged python, py3 or nothing. The helpers here find what an agent answered wherever
models put it:

- `split_thinking`: thinking blocks (<think>, <thinking>, <reasoning>) kept out of the reading;
- `yes_no`: a Yes/No verdict from JSON, \\boxed{}, a label, a line of its own, the first or the
  last line, or a sentence that calls the plan (in)sufficient;
- `extract_code`: the script of the reply's final code block;
- `strip_decoration`: markdown emphasis, quotes and punctuation around a short answer;
- `json_value`: the JSON list or object of a reply, fenced or in its prose;
- `fenced_blocks`: every fenced block of a reply, with its language.
"""

from __future__ import annotations

import ast
import json
import re

__all__ = [
    "extract_code",
    "fenced_blocks",
    "json_value",
    "split_thinking",
    "strip_decoration",
    "structured_value",
    "yes_no",
]

# <think>…</think> (DeepSeek R1, Qwen3, gateways that inline reasoning), <thinking> (Claude's
# prompted style), <reasoning>, <reflection>. An unclosed block at the start of a reply that
# was cut off holds only thinking.
_THINK = re.compile(
    r"<(think|thinking|reasoning|reflection|scratchpad)>(.*?)(?:</\1>|\Z)", re.I | re.DOTALL
)
_STRAY_CLOSE = re.compile(r"^.*?</(?:think|thinking|reasoning)>", re.I | re.DOTALL)

_DECORATION = "\"'`*_#>.,:;!?()[]{}- \t\r\n\u2014\u2013"


def split_thinking(text: str) -> tuple[str, str]:
    """(visible reply, thinking): the reply without its thinking blocks, and their content.

    Some servers drop the opening tag and send "reasoning…</think>answer": everything up to
    a closing tag without an opening one is thinking too."""
    text = text or ""
    thoughts: list[str] = []

    def keep(match: re.Match[str]) -> str:
        thoughts.append(match.group(2).strip())
        return ""

    visible = _THINK.sub(keep, text)
    stray = _STRAY_CLOSE.match(visible)
    if stray:
        thoughts.append(re.sub(r"</\w+>$", "", stray.group()).strip())
        visible = visible[stray.end() :]
    return visible.strip(), "\n\n".join(t for t in thoughts if t)


def strip_decoration(text: str) -> str:
    """`text` without the markdown, quotes and punctuation models wrap short answers in."""
    return (text or "").strip(_DECORATION)


# -- structured answers: JSON objects and \boxed{} -----------------------------------------------

_JSON_OBJECT = re.compile(r"\{[^{}]{0,2000}\}", re.DOTALL)
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text(?:bf)?\{)?([^{}]*?)\}?\s*\}")


def structured_value(text: str, keys: tuple[str, ...]) -> object | None:
    """The value of the last JSON object (fenced or not) holding one of `keys`, or the content
    of the last \\boxed{...}; None when the reply has neither."""
    found: object | None = None
    for match in _JSON_OBJECT.finditer(text):
        try:
            value = json.loads(match.group())
        except ValueError:
            continue
        if isinstance(value, dict):
            lowered = {str(k).lower(): v for k, v in value.items()}
            hit = next((lowered[k] for k in keys if k in lowered), None)
            if hit is not None:
                found = hit
    boxed = _BOXED.findall(text)
    if boxed:
        found = boxed[-1].strip()
    return found


# -- Yes / No ---------------------------------------------------------------------------------

_YES_NO = {"yes": True, "no": False, "true": True, "false": False}
_VERDICT_KEYS = ("sufficient", "is_sufficient", "verdict", "answer", "decision", "result")
# "Verdict: Yes", "**Final answer:** **No**", "Answer - yes", "The answer is yes".
_LABEL = re.compile(
    r"\b(?:final\s+verdict|final\s+answer|verdict|answer|decision|conclusion|judg(?:e)?ment"
    r"|sufficient)[*_`]*\s*(?:[:=\-\u2014\u2013]|\bis\b)\s*[*_`\"']*\s*(yes|no)\b",
    re.I,
)
# "Yes", "No.", "Yes, ...", "No - ...": a verdict word not followed by more words ("No errors
# occurred" is not a verdict).
_LEADING = re.compile(r"^(yes|no)\b(?![ \t]*[A-Za-z0-9])", re.I)
# A last line that concludes after a colon or dash: "Therefore: **No**", "So - yes".
_CONCLUDES = re.compile(r"[:\u2014\u2013-]\s*[*_`\"']*(yes|no)$", re.I)
# A last line that ends on an emphasized verdict after its sentence: "... answers it. **Yes**".
_EMPHASIZED_LAST = re.compile(r"[.!?:]\s*(\*\*?|__?)(yes|no)[.!]?\1[.!]?\s*$", re.I)
# "The plan is sufficient", "is not yet sufficient", "insufficient", "isn't sufficient".
_SUFFICIENT = re.compile(
    r"\b(?P<neg>in)?sufficient\b|\b(?P<not>not|n['\u2019]t|never)\s+(?:\w+\s+){0,2}sufficient\b",
    re.I,
)
_NEGATION_BEFORE = re.compile(r"(?:\bnot|n['\u2019]t|\bnever)\s+(?:\w+\s+){0,2}$", re.I)


def yes_no(text: str) -> bool | None:
    """The Yes/No verdict of a reply, wherever the model put it; None when it said neither.

    In order: a JSON field or \\boxed{}; a label ("Verdict: Yes"); the last line that is only
    Yes or No; a last line concluding with it after a colon or dash, or as an emphasized word
    after its sentence ("... answers the question. **Yes**"); a first, then last, line opening
    with "Yes," or "No."; the last sentence that calls the plan sufficient or not."""
    visible, _thinking = split_thinking(text)
    visible = re.sub(r"^\s*(```|~~~)\w*\s*$", "", visible, flags=re.M)  # a fenced verdict
    value = structured_value(visible, _VERDICT_KEYS)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and strip_decoration(value).lower() in _YES_NO:
        return _YES_NO[strip_decoration(value).lower()]
    labels = _LABEL.findall(visible)
    if labels:
        return labels[-1].lower() == "yes"
    lines = [strip_decoration(line) for line in visible.splitlines()]
    lines = [line for line in lines if line]
    alone = [line.lower() for line in lines if line.lower() in ("yes", "no")]
    if alone:
        return alone[-1] == "yes"
    concluded = _CONCLUDES.search(lines[-1]) if lines else None
    if concluded:
        return concluded.group(1).lower() == "yes"
    emphasized = _EMPHASIZED_LAST.search(visible.rstrip())
    if emphasized:
        return emphasized.group(2).lower() == "yes"
    for line in (lines[:1] + lines[-1:]) if lines else []:
        lead = _LEADING.match(line)
        if lead:
            return lead.group(1).lower() == "yes"
    said = [
        not (m.group("neg") or m.group("not") or _negated(visible, m.start()))
        for m in _SUFFICIENT.finditer(visible)
    ]
    return said[-1] if said else None


def _negated(text: str, start: int) -> bool:
    return bool(_NEGATION_BEFORE.search(text[max(0, start - 30) : start]))


# -- code ---------------------------------------------------------------------------------------

# A fence opens at the start of a line (possibly indented, as inside a list item) with three or
# more backticks or tildes and an optional info string; it closes with the same character, at
# least as many times, alone on a line. Backticks quoted inside prose never open a block.
_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$", re.M)
_CODE_LANGS = {"", "python", "py", "python3", "py3", "ipython", "ipython3", "python2", "pycon"}
_SHELL = re.compile(r"^\s*(?:\$\s|!?pip3?\s|python3?\s+\S+\.py|conda\s|uv\s|%pip\s)", re.I)
# A usage snippet after the script is far shorter than it; a revised script is not.
_SNIPPET_RATIO = 0.4


def _blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block; an unclosed last block runs to the end."""
    blocks: list[tuple[str, str]] = []
    pos = 0
    while True:
        opened = _OPEN.search(text, pos)
        if not opened:
            return blocks
        fence = opened.group("fence")
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        closed = closing.search(text, opened.end())
        end = closed.start() if closed else len(text)
        info = opened.group("info").strip().lower()
        lang = re.split(r"[\s{},]", info.lstrip("{."), maxsplit=1)[0] if info else ""
        blocks.append((lang, _dedent(text[opened.end() : end].strip("\n"))))
        pos = closed.end() if closed else len(text)


def _dedent(body: str) -> str:
    import textwrap

    return textwrap.dedent(body).strip()


def _is_python(lang: str, body: str) -> bool:
    if not body or lang not in _CODE_LANGS:
        return False
    lines = [line for line in body.splitlines() if line.strip()]
    if all(_SHELL.match(line) for line in lines):  # "pip install …", "python solution.py"
        return False
    if lang:
        return True  # tagged python: kept even when cut off mid-script
    try:  # an untagged block: only when it is Python (not sample output or a table)
        ast.parse(body)
    except (SyntaxError, ValueError, UnicodeError):  # ValueError: a NUL byte
        return False
    return True


def extract_code(text: str) -> str | None:
    """The Python script of a reply, or None when there is none.

    Thinking blocks are left out (a draft there is not the answer). Of the Python blocks, the
    final one wins: models revise and then give the script they mean. A much shorter block
    after a long one is a usage example or the key change quoted again, so the long one wins
    then."""
    visible, _thinking = split_thinking((text or "").replace("\r\n", "\n"))
    scripts = [body for lang, body in _blocks(visible) if _is_python(lang, body)]
    if not scripts:
        return None
    longest = max(scripts, key=len)
    final = scripts[-1]
    return longest if len(final) < _SNIPPET_RATIO * len(longest) else final


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block of `text`, thinking left out; an unclosed last
    block runs to the end."""
    visible, _thinking = split_thinking((text or "").replace("\r\n", "\n"))
    return _blocks(visible)


def json_value(text: str) -> list | dict | None:
    """The JSON list or object a reply holds: its last fenced block that parses (```json or
    any fence), else the whole reply, else the longest list or object that parses in its prose
    ("Here are the sub-questions: [...] Let me know..."). None when there is none."""
    visible, _thinking = split_thinking((text or "").replace("\r\n", "\n"))
    for _lang, body in reversed(_blocks(visible)):
        value = _loaded(body)
        if value is not None:
            return value
    value = _loaded(visible)
    if value is not None:
        return value
    decoder, found = json.JSONDecoder(), None
    for start in (m.start() for m in re.finditer(r"[\[{]", visible)):
        try:
            value, end = decoder.raw_decode(visible, start)
        except ValueError:
            continue
        if isinstance(value, list | dict) and (found is None or end - start > found[1]):
            found = (value, end - start)
    return found[0] if found else None


def _loaded(text: str) -> list | dict | None:
    try:
        value = json.loads(text.strip())
    except ValueError:
        return None
    return value if isinstance(value, list | dict) else None
