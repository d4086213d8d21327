"""What runs in the script's own interpreter before the script. Standard library only.

The chart hook: when (and only when) the script imports matplotlib, `Figure.savefig` is
wrapped so that each saved figure is also described from the figure object itself (type,
title, axis labels, legend, tick labels, colours and the plotted values), one JSON line per
save in `.dsstar-charts.jsonl` of the working directory, with the SHA-256 of the bytes just
saved. keep.py attaches each description to the file it names when the file is still those
bytes; the verifier reads it where the reader agent made no description of the image itself
(dsstar.algorithm.calls.read_charts), and DA-Code's scorer reads it as its `plot.json`.

The hook runs in the script's own process, so nothing it writes is beyond the script's reach:
a script can write such lines itself, or draw one figure and describe another. A description
is therefore the script's report, and is shown as such (deliverables.chart_text).

The warnings that say a line did nothing (pandas' chained assignment under Copy-on-Write) are
raised as errors (`raise_no_effect`), so that a script fails where it would be silently wrong.

host.py puts this source before boot.py's (a warm start calls both hooks in the forked
child), and a cold start runs it as `python -I -u -c <this source + run_cold()> script.py`:
the script then runs as `__main__` exactly as a warm start runs it.
"""

import functools
import hashlib
import json
import math
import os
import sys

__all__ = ["CHARTS_FILE", "describe", "install_chart_hook", "raise_no_effect", "run_cold"]

CHARTS_FILE = ".dsstar-charts.jsonl"
_MOST_VALUES, _MOST_SERIES = 10_000, 64  # a description stays small whatever is plotted
_HASHED_BYTES = 256 << 20  # a larger saved figure is not described (nor kept: outputs_mb)


def install_chart_hook():
    """Describe every figure the script saves; matplotlib is not imported here."""
    where = os.path.join(os.getcwd(), CHARTS_FILE)
    if "matplotlib.figure" in sys.modules:  # preloaded by the warm interpreter
        _wrap(sys.modules["matplotlib.figure"].Figure, where)
        return
    sys.meta_path.insert(0, _Finder(where))


class _Finder:
    """Wraps the loader of matplotlib.figure, so that the class is patched once imported."""

    def __init__(self, where):
        self.where = where

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.figure":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, self.where)
                return spec
        return None


class _Loader:
    def __init__(self, inner, where):
        self.inner, self.where = inner, where

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _wrap(module.Figure, self.where)


def _wrap(figure_class, where):
    original = figure_class.savefig
    if getattr(original, "_dsstar", False):
        return

    @functools.wraps(original)  # pyplot checks the qualified name of what it wraps
    def savefig(self, fname, *args, **kwargs):
        done = original(self, fname, *args, **kwargs)
        try:
            workdir = os.path.dirname(where)
            name = _saved_name(fname, kwargs.get("format"), workdir)
            digest = None if name is None else _digest(os.path.join(workdir, name))
            if digest is not None:
                item = {"name": name, "sha256": digest, "chart": describe(self)}
                with open(where, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(item, allow_nan=False) + "\n")
        except Exception:  # noqa: BLE001 - a description is a help, never the script's failure
            pass
        return done

    savefig._dsstar = True
    figure_class.savefig = savefig


def _saved_name(fname, fmt, workdir):
    """The saved file's path relative to the working directory, or None (a file object, a
    file outside it)."""
    if not isinstance(fname, (str, os.PathLike)):
        return None
    path = os.path.abspath(os.fspath(fname))
    if not os.path.splitext(path)[1]:  # matplotlib adds the format's suffix
        from matplotlib import rcParams

        path += "." + (fmt or rcParams["savefig.format"])
    name = os.path.relpath(path, workdir)
    return None if name.startswith("..") else name.replace(os.sep, "/")


def _digest(path):
    """SHA-256 of the file just saved at `path`; None when it is not a regular file within
    _HASHED_BYTES."""
    if not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size > _HASHED_BYTES:
            return None
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def describe(fig):
    """DA-Code's chart keys, read from the figure's first axes, with the plotted series."""
    from matplotlib.colors import to_hex

    axes = fig.axes[0] if fig.axes else None
    chart = {"type": "other", "figsize": [float(v) for v in fig.get_size_inches()],
             "graph_title": "", "x_label": "", "y_label": "", "legend_title": "", "labels": [],
             "xtick_labels": [], "ytick_labels": [], "color": [], "series": [],
             "axes": len(fig.axes)}  # fmt: skip
    suptitle = getattr(fig, "_suptitle", None)
    chart["graph_title"] = suptitle.get_text() if suptitle is not None else ""
    if axes is None:
        return chart
    chart["graph_title"] = axes.get_title() or chart["graph_title"]
    chart["x_label"], chart["y_label"] = axes.get_xlabel(), axes.get_ylabel()
    legend = axes.get_legend()
    if legend is not None:
        chart["legend_title"] = legend.get_title().get_text()
        chart["labels"] = [t.get_text() for t in legend.get_texts()]
    chart["xtick_labels"] = [t.get_text() for t in axes.get_xticklabels()]
    chart["ytick_labels"] = [t.get_text() for t in axes.get_yticklabels()]
    kind, series = _series(axes)
    chart["type"] = kind
    chart["series"] = [_numbers(values) for _, values, _ in series[:_MOST_SERIES]]
    chart["color"] = [_hex(to_hex, colour) for _, _, colour in series[:_MOST_SERIES]]
    chart["series_labels"] = [label for label, _, _ in series[:_MOST_SERIES]]
    return chart


def _series(axes):
    """(kind, [(label, values, colour)]): bars, else lines, else scatter, else a pie."""
    bars = []
    for container in axes.containers:
        if type(container).__name__ != "BarContainer" or not container.patches:
            continue
        across = getattr(container, "orientation", "vertical") == "horizontal"
        values = [p.get_width() if across else p.get_height() for p in container.patches]
        bars.append((container.get_label(), values, container.patches[0].get_facecolor()))
    if bars:
        return "bar", bars
    lines = [line for line in axes.get_lines() if len(line.get_ydata()) > 1]
    named = [line for line in lines if not str(line.get_label()).startswith("_")] or lines
    if named:
        return "line", [(str(n.get_label()), n.get_ydata(), n.get_color()) for n in named]
    points = [c for c in axes.collections if type(c).__name__ == "PathCollection"]
    if points:
        return "scatter", [
            (str(c.get_label()), [xy[1] for xy in c.get_offsets()],
             c.get_facecolor()[0] if len(c.get_facecolor()) else "k")
            for c in points
        ]  # fmt: skip
    wedges = [p for p in axes.patches if type(p).__name__ == "Wedge"]
    if wedges:
        sizes = [(w.theta2 - w.theta1) / 360 for w in wedges]
        return "pie", [("", sizes, wedges[0].get_facecolor())]
    return "other", []


def _numbers(values):
    """Plain floats for JSON: None for what is no finite number (NaN, a date, a string)."""
    out = []
    for value in list(values)[:_MOST_VALUES]:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        out.append(number if math.isfinite(number) else None)
    return out


def _hex(to_hex, colour):
    try:
        return to_hex(colour)
    except (TypeError, ValueError):
        return ""


# Warnings that say a line of the script did nothing, so that what it computes next is wrong
# without any error: pandas' ChainedAssignmentError (under Copy-on-Write, pandas 3's only mode,
# `df[col].fillna(x, inplace=True)` or `df[mask][col] = x` changes a temporary copy) and its
# warning that `df.name = values` sets an attribute, not a column. Matched by the start of
# their message, so that pandas is not imported here.
_NO_EFFECT = (
    "A value is being set on a copy of a DataFrame or Series through chained assignment",
    "Pandas doesn't allow columns to be created via a new attribute name",
)


def raise_no_effect():
    """Raise the warnings of _NO_EFFECT as errors: the traceback names the script's line and
    the debugger can fix it. Where this Python's warnings module allows, they stay first
    among the filters, so that a script's own `warnings.filterwarnings("ignore")` (common in
    notebooks) does not silence them."""
    import re
    import warnings

    for message in _NO_EFFECT:
        warnings.filterwarnings("error", message=re.escape(message))
    add = getattr(warnings, "_add_filter", None)
    mutated = getattr(warnings, "_filters_mutated", None)
    if add is None or mutated is None or getattr(add, "_dsstar", False):
        return
    ours = list(warnings.filters[: len(_NO_EFFECT)])

    def first(*item, append):
        add(*item, append=append)
        for entry in reversed(ours):
            if entry in warnings.filters:
                warnings.filters.remove(entry)
            warnings.filters.insert(0, entry)
        mutated()

    first._dsstar = True
    warnings._add_filter = first


def run_cold():
    """A cold start: run script.py (argv[1]) as `__main__`, as a warm start does."""
    import builtins
    import types

    path = os.path.abspath(sys.argv[1])
    install_chart_hook()
    raise_no_effect()
    sys.argv = [path]
    main = types.ModuleType("__main__")
    main.__file__, main.__builtins__, main.__cached__ = path, builtins, None
    sys.modules["__main__"] = main
    with open(path, "rb") as handle:
        source = handle.read()
    try:
        exec(compile(source, path, "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - printed as the interpreter would
        tb = exc.__traceback__
        tb = tb.tb_next if tb is not None and not isinstance(exc, SyntaxError) else None
        sys.excepthook(type(exc), exc, exc.with_traceback(tb).__traceback__)
        sys.exit(1)
