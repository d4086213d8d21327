"""Memory of grouping a lake by shape in the dsstar process: the peak that tracemalloc sees
while `analysis_plan` groups every file of a lake (as a cold `describe` does), and what the
plan keeps, with the profiles already in the catalog (so no sandbox runs: the figure is the
grouping's alone). Point it at the work folder of a `lake.py` run (it prints the folder).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/grouping_memory.py /tmp/dsstar-lake-bench-XXXX
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from pathlib import Path

from dsstar.algorithm.analysis import analysis_plan, known_analyses
from dsstar.inputs.spec import data_source, run_spec
from dsstar.settings import Settings
from dsstar.storage import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path, help="The work folder of a lake.py run.")
    work = parser.parse_args().work
    settings = Settings(
        model="openai/gpt-4o-mini",
        storage=str(work / "storage"),
        work_dir=str(work / "scratch"),
        max_parallel=2,
    )
    source = data_source(str(work / "lake"), settings)
    try:
        spec = run_spec(settings, "grouping", Store(settings.storage).url, source.mount_dir)
        files = known_analyses(spec, source)[0]
        gc.collect()
        tracemalloc.start()
        started = time.monotonic()
        plan = analysis_plan(spec, source, files, {}, files)  # every file missing: all grouped
        took = time.monotonic() - started
        now, peak = tracemalloc.get_traced_memory()
        print(
            f"{len(files):,} files, {plan.groups} groups, {len(plan.analyze)} to analyze:"
            f" grouping peak {peak / 1e6:.1f} MB, the plan keeps {now / 1e6:.1f} MB, {took:.1f} s"
        )
    finally:
        source.close()


if __name__ == "__main__":
    main()
