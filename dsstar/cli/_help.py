"""`--help` that fits the terminal: nothing cut with `…` at 80 columns.

typer draws a command's options as a table of six columns (marker, option, short option,
negative option, type, help). At 80 columns the help column of `dsstar run` was 21 characters
wide and rich cut what did not fit (`DSSTAR_MAX_DEBUG_AT…`, `--tasks-ids,--task-i…`). Below
`TABLE_WIDTH` each option is drawn on its own line instead (marker, names, type), with its
help below it across the width, the variable and default on a line of their own (as
`setting_help` in _app writes them). A command's description is wrapped to the width,
paragraph by paragraph. A flag's type is not shown: typer's `<bool>` beside `--json` read as
if the flag took a value. typer offers no setting for any of these: its functions are replaced when
typer loads the module that draws help (never for a command that runs).
"""

from __future__ import annotations

import copy
import importlib.abc
import importlib.util
import inspect
import re
import sys
from typing import Any

__all__ = ["TABLE_WIDTH", "fit_help_when_loaded"]

TABLE_WIDTH = 110  # from here on typer's table fits every name, variable and default whole
_INDENT = 4
# Where an option's help names its variable (setting_help in _app; `[` escaped for rich).
_VARIABLE = re.compile(r"\s+(\\?\[env: )")


def fit_help_when_loaded(widen: bool) -> None:
    """Draw options to fit the width when typer draws help; `widen`: draw at 120 columns
    where rich would fall back to 80 (help piped to a file or a pager)."""
    loaded = sys.modules.get("typer.rich_utils")
    if loaded is not None:
        _fit(loaded, widen)
        return
    for finder in sys.meta_path:
        if isinstance(finder, _FitWhenLoaded):
            finder.widen = finder.widen or widen
            return
    sys.meta_path.insert(0, _FitWhenLoaded(widen))


def _fit(rich_utils: Any, widen: bool) -> None:
    if widen and rich_utils.MAX_WIDTH is None:
        rich_utils.MAX_WIDTH = 120
    table = rich_utils._print_options_panel
    if getattr(table, "dsstar_fitted", False):
        return

    def options_panel(*, name: str, params: list, ctx: Any, markup_mode: Any, console: Any):
        params = [_without_type(param) if _is_flag(param) else param for param in params]
        if console.width >= TABLE_WIDTH:
            return table(
                name=name, params=params, ctx=ctx, markup_mode=markup_mode, console=console
            )
        return _stacked(rich_utils, name, params, ctx, markup_mode, console)

    options_panel.dsstar_fitted = True  # type: ignore[attr-defined]
    rich_utils._print_options_panel = options_panel
    rich_utils._fix_linebreaks = _rewrapped
    listed = rich_utils._make_command_help

    def command_help(*, help_text: str, markup_mode: Any) -> Any:
        """A command's line in its group's list: its first paragraph, one wrapped text."""
        first = inspect.cleandoc(help_text).split("\n\n")[0]
        if markup_mode != "markdown" and not first.startswith("\b"):
            first = " ".join(first.split())
        return listed(help_text=first, markup_mode=markup_mode)

    rich_utils._make_command_help = command_help


def _rewrapped(paragraphs: list[str], markup_mode: Any) -> str:
    """A command's help after its first paragraph, each paragraph one text that rich wraps
    to the width. typer keeps the docstring's line breaks, and at 80 columns each source
    line then wrapped on its own, ragged. A paragraph marked with \\b keeps its lines."""
    if markup_mode == "markdown":
        return "\n\n".join(paragraphs)
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split()) for p in paragraphs)


def _stacked(ru: Any, name: str, params: list, ctx: Any, markup_mode: Any, console: Any) -> None:
    """typer's options panel, one option after the other: its names and type on a line, its
    help below, indented, wrapped to the width."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.text import Text

    if not params:
        return
    parts: list[Any] = []
    for param in params:
        line = Text(no_wrap=False, overflow="fold")
        marker = ru.REQUIRED_SHORT_STRING if param.required else " "
        line.append(f"{marker} ", style=ru.STYLE_REQUIRED_SHORT)
        line.append_text(ru.highlighter(", ".join(_names(param))))
        negative = ", ".join(param.secondary_opts)
        if negative:
            line.append(" / ")
            line.append_text(ru.negative_highlighter(negative))
        kind = param.display_type_rich(ctx=ctx) or ""
        bounds = param._get_number_range_help_str()
        kind += ru.RANGE_STRING.format(bounds) if bounds else ""
        if kind:
            line.append(" ")
            line.append_text(ru.types_highlighter(Text(kind, style=ru.STYLE_TYPES)))
        parts.append(line)
        described = ru._get_parameter_help(
            param=_variable_apart(param), ctx=ctx, markup_mode=markup_mode
        )
        parts.append(Padding(described, (0, 0, 0, _INDENT)))
    console.print(
        Panel(
            Group(*parts),
            border_style=ru.STYLE_OPTIONS_PANEL_BORDER,
            title=name,
            title_align=ru.ALIGN_OPTIONS_PANEL,
        )
    )


def _is_flag(param: Any) -> bool:
    """Whether `param` is an on/off flag (`--json`, `--reuse/--no-reuse`): it takes no value."""
    return bool(getattr(param, "is_flag", False)) and not getattr(param, "count", False)


def _without_type(param: Any) -> Any:
    """`param` with no type shown: typer writes `<bool>` beside a flag, which reads as if
    it took a value (`--json <bool>`)."""
    bare = copy.copy(param)
    bare.display_type_rich = lambda ctx: None
    return bare


def _variable_apart(param: Any) -> Any:
    """`param` with its help's `[env: VARIABLE; default: VALUE]` made a paragraph of its own,
    which typer draws on a line of its own."""
    help_text = getattr(param, "help", None)
    if not help_text or not _VARIABLE.search(help_text):
        return param
    apart = copy.copy(param)
    apart.help = _VARIABLE.sub(r"\n\n\1", help_text, count=1)
    return apart


def _names(param: Any) -> list[str]:
    """An option's flags; an argument's name as the usage line writes it (RUN_ID)."""
    if getattr(param, "param_type_name", "") == "argument":
        return [param.display_name_raw.upper()]
    return list(param.opts)


class _FitWhenLoaded(importlib.abc.MetaPathFinder):
    """Finds typer.rich_utils as the other finders do, and fits its help once it has run."""

    def __init__(self, widen: bool) -> None:
        self.widen = widen

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "typer.rich_utils":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module: Any) -> None:
                run(module)
                _fit(module, self.widen)

            spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec
