"""Why a script failed, in one readable line.

A failed script leaves a traceback, often deep in a library, and the sandbox's own notes
(``[dsstar] the script was killed after 30 s (exec timeout).``). People read the failure in
the CLI, in Prefect's state message, in the answer card and in `dsstar runs show`: there
it must be one line that names the cause, such as
``ValueError: could not convert string to float: 'abc' (solution.py line 12)``, never the
last few hundred characters of a traceback cut anywhere. The whole output stays stored with
the run (rounds/NN/output.txt, final/output.txt); this line only points at it.
"""

from __future__ import annotations

import re

__all__ = ["exception_line", "failure_line"]

# The name the sandbox runs every script under (sandbox/mounts.py: /sandbox/script.py); a
# frame of that file is a line of the script, any other is a library's.
_SCRIPT = "script.py"
# A frame of a traceback, and the `File "...", line N` header of a SyntaxError.
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+)')
# The line that names the exception: a dotted name, alone or before ': message'.
_EXCEPTION = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")
# The sandbox's notes, and those that tell of what was kept (the middle of a long output
# dropped, figures not kept) rather than of why the script failed.
_NOTE = "[dsstar] "
_NOT_CAUSES = ("bytes of output left out", "(exec output limit)", "were not kept")
_MAX_CHARS = 300
# An exception group (Python 3.11) draws its tracebacks in a margin of `|` and rules of `+-`.
_GROUP_MARGIN = re.compile(r"^\s*\| ?(?P<rest>.*)$")
_GROUP_RULE = re.compile(r"^\s*\+[-+]")
_GROUP_HEAD = "+ Exception Group Traceback"


def failure_line(output: str, script: str = "the script", exit_code: int | None = None) -> str:
    """One line that says why a script failed, from its output (stdout, then stderr, then
    the sandbox's notes, as ExecResult.output holds it).

    `script` is the name a person knows the script by (``solution.py``, ``round 02``); the
    line names the script's own line where the error arose, when the traceback shows it. A
    cap the script hit (time, memory, processes, disk, output) is said after the exception;
    without a traceback, the last line the script printed, or its exit code, is the cause."""
    lines = output.splitlines()
    notes = [line[len(_NOTE) :].strip() for line in lines if line.startswith(_NOTE)]
    causes = [n for n in notes if not any(s in n for s in _NOT_CAUSES)]
    lines = [line for line in lines if not line.startswith(_NOTE)]
    found = _exception(_ungrouped(lines) if _GROUP_HEAD in output else lines, script)
    parts = [found] if found else []
    parts += [_sentence(n) for n in causes]
    if not parts:
        printed = [line.strip() for line in lines if line.strip()]
        if printed:
            parts.append(printed[-1])
        elif exit_code is not None:
            parts.append(f"{script} exited with code {exit_code} and printed nothing")
        else:
            parts.append(f"{script} failed and printed nothing")
    return _bounded("; ".join(parts))


def exception_line(exc: BaseException) -> str:
    """`Type: message` of an exception on one line (a message of several lines joined)."""
    message = " ".join(str(exc).split())
    return _bounded(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


def _exception(lines: list[str], script: str) -> str | None:
    """`Name: message (script line N)` of the last traceback in `lines`; None without one.
    The traceback may have lost its head to the output cap: the frames left and the
    exception line at its end are enough."""
    frames = [i for i, line in enumerate(lines) if _FRAME.match(line)]
    if not frames:
        return None
    last = frames[-1]
    raised = None
    for line in lines[last + 1 :]:
        if line.strip() and not line[:1].isspace():
            match = _EXCEPTION.match(line.strip())
            if match:
                raised = line.strip()
            break
    if raised is None:
        return None
    where = None
    for i in reversed(frames):  # the script's own frame nearest the error, in this traceback
        if i < last and _starts_traceback(lines, i, last):
            break
        match = _FRAME.match(lines[i])
        if match and match["file"].rsplit("/", 1)[-1] == _SCRIPT:
            where = match["line"]
            break
    return f"{raised} ({script} line {where})" if where else raised


def _ungrouped(lines: list[str]) -> list[str]:
    """An exception group's traceback as plain tracebacks write it: its `| ` margin taken
    off, its head a traceback's head, the rules between its sub-exceptions left out. The last
    sub-exception is then the last traceback."""
    plain = []
    for line in lines:
        if _GROUP_RULE.match(line):
            continue
        margin = _GROUP_MARGIN.match(line)
        plain.append(margin["rest"] if margin else line.replace(_GROUP_HEAD, "Traceback", 1))
    return plain


def _starts_traceback(lines: list[str], frame: int, last: int) -> bool:
    """Whether a line between `frame` and the `last` frame begins another traceback (a
    chained exception): frames before it belong to an earlier exception."""
    return any(
        line.startswith("Traceback (most recent call last)") for line in lines[frame + 1 : last]
    )


def _sentence(note: str) -> str:
    return note.rstrip(".")


def _bounded(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= _MAX_CHARS else line[: _MAX_CHARS - 1].rstrip() + "…"
