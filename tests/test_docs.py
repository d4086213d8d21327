"""The manual builds with `mkdocs build --strict`, and its generated references say what the
code says: every command with the options its --help lists, every setting, every kind of
stored object."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from conftest import dsstar_settings
from scenarios import ANSWER, always_first_time
from typer.testing import CliRunner

from dsstar.cli import app
from dsstar.keys import LAYOUT
from dsstar.settings import Settings

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
        app, [*path[1:], "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": None}
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


def test_the_readme_fits_on_a_page_and_starts_with_the_two_commands():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 150, "the rest belongs in docs/, linked from the README"
    first = lines[lines.index("```bash") + 1 : lines.index("```bash") + 3]
    assert first[0].endswith("dsstar demo") and first[1] == "bash scripts/test"
    assert (REPO / ".ci" / "run").read_text().strip().endswith("exec bash scripts/test")


def test_the_readme_links_to_pages_that_exist():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", (REPO / "README.md").read_text())
    local = [link for link in links if "://" not in link]
    assert "docs/index.md" in local
    assert [link for link in local if not (REPO / link).exists()] == []


# Runs the cells of a page in one namespace, as a notebook's kernel does, and writes what each
# printed (or the error it raised) to the JSON file named by argv[2].
_KERNEL = """
import contextlib, io, json, sys, traceback
cells, namespace, printed = json.load(open(sys.argv[1])), {}, []
for cell in cells:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(cell, "<cell>", "exec"), namespace)
        except Exception:
            traceback.print_exc(file=out)
    printed.append(out.getvalue())
json.dump(printed, open(sys.argv[2], "w"))
"""


def notebook_cells(text: str) -> list[tuple[str, str | None]]:
    """(code, expected output) of each `python` block of a Markdown page; the output is the
    `text` block right after it, if any."""
    blocks = re.findall(r"^```(\w+)\n(.*?)^```", text, re.S | re.M)
    cells = []
    for (kind, body), (after, shown) in zip(blocks, [*blocks[1:], ("", "")], strict=True):
        if kind == "python":
            cells.append((body, shown if after == "text" else None))
    return cells


def printed_as_shown(printed: str, shown: str) -> bool:
    """Whether a cell printed what the page shows, line by line; `...` stands for anything."""
    lines, expected = printed.splitlines(), shown.splitlines()
    patterns = [re.escape(line).replace(re.escape("..."), ".*") for line in expected]
    return len(lines) == len(patterns) and all(
        re.fullmatch(p, line) for p, line in zip(patterns, lines, strict=True)
    )


@pytest.mark.slow
def test_the_python_page_runs_as_a_notebook(llm, tmp_path):
    """docs/python.md, cell by cell, against the scripted model: each cell prints what the
    page shows after it, and the answer is the scripted one."""
    always_first_time(llm)
    cells = notebook_cells((REPO / "docs" / "python.md").read_text())
    assert len(cells) >= 4 and all(shown is not None for _, shown in cells)
    (tmp_path / "cells.json").write_text(json.dumps([code for code, _ in cells]))
    (tmp_path / "work").mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DSSTAR_")},
        **dsstar_settings(llm, tmp_path),  # as a user points dsstar at a model server
    }
    done = subprocess.run(
        [sys.executable, "-c", _KERNEL, str(tmp_path / "cells.json"), str(tmp_path / "out.json")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    printed = json.loads((tmp_path / "out.json").read_text())
    for (code, shown), out in zip(cells, printed, strict=True):
        assert printed_as_shown(out, shown), f"{code}\nprinted:\n{out}\nshown:\n{shown}"
    assert printed[0].strip() == ANSWER and llm.requests  # answered by the scripted model
