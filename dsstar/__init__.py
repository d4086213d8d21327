"""dsstar: the DS-STAR data-science agent (analyze, plan, code, execute, verify, route).

The core package is free of Prefect; `dsstar.tasks` and `dsstar.flows` (the folders `tasks/`
and `flows/` at the top of the repository) put it to work as a Prefect job.
"""

from . import _layout

__version__ = "0.1.0"

_layout.install()  # in a source tree, dsstar.flows and dsstar.tasks are the top folders
