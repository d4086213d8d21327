"""The dsstar image (the repository's Containerfile) and the Docker work pool, end to end.

The image is built on a locally made Debian base (tests/podman.py) and run through podman's
Docker API, as a Docker worker runs it. First the sandbox's default mode inside the container,
with the settings prefect.yaml gives it and without them; then `deployments/prefect.yaml`'s
`on-demand-docker` deployment served by a `prefect worker` of type docker: the retail question
answered in the container, data and artifacts in S3 (moto), the ledger in Postgres, the model
on the host's loopback, and a hostile generated script that finds no secret, no network and no
host file.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import require_binary
from podman import build_image, docker_api, podman_env
from processes import start, stop
from scenarios import ANSWER, two_rounds

# The first test builds the image: from nothing (a new machine or a new lock) that takes 10 to
# 20 minutes on 2 cores; cached, seconds.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]

REPO = Path(__file__).resolve().parents[1]
POOL = "dsstar-docker"
# Run inside the container: one generated script through the sandbox in its default mode.
SANDBOX_PROBE = """
import os, tempfile
from pathlib import Path
from dsstar.execution.sandbox import Limits, run_script
data = Path(tempfile.mkdtemp()); (data / "x.csv").write_text("a\\n1\\n")
os.environ["OPENAI_API_KEY"] = "sk-probe-secret"
script = "import os; print(sorted(os.environ)); print(open('data/x.csv').read().split())"
result = run_script(script, data_dir=data, limits=Limits())
print(result.sandbox, result.exit_code, result.output)
"""


@pytest.fixture(scope="module")
def image():
    """The image, built (or found up to date) once for this file: (podman env, tag, figures)."""
    for program in ("podman", "mmdebstrap", "runc"):  # scripts/test installs them
        require_binary(shutil.which(program), program)
    env = podman_env()
    started = time.monotonic()
    tag = build_image(env)
    size = subprocess.run(
        ["podman", "image", "inspect", tag, "--format", "{{.Size}}"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    figures = {
        "image build (s, cached layers reused)": round(time.monotonic() - started, 1),
        "image size (MB)": round(int(size) / 1e6),
    }
    return env, tag, figures


@pytest.fixture
def docker(image, tmp_path):
    """A docker-py client on podman's Docker API; yields (client, DOCKER_HOST, podman env)."""
    import docker as docker_py

    env, _, _ = image
    with docker_api(env, tmp_path) as host:
        client = docker_py.DockerClient(base_url=host)
        try:
            yield client, host, env
        finally:
            client.close()


def _run(client, tag: str, code: str, **kwargs) -> str:
    container = client.containers.run(tag, ["python", "-c", code], detach=True, **kwargs)
    try:
        container.wait(timeout=300)
        return container.logs().decode()
    finally:
        container.remove(force=True)


def test_the_sandbox_default_mode_holds_in_the_container(docker, image, record_property):
    client, _, _ = docker
    _, tag, figures = image
    record_property("figures", figures)
    # prefect.yaml's docker pool adds CAP_SYS_ADMIN: the default mode isolates with unshare
    # (bwrap, as root, also needs CAP_NET_ADMIN to bring up the loopback of its network).
    for caps, mode in ((["SYS_ADMIN"], "unshare"), (["SYS_ADMIN", "NET_ADMIN"], "bwrap")):
        out = _run(client, tag, SANDBOX_PROBE, cap_add=caps)
        assert out.startswith(f"{mode} 0 "), (caps, out)
        assert "['a', '1']" in out and "OPENAI_API_KEY" not in out  # data read, no secret
    # With the runtime's default capabilities root cannot make namespaces: dsstar refuses to
    # run generated code, naming the fix.
    out = _run(client, tag, SANDBOX_PROBE)
    assert "ConfigError: no usable isolation for generated scripts" in out, out


def _hostile_prelude(ports: list[int], canary: Path) -> str:
    """Code at the top of each generated script: it looks for secrets, the host's loopback
    services and a host file, and prints what it found."""
    return f"""import os, socket
print("PROBE uid", os.getuid())
print("PROBE env", sorted(os.environ))
for pid in os.listdir("/proc"):
    try:
        print("PROBE environ of", pid, open(f"/proc/{{pid}}/environ", "rb").read()[:4000])
    except OSError:
        pass
for port in {ports!r}:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        print("PROBE connected", port)
    except OSError as error:
        print("PROBE no connection", port, type(error).__name__)
try:
    print("PROBE canary", open({str(canary)!r}).read())
except OSError as error:
    print("PROBE canary unreadable", type(error).__name__)
"""


HOSTILE_DOCKER = {
    "name": "dsstar-run",
    "labels": {"team": "x"},
    "command": "sh -c 'id > /tmp/x'",
    "env": {"DSSTAR_FORM_ALLOW": "*", "DSSTAR_DATA_ROOTS": "/"},
    "image": "registry.example.com/evil:latest",
    "privileged": True,
    "volumes": ["/:/host"],
    "network_mode": "host",
    "networks": ["host"],
    "container_create_kwargs": {"cap_add": ["ALL"]},
    "mem_limit": "900g",
    "memswap_limit": "900g",
    "auto_remove": False,
    "stream_output": False,
    "image_pull_policy": "Always",
}


def _prefect(*args: str, env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "prefect", "--no-prompt", *args],
        cwd=REPO, capture_output=True, text=True, timeout=180, env=env,
    )  # fmt: skip
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])


def test_a_docker_worker_answers_in_the_container(
    docker, image, llm, s3, postgres_url, moto_port, tmp_path, request
):
    import boto3
    from prefect.blocks.system import Secret
    from prefect.deployments import run_deployment
    from prefect.exceptions import PrefectHTTPStatusError
    from prefect_docker.worker import DockerWorker

    _, docker_host, _ = docker
    _, tag, _ = image
    bucket = s3.removeprefix("s3://").split("/")[0]
    for path in (REPO / "examples" / "sales").iterdir():
        boto3.client("s3").upload_file(str(path), bucket, f"lake/sales/{path.name}")
    canary = tmp_path / "canary.txt"
    canary.write_text(f"host-canary-{secrets.token_hex(8)}")
    model_key = f"sk-container-{secrets.token_hex(8)}"
    pg_port = int(postgres_url.rsplit(":", 1)[1].split("/")[0])
    two_rounds(llm, prelude=_hostile_prelude([llm.port, moto_port, pg_port], canary))

    Secret(value=model_key).save("openai-api-key", overwrite=True)
    Secret(value=postgres_url).save("dsstar-database-url", overwrite=True)
    deploy_env = {
        **os.environ,
        "DSSTAR_IMAGE": tag,
        "DSSTAR_STORAGE": s3,
        "DSSTAR_DATA_ROOTS": f"s3://{bucket}/lake",
        "DSSTAR_MODEL": "openai/gpt-4o-mini",
    }
    # The pool's template as this machine's operator writes it: the image, storage, data roots
    # and model of the site, the loopback network (the model, S3 and Postgres listen there)
    # and the S3 endpoint with its credentials.
    pool = json.loads((REPO / "deployments" / "docker" / "base-job-template.json").read_text())
    job = pool["job_configuration"]
    job["image"] = tag
    job["network_mode"] = "host"
    job["env"].update(
        {k: v for k, v in deploy_env.items() if k in job["env"] and k.startswith("DSSTAR_")}
    )
    job["env"].update(
        DSSTAR_API_BASE=llm.base_url,
        **{k: os.environ[k] for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID",
                                      "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")},
    )  # fmt: skip
    (tmp_path / "docker-pool.json").write_text(json.dumps(pool))
    _prefect("work-pool", "create", POOL, "--type", "docker", "--overwrite",
             "--base-job-template", str(tmp_path / "docker-pool.json"), env=deploy_env)  # fmt: skip
    _prefect("deploy", "--prefect-file", "deployments/prefect.yaml", "--name",
             "on-demand-docker", env=deploy_env)  # fmt: skip
    question = "Which region had the highest revenue in 2024 H1, and who manages it?"
    parameters = {"question": question, "data": f"s3://{bucket}/lake/sales", "max_rounds": 5}
    # A flow run that sets every variable of Prefect's default Docker template is refused by
    # the server, naming each one that is not the run's to choose.
    defaults = DockerWorker.get_default_base_job_template()["variables"]["properties"]
    hostile = {name: HOSTILE_DOCKER.get(name, "x") for name in defaults}
    with pytest.raises(PrefectHTTPStatusError) as refused:
        run_deployment("ds-star/on-demand-docker", parameters=parameters, timeout=0,
                       job_variables=hostile)  # fmt: skip
    assert refused.value.response.status_code == 422
    for name in set(defaults) - {"name", "labels"}:
        assert repr(name) in refused.value.response.text, (name, refused.value.response.text)

    log = open(tmp_path / "worker.log", "w")
    worker = start(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", POOL, "--type", "docker",
         "--limit", "1"],
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, "DOCKER_HOST": docker_host, "PREFECT_WORKER_QUERY_SECONDS": "1"},
    )  # fmt: skip
    try:
        started = time.monotonic()
        flow_run = run_deployment(
            "ds-star/on-demand-docker", parameters=parameters, timeout=600, poll_interval=1
        )
        elapsed = time.monotonic() - started
    finally:
        stop(worker, grace=60)
        log.close()
    worker_log = (tmp_path / "worker.log").read_text()
    assert flow_run.state.is_completed(), (flow_run.state, worker_log[-4000:])
    assert flow_run.work_pool_name == POOL
    assert model_key not in json.dumps(flow_run.parameters)
    request.node.user_properties.append(
        ("figures", {"docker pool: run_deployment to answer (s)": round(elapsed, 1)})
    )

    s3fs = _s3fs()
    (record_path,) = s3fs.glob(f"{s3.removeprefix('s3://')}/runs/*/run.json")
    record = json.loads(s3fs.cat(record_path))
    assert record["status"] == "verified" and record["answer"] == ANSWER
    run_dir = record_path.rsplit("/", 1)[0]
    outputs = [s3fs.cat(p).decode() for p in s3fs.glob(f"{run_dir}/rounds/*/output.txt")]
    assert len(outputs) == 2 and all("PROBE env" in out for out in outputs), outputs
    for out in outputs:
        for secret in (model_key, os.environ["AWS_SECRET_ACCESS_KEY"], postgres_url):
            assert secret not in out
        for name in ("OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "DSSTAR_DATABASE_URL"):
            assert name not in out
        assert "PROBE connected" not in out and out.count("PROBE no connection") == 3
        assert "PROBE canary unreadable" in out and canary.read_text() not in out
        # the image's uid range (DSSTAR_EXEC_UID_BASE), apart from a dsstar on the host
        uid = int(out.split("PROBE uid ", 1)[1].split()[0])
        assert 1_300_000 <= uid < 1_300_256, uid
    assert _ledger_answers(postgres_url, record["run_id"]) == [ANSWER]


def _s3fs():
    import s3fs

    return s3fs.S3FileSystem(client_kwargs={"endpoint_url": os.environ["AWS_ENDPOINT_URL"]})


def _ledger_answers(url: str, run_id: str) -> list[str]:
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            query = sqlalchemy.text("SELECT answer FROM dsstar_run WHERE run_id = :run_id")
            rows = conn.execute(query, {"run_id": run_id}).mappings().all()
    finally:
        engine.dispose()
    return [row["answer"] for row in rows]
