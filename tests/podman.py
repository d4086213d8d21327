"""Podman for the container tests: the dsstar image built from the repository's Containerfile
on a locally made Debian base (no image registry is reachable here), and podman's Docker API
served on a unix socket, as the Docker work pool's worker talks to a Docker daemon.

Built things are kept under a cache folder (`DSSTAR_TEST_CACHE`, default
~/.cache/dsstar-test): the base's root filesystem, the wheelhouse of the pinned runtime
dependencies (keyed by the lock), podman's image store. A second build with
an unchanged Containerfile and lock reuses every layer but the project's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from processes import start, stop

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("DSSTAR_TEST_CACHE", Path.home() / ".cache" / "dsstar-test"))
# What the Containerfile needs of its base: Python 3.11 with venv, the sandbox's bubblewrap and
# LightGBM's OpenMP runtime (the public python images get the last two from the Containerfile's
# apt-get instead; the test build has no network).
BASE_PACKAGES = ("python3", "python3-venv", "bubblewrap", "libgomp1", "ca-certificates")
BASE_TAG = (
    "localhost/dsstar-test-base:"
    + hashlib.sha256(",".join(BASE_PACKAGES).encode()).hexdigest()[:12]
)
IMAGE = "localhost/dsstar:test"
# crun refuses this machine's hybrid cgroups; podman's default ulimits cannot be set here.
CONTAINERS_CONF = '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n'


def podman_env(root: Path = CACHE / "podman") -> dict[str, str]:
    """The environment under which podman uses a private configuration and image store."""
    root.mkdir(parents=True, exist_ok=True)
    conf = root / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    storage = root / "storage.conf"
    storage.write_text(
        f'[storage]\ndriver = "overlay"\ngraphroot = "{root / "storage"}"\n'
        f'runroot = "{root / "run"}"\n'
    )
    return {**os.environ, "CONTAINERS_CONF": str(conf), "CONTAINERS_STORAGE_CONF": str(storage)}


def podman(*args: str, env: dict[str, str], timeout: float = 600) -> str:
    """Run `podman ARGS`; its stdout, or AssertionError with its output."""
    done = subprocess.run(
        ["podman", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


def wheelhouse() -> Path:
    """Every pin of requirements.lock as a wheel, built on this host (Debian, Python 3.11)
    once per lock. All of them, not only what this host's Python resolves: the base's Python
    may be an older 3.11 that needs a backport the host's does not (redis's async-timeout)."""
    key = hashlib.sha256((REPO / "requirements.lock").read_bytes()).hexdigest()[:12]
    target = CACHE / f"wheels-{key}"
    if not target.is_dir():
        partial = CACHE / f"wheels-{key}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
             "-r", str(REPO / "requirements.lock"), "setuptools", "-w", str(partial)],
            check=True, capture_output=True, timeout=1800,
        )  # fmt: skip
        partial.rename(target)
    return target


def base_image(env: dict[str, str]) -> str:
    """A Debian bookworm image with Python, made with mmdebstrap and imported into podman."""
    if subprocess.run(["podman", "image", "exists", BASE_TAG], env=env).returncode == 0:
        return BASE_TAG
    tarball = CACHE / f"{BASE_TAG.rsplit(':', 1)[1]}-rootfs.tar"
    if not tarball.exists():
        partial = tarball.with_suffix(".partial.tar")  # mmdebstrap's format: from the name
        subprocess.run(
            ["mmdebstrap", "--quiet", "--variant=minbase", "--include=" + ",".join(BASE_PACKAGES),
             "bookworm", str(partial)],
            check=True, capture_output=True, timeout=1200,
        )  # fmt: skip
        partial.rename(tarball)
    podman("import", str(tarball), BASE_TAG, env=env)
    return BASE_TAG


def build_image(env: dict[str, str]) -> str:
    """The repository's Containerfile built on the local base, offline, from the wheelhouse."""
    wheels = wheelhouse()
    remove_stopped_builds(env)
    podman(
        "build", "--quiet", "--layers", "--network", "none", "-f", str(REPO / "Containerfile"),
        "--build-arg", f"BASE={base_image(env)}",
        "--build-arg", "PIP_OPTIONS=--no-index --find-links /wheels",
        "-v", f"{wheels}:/wheels:ro", "-t", IMAGE, str(REPO),
        env=env, timeout=1800,
    )  # fmt: skip
    podman("image", "prune", "--force", env=env)  # the layers earlier builds left untagged
    return IMAGE


def remove_stopped_builds(env: dict[str, str]) -> None:
    """The working containers of a build that was stopped midway (a test run killed while it
    built): podman keeps each with its layers mounted, and `rm -rf` of the cache then fails
    on those mounts."""
    stale = podman(
        "ps", "--all", "--external", "--filter", "name=-working-container$",
        "--format", "{{.ID}}", env=env,
    ).split()  # fmt: skip
    if stale:
        podman("rm", "--force", *stale, env=env)


@contextlib.contextmanager
def docker_api(env: dict[str, str], folder: Path) -> Iterator[str]:
    """podman's Docker API on a unix socket in `folder`, for as long as the block runs; yields
    the DOCKER_HOST URL. The service is stopped by its pid, also when the block fails."""
    socket = folder / "podman.sock"
    log = open(folder / "podman-service.log", "w")
    proc = start(
        ["podman", "system", "service", "--time=0", f"unix://{socket}"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not socket.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((folder / "podman-service.log").read_text()[-3000:])
            time.sleep(0.2)
        yield f"unix://{socket}"
    finally:
        stop(proc)
        log.close()
