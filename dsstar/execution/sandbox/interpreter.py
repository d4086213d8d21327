"""The scripts' interpreter: which Python runs generated scripts, what it has installed, and
the font cache its matplotlib starts from.

By default scripts run in dsstar's own interpreter; the worker may name another (its
`DSSTAR_SCRIPT_PYTHON`: a user's venv or an image's Python). Either is probed once per process:
a run of that interpreter (`python -I`, as scripts start) reports its prefixes (bound
read-only into the sandbox) and its installed distributions, read with importlib.metadata.

Which distributions the prompts name (`Interpreter.libraries`): the scientific stack dsstar
installs for scripts (`SCRIPT_STACK`, as far as that environment has it), plus every other
distribution there that nothing else installed requires (what someone installed on purpose),
unless it is dsstar's own (dsstar and everything it requires, extras included) or a packaging
tool; each with its major.minor version.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dsstar.errors import ConfigError
from dsstar.execution.sandbox.host import environment
from dsstar.execution.sandbox.staging import new_dir, remove

__all__ = [
    "SCRIPT_STACK",
    "Interpreter",
    "font_cache",
    "interpreter",
    "resolve_python",
    "stage_fonts",
]

log = logging.getLogger(__name__)

# The libraries dsstar installs for generated scripts (pyproject's dependencies; a test keeps
# the two together). Named in the prompts only where the scripts' environment has them.
SCRIPT_STACK = ("numpy", "pandas", "scipy", "scikit-learn", "statsmodels", "matplotlib",
                "seaborn", "pyarrow", "openpyxl", "duckdb", "lightgbm", "xgboost-cpu")  # fmt: skip
# A distribution named in the prompts as what scripts import, where the two differ in a way a
# model could take for another module (xgboost-cpu is xgboost built without CUDA).
_SHOWN_AS = {"xgboost-cpu": "xgboost"}
_TOOLS = frozenset({"pip", "setuptools", "wheel", "distribute", "pkg-resources"})
PROBE_TIMEOUT_S = 60.0
FONT_TIMEOUT_S = 120.0

# Run by the scripts' interpreter: its prefixes and distributions, as JSON. Standard library.
_PROBE = r"""
import importlib.metadata as md, json, os, re, sys
def key(name):
    return re.sub(r"[-_.]+", "-", name).lower()
found = {}
for dist in md.distributions():
    name = dist.metadata["Name"]
    if not name or key(name) in found:
        continue  # the first of a name on sys.path is the one imported
    requires = []
    for line in dist.requires or ():
        head = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
        if head:
            requires.append(key(head.group(1)))
    found[key(name)] = {"name": name, "version": dist.version, "requires": requires}
real = os.path.realpath(sys.executable)
prefixes = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(real))]
print(json.dumps({"executable": sys.executable, "prefixes": prefixes, "distributions": found}))
"""


@dataclass(frozen=True)
class Interpreter:
    """A Python that scripts run in, as its probe found it."""

    executable: str
    prefixes: tuple[str, ...]  # folders of the interpreter, bound read-only into the sandbox
    libraries: tuple[str, ...]  # what the prompts name, e.g. "pandas 2.2"
    has_matplotlib: bool


def resolve_python(python: str | os.PathLike[str] | None) -> str:
    """The scripts' interpreter as an absolute path (None: this Python); ConfigError when it
    is not an executable file."""
    if python is None or str(python) == "":
        return sys.executable
    path = shutil.which(str(python)) if os.sep not in str(python) else str(python)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise ConfigError(
            f"DSSTAR_SCRIPT_PYTHON={python} is not an executable Python: name the interpreter"
            " of the environment scripts should run in (e.g. /opt/myenv/bin/python)"
        )
    return os.path.abspath(path)


def interpreter(python: str | os.PathLike[str] | None = None) -> Interpreter:
    """The scripts' interpreter (None: this Python), probed once per process."""
    return _probe(resolve_python(python))


@cache
def _probe(executable: str) -> Interpreter:
    with tempfile.TemporaryDirectory(prefix="dsstar-probe-") as home:
        try:
            done = subprocess.run(
                [executable, "-I", "-c", _PROBE],
                capture_output=True,
                text=True,
                env=environment(home, home),
                timeout=PROBE_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigError(f"the scripts' interpreter {executable} did not run: {exc}") from exc
    if done.returncode != 0:
        tail = done.stderr.strip()[-500:]
        raise ConfigError(f"the scripts' interpreter {executable} failed its probe: {tail}")
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    found = facts["distributions"]
    prefixes = tuple(dict.fromkeys(p for p in facts["prefixes"] if os.path.isdir(p)))
    return Interpreter(
        executable=executable,
        prefixes=prefixes,
        libraries=tuple(_named(found)),
        has_matplotlib="matplotlib" in found,
    )


def _named(found: dict[str, dict]) -> list[str]:
    """The distributions the prompts name (see the module's docstring), stack first."""
    required = {req for dist in found.values() for req in dist["requires"]}
    own = _closure("dsstar", found)
    added = sorted(
        key
        for key in found
        if key not in required and key not in own and key not in _TOOLS
        and key not in SCRIPT_STACK
    )  # fmt: skip
    keys = [key for key in SCRIPT_STACK if key in found] + added
    return [
        f"{_SHOWN_AS.get(key, found[key]['name'])} {_minor(found[key]['version'])}" for key in keys
    ]


def _closure(root: str, found: dict[str, dict]) -> set[str]:
    seen: set[str] = set()
    todo = [root] if root in found else []
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        todo += [req for req in found.get(key, {}).get("requires", ()) if req in found]
    return seen


def _minor(version: str) -> str:
    """major.minor: what changes an API; a patch release does not change a prompt."""
    parts = re.match(r"(\d+)(?:\.(\d+))?", version)
    if not parts:
        return version
    return ".".join(p for p in parts.groups() if p is not None)


_FONT_LOCK = threading.Lock()
_FONTS: dict[str, Path | None] = {}


def font_cache(python: str | None = None) -> Path | None:
    """A folder holding matplotlib's font list for the scripts' interpreter, built once per
    process (None when it has no matplotlib or the build failed). Every script's matplotlib
    starts from a copy of it, instead of scanning the fonts again (a second or more)."""
    found = interpreter(python)
    if not found.has_matplotlib:
        return None
    with _FONT_LOCK:
        if found.executable not in _FONTS:
            _FONTS[found.executable] = _build_fonts(found.executable)
        return _FONTS[found.executable]


def _build_fonts(executable: str) -> Path | None:
    """matplotlib's font list made by the scripts' interpreter with the sandbox's environment
    (an empty home: the fonts a script sees are the system's and matplotlib's own)."""
    folder = new_dir("fonts", None)  # swept like the sandbox's other folders if left behind
    code = "import matplotlib.font_manager as fm; print(fm.fontManager is not None)"
    env = environment(str(folder), str(folder))
    try:
        done = subprocess.run(
            [executable, "-I", "-c", code],
            capture_output=True,
            env=env,
            timeout=FONT_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("matplotlib's font cache was not built (%s): each script builds its own", exc)
        return None
    made = Path(env["MPLCONFIGDIR"])
    lists = sorted(made.glob("fontlist-*.json"))
    if done.returncode != 0 or not lists:
        log.warning("matplotlib's font cache was not built: each script builds its own")
        return None
    return made


@atexit.register
def _remove_font_caches() -> None:
    for folder in _FONTS.values():
        if folder is not None:
            remove(folder.parent)


def stage_fonts(folder: Path, python: str | None = None) -> None:
    """Copy the font list of `python`'s matplotlib (when it has one) into `folder`, which the
    sandbox shows at /.dsstar/fonts (the boot program's `seed_caches` takes it from there)."""
    built = font_cache(python)
    if built is None:
        return
    folder.mkdir(mode=0o755, exist_ok=True)
    for item in built.iterdir():
        shutil.copyfile(item, folder / item.name)
        (folder / item.name).chmod(0o444)
