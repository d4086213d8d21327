"""The commands of the README and of the docs' quickstart work as written.

Every line of a code block tagged `bash` in README.md and docs/index.md is run with bash from
the repository root, in order, against the scripted model server (other blocks, tagged `sh`,
show commands that need a real model, server or cluster). Only the set-up is left out: the
virtual environment and install at the start of the README's first line (the `dsstar demo`
that follows it is run) and `bash scripts/test`. Afterwards every object the commands stored
must match the storage layout table.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, dsstar_settings
from scenarios import ANSWER, always_first_time

from dsstar.keys import LAYOUT

pytestmark = pytest.mark.slow

SETUP = "python3 -m venv .venv && .venv/bin/pip install -q -r requirements.lock -e . && "
TESTS = "bash scripts/test"
PAGES = ("README.md", "docs/index.md")


def bash_commands(text: str) -> list[str]:
    """The commands of the `bash` blocks of a Markdown text, continuation lines joined."""
    commands: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                commands.append(line.strip())
    return commands


def runnable(commands: list[str]) -> list[str]:
    """The commands less the set-up: the install before `dsstar demo`, the tests."""
    kept = []
    for command in commands:
        if command == TESTS:
            continue
        kept.append(command.removeprefix(SETUP))
    return kept


def test_the_readme_opens_with_the_two_set_up_commands():
    first = bash_commands((REPO / "README.md").read_text())
    assert first[0] == SETUP + ".venv/bin/dsstar demo"
    assert first[1] == TESTS


def layout_pattern(pattern: str) -> re.Pattern[str]:
    """A LAYOUT key pattern as a regex: <name> is one path segment, a trailing ... anything."""
    regex = re.escape(pattern)
    regex = re.sub(r"<[^>]+>", "[^/]+", regex.replace(r"\<", "<").replace(r"\>", ">"))
    return re.compile(regex.replace(r"\.\.\.", ".+") + r"\Z")


@pytest.mark.parametrize("page", PAGES)
def test_the_commands_work_as_written(page, llm, tmp_path):
    commands = runnable(bash_commands((REPO / page).read_text()))
    assert len(commands) >= 3, commands
    assert (REPO / ".venv" / "bin" / "dsstar").exists(), "the commands name .venv/bin/dsstar"
    always_first_time(llm)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DSSTAR_")},
        **dsstar_settings(llm, tmp_path),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    (tmp_path / "work").mkdir()
    asked = 0
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, command
        if re.search(r"dsstar run\b", command):
            assert ANSWER in done.stdout, command
        if re.search(r"dsstar demo\b", command):  # answered by its recorded replies
            assert "Northeast, Ada Park" in done.stdout and "replies: recorded" in done.stderr
        if re.search(r"dsstar (runs list|history)\b", command):
            assert ANSWER in done.stdout, command  # the run above is listed with its answer
        if re.search(r"dsstar (describe|retrieve)\b", command):
            assert "orders_2024.csv" in done.stdout, command
        asked += bool(re.search(r"dsstar run\b", command))
    assert asked and llm.requests  # the runs were answered by the scripted model

    storage = tmp_path / "storage"
    stored = [p.relative_to(storage).as_posix() for p in storage.rglob("*") if p.is_file()]
    patterns = [layout_pattern(pattern) for pattern, _ in LAYOUT]
    assert any(key.startswith("runs/") for key in stored)
    unknown = [key for key in stored if not any(p.match(key) for p in patterns)]
    assert not unknown, f"stored objects missing from dsstar.keys.LAYOUT: {unknown}"
