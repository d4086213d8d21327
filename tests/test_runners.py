"""The analysis fan-out on real engines: a local 2-worker Dask cluster and a local Ray
instance give the same descriptions as the thread runner (scripts run in the sandbox on the
workers), and local storage with a remote cluster address is called out."""

from __future__ import annotations

import shutil

import pytest
from prefect.task_runners import ThreadPoolTaskRunner
from scenarios import describe_script

from dsstar.settings import Settings
from flows._runners import build_task_runner, shared_storage_warning
from flows.describe import describe

pytestmark = pytest.mark.slow


@pytest.fixture
def lake(sales, tmp_path):
    """The example data plus a few more tables: enough files to spread over two workers."""
    root = tmp_path / "lake"
    shutil.copytree(sales, root)
    for n in range(4):
        (root / f"extra_{n}.csv").write_text(f"id,value\n{n},{n * 10}\n{n + 1},{n * 20}\n")
    return root


def analyse(kind: str, lake, tmp_path) -> list[dict]:
    """Describe the lake on `kind`, into a storage of its own (no shared cache hits)."""
    options = {"storage": str(tmp_path / f"storage-{kind}"), "task_runner": kind}
    runner = build_task_runner(Settings(**options, task_workers=2))
    return describe.with_options(task_runner=runner)(data=str(lake), options=options)


def by_path(items: list[dict]) -> dict[str, tuple]:
    return {i["path"]: (i["format"], i["description"], i["source"], i["error"]) for i in items}


# A cluster starts its own processes (Ray: a GCS, a raylet, two workers that import dsstar and
# Prefect), 45 s for the Ray case on an idle machine. Beside the soaks at the suite's start
# (load 8 to 15 on 2 cores) it took 170 s in one run and more than the suite's 300 s in another.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["dask", "ray"])
def test_cluster_runner_analyses_like_threads(kind, env, llm, lake, tmp_path):
    llm.default("analyzer", describe_script)
    threads = analyse("thread", lake, tmp_path)
    clustered = analyse(kind, lake, tmp_path)
    # The example's files (README.md, orders_2024.csv, regions.json: no two alike) and the
    # four extra_*.csv.
    example = sorted(p.name for p in lake.iterdir() if not p.name.startswith("extra_"))
    assert sorted(p.rsplit("/", 1)[-1] for p in by_path(threads)) == sorted(
        [*example, *(f"extra_{n}.csv" for n in range(4))]
    )
    assert by_path(clustered) == by_path(threads)
    assert all(item["error"] is None for item in clustered)
    assert all("bytes:" in item["description"] for item in clustered)  # the script's output
    # Each runner analysed every file itself: each example file with a model call, the four
    # like extra_*.csv with one, whose script described the three others on the runner's
    # workers.
    assert len(llm.calls("analyzer")) == 2 * (len(example) + 1)
    assert [item["source"] for item in clustered].count("script") == 3


def test_runner_choice_and_shared_storage_warning():
    from prefect_dask import DaskTaskRunner
    from prefect_ray import RayTaskRunner

    assert isinstance(build_task_runner(Settings()), ThreadPoolTaskRunner)
    assert isinstance(build_task_runner(Settings(task_runner="dask")), DaskTaskRunner)
    remote = Settings(task_runner="dask", dask_address="tcp://10.1.2.3:8786", storage="/tmp/x")
    assert build_task_runner(remote).address == "tcp://10.1.2.3:8786"
    assert "shared storage" in shared_storage_warning(remote)
    assert shared_storage_warning(remote.model_copy(update={"storage": "s3://b/p"})) is None
    local = Settings(task_runner="dask", dask_address="tcp://127.0.0.1:8786", storage="/tmp/x")
    assert shared_storage_warning(local) is None
    assert isinstance(build_task_runner(Settings(task_runner="ray")), RayTaskRunner)
    with pytest.raises(ValueError, match="thread, dask, ray"):
        Settings(task_runner="spark")
