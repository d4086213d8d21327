"""MkDocs hook: the reference pages, generated from the code each time the site is built.

- reference/cli.md from the typer app (`dsstar.cli.app`), with typer's own doc generator:
  every command and subcommand, its usage, help and options;
- reference/settings.md from `dsstar.settings.Settings`: every field, its DSSTAR_* variable,
  type, default and description;
- reference/storage.md from `dsstar.keys.LAYOUT`: every kind of stored object.

Nothing here is committed as Markdown: the pages exist only in the built site.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

_HOME = str(Path.home())


def _homeless(text: str) -> str:
    """The build machine's home folder as `~`, so the pages do not name one machine's user."""
    return text.replace(_HOME, "~")


def cli_page() -> str:
    """Every command of `dsstar`, as `typer ... utils docs` writes it."""
    import typer
    from typer.cli import get_docs_for_click

    from dsstar.cli import app

    command = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="dsstar")
    text = get_docs_for_click(obj=command, ctx=ctx, name="dsstar", title="Command line")
    intro = (
        "Generated from the command's own definitions when this site is built; "
        "`dsstar COMMAND --help` prints the same. Defaults computed on a machine "
        "(the CPU count) are those of the machine that built the site.\n\n"
    )
    text = text.replace("\n", "\n\n" + intro, 1) if text.startswith("# ") else intro + text
    return _homeless(text)


def _cell(value: Any) -> str:
    """A table cell in code type; a '|' (as in `str | None`) as an entity, so that the table
    does not split there and no backslash shows."""
    text = html.escape(_homeless(str(value)).replace("\n", " ")).replace("|", "&#124;")
    return f"<code>{text}</code>" if text else ""


def settings_page() -> str:
    """Every field of Settings: variable, type, default, description."""
    from pydantic_core import PydanticUndefined

    from dsstar.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    form = _form_rule()
    lines = [
        "# Settings",
        "",
        "Generated from `dsstar.settings.Settings` when this site is built. Flags override",
        f"`{prefix}*` environment variables, which override these defaults. A run form in the",
        "Prefect UI offers the same fields, except the secrets, each in its section; the column",
        "*run form* says what a form may set ([the rule](../sandbox.md#what-a-run-form-may-set))",
        "and in which section.",
        "",
        "| variable | type | default | run form | description |",
        "|---|---|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        if field.default_factory is not None:
            default = field.default_factory()
        elif field.default is PydanticUndefined:
            default = "(required)"
        else:
            default = field.default
        default = "" if default is None else default
        kind = re.sub(r"\b(typing|pydantic\.types|pathlib)\.", "", str(field.annotation))
        kind = kind.replace("<class '", "").replace("'>", "")
        description = (field.description or "").replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| `{prefix}{name.upper()}` | {_cell(kind)} | {_cell(default)} | {form(name)} |"
            f" {description} |"
        )
    return "\n".join(lines) + "\n"


def _form_rule() -> Any:
    """What a run form may do with a setting, by name (see dsstar.inputs.trust)."""
    from dsstar.caps import is_cap
    from dsstar.inputs.fields import section_of
    from dsstar.inputs.form import SECRET_FIELDS, WORKER_FIELDS
    from dsstar.inputs.trust import GUARDED

    def rule(name: str) -> str:
        if name in SECRET_FIELDS | WORKER_FIELDS:
            return "no: the worker's alone"
        where = f" (in {section_of(name)})" if section_of(name) else ""
        if name in GUARDED:
            return f"the worker's value, unless allowed{where}"
        if is_cap(name):
            return f"at most the worker's value, unless allowed{where}"
        return f"yes{where}"

    return rule


def storage_page() -> str:
    """The storage layout, from the one table in the code."""
    from dsstar.keys import LAYOUT

    rows = "\n".join(f"| `{pattern}` | {what} |" for pattern, what in LAYOUT)
    return (
        "# Storage layout\n\n"
        "Generated from `dsstar.keys.LAYOUT` when this site is built. Everything dsstar\n"
        "stores goes under `--storage` (`DSSTAR_STORAGE`, default `~/.dsstar`): a local folder\n"
        "or an fsspec URL such as `s3://bucket/prefix`, laid out the same way.\n\n"
        f"| key | holds |\n|---|---|\n{rows}\n\n"
        "A `<name>` stands for one path segment, a trailing `...` for anything below.\n"
        "`<key>` is the file's path when that is a short plain name (`orders.csv`); any other\n"
        "path becomes a readable prefix, `~` and a hash of the whole path (at most 117\n"
        "characters), so `x/y.csv` and `x__y.csv` never share a folder. `<NN>` is the round\n"
        "number in two digits: round 00 holds the initial plan, and `route.json` exists from\n"
        "round 01 on. The ledger (runs, rounds, LLM calls) is not here: it is a database,\n"
        "`DSSTAR_DATABASE_URL`.\n"
    )


PAGES = {
    "reference/cli.md": cli_page,
    "reference/settings.md": settings_page,
    "reference/storage.md": storage_page,
}


def on_files(files: Files, config: Any) -> Files:
    for path, render in PAGES.items():
        files.append(File.generated(config, path, content=render()))
    return files
