"""dsstar: the DS-STAR data-science agent (analyze, plan, code, execute, verify, route).

This package is the core, free of Prefect, grouped by role:

    algorithm/   DS-STAR itself: the loop, step 1's analysis and the agents
    model/       the language model: calls, caching, kept replies
    data/        the data side: sources, lakes, profiles, catalog, contracts, retrieval
    inputs/      what a run is given: its form, trust, preflight, question sets
    records/     what a run keeps: record, claim, state, the ledger
    views/       what is read back: listings, reports, notebooks
    execution/   the sandbox for generated code, scratch folders, clean stops
    research/    reports as answers: sub-questions, their answers, the report (DS-STAR+)
    bench/       benchmark suites and their scorers
    cli/         the `dsstar` command (it reaches Prefect only through `flows`)
    api          the same from Python: ask, report, describe, runs (typed results: `results`)

The top-level packages `flows` and `tasks` put the core to work as a Prefect job; `prompts`
holds the agents' templates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsstar.api import ask, describe, report, runs
    from dsstar.results import Answer, FileDescription, RunSummary

__version__ = "0.1.0"

__all__ = [
    "Answer", "FileDescription", "RunSummary", "__version__", "ask", "describe", "report",
    "runs",
]  # fmt: skip

# Imported when first used: `import dsstar` stays fast and free of Prefect (the CLI imports
# this package before every command).
_API = {"ask", "describe", "report", "runs"}
_RESULTS = {"Answer", "FileDescription", "RunSummary"}


def __getattr__(name: str) -> Any:
    if name in _API | _RESULTS:
        import importlib

        module = importlib.import_module("dsstar.api" if name in _API else "dsstar.results")
        return getattr(module, name)
    raise AttributeError(f"module 'dsstar' has no attribute {name!r}")
