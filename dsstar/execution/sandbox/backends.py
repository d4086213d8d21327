"""What a sandbox backend is (`Backend`), and the one that does not isolate (`NoIsolation`).

A backend is what `--sandbox` names: it says whether it works here and builds the command that
starts the boot program (boot.py) for one script or one pool interpreter. Everything else
(staging, uids, limits, the watchdog, the result) is the sandbox's own and the same in every
backend, so a new one is a class and a `register` call (modes.py), from anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from dsstar.execution.sandbox.host import boot_python, kill_with_parent
from dsstar.sandbox_names import NONE

__all__ = ["Backend", "NoIsolation"]


class Backend(Protocol):
    """One way of starting the boot program with a spec (JSON, its one argument).

    A backend that `isolates` starts it in private mount, PID, network, IPC and UTS namespaces
    with a read-only root where the stage folder is `/.dsstar` and the data folder `/.data`;
    the boot program then makes each script's working directory itself. It is what 'auto'
    picks, in the order of the table. `spec["python"]` is the scripts' interpreter
    (`host.boot_python(spec.get("python"))` starts it); a backend that isolates makes its
    folders (`interpreter.interpreter(...).prefixes`) visible, read-only.

    A backend that does not isolate starts it as a plain process of the host: the host makes
    the script's folder (`spec["workdir"]`, data as a read-only copy), and the script gets the
    limits, the clean environment and the uid, nothing more. It is never picked by 'auto',
    has no warm pool, is warned on every run, and a run form may not choose it unless the
    worker uses it already.
    """

    name: str  # what --sandbox and DSSTAR_SANDBOX call it, and each result records
    isolates: bool
    fix: str  # what to do when it does not work here, for the error that says so

    def available(self) -> bool:
        """Whether it can isolate scripts on this machine (asked once per process, and only
        of backends that isolate)."""
        ...

    def argv(self, stage: Path, data_dir: Path, spec: dict[str, Any]) -> list[str]:
        """The command that starts the boot program with `spec` for this stage and data."""
        ...


class NoIsolation:
    """Mode 'none': a plain subprocess with the same limits and uid, for explicit use only."""

    name = NONE
    isolates = False
    fix = ""

    def available(self) -> bool:
        return True

    def argv(self, stage: Path, data_dir: Path, spec: dict[str, Any]) -> list[str]:
        return [*kill_with_parent(), *boot_python(spec.get("python")), json.dumps(spec)]
