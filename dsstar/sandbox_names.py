"""The names `--sandbox` (DSSTAR_SANDBOX) accepts, known without importing the sandbox.

A foundation, like settings: settings checks a name here, so reading them never loads the
sandbox. The sandbox's table of backends (dsstar/execution/sandbox/backends.py) is keyed by
the same names, and adds here the name of every backend registered beyond the built-in ones.
"""

from __future__ import annotations

import logging
from functools import cache

from dsstar.errors import ConfigError

__all__ = ["AUTO", "BUILT_IN", "MODES", "NONE", "add", "known", "remove", "spell"]

log = logging.getLogger(__name__)

AUTO = "auto"  # the first isolating backend that works here
NONE = "none"  # limits, a clean environment and a uid only: explicit use only
BUILT_IN = ("bwrap", "unshare", NONE)  # the backends' table holds these first, in this order
MODES = (AUTO, *BUILT_IN)  # the built-in names users may give (and 'process', the old 'none')
_OLD_NAMES = {"process": NONE}
_added: list[str] = []


def known() -> tuple[str, ...]:
    """Every name a user may give now: the built-in ones, then those of registered backends."""
    return (*MODES, *_added)


def spell(name: str) -> str:
    """`name` spelled the one way (an old name becomes the current one); ConfigError naming
    the known ones when it is none of them. Whether the backend works here is not asked."""
    if name in _OLD_NAMES:
        _warn_deprecated(name)
        name = _OLD_NAMES[name]
    if name not in known():
        raise ConfigError(f"unknown sandbox mode {name!r}: use {', '.join(known())}.")
    return name


def add(name: str) -> None:
    """Accept `name` from now on (the backends table calls this when one is registered)."""
    if name in known() or name in _OLD_NAMES:
        raise ConfigError(f"sandbox mode {name!r} is already taken.")
    _added.append(name)


def remove(name: str) -> None:
    """Stop accepting a name that `add` accepted."""
    _added.remove(name)


@cache
def _warn_deprecated(name: str) -> None:
    log.warning("sandbox mode %r is deprecated; it now means %r", name, _OLD_NAMES[name])
