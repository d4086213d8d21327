"""In-process progress events, so a front end (the CLI's live display) can follow a run.

The flow and its tasks call `emit` with a typed event (`dsstar.events`); listeners run in the
emitting thread and must be quick. Nothing is emitted anywhere else: a run on a worker with no
listener costs nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from dsstar.events import Event

__all__ = ["Listener", "emit", "listen"]

Listener = Callable[[Event], None]
_listeners: list[Listener] = []
_lock = threading.Lock()


def listen(listener: Listener) -> Callable[[], None]:
    """Register `listener`; returns a function that unregisters it."""
    with _lock:
        _listeners.append(listener)

    def stop() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return stop


def emit(event: Event) -> None:
    """Tell every listener about `event` (e.g. `LLMCall`, `RoundDone`)."""
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(event)
