"""The house rules, read from the imports (pyproject's [tool.importlinter]): they hold for the
code, and they catch a core module that imports Prefect, a CLI that reaches past the public
face of `flows`, a floor of the core that imports one above it, and a floor below the inputs
that reads `Settings` instead of the run's spec."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

CONTRACTS = (
    "The core (the CLI aside) imports neither Prefect nor the Prefect job",
    "Flows above tasks",
    "Nothing below the CLI imports it",
    "No module imports another package's private module",
    "The core's floors",
    "Below the inputs floor, the settings give defaults only",
)


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` over the packages found in `root` (first on the path)."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=root, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "300"},
    )  # fmt: skip


def test_the_code_keeps_every_contract():
    done = lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in CONTRACTS:
        assert f"{name} KEPT" in done.stdout


@pytest.fixture
def copy(tmp_path) -> Path:
    """The packages and the contracts, copied to break them without touching the repository."""
    for name in ("dsstar", "flows", "tasks", "prompts"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "import_rules.py", tmp_path / "scripts")
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def add_line(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}\n")


def test_a_core_module_that_imports_prefect_breaks_the_first_contract(copy):
    add_line(copy / "dsstar" / "algorithm" / "loop.py", "import prefect  # noqa")
    done = lint_imports(copy)
    assert done.returncode == 1
    assert f"{CONTRACTS[0]} BROKEN" in done.stdout
    assert "dsstar.algorithm.loop -> prefect" in done.stdout


def test_a_cli_that_imports_a_private_flows_module_breaks_two_contracts(copy):
    add_line(copy / "dsstar" / "cli" / "run.py", "from flows._story import say  # noqa")
    done = lint_imports(copy)
    assert done.returncode == 1
    assert f"{CONTRACTS[3]} BROKEN" in done.stdout
    assert "dsstar.cli.run imports flows._story" in done.stdout
    assert f"{CONTRACTS[0]} BROKEN" in done.stdout  # past the public face, too


def test_tasks_that_import_a_flow_break_the_layers(copy):
    add_line(copy / "tasks" / "llm.py", "import flows.ds_star  # noqa")
    done = lint_imports(copy)
    assert done.returncode == 1
    assert f"{CONTRACTS[1]} BROKEN" in done.stdout


def test_the_data_side_importing_records_breaks_the_core_floors(copy):
    add_line(copy / "dsstar" / "data" / "catalog.py", "import dsstar.records.record  # noqa")
    done = lint_imports(copy)
    assert done.returncode == 1
    assert f"{CONTRACTS[4]} BROKEN" in done.stdout
    assert "dsstar.data is not allowed to import dsstar.records" in done.stdout
    assert "dsstar.data.catalog -> dsstar.records.record" in done.stdout


def test_a_module_of_the_core_without_a_floor_breaks_the_core_floors(copy):
    (copy / "dsstar" / "stray.py").write_text('"""A module no floor holds."""\n')
    done = lint_imports(copy)
    assert done.returncode == 1
    assert f"{CONTRACTS[4]} BROKEN" in done.stdout
    assert "dsstar.stray" in done.stdout


@pytest.mark.parametrize(
    "line",
    [
        "from dsstar.settings import Settings  # noqa",
        "from dsstar.settings import default, Settings  # noqa",
        "import dsstar.settings  # noqa",
        "from dsstar import settings  # noqa",
    ],
)
def test_the_loop_reading_settings_breaks_the_defaults_only_rule(copy, line):
    add_line(copy / "dsstar" / "algorithm" / "loop.py", line)
    done = lint_imports(copy)
    assert done.returncode == 1
    assert f"{CONTRACTS[5]} BROKEN" in done.stdout
    assert "dsstar.algorithm.loop (l." in done.stdout
    assert f"{CONTRACTS[4]} KEPT" in done.stdout  # no floor is climbed: settings lies below


def test_a_default_read_below_the_inputs_floor_keeps_the_rule(copy):
    add_line(
        copy / "dsstar" / "model" / "ceiling.py", "from dsstar.settings import default  # noqa"
    )
    done = lint_imports(copy)
    assert done.returncode == 0, done.stdout
    assert f"{CONTRACTS[5]} KEPT" in done.stdout
