"""The table of sandbox backends, and the one place a `--sandbox` name is resolved to one.

Built in, in the order 'auto' tries those that isolate (see namespaces.py and backends.py):

- `bwrap`: bubblewrap makes the namespaces and the read-only root;
- `unshare`: util-linux `unshare` makes the same namespaces, the boot program the same root;
- `none`: a plain subprocess with the same limits and uid, for explicit use only.

`register` adds a backend under a new name; nothing else changes for it to be chosen.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from dsstar import sandbox_names
from dsstar.errors import ConfigError
from dsstar.execution.sandbox.backends import Backend, NoIsolation
from dsstar.execution.sandbox.namespaces import FIX, Bubblewrap, Unshare
from dsstar.sandbox_names import AUTO, BUILT_IN, MODES

__all__ = [
    "MODES",
    "backend",
    "boot_argv",
    "isolates",
    "register",
    "resolve_mode",
    "unregister",
]

_TABLE: dict[str, Backend] = {b.name: b for b in (Bubblewrap(), Unshare(), NoIsolation())}


def register(new: Backend) -> Backend:
    """Make `new` a sandbox mode under its name: settings, preflight, the executor and the
    warm pool take it from then on. ConfigError when the name is taken."""
    sandbox_names.add(new.name)
    _TABLE[new.name] = new
    return new


def unregister(name: str) -> None:
    """Remove a backend that `register` added (the built-in ones stay)."""
    if name in BUILT_IN:
        raise ConfigError(f"sandbox mode {name!r} is built in and stays.")
    del _TABLE[name]
    sandbox_names.remove(name)
    _usable.cache_clear()  # a later backend of the same name is probed afresh


def backend(name: str) -> Backend:
    """The backend a resolved name stands for."""
    return _TABLE[name]


def isolates(name: str) -> bool:
    """Whether scripts are isolated under `name` (spelled as `resolve_mode` spells it);
    'auto' only ever picks a backend that isolates."""
    return name == AUTO or backend(name).isolates


@cache
def _usable(name: str) -> bool:
    """Whether this backend can make its namespaces here (probed once per process)."""
    return backend(name).available()


def resolve_mode(mode: str = AUTO, *, probe: bool = True) -> str:
    """The one place a sandbox mode name is resolved; settings, preflight and the executor
    all call it.

    With `probe` (default), the mode scripts run in: 'auto' becomes the first isolating
    backend that works here, an isolating one named must work here, one that does not
    isolate is taken as named. Without it, only the name is checked and spelled the one way
    ('process' is the old 'none'), so settings can be read on a machine that will not run
    scripts. Raises ConfigError, naming the fix, when the name is unknown or the mode cannot
    isolate scripts here.
    """
    name = sandbox_names.spell(mode)
    if not probe:
        return name
    if name == AUTO:
        for candidate in _TABLE.values():
            if candidate.isolates and _usable(candidate.name):
                return candidate.name
        raise ConfigError(f"no usable isolation for generated scripts: {FIX}.")
    chosen = backend(name)
    if chosen.isolates and not _usable(name):
        raise ConfigError(f"sandbox mode {name!r} does not work on this machine: {chosen.fix}.")
    return name


def boot_argv(mode: str, stage: Path, data_dir: Path, spec: dict[str, Any]) -> list[str]:
    """The command that starts the boot program with `spec` in the given mode."""
    return backend(mode).argv(stage, data_dir, spec)
