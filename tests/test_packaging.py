"""dsstar as users install it: `pip install .` (not editable) holds everything a run needs
(package code, prompts, migrations), and `dsstar run` from that copy answers a question."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from scenarios import ANSWER, two_rounds

# What a build reads: the project file, the readme of its metadata and the listed packages.
SOURCES = ("pyproject.toml", "README.md", "dsstar", "flows", "tasks", "prompts")


def package_folders() -> dict[str, Path]:
    """Every package the install must hold, by dotted name: each top-level folder of the
    layout and every folder of .py files under it."""
    found = {}
    for top in ("dsstar", "flows", "tasks", "prompts"):
        root = REPO / top
        for folder in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
            if folder.name != "__pycache__" and (folder / "__init__.py").is_file():
                found[".".join([top, *folder.relative_to(root).parts])] = folder
    return found


def test_every_folder_of_code_is_a_package():
    """pyproject finds packages by their __init__.py: a folder of modules without one would be
    left out of `pip install .`."""
    for top in ("dsstar", "flows", "tasks"):
        for folder in (REPO / top).rglob("*"):
            if folder.is_dir() and folder.name != "__pycache__" and any(folder.glob("*.py")):
                assert (folder / "__init__.py").is_file(), folder


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """`pip install --no-deps --target DIR .` from a copy of the sources (the build writes
    build/ and *.egg-info beside them); dependencies come from this interpreter's environment."""
    root = tmp_path_factory.mktemp("install")
    source, target = root / "source", root / "site"
    skip = shutil.ignore_patterns("__pycache__")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=skip)
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
         str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return target


def from_install(target: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Python with only the installed copy on its path (not the repository), outside the repo."""
    env = {**os.environ, "PYTHONPATH": str(target)}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_the_installed_copy_holds_what_a_run_needs(installed, tmp_path):
    for name, folder in package_folders().items():
        inside = installed.joinpath(*name.split("."))
        wanted = {p.name for p in folder.iterdir() if p.suffix in {".py", ".j2", ".mako"}}
        assert wanted <= {p.name for p in inside.iterdir()}, name
    probe = (
        "import dsstar, dsstar.algorithm.agents._base as base, flows.ds_star as flow;"
        "print(dsstar.__file__, base.PROMPTS_DIR, flow.__file__, sep='\\n')"
    )
    done = from_install(installed, "-c", probe, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    for path in done.stdout.split():
        assert Path(path).is_relative_to(installed), path  # not the repository's copy


@pytest.mark.slow
def test_dsstar_run_from_a_non_editable_install(installed, env, llm, sales, tmp_path):
    two_rounds(llm)
    question = "Which region had the highest revenue in 2024 H1, and who manages it?"
    done = from_install(
        installed, "-m", "dsstar", "run", "--data", str(sales), "--question", question, "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["status"] == "verified" and result["answer"] == ANSWER
    assert result["llm_calls"] == len(llm.requests)
