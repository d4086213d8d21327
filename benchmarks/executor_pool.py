"""Per-script overhead of the sandbox: cold starts against the warm executor pool.

Runs the same small pandas script through dsstar.sandbox.run_script, cold (a fresh
interpreter in fresh namespaces that imports pandas) and warm (forked from the pool
interpreter that has pandas imported), in each isolating mode this machine offers. The
overhead is the wall time of run_script minus the time the script's own work takes in an
interpreter that has pandas imported already. Outputs of warm and cold runs are compared.

    .venv/bin/python benchmarks/executor_pool.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from dsstar.sandbox import Limits, pool, run_script
from dsstar.sandbox.modes import _usable

SCRIPT = """\
import pandas as pd
df = pd.read_csv('data/sales.csv')
print(df.groupby('region')['revenue'].sum().sort_index())
"""


def script_work_s(data: Path) -> float:
    """Seconds the script's own work takes with pandas imported (the part no pool can save)."""
    import pandas as pd

    started = time.perf_counter()
    for _ in range(20):
        pd.read_csv(data / "sales.csv").groupby("region")["revenue"].sum().sort_index()
    return (time.perf_counter() - started) / 20


def timed(mode: str, data: Path, work: Path, warm: bool, runs: int) -> tuple[list[float], set]:
    seconds, outputs = [], set()
    limits = Limits(timeout_s=60, warm=warm)
    for _ in range(runs):
        started = time.perf_counter()
        result = run_script(SCRIPT, data_dir=data, limits=limits, mode=mode, work_root=work)
        seconds.append(time.perf_counter() - started)
        assert result.ok and result.start == ("warm" if warm else "cold"), result
        outputs.add(result.output)
    return seconds, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="scripts per mode and start")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data, work = Path(tmp) / "data", Path(tmp) / "work"
        data.mkdir()
        rows = "".join(f"{r},{i}\n" for i in range(200) for r in ("NE", "SW", "N"))
        (data / "sales.csv").write_text("region,revenue\n" + rows)
        work_s = script_work_s(data)
        print(f"script's own work with pandas imported: {work_s * 1000:.1f} ms")
        for mode in [m for m in ("bwrap", "unshare") if _usable(m)]:
            started = time.perf_counter()
            pool.get(mode, data.resolve(), work)
            pool_start = time.perf_counter() - started
            cold, cold_out = timed(mode, data, work, warm=False, runs=args.runs)
            warm, warm_out = timed(mode, data, work, warm=True, runs=args.runs)
            cold_ms = (statistics.median(cold) - work_s) * 1000
            warm_ms = (statistics.median(warm) - work_s) * 1000
            print(
                f"{mode:8s} overhead per script (median of {args.runs}): cold {cold_ms:6.0f} ms"
                f"  warm {warm_ms:5.0f} ms  ratio {cold_ms / warm_ms:4.1f}x"
                f"  (warm p90 {sorted(warm)[int(0.9 * len(warm))] * 1000 - work_s * 1000:.0f} ms;"
                f" pool start {pool_start:.2f} s once per data folder)"
            )
            print(f"{mode:8s} outputs equal cold vs warm: {cold_out == warm_out}")
            pool.shutdown()


if __name__ == "__main__":
    main()
