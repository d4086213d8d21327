"""The manual builds with `mkdocs build --strict`, and its generated references say what the
code says: every command with the options its --help lists, every setting, every kind of
stored object."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from dsstar.cli import app
from dsstar.settings import Settings
from dsstar.storage import LAYOUT

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def commands(command, path=("dsstar",)):
    """(path, command) of the app and of every command and subcommand below it."""
    yield path, command
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from commands(sub, (*path, name))


def help_options(path: tuple[str, ...]) -> set[str]:
    """The option names `dsstar ... --help` lists, from the app itself (in this process)."""
    done = CliRunner().invoke(
        app, [*path[1:], "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"}
    )
    assert done.exit_code == 0, done.output
    return options_in_help(done.output)


def options_in_help(text: str) -> set[str]:
    """The option names in the first column of the Options panel of a --help text."""
    names: set[str] = set()
    for line in text.splitlines():
        row = re.match(r"│ {1,4}(?:\* +)?(-[^<│]*)", line)  # a row's first column, not a wrap
        if row:
            names |= set(re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", row.group(1)))
    return names


def reference_sections(page: str) -> dict[str, set[str]]:
    """Command path -> option names, from the built CLI reference page."""
    sections: dict[str, set[str]] = {}
    parts = re.split(r"<h[1-6] id=\"[^\"]*\">", page)
    title = "dsstar"  # the page's own heading: the app's options come first
    for part in parts[1:]:
        heading = re.match(r"<code>(dsstar[^<]*)</code>", part)
        if heading:
            title = html.unescape(heading.group(1))
        options = sections.setdefault(title, set())
        for item in re.findall(r"<li><code>([^<]*)</code>", part):
            text = html.unescape(item).split("<", 1)[0]
            options |= set(re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", text))
    return sections


def test_the_cli_reference_lists_every_command_with_the_options_of_its_help(site):
    page = (site / "reference" / "cli" / "index.html").read_text()
    sections = reference_sections(page)
    tree = dict(commands(typer.main.get_command(app)))
    assert set(sections) == {" ".join(path) for path in tree}
    assert len(tree) > 10  # run, resume, describe, ... and the subcommands of bench, runs...
    for path in tree:
        expected = help_options(path)
        assert "--help" in expected
        assert sections[" ".join(path)] == expected, " ".join(path)
    assert "--max-rounds" in sections["dsstar run"] and "--offline" in sections["dsstar describe"]


def test_the_installed_command_prints_the_same_help():
    """The in-process help above is the installed command's: `dsstar run --help` as a user
    runs it lists the same options."""
    done = subprocess.run(
        [sys.executable, "-m", "dsstar", "run", "--help"], capture_output=True, text=True,
        timeout=120, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert options_in_help(done.stdout) == help_options(("dsstar", "run"))
    assert {"--data", "--question", "--max-rounds", "--json"} <= options_in_help(done.stdout)


def test_the_settings_reference_lists_every_field_with_its_variable_and_description(site):
    page = html.unescape((site / "reference" / "settings" / "index.html").read_text())
    rows = re.findall(r"<tr>\s*<td><code>(DSSTAR_\w+)</code></td>(.*?)</tr>", page, re.S)
    listed = {name: row for name, row in rows}
    assert list(listed) == [f"DSSTAR_{name.upper()}" for name in Settings.model_fields]
    for name, field in Settings.model_fields.items():
        words = re.sub(r"<[^>]+>", "", listed[f"DSSTAR_{name.upper()}"])
        assert field.description and field.description.split(".")[0][:40] in words, name
    assert "<code>20</code>" in listed["DSSTAR_MAX_ROUNDS"]  # the default


def test_the_storage_reference_shows_the_layout_table(site):
    page = (site / "reference" / "storage" / "index.html").read_text()
    rows = re.findall(r"<tr>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*</tr>", page, re.S)
    shown = [tuple(html.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in row) for row in rows]
    assert shown == [(pattern, what.replace("`", "")) for pattern, what in LAYOUT]


def test_no_generated_page_is_committed():
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = subprocess.run(
        ["git", "ls-files", "docs"], cwd=REPO, capture_output=True, text=True
    ).stdout.split()
    assert "docs/index.md" in tracked
    assert not [p for p in tracked if p.startswith("docs/reference/")]


def test_the_readme_links_to_pages_that_exist():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", (REPO / "README.md").read_text())
    local = [link for link in links if "://" not in link]
    assert "docs/index.md" in local
    assert [link for link in local if not (REPO / link).exists()] == []
