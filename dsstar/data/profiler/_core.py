"""One file's profile, and the batch loop that runs inside the sandbox."""

from __future__ import annotations

import faulthandler
import json
import signal
import stat
import sys
import time
import warnings
from pathlib import Path

from dsstar.data.formats import by_name, resolve
from dsstar.data.profiler._base import Budget, human
from dsstar.data.profiler._detect import detect_format
from dsstar.data.profiler._docs import describe_binary

__all__ = ["MARK", "profile_batch", "profile_file"]

MARK = "@@dsstar-profile@@ "  # prefixes each result line, so stray prints cannot pose as one
_TRUNCATED = "\n... (truncated)"


def _describe(path: Path, fmt: str) -> list[str]:
    """The profile's lines by the format's own profiler; an unknown format is a binary."""
    known = by_name(fmt)
    describe = resolve(known.profile) if known and known.profile else describe_binary
    return describe(path, fmt)


class ProfileTimeout(Exception):
    """The per-file time bound passed."""


def profile_file(path: Path, display_name: str | None = None, max_chars: int = 6000) -> str:
    """Describe `path`; parse errors are reported in the text, only a missing path raises.
    Anything but a regular file or folder is described without being opened."""
    path = Path(path)
    info = path.stat()  # raises FileNotFoundError, as documented
    name = display_name or path.name
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        return f"File: {name} (format: special)\nnot a regular file: not opened"
    fmt = detect_format(str(path))
    lines = [f"File: {name} (format: {fmt}, size: {human(info.st_size)})"]
    if stat.S_ISDIR(info.st_mode) or info.st_size == 0:
        lines.append("This is a directory, not a file." if path.is_dir() else "The file is empty.")
    else:
        try:
            with warnings.catch_warnings():  # pandas/openpyxl warnings would only add noise
                warnings.simplefilter("ignore")
                lines += _describe(path, fmt)
        except ProfileTimeout:
            raise
        except Exception as exc:  # never raise: the error itself is the description
            reason = f"{type(exc).__name__}: {exc}"[:500]
            known = by_name(fmt)
            lines.append(f"could not parse as {known.shown_as if known else fmt}: {reason}")
    text = "\n".join(lines)
    if len(text) > max_chars:
        text = text[: max(0, max_chars - len(_TRUNCATED))] + _TRUNCATED
    return text


def _alarm(signum: int, frame: object) -> None:
    raise ProfileTimeout


def profile_batch(
    paths: list[str], names: list[str], *, seconds: float, max_bytes: int, max_chars: int
) -> None:
    """Profile each file in turn, printing one marked JSON line when it starts and one with
    its text when it ends; each file gets at most `seconds` and `max_bytes`. The caller
    reads the lines, so a batch killed midway still yields the files it finished."""
    Budget.max_bytes = max_bytes
    signal.signal(signal.SIGALRM, _alarm)
    for path, name in zip(paths, names, strict=True):
        print(MARK + json.dumps({"start": name}, ensure_ascii=False), flush=True)
        started = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, seconds)
        # SIGALRM waits for C code to return; faulthandler's own thread does not: a reader
        # stuck in C past twice the bound ends the script, and the caller names this file.
        faulthandler.dump_traceback_later(seconds * 2 + 5, exit=True)
        try:
            text = profile_file(Path(path), name, max_chars)
        except ProfileTimeout:
            text = f"File: {name}\nnot profiled: took longer than the {seconds:g} s per-file bound"
        except Exception as exc:  # a missing file or a reader bug: state it, go on
            text = f"File: {name}\nnot profiled: {type(exc).__name__}: {str(exc)[:300]}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            faulthandler.cancel_dump_traceback_later()
        record = {"path": name, "text": text, "seconds": round(time.monotonic() - started, 3)}
        print(MARK + json.dumps(record, ensure_ascii=False), flush=True)
    sys.stdout.flush()
