"""Prefect flows that compose dsstar's tasks. The CLI uses the public names below (and those
of `serving`):

    ensure_alerts             the nightly alerts' automations, created or updated by name
    find_notification_blocks  notification blocks named as `--notify` names them
    ALERT_NAMES               the names of those automations
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported when first used: a command loads only the flows it needs.
_HOMES = {
    "ALERT_NAMES": (".alerts", "ALERT_NAMES"),
    "ensure_alerts": (".alerts", "ensure_alerts"),
    "find_notification_blocks": (".alerts", "find_notification_blocks"),
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _HOMES[name]
    return getattr(importlib.import_module(module, __name__), attribute)


__all__ = ["ALERT_NAMES", "ensure_alerts", "find_notification_blocks"]
