"""Per-script overhead of the sandbox: cold starts against the warm executor pool.

Runs the same small scripts through dsstar.execution.sandbox.run_script, cold (a fresh
interpreter in fresh namespaces that imports what the script imports) and warm (forked from the
pool interpreter that has the data stack imported), in each isolating mode this machine offers.
The warm start is the wall time of run_script for a script that only imports pandas and prints
its version; a small groupby script shows the end-to-end time; two scripts show what importing
matplotlib (and drawing one chart to a PNG) or scikit-learn (and fitting one model) costs a
script. Outputs of warm and cold runs are compared.

    .venv/bin/python benchmarks/executor_pool.py [--runs 15] [--mode bwrap] [--preload M,...]
"""

from __future__ import annotations

import argparse
import os
import shutil
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
PYPLOT = """\
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.bar(['NE', 'SW', 'N'], [3, 1, 2])
ax.set_title('revenue')
fig.savefig('chart.png')
print('saved')
"""
SKLEARN = """\
import numpy as np
from sklearn.linear_model import LinearRegression
x = np.arange(20.0).reshape(-1, 1)
print(LinearRegression().fit(x, 2 * x.ravel() + 1).coef_.round(3))
"""
SCRIPTS = (
    ("warm start (import pandas)", OVERHEAD),
    ("groupby script", SCRIPT),
    ("matplotlib.pyplot chart", PYPLOT),
    ("sklearn linear fit", SKLEARN),
)


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
    parser.add_argument("--mode", action="append", help="only this mode (repeatable)")
    parser.add_argument(
        "--preload",
        default="",
        help="modules the pool imports besides its own (comma-separated), to weigh the cost of"
        " a larger pool interpreter against scripts that use them, e.g. sklearn.linear_model",
    )
    args = parser.parse_args()
    extra = tuple(filter(None, args.preload.split(",")))
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    modes = [m for m in (args.mode or ("bwrap", "unshare")) if _usable(m)]
    with tempfile.TemporaryDirectory() as tmp:
        data, work = Path(tmp) / "data", Path(tmp) / "work"
        data.mkdir()
        rows = "".join(f"{r},{i}\n" for i in range(200) for r in ("NE", "SW", "N"))
        (data / "sales.csv").write_text("region,revenue\n" + rows)
        for mode in modes:
            started = time.perf_counter()
            zygote, _ = pool.get(mode, data.resolve(), work)
            pool_start = time.perf_counter() - started
            print(f"{mode:8s} pool preloads: {', '.join(zygote.loaded) if zygote else 'none'}")
            for label, code in SCRIPTS:
                cold, cold_out = timed(code, mode, data, work, False, args.runs)
                warm, warm_out = timed(code, mode, data, work, True, args.runs)
                print(
                    f"{mode:8s} {label:27s} median of {args.runs}: cold {cold * 1000:5.0f} ms"
                    f"  warm {warm * 1000:5.0f} ms  ratio {cold / warm:4.1f}x"
                    f"  outputs equal: {cold_out == warm_out}"
                )
            print(f"{mode:8s} pool start (once per data folder): {pool_start:.2f} s")
            if extra:
                compare_preload(mode, data, work, extra, args.runs)
            pool.shutdown()


def compare_preload(mode: str, data: Path, work: Path, extra: tuple[str, ...], runs: int) -> None:
    """Warm starts from the pool as it is and from one that also imports `extra`, run in
    turns so that both see the same load: what a larger pool costs every script, and what it
    saves the scripts that use those modules."""
    other = data.parent / "same-data"  # a copy: another data folder, so a second pool
    if not other.exists():
        shutil.copytree(data, other)
    other = other.resolve()
    own = pool.PRELOAD
    pool.get(mode, data.resolve(), work)
    pool.PRELOAD = (*own, *extra)
    try:
        pool.get(mode, other, work)
    finally:
        pool.PRELOAD = own
    for label, code in SCRIPTS:
        times: dict[str, list[float]] = {"as is": [], "preloaded": []}
        for _ in range(runs):
            for name, folder in (("as is", data.resolve()), ("preloaded", other)):
                limits = Limits(timeout_s=60, warm=True)
                started = time.perf_counter()
                result = run_script(code, data_dir=folder, limits=limits, mode=mode, work_root=work)
                times[name].append(time.perf_counter() - started)
                assert result.ok and result.start == "warm", result
        plain, more = (statistics.median(times[k]) * 1000 for k in ("as is", "preloaded"))
        print(
            f"{mode:8s} {label:27s} warm, pool as is {plain:5.0f} ms;"
            f" also importing {','.join(extra)}: {more:5.0f} ms"
        )


if __name__ == "__main__":
    main()
