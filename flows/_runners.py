"""The task runner of the analysis fan-out and the nightly batch: threads in this process,
a Dask cluster (prefect-dask) or a Ray instance (prefect-ray), chosen by
DSSTAR_TASK_RUNNER (or --task-runner). Scripts still run in the sandbox, on the worker that
runs the task; a cluster's workers must share the storage, so local storage with a remote
cluster address gets a warning."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from dsstar.locations import is_remote
from dsstar.settings import Settings

__all__ = ["build_task_runner", "default_task_runner", "shared_storage_warning"]

logger = logging.getLogger("dsstar.runners")


def build_task_runner(settings: Settings) -> TaskRunner:
    """A fresh, unstarted task runner for `settings.task_runner`."""
    warning = shared_storage_warning(settings)
    if warning:
        logger.warning(warning)
    if settings.task_runner == "dask":
        return _dask(settings)
    if settings.task_runner == "ray":
        return _ray(settings)
    return ThreadPoolTaskRunner()


def default_task_runner() -> TaskRunner:
    """The runner a flow gets when it is decorated: from DSSTAR_* variables, so a deployment's
    worker picks its engine from its environment. Invalid values fall back to threads."""
    try:
        return build_task_runner(Settings())
    except ValueError as exc:  # a bad DSSTAR_* value must not break importing the flows
        print(f"dsstar: ignoring task runner settings: {exc}", file=sys.stderr)
        return ThreadPoolTaskRunner()


def shared_storage_warning(settings: Settings) -> str | None:
    """Why the run's storage will not work for a remote cluster, or None."""
    address = {"dask": settings.dask_address, "ray": settings.ray_address}.get(settings.task_runner)
    remote = address and address != "auto" and not _loopback(address)
    if remote and not is_remote(settings.storage):
        return (
            f"storage {settings.storage} is a local folder but the {settings.task_runner}"
            f" cluster at {address} runs tasks on other machines: use shared storage"
            " (DSSTAR_STORAGE=s3://bucket/prefix) so workers can read and write it"
        )
    return None


def _loopback(address: str) -> bool:
    host = address.split("://", 1)[-1].rsplit(":", 1)[0]
    return host in {"127.0.0.1", "localhost", "::1", "[::1]"}


def _dask(settings: Settings) -> TaskRunner:
    from prefect_dask import DaskTaskRunner

    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
    # Processes, one thread each: analyses hold the GIL while parsing replies and profiles.
    # No dashboard: it needs bokeh, and a batch job has no one looking at it.
    return DaskTaskRunner(
        cluster_class="distributed.LocalCluster",
        cluster_kwargs={
            "n_workers": settings.task_workers,
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": None,
        },
    )


def _ray(settings: Settings) -> TaskRunner:
    from prefect_ray import RayTaskRunner

    if settings.ray_address:
        return RayTaskRunner(address=settings.ray_address)
    # Ray workers must import dsstar, flows and tasks: the folder that holds them goes first.
    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return RayTaskRunner(
        init_kwargs={
            "num_cpus": settings.task_workers,
            "include_dashboard": False,
            "runtime_env": {"env_vars": {"PYTHONPATH": path}},
        }
    )
