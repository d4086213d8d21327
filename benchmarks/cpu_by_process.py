"""CPU used on this machine by kind of process, sampled with psutil: run it beside the suite
(or any workload) for SECONDS, then read the table it prints.

    .venv/bin/python benchmarks/cpu_by_process.py 3600 > /tmp/by-process.txt &
    bash scripts/test

Every half second each process's CPU (user + system) is read; a process counts what it used
between its first and last sighting, so one that lives less than half a second is missed.
Processes are grouped by what their command line says they are; a `dsstar` command forked by
tests/forked_cli.py keeps the forking interpreter's command line, and is counted as such.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict

import psutil

# (a piece of the command line, the kind of process): the first that matches names it.
KINDS = (
    ("forked_cli", "forked dsstar commands (tests/forked_cli.py)"),
    ("-c import gc, runpy", "Prefect servers of the tests (tests/conftest.py)"),
    ("prefect.server.api.server:create_app", "temporary Prefect servers of commands"),
    ("prefect server start", "Prefect servers (prefect server start)"),
    ("prefect.engine", "flow runs Prefect starts"),
    ("prefect", "other Prefect processes (workers, runners)"),
    ("exec(eval(sys.stdin.readline()))", "pytest workers"),
    ("The sandbox's filesystem", "sandbox: building a script's filesystem"),
    ("matplotlib.font_manager", "sandbox: the font list"),
    ("importlib.metadata as md", "sandbox: the interpreter probe"),
    ("postgres", "PostgreSQL"),
    ("chromium", "Chromium"),
    ("moto", "moto"),
    ("dsstar", "other dsstar processes"),
)


def _sample(seconds: float) -> dict[str, list[float]]:
    seen: dict[int, tuple[float, float, str]] = {}  # pid -> first CPU, last CPU, command line
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for proc in psutil.process_iter(["cmdline", "cpu_times"]):
            times, argv = proc.info["cpu_times"], proc.info["cmdline"]
            if times is None:  # gone, or not ours to read
                continue
            cpu = times.user + times.system
            first = seen.get(proc.pid, (cpu, cpu, " ".join(argv or ())))
            seen[proc.pid] = (first[0], cpu, first[2])
        time.sleep(0.5)
    kinds: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for first, last, command in seen.values():
        kind = next((name for piece, name in KINDS if piece in command), command[:60])
        kinds[kind][0] += last - first
        kinds[kind][1] += 1
    return kinds


def main() -> None:
    kinds = _sample(float(sys.argv[1]) if len(sys.argv) > 1 else 60)
    total = sum(cpu for cpu, _ in kinds.values())
    print(f"{total / 60:.1f} min of CPU seen\n\n  CPU s  processes  kind")
    for kind, (cpu, count) in sorted(kinds.items(), key=lambda item: -item[1][0])[:25]:
        print(f"{cpu:7.1f}  {count:9d}  {kind}")


if __name__ == "__main__":
    main()
