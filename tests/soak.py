"""A chaos soak: many `dsstar run`s in a row on one PREFECT_HOME, as on a user's machine,
mixing clean runs with failing scripts, failed runs, signals, SIGKILLs of the CLI during
model calls and during scripts, SIGKILLs of the temporary server and concurrent runs.

Each event is a real CLI in a subprocess against the scripted model server. The model's
replies are chosen by the tag in the question (`[soak 07 kill-script]`), so a resumed run
(same question) gets the same kind of replies, with the trap disarmed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from fake_llm import Error, FakeLLM, text_of
from scenarios import FINAL_ONLY_ANSWER, JOIN, describe_script, fence

SLOW = "import time\ntime.sleep(60)\n"
FAILING = "raise RuntimeError('the first try at the script fails')\n"

# The 30 events of a soak: what each does to its run, in order.
EVENTS = [
    "verified", "failing-script", "verified", "kill-script", "verified", "kill-llm",
    "verified", "sigint-llm", "verified", "sigterm-script", "failed-run", "verified",
    "concurrent", "kill-server", "verified", "kill-script", "failing-script", "sigterm-llm",
    "verified", "kill-llm", "concurrent", "failed-run", "kill-script", "verified",
    "kill-server", "sigint-llm", "verified", "kill-llm", "failing-script", "verified",
]  # fmt: skip
SERVER_APP = "prefect.server.api.server:create_app"  # a command's temporary server
KILLS = {"kill-script", "kill-llm", "kill-server", "sigint-llm", "sigterm-llm", "sigterm-script"}


def tag_of(request: dict[str, Any]) -> tuple[str, str] | None:
    found = re.search(r"\[soak (\S+) (\S+)\]", text_of(request))
    return (found.group(1), found.group(2)) if found else None


@dataclass
class Soak:
    """The soak's model server, environment and the figures it measured."""

    llm: FakeLLM
    env: dict[str, str]
    data: Path
    armed: set[str] = field(default_factory=set)  # run ids whose trap has not fired yet
    first_planner: dict[str, float] = field(default_factory=dict)
    fired: dict[str, threading.Event] = field(default_factory=dict)
    figures: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.llm.set_handler(self.reply)

    def reply(self, request: dict[str, Any]) -> Any:
        agent, tag = request["agent"], tag_of(request)
        run_id, kind = tag if tag else ("", "verified")
        if agent == "planner":
            with self.lock:
                self.first_planner.setdefault(run_id, time.monotonic())
        trapped = run_id in self.armed
        if trapped and kind == "failed-run" and agent == "planner":
            return Error(401, "invalid api key (scripted)")
        if trapped and kind.endswith("-llm") and agent == "planner":
            self.fired[run_id].set()
            time.sleep(3)  # the signal lands while the reply is awaited
            return Error(503, "gone")
        if agent == "analyzer":
            return describe_script(request)
        if agent == "planner":
            return "Compute revenue per region and find its manager."
        if agent == "coder":
            if trapped and kind.endswith("-script"):
                self.fired[run_id].set()
                return fence(SLOW + JOIN)
            if kind == "failing-script" and trapped:
                self.armed.discard(run_id)
                return fence(FAILING + JOIN)
            return fence(JOIN)
        if agent == "debugger":
            return fence(JOIN)
        if agent == "verifier":
            return "Yes"
        if agent == "router":
            return "Add Step"
        if agent == "finalyzer":
            return fence(FINAL_ONLY_ANSWER)
        return fence(JOIN)

    def start(self, run_id: str, kind: str) -> tuple[subprocess.Popen, float]:
        question = f"Which region sold most, and who manages it? [soak {run_id} {kind}]"
        argv = ["run", "--data", str(self.data), "--question", question, "--json"]
        return self.cli(*argv, "--run-id", run_id), time.monotonic()

    def cli(self, *argv: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "dsstar", *argv],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env,
        )  # fmt: skip

    def finish(self, proc: subprocess.Popen, timeout: float = 240) -> tuple[int, str, str]:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err

    def event(self, number: int, kind: str) -> None:
        """Play one event; afterwards every run it started has finished (resumed if needed)."""
        if kind == "concurrent":
            runs = [self.start(f"s{number:02d}{c}", "verified") for c in "abc"]
            for (proc, started), c in zip(runs, "abc", strict=True):
                self.expect_ok(f"s{number:02d}{c}", proc, started, kind)
            return
        run_id = f"s{number:02d}"
        self.armed.add(run_id)
        self.fired[run_id] = threading.Event()
        proc, started = self.start(run_id, kind)
        if kind in KILLS:
            assert self.fired[run_id].wait(180), f"{kind}: the trap never fired"
            time.sleep(2 if kind.endswith("-script") else 0.5)
            self.armed.discard(run_id)
            self.strike(proc, kind)
            code, out, err = self.finish(proc)
            assert code != 0, f"{kind}: the run finished anyway\n{err[-2000:]}"
            resumed = self.cli("resume", run_id, "--json")
            self.expect_ok(run_id, resumed, time.monotonic(), f"{kind}, resumed")
        elif kind == "failed-run":
            code, out, err = self.finish(proc)
            assert code == 1, f"failed-run exited {code}\n{err[-2000:]}"
            self.armed.discard(run_id)
            self.figures.append({"event": kind, "run": run_id, "exit": code})
        else:
            self.expect_ok(run_id, proc, started, kind)

    def strike(self, proc: subprocess.Popen, kind: str) -> None:
        if kind.startswith("kill-server"):
            family = psutil.Process(proc.pid).children(recursive=True)
            servers = [p for p in family if SERVER_APP in " ".join(p.cmdline())]
            assert servers, "no temporary server to kill"
            for server in servers:
                server.kill()
        elif kind.startswith("kill"):
            proc.kill()
        elif kind.startswith("sigint"):
            proc.send_signal(signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)

    def expect_ok(self, run_id: str, proc: subprocess.Popen, started: float, kind: str) -> None:
        code, out, err = self.finish(proc)
        assert code == 0, f"{kind} ({run_id}) exited {code}\n{err[-3000:]}"
        result = json.loads(out)
        assert result["status"] == "verified", result
        planner = self.first_planner.get(run_id)
        to_scripts = planner - started if planner and planner > started else None
        self.figures.append(
            {"event": kind, "run": run_id, "exit": code, "analysis_done_s": to_scripts}
        )


def runs_left_running(storage: Path) -> list[str]:
    """Run ids whose run.json still says `running`."""
    left = []
    for path in storage.glob("runs/*/run.json"):
        if json.loads(path.read_text()).get("status") == "running":
            left.append(path.parent.name)
    return left


def processes_of(home: Path, keep: set[int] = frozenset()) -> list[str]:
    """Processes still alive whose environment names `home` as PREFECT_HOME (the soak's
    CLIs, their servers and scripts, orphans included), but those in `keep`."""
    marker = f"PREFECT_HOME={home}".encode()
    left = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.info["pid"] in keep or proc.info["pid"] == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{proc.info['pid']}/environ").read_bytes()
            if marker in environ.split(b"\0") and proc.status() != psutil.STATUS_ZOMBIE:
                left.append(" ".join(proc.info["cmdline"] or [])[:160])
        except (OSError, psutil.Error):
            continue
    return left
