"""Where the folders the layout keeps at the top of the repository are found.

`flows/`, `tasks/` and `prompts/` sit beside `dsstar/` in the repository; `pip install .` puts
them inside the package as `dsstar.flows`, `dsstar.tasks` and `dsstar/prompts` (pyproject's
`package-dir`), so an installed copy needs no repository. In a source tree (tests from the
repository root, PYTHONPATH=repo, an editable install) they are found at the top under the same
names: `install()` adds a finder for exactly those two packages, ahead of any other, so a source
tree never picks up another checkout's copy through an editable install's finder."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path

__all__ = ["SOURCE_ROOT", "install", "top_folder"]

PACKAGE = Path(__file__).resolve().parent
SOURCE_ROOT = PACKAGE.parent  # the folder holding the package: a checkout, or site-packages
_TOP_PACKAGES = ("flows", "tasks")


def top_folder(name: str) -> Path:
    """The folder `name` of the layout: inside the installed package, else at the top of the
    source tree."""
    installed = PACKAGE / name
    return installed if installed.is_dir() else SOURCE_ROOT / name


class _SourceTreeFinder(importlib.abc.MetaPathFinder):
    """Finds dsstar.flows and dsstar.tasks in the folders at the top of this source tree."""

    names = {f"{PACKAGE.name}.{name}" for name in _TOP_PACKAGES}

    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname not in self.names:
            return None
        # The last part of the name is looked up in the given folder: flows -> <root>/flows.
        return importlib.machinery.PathFinder.find_spec(fullname, [str(SOURCE_ROOT)])


def install() -> None:
    """In a source tree, make dsstar.flows and dsstar.tasks importable; installed, do nothing."""
    if (PACKAGE / _TOP_PACKAGES[0]).is_dir():
        return  # an installed copy: the packages are inside dsstar/
    if not all((SOURCE_ROOT / name / "__init__.py").is_file() for name in _TOP_PACKAGES):
        return
    if not any(isinstance(finder, _SourceTreeFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SourceTreeFinder())
