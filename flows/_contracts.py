"""The contract gate of a run: every input file against its stored suite before a stored
solution is trusted on today's data. Failures become a warning artifact and the run's
`contracts` record; the core work happens in `dsstar.data.contracts`."""

from __future__ import annotations

import logging
from typing import Any

from dsstar.data.contracts import check_source, failures_markdown
from dsstar.data.sources import DataSource
from flows import _story as story
from flows._run import Run
from tasks.cache_keys import artifact_key
from tasks.cards import publish_markdown

__all__ = ["check_contracts"]


def check_contracts(run: Run, source: DataSource) -> dict[str, Any]:
    """Validate (or, for new files, create) every file's contract. Returns the report:
    {"checked", "failed", "created", "files"}; it is also kept in run.json."""
    report = check_source(run.store, source)
    run.note(contracts=report)
    if report["failed"]:
        story.say(
            "data contract failed for %d expectation(s) under %s: the stored solution is not"
            " reused", len(report["failed"]), source.location, level=logging.WARNING,
        )  # fmt: skip
        publish_markdown(
            artifact_key(f"{run.run_id}-contracts"),
            failures_markdown(
                source.location, report, "The stored solution was not reused; the full loop ran."
            ),
            "Data contract failures",
        )
    return report
