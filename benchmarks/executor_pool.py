"""Per-script overhead of the sandbox: cold starts against the warm executor pool.

Runs the same small pandas script through dsstar.execution.sandbox.run_script, cold (a fresh
interpreter in fresh namespaces that imports pandas) and warm (forked from the pool
interpreter that has pandas imported), in each isolating mode this machine offers. The
overhead is the wall time of run_script for a script that only imports pandas and prints its
version; a small groupby script shows the end-to-end time. Outputs of warm and cold runs are
compared.

    .venv/bin/python benchmarks/executor_pool.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from dsstar.execution.sandbox import Limits, pool, run_script
from dsstar.execution.sandbox.modes import _usable

OVERHEAD = "import pandas as pd\nprint(pd.__version__)\n"  # all start-up, no work
SCRIPT = """\
import pandas as pd
df = pd.read_csv('data/sales.csv')
print(df.groupby('region')['revenue'].sum().sort_index())
"""


def timed(
    code: str, mode: str, data: Path, work: Path, warm: bool, runs: int
) -> tuple[float, set[str]]:
    """Median seconds of run_script for `code`, and the distinct outputs."""
    seconds, outputs = [], set()
    limits = Limits(timeout_s=60, warm=warm)
    for _ in range(runs):
        started = time.perf_counter()
        result = run_script(code, data_dir=data, limits=limits, mode=mode, work_root=work)
        seconds.append(time.perf_counter() - started)
        assert result.ok and result.start == ("warm" if warm else "cold"), result
        outputs.add(result.output)
    return statistics.median(seconds), outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="scripts per mode and start")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        data, work = Path(tmp) / "data", Path(tmp) / "work"
        data.mkdir()
        rows = "".join(f"{r},{i}\n" for i in range(200) for r in ("NE", "SW", "N"))
        (data / "sales.csv").write_text("region,revenue\n" + rows)
        for mode in [m for m in ("bwrap", "unshare") if _usable(m)]:
            started = time.perf_counter()
            pool.get(mode, data.resolve(), work)
            pool_start = time.perf_counter() - started
            for label, code in (("overhead (import pandas)", OVERHEAD), ("groupby script", SCRIPT)):
                cold, cold_out = timed(code, mode, data, work, False, args.runs)
                warm, warm_out = timed(code, mode, data, work, True, args.runs)
                print(
                    f"{mode:8s} {label:25s} median of {args.runs}: cold {cold * 1000:5.0f} ms"
                    f"  warm {warm * 1000:4.0f} ms  ratio {cold / warm:4.1f}x"
                    f"  outputs equal: {cold_out == warm_out}"
                )
            print(f"{mode:8s} pool start (once per data folder): {pool_start:.2f} s")
            pool.shutdown()


if __name__ == "__main__":
    main()
