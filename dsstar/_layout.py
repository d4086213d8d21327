"""Where the folders the layout keeps at the top of the repository are found.

`prompts/` (and, as packages, `flows/` and `tasks/`) sit beside `dsstar/` in the repository;
`pip install .` puts them inside the package (pyproject's `package-dir`), so an installed copy
needs no repository. A source checkout or an editable install finds them at the top."""

from __future__ import annotations

from pathlib import Path

__all__ = ["top_folder"]

PACKAGE = Path(__file__).resolve().parent


def top_folder(name: str) -> Path:
    """The folder `name` of the layout: inside the installed package, else at the top of the
    source tree."""
    installed = PACKAGE / name
    return installed if installed.is_dir() else PACKAGE.parent / name
