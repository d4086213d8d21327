"""What a run started from Python shows on the console of its process.

A run logs its story through Prefect's run loggers (`prefect.flow_runs`, `prefect.task_runs`):
the lines reach the Prefect API (the UI's Logs tab) through a handler of those loggers, and a
console through Prefect's console handler and any handler a user put on the root logger, by
propagation. `dsstar.ask` in a notebook shows none of it unless asked: the console gets the
run's lines at the level asked for, while the API gets every line as always.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["run_console"]

_RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
_SILENT = logging.CRITICAL + 1


@contextmanager
def run_console(level: int | None) -> Iterator[None]:
    """While the block runs, the console shows the run's log lines of `level` and above;
    None: nothing at all (the lines still reach the Prefect API). Restored afterwards."""
    from prefect.logging.handlers import PrefectConsoleHandler  # Prefect's logging set up

    handlers = [h for h in _handlers() if isinstance(h, PrefectConsoleHandler)]
    levels = [h.level for h in handlers]
    loggers = [logging.getLogger(name) for name in _RUN_LOGGERS]
    propagating = [logger.propagate for logger in loggers]
    for handler in handlers:
        handler.setLevel(_SILENT if level is None else level)
    for logger in loggers:  # a user's own root handler would show them otherwise
        logger.propagate = level is not None
    try:
        yield
    finally:
        for handler, was in zip(handlers, levels, strict=True):
            handler.setLevel(was)
        for logger, was in zip(loggers, propagating, strict=True):
            logger.propagate = was


def _handlers() -> list[logging.Handler]:
    """Every handler of every logger of this process, the root's included."""
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    return [handler for logger in loggers for handler in logger.handlers]
