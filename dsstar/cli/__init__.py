"""The `dsstar` command line.

Exit codes: 0 an answer was produced (verified or max_rounds), 1 the run failed,
2 bad usage or input. With --json, stdout carries exactly one JSON object; everything else
(logs, progress) goes to stderr.
"""

from dsstar.cli import (  # noqa: F401  (each module registers its commands)
    alerts,
    bench,
    contracts,
    data,
    limits,
    replay,
    report,
    run,
    runs,
    serve,
    workers,
)
from dsstar.cli._app import app, main

__all__ = ["app", "main"]
