"""Previews of the tables a script wrote, read in the bounded table reader (see
`dsstar.data.contracts.preview_bounded`), never in this process: a file that would decode past
the reader's bounds gets the reason instead of a preview, and the run goes on.

A preview is read once, when the script has run, and kept on its output (`preview`): the
verifier's prompt (`dsstar.execution.deliverables.outputs_text`) and the deliverables card show
it, and a resumed run reads it back with the cached execution, so its prompts are the same.
"""

from __future__ import annotations

import base64
import tempfile
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

from dsstar.data.contracts import ReadBounds, TableSkipped, preview_bounded
from dsstar.execution.deliverables import TABLE_SUFFIXES
from dsstar.execution.sandbox import ExecResult

__all__ = ["PREVIEW_ROWS", "preview_file", "with_previews"]

PREVIEW_ROWS = 20  # the deliverables card shows these; the verifier's prompt the first five


def with_previews(
    result: ExecResult, work_dir: Path | None = None, bounds: ReadBounds | None = None
) -> ExecResult:
    """`result` with a `preview` on each table among its outputs that carries its bytes
    ('data'): {'shape', 'columns', 'head'}, or {'skipped': why} when a bound of the reader
    stopped it. A file that does not parse as a table gets none. The bytes go to the reader
    through a private temporary file under `work_dir` (None: the system's)."""
    if not any(_is_table(item) for item in result.outputs):
        return result
    outputs = [_previewed(item, work_dir, bounds) for item in result.outputs]
    return replace(result, outputs=outputs)


def preview_file(
    path: Path, name: str, rows: int = PREVIEW_ROWS, bounds: ReadBounds | None = None
) -> dict[str, Any] | None:
    """The preview of the table at `path` (its kind by `name`), {'skipped': why} past a bound,
    or None when it does not read as a table."""
    try:
        return preview_bounded(path, name, rows, bounds)
    except TableSkipped as exc:
        return {"skipped": str(exc)}
    except (ValueError, OSError):  # a file that does not read as a table is just a file
        return None


def _is_table(item: dict[str, Any]) -> bool:
    return PurePosixPath(item["name"]).suffix.lower() in TABLE_SUFFIXES and "data" in item


def _previewed(
    item: dict[str, Any], work_dir: Path | None, bounds: ReadBounds | None
) -> dict[str, Any]:
    if not _is_table(item):
        return item
    suffix = PurePosixPath(item["name"]).suffix.lower()
    folder = work_dir if work_dir is not None and work_dir.is_dir() else None
    with tempfile.NamedTemporaryFile(dir=folder, prefix="dsstar-preview-", suffix=suffix) as f:
        f.write(base64.b64decode(item["data"]))
        f.flush()
        preview = preview_file(Path(f.name), item["name"], bounds=bounds)
    return item if preview is None else {**item, "preview": preview}
