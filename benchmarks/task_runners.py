"""Seconds to analyze one small lake with each task runner: threads, a local 2-worker Dask
cluster and a local Ray instance (same files, same scripted model, separate storage so no run
finds another's cached analyses). Every analysis makes one model call (a scripted analyzer
reply from the fake OpenAI-compatible server in tests/) and runs its script in the sandbox.

Starts its own Prefect server on loopback (about 12 s) before timing anything.

    PYTHONPATH=. .venv/bin/python benchmarks/task_runners.py [--files 16] [--delay 0.2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from round_overhead import start_prefect  # noqa: E402  (the same started server as there)


def make_lake(root: Path, files: int) -> Path:
    lake = root / "lake"
    shutil.copytree(REPO / "examples" / "sales", lake)
    for n in range(files - 4):
        rows = "\n".join(f"{i},{i * n},{'NE' if i % 2 else 'SW'}" for i in range(200))
        (lake / f"table_{n:02d}.csv").write_text("id,value,region\n" + rows + "\n")
    return lake


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.2, help="model latency, seconds")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dsstar-bench-runners-"))
    server = start_prefect(root / "prefect")
    from fake_llm import FakeLLM
    from scenarios import describe_script

    def slow_analyzer(request):  # a model takes a while to answer
        time.sleep(args.delay)
        return describe_script(request)

    llm = FakeLLM().start().default("analyzer", slow_analyzer)
    os.environ.update(DSSTAR_MODEL="openai/gpt-4o-mini", DSSTAR_API_BASE=llm.base_url,
                      DSSTAR_API_KEY="sk-bench", DSSTAR_WORK_DIR=str(root),
                      DSSTAR_DATABASE_URL=f"sqlite:///{root / 'ledger.db'}")  # fmt: skip
    from dsstar.settings import Settings
    from flows._runners import build_task_runner
    from flows.describe import describe

    lake = make_lake(root, args.files)
    print(f"{args.files} files, model latency {args.delay} s, {os.cpu_count()} CPUs")

    def timed(label: str, settings: dict) -> None:
        folder = "".join(c if c.isalnum() else "-" for c in label)
        options = {"storage": str(root / f"storage-{folder}"), **settings}
        runner = build_task_runner(Settings(**options, task_workers=2))
        started = time.perf_counter()
        items = describe.with_options(task_runner=runner)(data=str(lake), options=options)
        seconds = time.perf_counter() - started
        errors = sum(1 for i in items if i["error"])
        print(f"{label:<34} {seconds:7.2f} s  ({len(items)} files, {errors} errors)")

    try:
        timed("thread (1st run)", {"task_runner": "thread"})
        timed("thread (2nd run)", {"task_runner": "thread"})
        timed("dask, new local cluster (cold)", {"task_runner": "dask"})
        timed("ray, new local instance (cold)", {"task_runner": "ray"})
        # Warm engines: the cluster is up and its workers have imported dsstar once.
        from distributed import LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
            address = {"task_runner": "dask", "dask_address": cluster.scheduler_address}
            timed("dask, running cluster (1st run)", address)
            timed("dask, running cluster (2nd run)", address)
        import ray

        ray.init(num_cpus=2, include_dashboard=False, runtime_env=_ray_env())
        timed("ray, running instance (1st run)", {"task_runner": "ray"})
        timed("ray, running instance (2nd run)", {"task_runner": "ray"})
        ray.shutdown()
    finally:
        llm.stop()
        server.terminate()
        server.wait(timeout=30)


def _ray_env() -> dict:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {"env_vars": {"PYTHONPATH": path}}


if __name__ == "__main__":
    main()
