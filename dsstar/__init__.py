"""dsstar: the DS-STAR data-science agent (analyze, plan, code, execute, verify, route).

The core package is free of Prefect; `tasks/` and `flows/` put it to work as a Prefect job.
"""

__version__ = "0.1.0"
