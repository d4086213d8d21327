"""Benchmarks: the DABStep and KramaBench suites, their official scoring rules, and the
outputs of a benchmark run (submission, scores, report). Free of Prefect: flows/bench.py runs
the tasks."""

from dsstar.bench.report import agent_totals, reasoning_trace, table_rows, write_outputs
from dsstar.bench.score import SUITES, load_records, score, score_files
from dsstar.bench.suites import BenchTask, dabstep_tasks, kramabench_tasks, select

__all__ = [
    "SUITES",
    "BenchTask",
    "agent_totals",
    "dabstep_tasks",
    "kramabench_tasks",
    "load_records",
    "reasoning_trace",
    "score",
    "score_files",
    "select",
    "table_rows",
    "write_outputs",
]
