"""Checks that take a few seconds and save a wasted run: each failure is one line that names
the fix, raised before any LLM call, execution or stored run.

    model configured      ConfigError   --model / DSSTAR_MODEL, for every agent; --agent-model
                                        names only agents that exist
    key for its provider  ConfigError   OPENAI_API_KEY, ... or DSSTAR_API_KEY
    model routable        ConfigError   --model: litellm knows the provider (`reachability`)
    server reachable      ConfigError   --api-base / DSSTAR_API_BASE answers within seconds
    key accepted          ConfigError   the provider's list of models takes the key
    ceiling priced        ConfigError   --max-cost needs a price for every model, else --max-tokens
    usable isolation      ConfigError   bubblewrap, or DSSTAR_SANDBOX=none
    appliable caps        ConfigError   exec_* caps within the hard resource limits (ulimit -H)
    data root             DataError     exists, readable, holds at least one file
    storage               ConfigError   writable

The key is tried on a free request (the provider's list of models), never a completion.
A model the server does not know fails at the first call, at once, with LLMFatalError,
which is never retried.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from dsstar.errors import ConfigError, DataError, DSStarError
from dsstar.locations import is_remote, local_path
from dsstar.settings import Settings

__all__ = [
    "NO_MODEL",
    "check_data",
    "check_isolation",
    "check_keys",
    "check_limits",
    "check_model",
    "check_priced",
    "check_reachable",
    "preflight",
    "unreadable_warning",
    "used_models",
]

NO_MODEL = (
    "No model is configured: pass --model (or set DSSTAR_MODEL), e.g. --model openai/gpt-4o"
    " with OPENAI_API_KEY set, or --model ollama/qwen2.5-coder --api-base"
    " http://localhost:11434 for a local server."
)
_HIDDEN = {"__pycache__", "__MACOSX"}

log = logging.getLogger(__name__)


def preflight(
    settings: Settings, data: str | None = None, *, llm: bool = True, storage: bool = True
) -> None:
    """Run every check that applies; raise the first failure (a UsageError: CLI exit 2).
    Once per run: where the CLI or the Python API checked, the flow does not again."""
    if llm:
        check_model(settings)
        check_keys(settings)
        check_priced(settings)
    check_isolation(settings)
    check_limits(settings)
    if data is not None:
        check_data(data)
    if storage:
        check_storage(settings)
    if llm:  # last: the only check that waits on the network
        check_reachable(settings)


def check_reachable(settings: Settings) -> None:
    """The models the agents use: routable, their server reachable, the key accepted
    (`dsstar.model.reachability`)."""
    from dsstar.model.reachability import check_models

    key = settings.api_key.get_secret_value() if settings.api_key else None
    check_models(used_models(settings), settings.api_base, key)


def used_models(settings: Settings) -> list[str]:
    """The models the agents talk to, each once, in the order of the agents."""
    from dsstar.algorithm.agents import ROSTER

    return list(dict.fromkeys(m for agent in ROSTER if (m := settings.model_for(agent))))


def check_model(settings: Settings) -> None:
    from dsstar.algorithm.agents import ROSTER

    if not settings.model and not settings.agent_models:
        raise ConfigError(NO_MODEL)
    unknown = sorted(set(settings.agent_models) - set(ROSTER))
    if unknown:
        raise ConfigError(
            f"--agent-model (DSSTAR_AGENT_MODELS) names no agent: {', '.join(unknown)};"
            f" the agents are {', '.join(ROSTER)}."
        )
    unset = [a for a in ROSTER if not settings.model_for(a)]
    if unset:
        raise ConfigError(
            f"No model for the {', '.join(unset)} agent(s): pass --model (or DSSTAR_MODEL) for"
            " every agent not named in --agent-model."
        )


def check_keys(settings: Settings) -> None:
    """Every model's provider has its key. DSSTAR_API_KEY counts for all; a server given with
    --api-base (Ollama, vLLM, a gateway) may need none."""
    if settings.api_key or settings.api_base:
        return
    from dsstar.model.llm import missing_keys

    for model in used_models(settings):
        missing = missing_keys(model)
        if missing:
            names = " or ".join(missing)
            raise ConfigError(
                f"The model {model} needs {names}: export it (or set DSSTAR_API_KEY), or pass"
                " --api-base for a server that needs no key."
            )


def check_priced(settings: Settings) -> None:
    """A cost ceiling must be able to price every call: with --max-cost alone, a model
    without a known price is refused (it would pass the ceiling unseen)."""
    if settings.max_cost is None or settings.max_tokens is not None:
        return
    from dsstar.model.pricing import priced

    unpriced = [m for m in used_models(settings) if not priced(m)]
    if unpriced:
        raise ConfigError(
            f"--max-cost cannot bound {', '.join(unpriced)}: no price is known for it; set"
            " --max-tokens (DSSTAR_MAX_TOKENS) as its ceiling, alone or beside --max-cost."
        )


def check_isolation(settings: Settings) -> str:
    """The mode scripts will run in (ConfigError, one line naming the fix, when none works,
    or when one that does not isolate would have to run scripts as root); warns on every run
    that goes without isolation."""
    from dsstar.execution.sandbox.host import check_dedicated_uid
    from dsstar.execution.sandbox.interpreter import resolve_python
    from dsstar.execution.sandbox.modes import isolates, resolve_mode

    mode = resolve_mode(settings.sandbox)
    if not isolates(mode):  # as root: the scripts' Python and the profiler's (dsstar's own)
        pythons = [resolve_python(settings.script_python), resolve_python(None)]
        check_dedicated_uid(mode, pythons, settings.work_dir)
        log.warning(
            f"sandbox {mode!r}: generated scripts run WITHOUT isolation (limits and a clean"
            " environment only): they can read host files, write outside their folder and"
            " reach the network."
        )
    return mode


def check_limits(settings: Settings) -> None:
    """Every cap of a script can be applied here: none is above this process's hard resource
    limits (a script would otherwise fail at its start, every time)."""
    from dsstar.inputs.spec import sandbox_limits

    beyond = sandbox_limits(settings).beyond_host()
    if beyond:
        raise ConfigError(
            "the sandbox cannot apply " + "; ".join(beyond) + ": above this machine's hard"
            " resource limits (ulimit -H). Lower it."
        )


def check_data(data: str) -> None:
    """A local data root exists, is readable and holds at least one visible file. Remote roots
    are checked when the run opens them (listing a bucket may take long)."""
    if is_remote(data):
        return
    path = local_path(data)
    if not path.exists():
        raise DataError(f"--data {data}: no such file or folder; pass an existing path.")
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        raise DataError(f"--data {data}: not readable by this user; fix its permissions.")
    if path.is_file():
        return
    if not _has_a_file(path):
        raise DataError(
            f"--data {data}: the folder holds no data files; put files in it or pass another."
        )


def unreadable_warning(data: str, sample: int = 200, shown: str | None = None) -> str | None:
    """A warning when none of the first `sample` files of a local data root can be read: each
    is unreadable or binary of no known format. The run would still spend its LLM calls on
    analyzers that cannot open them, so the user hears it before the first one. None when
    a file looks readable, and for remote roots (listing a bucket may take long). `shown`:
    the location the warning names (default `data`), e.g. when `data` is its view."""
    if is_remote(data):
        return None
    from dsstar.data.profiler import detect_format

    root = local_path(data)
    paths = [root] if root.is_file() else _visible_files(root, sample)
    if not paths or any(detect_format(str(p)) not in _UNREADABLE for p in paths):
        return None
    which = f"none of the first {sample} files" if len(paths) == sample else "no input file"
    return (
        f"--data {shown or data}: {which} could be read ({len(paths)} checked, each unreadable or"
        " binary of no known format); the run will still spend LLM calls on files it cannot"
        " open. Check the path, the permissions and the files."
    )


_UNREADABLE = {"unknown", "binary"}  # detect_format: cannot open it / no format it knows


def _visible_files(root: Path, most: int) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _HIDDEN)
        found += [Path(folder) / f for f in sorted(files) if not f.startswith(".")]
        if len(found) >= most:
            return found[:most]
    return found


def check_storage(settings: Settings) -> None:
    from dsstar.storage import Store

    try:
        Store(settings.storage).check()
    except DSStarError as exc:
        raise ConfigError(_one_line(str(exc)) + " (--storage, DSSTAR_STORAGE)") from exc


def _has_a_file(root: Path) -> bool:
    """True at the first visible file (stops early: a big lake costs no more than a small one)."""
    for _folder, dirs, files in os.walk(root, onerror=_raise):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _HIDDEN]
        if any(not f.startswith(".") for f in files):
            return True
    return False


def _raise(exc: OSError) -> None:
    raise DataError(f"cannot read {exc.filename}: {exc.strerror}; fix its permissions.") from exc


def _one_line(text: str) -> str:
    return " ".join(text.split())
