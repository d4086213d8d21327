"""Benchmarks: the DABStep, DABStep-Research, KramaBench and DA-Code suites (each a module that
registers itself in dsstar.bench.registry), their official scoring rules, and the outputs of a
benchmark run (submission, scores, report). Free of Prefect: flows/bench.py runs the tasks."""

from dsstar.bench.dabstep_suite import dabstep_tasks
from dsstar.bench.dacode_suite import dacode_tasks
from dsstar.bench.kramabench_suite import kramabench_tasks
from dsstar.bench.registry import Suite, TaskSource, get, names
from dsstar.bench.report import agent_totals, reasoning_trace, table_rows, write_outputs
from dsstar.bench.research_suite import research_tasks
from dsstar.bench.score import load_records, score, score_files
from dsstar.bench.suites import BenchTask, select

__all__ = [
    "BenchTask",
    "Suite",
    "TaskSource",
    "agent_totals",
    "dabstep_tasks",
    "dacode_tasks",
    "get",
    "kramabench_tasks",
    "load_records",
    "names",
    "reasoning_trace",
    "research_tasks",
    "score",
    "score_files",
    "select",
    "table_rows",
    "write_outputs",
]
