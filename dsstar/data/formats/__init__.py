"""File formats: one registry says, for every format, how a file of it is recognised, how the
offline profiler describes it, how a data contract reads its tables, and whether it is
documentation that the agents see whole.

The built-in formats register themselves (`_builtin`); a user's format module does the same
with `register(Format(...))` when imported. Such a module is loaded in every process that
needs it, the sandboxed profiler and the contract reader included, when it is named

- in the `DSSTAR_FORMATS` setting (module names, comma-separated, importable from the
  process's path), or
- by an entry point of the group `dsstar.formats` of an installed package,

or when it is imported before its formats are used. Its profiler runs inside the sandbox,
where dsstar cannot be imported: the module's source is joined into the profiling script, so
it may import only the standard library, its readers' packages, and `dsstar.data.formats`.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import sys
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

from dsstar.data.formats import _builtin, _registry
from dsstar.data.formats._builtin import ARCHIVE_KINDS, archive_kind, leading_bytes
from dsstar.data.formats._registry import (
    ExtensionMap,
    Format,
    NamesWhere,
    by_name,
    for_file_name,
    formats,
    generation,
    register,
    resolve,
    unregister,
)

__all__ = [
    "ARCHIVE_KINDS",
    "BUILTIN_MODULES",
    "ENTRY_POINT_GROUP",
    "ExtensionMap",
    "Format",
    "NamesWhere",
    "archive_kind",
    "by_name",
    "child_environment",
    "definition_sources",
    "for_file_name",
    "formats",
    "generation",
    "leading_bytes",
    "plugin_sources",
    "register",
    "resolve",
    "unregister",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "dsstar.formats"
_SETTING = "DSSTAR_FORMATS"
# The modules whose source defines the built-in formats, joined into the profiling script.
BUILTIN_MODULES = (_registry, _builtin)


def _plugin_names() -> list[str]:
    # Read here rather than through Settings: formats load in child processes and on the
    # first detection, and an unrelated bad setting must not make every file unknown.
    named = [m.strip() for m in os.environ.get(_SETTING, "").split(",") if m.strip()]
    return named + [ep.value.split(":")[0] for ep in entry_points(group=ENTRY_POINT_GROUP)]


def _load_plugins() -> None:
    for module in dict.fromkeys(_plugin_names()):
        try:
            importlib.import_module(module)
        except Exception as exc:  # one broken format module must not hide the others
            log.warning("cannot load the format module %s: %s", module, exc)


_registry.set_plugin_loader(_load_plugins)


def _plugin_modules() -> list[str]:
    """The modules outside dsstar that registered the formats known now."""
    origins = (fmt.origin for fmt in formats())
    return list(dict.fromkeys(o for o in origins if o and o.split(".")[0] != "dsstar"))


def plugin_sources() -> dict[str, str]:
    """Module name -> source of every user's format module in use. A format registered from
    a notebook or script (no module source) stays unknown to the sandboxed profiler."""
    return _plugin_sources(generation())


@cache
def _plugin_sources(_generation: int) -> dict[str, str]:
    sources = {}
    for name in _plugin_modules():
        module = sys.modules.get(name)
        try:
            sources[name] = inspect.getsource(module)  # type: ignore[arg-type]
        except (OSError, TypeError):
            log.warning("format module %s has no source: the profiler cannot use it", name)
    return sources


def definition_sources() -> list[str]:
    """The sources that define every format now: a change in any changes what is detected."""
    own = [Path(m.__file__).read_text(encoding="utf-8") for m in BUILTIN_MODULES]
    return own + [f"{name}\n{text}" for name, text in sorted(plugin_sources().items())]


def child_environment() -> dict[str, str]:
    """Environment entries that make a child Python process load the formats this process
    has: the user's format modules by name, and the folders they were imported from."""
    modules = _plugin_modules()
    if not modules:
        return {}
    roots = []
    for name in modules:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if origin:  # a.b.c from /x/a/b/c.py is importable from /x
            depth = name.count(".") + (1 if Path(origin).name == "__init__.py" else 0)
            roots.append(str(Path(origin).resolve().parents[depth]))
    existing = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {
        _SETTING: ",".join(modules),
        "PYTHONPATH": os.pathsep.join(dict.fromkeys([*roots, *existing])),
    }
