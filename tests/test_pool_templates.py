"""dsstar's work pool templates (deployments/*/base-job-template.json) leave a flow run only
its job's name and labels: every variable of Prefect's default template of each pool type,
set on a flow run with a hostile value, is refused by the pool's schema as Prefect's server
checks a flow run's job variables, and, rendered anyway by the worker's own job
configuration (as if the server let it through), changes nothing but the Docker env, which
the flow itself refuses (`dsstar.inputs.trust.check_job_variables`). Offline: no server, no
worker; tests/test_work_pool.py runs the process pool for real."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import uuid
from pathlib import Path

import pytest
from prefect.client.schemas.objects import FlowRun
from prefect.utilities.schema_tools import ValidationError, validate
from prefect.workers.process import ProcessWorker
from prefect_docker.worker import DockerWorker
from prefect_kubernetes.worker import KubernetesWorker

import dsstar.inputs.trust as trust

REPO = Path(__file__).resolve().parents[1]
MARKER = "/tmp/dsstar-job-variable-marker"
# A hostile value for every variable of Prefect's default templates of the three types.
HOSTILE = {
    "command": f"sh -c 'id > {MARKER}'",
    "env": {
        "DSSTAR_FORM_ALLOW": "*",
        "DSSTAR_DATA_ROOTS": "/",
        "DSSTAR_SANDBOX": "none",
        "DSSTAR_MAX_TOKENS": "900000",
        "PYTHONPATH": "/tmp",
        "LD_PRELOAD": "/tmp/x.so",
        "PREFECT_API_URL": "http://elsewhere/api",
    },
    "working_dir": "/",
    "stream_output": False,
    "image": "registry.example.com/evil:latest",
    "registry_credentials": {
        "username": "evil",
        "password": "x",
        "registry_url": "registry.example.com",
    },
    "image_pull_policy": "Always",
    "networks": ["host"],
    "network_mode": "host",
    "auto_remove": False,
    "volumes": ["/:/host", "/var/run/docker.sock:/var/run/docker.sock"],
    "mem_limit": "900g",
    "memswap_limit": "900g",
    "privileged": True,
    "container_create_kwargs": {"cap_add": ["ALL"], "pid_mode": "host", "user": "0"},
    "annotations": {"container.apparmor.security.beta.kubernetes.io/prefect-job": "unconfined"},
    "namespace": "kube-system",
    "service_account_name": "cluster-admin",
    "backoff_limit": 100,
    "finished_job_ttl": None,
    "job_watch_timeout_seconds": 1,
    "pod_watch_timeout_seconds": 1,
    "cluster_config": {"config": {}, "context_name": "elsewhere"},
    "cpu_request": "64",
    "cpu_limit": "64",
    "memory_request": "900Gi",
    "memory_limit": "900Gi",
    "secret_name": "another-teams-secrets",
    "scratch_size": "900Ti",
    "labels": {"app": "x"},  # allowed by process and Docker; refused by Kubernetes
    "name": "a-name",  # allowed everywhere
}
# Names a run may choose, but not as a template: the worker resolves `{{ prefect.* }}` in the
# rendered job, so such a name would carry a secret block into a container's name.
INJECTED_NAME = "{{ prefect.blocks.secret.openai-api-key }}"

POOLS = {
    "process": (ProcessWorker, {"name", "labels"}, set()),
    "docker": (DockerWorker, {"name", "labels"}, {"env"}),
    "kubernetes": (KubernetesWorker, {"name"}, set()),
}
# Variables that carry the pool's Secret blocks (Prefect's server accepts a block reference
# only in a variable's default): each allows its default alone.
PINNED = {"docker": {"openai_api_key", "database_url"}}


def template(kind: str) -> dict:
    return json.loads((REPO / "deployments" / kind / "base-job-template.json").read_text())


def server_check(pool: dict, job_variables: dict) -> None:
    """What Prefect's server does with a flow run's job variables (its
    `validate_job_variables_for_deployment_flow_run`): the template's defaults overlaid with
    them, checked against the template's schema."""
    schema = pool["variables"]
    values = {k: v["default"] for k, v in schema["properties"].items() if "default" in v}
    validate({**values, **job_variables}, schema, raise_on_error=True, preprocess=True,
             ignore_required=False, allow_none_with_default=True)  # fmt: skip


def rendered(worker: type, pool: dict, job_variables: dict) -> dict:
    """The job the worker would start for a flow run with these job variables, by the
    worker's own code (Secret blocks, resolved by the worker from the API, left as text)."""
    pool = json.loads(json.dumps(pool).replace("{{ prefect.blocks.", "{{ blocks."))
    configuration = asyncio.run(
        worker.job_configuration.from_template_and_values(copy.deepcopy(pool), job_variables)
    )
    flow_run = FlowRun(id=uuid.UUID(int=1), flow_id=uuid.UUID(int=2), name="quiet-otter")
    configuration.prepare_for_flow_run(flow_run)
    return configuration.model_dump(mode="json")


@pytest.mark.parametrize("kind", POOLS)
def test_every_default_job_variable_is_refused_or_without_effect(kind):
    worker, allowed, merged = POOLS[kind]
    pool = template(kind)
    defaults = worker.get_default_base_job_template()["variables"]["properties"]
    assert set(defaults) <= set(HOSTILE), set(defaults) - set(HOSTILE)  # a new one: judge it
    pinned = PINNED.get(kind, set())
    assert set(pool["variables"]["properties"]) == allowed | pinned
    for name in pinned:
        variable = pool["variables"]["properties"][name]
        assert variable["enum"] == [variable["default"]], name
        with pytest.raises(ValidationError, match=name):
            server_check(pool, {name: "{{ prefect.blocks.secret.another-teams-key }}"})
    baseline = rendered(worker, pool, {})
    for name in sorted(set(defaults) - allowed):
        with pytest.raises(ValidationError, match=name):
            server_check(pool, {name: HOSTILE[name]})
        if name not in merged:
            assert rendered(worker, pool, {name: HOSTILE[name]}) == baseline, name
    for name in allowed:  # a plain name and labels pass, and name only the job
        server_check(pool, {name: HOSTILE[name]})
        changed = rendered(worker, pool, {name: HOSTILE[name]})
        assert {k for k in baseline if changed[k] != baseline[k]} <= {name, "job_manifest"}
    with pytest.raises(ValidationError, match="name"):
        server_check(pool, {"name": INJECTED_NAME})


@pytest.mark.parametrize("kind", POOLS)
def test_the_server_accepts_the_template(kind):
    """A work pool made from the template is accepted by Prefect's server, whose check wants
    every placeholder of the job to name a variable (a Secret block only in a default)."""
    from prefect.server.schemas.actions import WorkPoolCreate

    WorkPoolCreate(name=f"dsstar-{kind}", type=kind, base_job_template=template(kind))


def test_the_docker_env_a_server_would_refuse_is_refused_by_the_flow_too():
    """Rendered, a run's env merges into the Docker template's (Prefect's worker merges any
    `env` value): the server's check refuses it, and the flow refuses it again at its start."""
    job = rendered(DockerWorker, template("docker"), {"env": HOSTILE["env"]})
    assert job["env"]["DSSTAR_FORM_ALLOW"] == "*"  # what the two checks stand against
    with pytest.raises(trust.ForbiddenError, match="env.DSSTAR_FORM_ALLOW"):
        trust.check_job_variables({"env": HOSTILE["env"]})


@pytest.mark.parametrize("kind", POOLS)
def test_the_template_fixes_the_job(kind):
    """What the template fixes, as the worker renders it: the process worker's own
    environment and command; the Docker image, env and capabilities of the sandbox; the
    Kubernetes image and the ConfigMap and Secret the policy comes from."""
    worker, _, _ = POOLS[kind]
    job = rendered(worker, template(kind), {})
    if kind == "process":
        assert job["command"].endswith(" -m prefect.engine")  # the worker's own
        assert job["working_dir"] is None

        # The worker's environment is the run's (its DSSTAR_* policy): the job adds none.
        def policy(env):
            return {k: v for k, v in env.items() if k.startswith("DSSTAR_")}

        assert policy(job["env"]) == policy(os.environ), job["env"]
    elif kind == "docker":
        assert job["image"] == "registry.example.com/dsstar:2026.11"
        assert job["privileged"] is False and job["volumes"] == [] and job["networks"] == []
        assert job["container_create_kwargs"] == {"cap_add": ["SYS_ADMIN"]}
        assert job["env"]["DSSTAR_DATA_ROOTS"] == "s3://bucket/lake"
        assert "DSSTAR_FORM_ALLOW" not in job["env"]
    else:
        (container,) = job["job_manifest"]["spec"]["template"]["spec"]["containers"]
        assert container["image"] == "registry.example.com/dsstar:0.1.0"
        assert container["envFrom"] == [{"configMapRef": {"name": "dsstar-settings"}},
                                        {"secretRef": {"name": "dsstar-secrets"}}]  # fmt: skip
