"""What a script run is bounded by (Limits) and what it produced (ExecResult)."""

from __future__ import annotations

import resource
import signal
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from dsstar.execution.sandbox.keep import is_figure
from dsstar.settings import default as _default

__all__ = ["ExecResult", "Limits"]


@dataclass(frozen=True)
class Limits:
    """Bounds on one script run. Every cap holds for the script's whole process tree (memory
    and CPU time are summed over the tree by the watchdog of the script's own uid, so when
    dsstar runs as root; else they bound each process)."""

    timeout_s: float = _default("exec_timeout")  # wall clock
    memory_mb: int = _default("exec_memory_mb")  # of each process, and resident of the tree
    output_bytes: int = _default("exec_output_bytes")  # of stdout and stderr, head and tail kept
    processes: int = _default("exec_processes")  # processes and threads of the script at once
    disk_mb: int = _default("exec_disk_mb")  # /tmp plus the working directory
    cpu_s: float | None = _default("exec_cpu_seconds")  # of the tree; None: the timeout + 2
    warm: bool = _default("exec_pool")  # start from the warm interpreter pool when it can
    outputs: int = _default("exec_outputs")  # files kept from the working directory
    outputs_mb: float = _default("exec_outputs_mb")  # their bytes together

    @property
    def cpu_seconds(self) -> int:
        return int(self.cpu_s if self.cpu_s is not None else self.timeout_s + 2)

    @property
    def outputs_bytes(self) -> int:
        return int(self.outputs_mb * 1024 * 1024)

    def beyond_host(self) -> list[str]:
        """The caps above this process's hard resource limits, which the sandbox (inside a
        user namespace, or as the worker's user) cannot raise, each as 'setting=value
        (hard limit N)'; empty when every cap can be applied."""
        boot = self.boot()
        found = []
        for cap, rlimit, setting in _HOST_LIMITS:
            hard = resource.getrlimit(rlimit)[1]
            if hard != resource.RLIM_INFINITY and boot[cap] > hard:
                shown = getattr(self, _SHOWN[cap])
                found.append(f"{setting}={shown} (the hard limit here is {_in(cap, hard)})")
        return found

    def boot(self) -> dict[str, int]:
        """The caps the program inside the sandbox applies, in bytes and seconds."""
        return {
            "memory": self.memory_mb * 1024 * 1024,
            "cpu": self.cpu_seconds,
            "disk": self.disk_mb * 1024 * 1024,
            "processes": self.processes,
            "outputs": self.outputs,
            "outputs_bytes": self.outputs_bytes,
        }


# Each cap the sandbox applies with setrlimit: its boot key, the limit and its setting.
_HOST_LIMITS = (
    ("memory", resource.RLIMIT_AS, "exec_memory_mb"),
    ("cpu", resource.RLIMIT_CPU, "exec_cpu_seconds"),
    ("disk", resource.RLIMIT_FSIZE, "exec_disk_mb"),
    ("processes", resource.RLIMIT_NPROC, "exec_processes"),
)
_SHOWN = {"memory": "memory_mb", "cpu": "cpu_seconds", "disk": "disk_mb", "processes": "processes"}


def _in(cap: str, hard: int) -> str:
    """A hard limit in the unit of its setting."""
    return f"{hard // (1024 * 1024)} MB" if cap in ("memory", "disk") else str(hard)


@dataclass(frozen=True)
class ExecResult:
    """What a script run produced. JSON-safe."""

    ok: bool
    exit_code: int | None
    output: str  # stdout, then stderr: what the agents see
    timed_out: bool
    duration_s: float
    truncated: bool
    sandbox: str  # the isolation mode: 'bwrap', 'unshare' or 'none'
    stdout: str = ""  # stdout alone: the answer of a final script
    limits_hit: list[str] = field(default_factory=list)  # e.g. ['memory', 'processes']
    start: str = "cold"  # 'warm' (forked from the pool) or 'cold' (a fresh interpreter)
    note: str = ""  # why a cold start was used although the pool was asked for
    # Files the script wrote in its working directory: {'name' (relative), 'bytes', 'data'
    # (base64), 'chart' (the description of a matplotlib figure, when it is one)}, bounded by
    # Limits.outputs and outputs_mb. A runtime adds a table's 'preview' (dsstar.data.previews)
    # and may store the files, leaving 'sha256' and 'key' where 'data' was
    # (dsstar.records.files); the loop adds a chart's 'reading', the reader agent's
    # description of its image (dsstar.algorithm.calls).
    outputs: list[dict[str, Any]] = field(default_factory=list)
    outputs_error: str = ""  # which bound left which files out; empty when all were kept

    @property
    def figures(self) -> list[dict[str, Any]]:
        """The outputs that are images or pages a chart library saves."""
        return [f for f in self.outputs if is_figure(f["name"])]

    @property
    def killed_outside(self) -> bool:
        """Whether a SIGKILL that none of its caps sent ended the script (another process,
        the kernel's out-of-memory killer): not the script's fault, so worth running again."""
        return self.exit_code == -signal.SIGKILL and not self.timed_out and not self.limits_hit

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExecResult:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
