"""Every `--help` reads whole at 80 and at 120 columns: nothing cut with `…`, no line wider than
the terminal, each variable and its default whole on a line of their own where the table is
narrow."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from dsstar.cli import app


def command_paths(command, path=()):
    """The path of every command and group of the app, sub-apps included."""
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if not sub.hidden:
            yield from command_paths(sub, (*path, name))


COMMANDS = list(command_paths(typer.main.get_command(app)))


@pytest.fixture(autouse=True)
def no_width_fixed_before(monkeypatch):
    """typer fixes its help's width when it is first imported (TERMINAL_WIDTH), and dsstar's
    main widens piped help: an earlier test in this process may have left either behind."""
    import typer.rich_utils

    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", None)


def rendered(path, width):
    env = {"COLUMNS": str(width), "TERMINAL_WIDTH": None, "LINES": "50"}
    done = CliRunner().invoke(app, [*path, "--help"], env=env)
    assert done.exit_code == 0, done.output
    return done.output


def test_every_command_is_walked():
    assert {("run",), ("bench", "run"), ("runs", "show"), ("contracts", "validate")} <= set(
        COMMANDS
    )


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "dsstar")
def test_help_fits_the_width_whole(path, width):
    out = rendered(path, width)
    assert "…" not in out, "\n".join(line for line in out.splitlines() if "…" in line)
    assert max(len(line) for line in out.splitlines()) <= width


def test_at_80_columns_variables_and_defaults_have_lines_of_their_own():
    out = rendered(("run",), 80)
    lines = [line.strip(" │") for line in out.splitlines()]
    for whole in (
        "[env: DSSTAR_MAX_DEBUG_ATTEMPTS; default: 3]",
        "[env: DSSTAR_EXEC_MEMORY_MB; default: 4096]",
        "[env: DSSTAR_MODEL]",
    ):
        assert whole in lines, whole
    storage = [line for line in lines if line.startswith("[env: DSSTAR_STORAGE; default: ")]
    assert storage and storage[0].endswith("]")  # the default path whole, on its line
    # Each option on its line, its help below it across the width: not a 21-column cell.
    assert "* --question, -q <str>" in lines
    assert len(out.splitlines()) < 130


@pytest.mark.parametrize("width", [80, 120])
def test_a_flag_shows_no_type_as_if_it_took_a_value(width):
    out = rendered(("run",), width)
    assert "<bool>" not in out
    lines = [" ".join(line.strip(" │").split()) for line in out.splitlines()]
    assert any(line.startswith("--data <str>") or "--data <str>" in line for line in lines)
    flags = [line for line in lines if "--json" in line or "--reuse" in line]
    assert flags and not any("<" in line.split("--json")[-1][:12] for line in flags), flags


def test_a_commands_description_is_wrapped_to_the_width():
    lines = [line.strip() for line in rendered(("bench", "run"), 80).splitlines()]
    # The docstring breaks after "DA-Code": rewrapped, the sentence goes on on the same line.
    assert any(re.search(r"OUT/report\.md; DA-Code also", line) for line in lines)


def test_the_program_draws_the_same_help_at_80_columns():
    """Through the `dsstar` program itself (its own start, not the test runner)."""
    done = subprocess.run(
        [sys.executable, "-m", "dsstar", "run", "--help"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "80"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    assert "[env: DSSTAR_MAX_DEBUG_ATTEMPTS; default: 3]" in done.stdout
