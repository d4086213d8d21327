"""dsstar: the DS-STAR data-science agent (analyze, plan, code, execute, verify, route).

This package is the core, free of Prefect, grouped by role:

    algorithm/   DS-STAR itself: the loop, step 1's analysis and the agents
    model/       the language model: calls, caching, kept replies
    data/        the data side: sources, lakes, profiles, catalog, contracts, retrieval
    runs/        runs and their records: form, record, claim, ledger, reports
    execution/   the sandbox for generated code, scratch folders, clean stops
    bench/       benchmark suites and their scorers
    cli/         the `dsstar` command (it reaches Prefect only through `flows`)

The top-level packages `flows` and `tasks` put the core to work as a Prefect job; `prompts`
holds the agents' templates.
"""

__version__ = "0.1.0"
