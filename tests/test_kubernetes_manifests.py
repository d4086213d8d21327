"""deployments/kubernetes, checked offline: every manifest validates against the schemas of a
pinned Kubernetes release (a broken copy does not), and the work pool's base job template,
filled with the job variables of prefect.yaml's Kubernetes deployments, renders through
prefect-kubernetes' own job configuration into a Job that validates too and carries what the
default sandbox needs. No cluster is involved: this is validation, not a run."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from conftest import require_binary
from prefect import get_client
from prefect.client.schemas.objects import FlowRun
from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError
from prefect.utilities.templating import apply_values
from prefect_kubernetes.worker import KubernetesWorkerJobConfiguration

from dsstar.execution.sandbox.uids import SLOT_FOLDERS, slot_folder

REPO = Path(__file__).resolve().parents[1]
KUBE = REPO / "deployments" / "kubernetes"
IMAGE = "registry.example.com/dsstar:0.1.0"
DEPLOY_ENV = {"DSSTAR_IMAGE": IMAGE, "DSSTAR_STORAGE": "s3://lake-runs/dsstar",
              "DSSTAR_MODEL": "openai/gpt-4o"}  # fmt: skip
KUBERNETES_VERSION = "1.33.0"  # pinned: the oldest release the manifests promise to fit
# What bubblewrap needs to make the sandbox's namespaces as root in a container (found with
# podman, docs/beyond.md): the rest of the default capabilities are dropped.
SANDBOX_CAPABILITIES = {"SYS_ADMIN", "NET_ADMIN", "SETUID", "SETGID", "KILL", "CHOWN",
                        "DAC_OVERRIDE", "FOWNER"}  # fmt: skip
# A flow run's job variables: every variable of Prefect's default Kubernetes template, hostile.
HOSTILE = {
    "name": "quiet-otter",
    "command": "sh -c 'id > /tmp/x'",
    "env": {"DSSTAR_FORM_ALLOW": "*", "DSSTAR_DATA_ROOTS": "/", "DSSTAR_SANDBOX": "none"},
    "labels": {"app": "dsstar-worker"},
    "annotations": {"container.apparmor.security.beta.kubernetes.io/x": "unconfined"},
    "namespace": "kube-system",
    "image": "registry.example.com/evil:latest",
    "service_account_name": "cluster-admin",
    "image_pull_policy": "Always",
    "backoff_limit": 9000,
    "finished_job_ttl": 9000,
    "job_watch_timeout_seconds": 9000,
    "pod_watch_timeout_seconds": 9000,
    "stream_output": False,
    "cpu_request": "900",
    "cpu_limit": "900",
    "memory_request": "900Gi",
    "memory_limit": "900Gi",
    "secret_name": "another-teams-secrets",
    "scratch_size": "900Ti",
    "cluster_config": {"config": {}, "context_name": "elsewhere"},
}
FLOW_PROCESS_MIB = 1024  # the flow's process and the warm pool's interpreter, with margin


def validate_file(path: Path) -> list[str]:
    """The kinds/names of the resources in `path`, each validated strictly (unknown fields
    are errors); raises kubernetes_validate.ValidationError on the first bad one."""
    resources = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert resources, f"{path} holds no resource"
    for resource in resources:
        kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
    return [f"{r['kind']}/{r['metadata']['name']}" for r in resources]


def manifests() -> dict[str, dict]:
    """Every resource of deployments/kubernetes/manifests by kind/name."""
    found = {}
    for path in sorted((KUBE / "manifests").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            found[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return found


def test_every_manifest_validates_against_the_pinned_release():
    names = [name for path in sorted((KUBE / "manifests").glob("*.yaml"))
             for name in validate_file(path)]  # fmt: skip
    assert set(names) >= {"Namespace/dsstar", "Deployment/dsstar-worker", "Secret/dsstar-secrets",
                          "ServiceAccount/dsstar-worker", "Role/dsstar-worker",
                          "RoleBinding/dsstar-worker"}  # fmt: skip


@pytest.mark.parametrize(
    "breakage",
    [
        ("a misspelt field", lambda d: d["spec"]["template"]["spec"].update(serviceAcount="x")),
        ("a wrong type", lambda d: d["spec"].update(replicas="two")),
        ("a missing required field", lambda d: d["spec"].pop("selector")),
    ],
    ids=lambda b: b[0],
)
def test_a_broken_copy_of_the_worker_fails_validation(tmp_path, breakage):
    worker = yaml.safe_load((KUBE / "manifests" / "worker.yaml").read_text())
    breakage[1](worker)
    broken = tmp_path / "worker.yaml"
    broken.write_text(yaml.safe_dump(worker))
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_file(broken)


def test_the_manifests_agree_with_each_other_and_with_prefect_yaml():
    found = manifests()
    template = json.loads((KUBE / "base-job-template.json").read_text())["job_configuration"]
    pod = template["job_manifest"]["spec"]["template"]["spec"]
    refs = {k: v["name"] for ref in pod["containers"][0]["envFrom"] for k, v in ref.items()}
    (pool,) = {d["work_pool"]["name"] for d in kubernetes_deployments()}
    worker = found["Deployment/dsstar-worker"]["spec"]["template"]["spec"]
    command = worker["containers"][0]["command"]
    assert command[command.index("--pool") + 1] == pool
    assert command[command.index("--type") + 1] == "kubernetes"
    assert f"ServiceAccount/{worker['serviceAccountName']}" in found
    assert f"ServiceAccount/{pod['serviceAccountName']}" in found
    assert f"Secret/{refs['secretRef']}" in found
    settings = found[f"ConfigMap/{refs['configMapRef']}"]["data"]
    assert {"DSSTAR_STORAGE", "DSSTAR_DATA_ROOTS", "DSSTAR_MODEL"} <= set(settings)
    namespaces = {
        doc["metadata"].get("namespace", doc["metadata"]["name"]) for doc in found.values()
    }
    assert namespaces == {template["namespace"]}
    binding = found["RoleBinding/dsstar-worker"]
    assert binding["subjects"][0]["name"] == worker["serviceAccountName"]
    assert f"Role/{binding['roleRef']['name']}" in found


def test_the_worker_role_grants_what_the_worker_calls():
    rules = manifests()["Role/dsstar-worker"]["rules"]
    granted = {(resource, verb) for rule in rules for resource in rule["resources"]
               for verb in rule["verbs"]}  # fmt: skip
    needed = {("jobs", v) for v in ("create", "get", "list", "watch", "delete")}
    needed |= {("pods", v) for v in ("get", "list", "watch")} | {("pods/log", "get")}
    needed |= {("events", v) for v in ("list", "watch", "create")}
    assert needed <= granted, needed - granted
    assert not any("secrets" in rule["resources"] or "*" in rule["verbs"] for rule in rules)


def validate_job(job: dict) -> None:
    """Validate a rendered Job strictly, but for the two fields prefect-kubernetes requires in
    the pod spec (`parallelism`, `completions`: Job fields, which its manifest check demands
    there too); the API server drops them with a warning, so they are taken out here."""
    pod = copy.deepcopy(job)
    for field in ("parallelism", "completions"):
        assert pod["spec"]["template"]["spec"].pop(field) == 1
    kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)


def kubernetes_deployments() -> list[dict]:
    config = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
    found = [d for d in config["deployments"] if d["work_pool"]["name"] == "dsstar-k8s"]
    assert {d["name"] for d in found} == {"on-demand-kubernetes", "nightly-kubernetes"}
    return found


def render(job_variables: dict, template: dict | None = None) -> dict:
    """The Job the Kubernetes worker would create for a flow run of a deployment with these
    job variables, by prefect-kubernetes' own code."""
    template = template or json.loads((KUBE / "base-job-template.json").read_text())
    configuration = asyncio.run(
        KubernetesWorkerJobConfiguration.from_template_and_values(template, job_variables)
    )
    flow_run = FlowRun(id=uuid.UUID(int=1), flow_id=uuid.UUID(int=2), name="quiet-otter")
    configuration.prepare_for_flow_run(flow_run)
    return configuration.job_manifest


@pytest.mark.parametrize("deployment", ["on-demand-kubernetes", "nightly-kubernetes"])
def test_the_base_job_template_renders_a_valid_job(deployment, monkeypatch):
    for name, value in DEPLOY_ENV.items():
        monkeypatch.setenv(name, value)  # what `prefect deploy` fills `{{ $NAME }}` from
    (spec,) = [d for d in kubernetes_deployments() if d["name"] == deployment]
    job = render(apply_values(copy.deepcopy(spec["work_pool"].get("job_variables", {})), {}))
    validate_job(job)
    assert_job_runs_the_default_sandbox(job)


def assert_job_runs_the_default_sandbox(job: dict) -> None:
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == IMAGE
    assert container["args"][:3] == ["prefect", "flow-run", "execute"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["PREFECT__FLOW_RUN_ID"] == str(job["metadata"]["labels"]["prefect.io/flow-run-id"])
    # The default sandbox, never 'none'; keys come from the Secret, not from the job's env.
    assert "DSSTAR_SANDBOX" not in env
    assert not any(key.endswith("_API_KEY") or key == "DSSTAR_DATABASE_URL" for key in env)
    # The policy (data roots, storage, model) from the cluster's ConfigMap, keys from its Secret.
    assert container["envFrom"] == [{"configMapRef": {"name": "dsstar-settings"}},
                                    {"secretRef": {"name": "dsstar-secrets"}}]  # fmt: skip
    context = container["securityContext"]
    assert set(context["capabilities"]["add"]) == SANDBOX_CAPABILITIES
    assert context["capabilities"]["drop"] == ["ALL"]
    assert context["allowPrivilegeEscalation"] is False and "privileged" not in context
    # The scripts a run may hold at once fit in the job's memory, beside the flow's process.
    limit_mib = int(container["resources"]["limits"]["memory"].removesuffix("Gi")) * 1024
    scripts_mib = int(env["DSSTAR_MAX_PARALLEL"]) * int(env["DSSTAR_EXEC_MEMORY_MB"])
    assert scripts_mib + FLOW_PROCESS_MIB <= limit_mib
    # Every dsstar pod of a node takes its scripts' uids from one set of slot locks: the uids
    # are the node's, and two pods' scripts under one uid would share RLIMIT_NPROC.
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    # The folder is the one dsstar locks on any host, so dsstar on the node itself shares it.
    slots = str(SLOT_FOLDERS[0])
    assert mounts.keys() == {"/tmp", slots}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts[slots]]["hostPath"]["path"] == slots
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == "dsstar-flow-run"
    assert job["metadata"]["namespace"] == "dsstar"


@pytest.mark.slow
def test_a_pool_made_from_the_template_takes_the_deployments_as_prefect_deploy_sends_them():
    """As the docs set it up, against the test's Prefect server: the pool is created from the
    template, both Kubernetes deployments are deployed into it (the server checks their job
    variables against the pool's schema), and what the server then holds renders a valid Job,
    as the worker would render it."""

    def prefect(*args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "prefect", "--no-prompt", *args], cwd=REPO,
            capture_output=True, text=True, timeout=180, env={**os.environ, **DEPLOY_ENV},
        )  # fmt: skip
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])

    async def stored(names: tuple[str, ...]) -> tuple[dict, list[dict]]:
        async with get_client() as client:
            pool = await client.read_work_pool("dsstar-k8s")
            deployments = [await client.read_deployment_by_name(name) for name in names]
        return pool.base_job_template, [d.job_variables for d in deployments]

    async def remove(names: tuple[str, ...]) -> None:
        async with get_client() as client:
            for name in names:
                with contextlib.suppress(ObjectNotFound):
                    await client.delete_deployment((await client.read_deployment_by_name(name)).id)
            with contextlib.suppress(ObjectNotFound):
                await client.delete_work_pool("dsstar-k8s")

    async def hostile_flow_run(name: str) -> str:
        async with get_client() as client:
            deployment = await client.read_deployment_by_name(name)
            try:
                await client.create_flow_run_from_deployment(
                    deployment.id, parameters=parameters[name], job_variables=HOSTILE
                )
            except PrefectHTTPStatusError as exc:
                return f"{exc.response.status_code} {exc.response.text}"
        return "created"

    template = KUBE / "base-job-template.json"
    parameters = {"ds-star/on-demand-kubernetes": {"question": "q", "data": "s3://lake/x"}}
    names = ("ds-star/on-demand-kubernetes", "ds-star-nightly/nightly-kubernetes")
    try:
        prefect("work-pool", "create", "dsstar-k8s", "--type", "kubernetes", "--overwrite",
                "--base-job-template", str(template))  # fmt: skip
        prefect("deploy", "--prefect-file", "deployments/prefect.yaml",
                "--name", "on-demand-kubernetes", "--name", "nightly-kubernetes")  # fmt: skip
        pool_template, variables = asyncio.run(stored(names))
        refusal = asyncio.run(hostile_flow_run(names[0]))
    finally:  # the nightly schedule would leave scheduled runs on the shared server
        asyncio.run(remove(names))
    assert pool_template == json.loads(template.read_text())
    # The server refuses a flow run that sets what the template fixes, naming the variable.
    assert "422" in refusal and "Additional properties are not allowed" in refusal, refusal
    assert all(name in refusal for name in ("command", "env", "image", "secret_name"))
    for job_variables in variables:
        job = render(job_variables, pool_template)
        validate_job(job)
        assert_job_runs_the_default_sandbox(job)


def test_a_value_of_the_wrong_kind_renders_an_invalid_job():
    """The rendered Job is validated for real: a bad value in the template is caught."""
    template = json.loads((KUBE / "base-job-template.json").read_text())
    pod = template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]
    pod["volumes"][0]["emptyDir"]["sizeLimit"] = ["20Gi"]
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_job(render({}, template))


def test_a_flow_run_s_hostile_job_variables_leave_the_job_as_the_template_says():
    """Rendered by prefect-kubernetes' own code with every variable of Prefect's default
    Kubernetes template set by a flow run (as if the server had not refused them, see the
    pool test below): the Job carries none of them."""
    job = render(HOSTILE)
    validate_job(job)
    assert_job_runs_the_default_sandbox(job)
    assert job == render({"name": HOSTILE["name"]})
    text = json.dumps(job)
    for value in ("evil", "900", "kube-system", "cluster-admin", "another-teams", "unconfined",
                  "DSSTAR_FORM_ALLOW", "id >"):  # fmt: skip
        assert value not in text, value


# Run in the container by the host's Python (the container's root is the host's, under an
# overlay): the default sandbox, one script that reports its uid, its network and a secret.
SANDBOX_PROBE = """
import json, os, socket, sys
from pathlib import Path
from dsstar.errors import ConfigError
from dsstar.execution.sandbox import Limits, resolve_mode, run_script
PORT = int(sys.argv[1])  # the Prefect server of the tests, on the host's loopback
socket.create_connection(("127.0.0.1", PORT), timeout=5).close()  # the container reaches it
try:
    mode = resolve_mode("auto")
except ConfigError as exc:
    sys.exit(f"refused: {exc}")
code = '''
import os, socket
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2)
    net = "reached"
except OSError as exc:
    net = type(exc).__name__
data = open("data/x.csv").readlines()[-1].strip()
print(os.getuid(), net, "DSSTAR_PROBE_SECRET" in os.environ, data)
'''.replace("PORT", str(PORT))
result = run_script(code, data_dir=Path("/data"), limits=Limits(warm=False), mode=mode)
print(json.dumps({"mode": mode, "ok": result.ok, "output": result.output}))
"""


def podman_flags(container: dict, pod: dict) -> list[str]:
    """The podman options that give a container what the job template gives the job's."""
    context = container["securityContext"]
    flags = ["--cap-drop", ",".join(context["capabilities"]["drop"]),
             "--cap-add", ",".join(context["capabilities"]["add"])]  # fmt: skip
    if context["allowPrivilegeEscalation"] is False:
        flags += ["--security-opt", "no-new-privileges"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:
            flags += ["--tmpfs", f"{mount['mountPath']}:notmpcopyup"]
        else:  # the node's uid slots: here the host's own, which its dsstar processes lock
            flags += ["-v", f"{slot_folder()}:{mount['mountPath']}"]
    return flags


@pytest.mark.slow
def test_the_job_template_s_security_context_runs_the_default_sandbox_in_a_container(tmp_path):
    """The securityContext, as podman options, on a real container (root inside, no user
    namespace, podman's default seccomp profile): the default sandbox isolates a script
    there; with podman's default capabilities it refuses to run."""
    podman = require_binary(shutil.which("podman"), "podman")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.csv").write_text("a,b\n1,2\n")
    conf = tmp_path / "containers.conf"  # runc and no default ulimits (docs/beyond.md)
    conf.write_text('[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n')
    template = json.loads((KUBE / "base-job-template.json").read_text())
    pod = template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]
    port = urlsplit(os.environ["PREFECT_API_URL"]).port

    def run(flags: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [podman, "run", "--rm", "--rootfs", *flags, "--network", "host",
             "-v", f"{tmp_path / 'data'}:/data:ro", "-e", "DSSTAR_PROBE_SECRET=hunter2",
             "-e", "LITELLM_LOCAL_MODEL_COST_MAP=True",
             "-v", f"{REPO}:{REPO}:ro",  # the checkout and its venv, also when under /tmp
             "/:O",
             sys.executable, "-c", SANDBOX_PROBE, str(port)],
            capture_output=True, text=True, timeout=240, cwd=REPO,
            env={**os.environ, "CONTAINERS_CONF": str(conf)},
        )  # fmt: skip

    done = run(podman_flags(pod["containers"][0], pod))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["mode"] == "bwrap" and report["ok"], report
    uid, network, secret, data = report["output"].split()
    assert int(uid) >= 1_200_000  # a dedicated unprivileged uid, not the container's root
    assert network != "reached" and secret == "False" and data == "1,2"

    refused = run(["--tmpfs", "/tmp:notmpcopyup"])  # podman's default capabilities
    assert refused.returncode != 0
    assert "refused: no usable isolation" in refused.stderr, refused.stderr[-3000:]
