"""A chaos soak: `dsstar run`s in a row on one PREFECT_HOME, as on a user's machine, mixing
clean runs with failing scripts, failed runs, signals, SIGKILLs of the CLI during model calls
and during scripts, SIGKILLs of the temporary server and concurrent runs.

Each event is a real CLI in a subprocess against the scripted model server. The model's
replies are chosen by the run id each request carries (X-DSStar-Run), so a resumed run gets
the same kind of replies as before, with the trap disarmed.

Each backend (a command's temporary server, a long-lived server on SQLite, one on PostgreSQL)
plays its own fixed list of six events, `EVENTS[mode]`; together the lists play every kind of
event, each list has a kill during a model call, a kill during a script and concurrent runs,
and each long-lived server also plays a failing script and a failed run. The order of a list's
middle events and the moment of each kill after its trap fired are random, drawn from a seed
that the soak prints (set SOAK_SEED to play the same soak again, SOAK_EVENTS=kill-server,verified
to play chosen events).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import forked_cli
import psutil
from fake_llm import Error, FakeLLM, text_of
from processes import stop
from scenarios import FINAL_ONLY_ANSWER, JOIN, answered, asked, describe_script, fence

from tasks.slots import RATE_NAME

SLOW = "import time\ntime.sleep(5)\n"  # killed at most 3 s in; a resumed run waits it out
FAILING = "raise RuntimeError('the first try at the script fails')\n"

# What each backend plays, in this order but for the middle events, which are shuffled: the
# first run starts on a fresh home, the last one (verified) checks that the home still serves.
EVENTS = {
    # On a home that an older dsstar left slots counted in (seed_stuck_counts). A failed run
    # takes no slot on a private server: the two long-lived servers play it.
    "temporary-server": [
        "kill-server", "sigint-llm", "kill-script", "kill-analysis", "concurrent", "verified",
    ],
    "sqlite-server": [
        "failing-script", "sigterm-script", "concurrent", "sigterm-llm", "failed-run", "verified",
    ],
    "postgres-server": [
        "kill-llm", "kill-script", "failing-script", "concurrent", "failed-run", "verified",
    ],
}  # fmt: skip
SERVER_APP = "prefect.server.api.server:create_app"  # a command's temporary server
KILLS = {
    "kill-analysis",
    "kill-script",
    "kill-llm",
    "kill-server",
    "sigint-llm",
    "sigterm-llm",
    "sigterm-script",
}


@dataclass
class Soak:
    """The soak's model server, environment and the figures it measured."""

    llm: FakeLLM
    env: dict[str, str]
    data: Path
    rng: random.Random = field(default_factory=random.Random)  # the strike's moment
    kinds: dict[str, str] = field(default_factory=dict)  # run id -> its event
    datas: dict[str, Path] = field(default_factory=dict)  # run id -> the data it reads
    armed: set[str] = field(default_factory=set)  # run ids whose trap has not fired yet
    planner_at: dict[str, list[float]] = field(default_factory=dict)  # run id -> times
    fired: dict[str, threading.Event] = field(default_factory=dict)
    figures: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.llm.set_handler(self.reply)

    def reply(self, request: dict[str, Any]) -> Any:
        agent, run_id = request["agent"], request["run"]  # X-DSStar-Run names the run
        kind = self.kinds.get(run_id, "verified")
        if agent == "planner":
            with self.lock:
                self.planner_at.setdefault(run_id, []).append(time.monotonic())
        trapped = run_id in self.armed
        if trapped and kind == "failed-run" and agent == "planner":
            return ""  # never a usable step: the run fails (exit 1)
        if trapped and (kind.endswith("-llm") or kind == "kill-server") and agent == "planner":
            self.fired[run_id].set()
            time.sleep(3)  # the signal lands while the reply is awaited
            return Error(503, "gone")
        if agent == "analyzer":
            if trapped and kind == "kill-analysis" and f"fresh_{run_id}" in text_of(request):
                self.fired[run_id].set()
                return describe_script(request).replace("from pathlib", SLOW + "from pathlib")
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
        self.kinds[run_id] = kind
        data = self.data
        if kind == "kill-analysis":  # a file never analyzed before (analyses are cached)
            data = self.data.parent / f"data-{run_id}"
            shutil.copytree(self.data, data)
            (data / f"fresh_{run_id}.csv").write_text(f"run,note\n{run_id},new\n")
        self.datas[run_id] = data
        argv = ["run", "--data", str(data), "--question", question, "--json"]
        return self.cli(*argv, "--run-id", run_id), time.monotonic()

    def cli(self, *argv: str) -> subprocess.Popen | forked_cli.Forked:
        return forked_cli.popen(
            [sys.executable, "-m", "dsstar", *argv],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env,
        )  # fmt: skip

    def finish(self, proc: subprocess.Popen, timeout: float = 240) -> tuple[int, str, str]:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err

    def event(self, number: int, kind: str) -> None:
        """Play one event; afterwards every run it started has finished (resumed if needed)."""
        started, count = time.monotonic(), len(self.figures)
        self._event(number, kind)
        self.figures[-1]["event_s"] = time.monotonic() - started
        assert len(self.figures) > count

    def _event(self, number: int, kind: str) -> None:
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
            # Anywhere in the held reply (3 s) or the script's sleep (5 s), past its start.
            time.sleep(
                self.rng.uniform(0.2, 2.5) if kind.endswith("-llm") else self.rng.uniform(1, 3)
            )
            self.armed.discard(run_id)
            struck = time.monotonic()
            self.strike(proc, kind)
            code, out, err = self.finish(proc)
            stopped = time.monotonic() - struck
            assert code != 0, f"{kind}: the run finished anyway\n{err[-2000:]}"
            # A CLI whose server died stops at once (it used to retry for minutes).
            assert stopped < 60, f"{kind}: the CLI took {stopped:.0f} s to stop\n{err[-2000:]}"
            before = self.requests_of(run_id)
            # As its user would: naming the run's data (a resume takes a stored location only
            # under DSSTAR_DATA_ROOTS, which a user's shell does not set).
            resumed = self.cli("resume", run_id, "--data", str(self.datas[run_id]), "--json")
            self.expect_ok(run_id, resumed, time.monotonic(), f"{kind}, resumed")
            self.figures[-1]["stopped_s"] = stopped
            again = answered(before) & asked(self.requests_of(run_id)[len(before) :])
            assert not again, f"{kind}: resume asked again {[agent for agent, _ in again]}"
        elif kind == "failed-run":
            code, out, err = self.finish(proc)
            assert code == 1, f"failed-run exited {code}\n{err[-2000:]}"
            self.armed.discard(run_id)
            self.figures.append({"event": kind, "run": run_id, "exit": code})
        else:
            self.expect_ok(run_id, proc, started, kind)

    def requests_of(self, run_id: str) -> list[dict[str, Any]]:
        return [r for r in self.llm.calls() if r["run"] == run_id]

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
        # No run waits on a slot after any event: a wait of 10 s would be on its stderr.
        assert " slot (" not in err, f"{kind} ({run_id}) waited for a slot\n{err[-3000:]}"
        result = json.loads(out)
        assert result["status"] == "verified", result
        # The planner is asked once every analysis script has run: a run stuck on a slot
        # never gets there.
        after = [at for at in self.planner_at.get(run_id, []) if at > started]
        to_scripts = after[0] - started if after else None
        self.figures.append(
            {"event": kind, "run": run_id, "exit": code, "analysis_done_s": to_scripts}
        )


STUCK = {"dsstar-exec": 2, "dsstar-llm": 8}


def seed_stuck_counts(env: dict[str, str]) -> dict[str, int]:
    """What a crash under an older dsstar left in the user's Prefect database: dsstar-exec
    and dsstar-llm counted full, with no lease anywhere (`STUCK`, which it returns)."""
    code = (
        "from flows.api_server import ensure_api\n"
        "s = ensure_api(); s.wait_ready()\n"
        "from prefect import get_client\n"
        "from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate as C\n"
        "with get_client(sync_client=True) as c:\n"
        f"    for name, size in {tuple(STUCK.items())!r}:\n"
        "        c.create_global_concurrency_limit(C(name=name, limit=size, active_slots=size))\n"
        "s.stop()\n"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    return dict(STUCK)


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


def base_env(tmp_path: Path, llm, home: Path) -> dict[str, str]:
    """The environment of a user's shell: one PREFECT_HOME for every run, no server."""
    from conftest import dsstar_settings

    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSSTAR_", "PREFECT_API"))}
    env.update(dsstar_settings(llm, tmp_path))
    env.update({"PREFECT_HOME": str(home), "DSSTAR_MAX_PARALLEL": "2", "DSSTAR_EXEC_TIMEOUT": "90"})
    (tmp_path / "work").mkdir(exist_ok=True)
    return env


def limits_state(env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "dsstar", "limits", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def held(state: dict) -> dict[str, int]:
    return {row["name"]: row["active"] for row in state["limits"] if row["name"] != RATE_NAME}


def report(request, title: str, soak: Soak, extra: dict) -> None:
    """Hand the soak's figures to the terminal summary (see conftest)."""
    timed = [f["analysis_done_s"] for f in soak.figures if f.get("analysis_done_s")]
    lines = [f"{title}: {len(soak.figures)} runs (each killed one resumed)"]
    for f in soak.figures:
        line = f"  {f['run']:>6} {f['event']:<26} exit {f['exit']}"
        if f.get("analysis_done_s"):
            line += f"  start to scripts done {f['analysis_done_s']:5.1f} s"
        if f.get("stopped_s") is not None:
            line += f"  stopped {f['stopped_s']:4.1f} s after the kill"
        if f.get("event_s"):
            line += f"  event {f['event_s']:5.1f} s"
        lines.append(line)
    if timed:
        lines.append(
            f"  start to scripts done: median {sorted(timed)[len(timed) // 2]:.1f} s,"
            f" max {max(timed):.1f} s"
        )
    lines += [f"  {key}: {value}" for key, value in extra.items()]
    request.node.user_properties.append(("figures", "\n".join(lines)))


def planned(mode: str, rng: random.Random) -> list[str]:
    """The events `mode` plays: its list with the middle shuffled, or SOAK_EVENTS."""
    if "SOAK_EVENTS" in os.environ:  # SOAK_EVENTS=kill-server,verified replays a few events
        events = os.environ["SOAK_EVENTS"].split(",")
    else:
        first, *middle, last = EVENTS[mode]
        rng.shuffle(middle)
        events = [first, *middle, last]
    # A long-lived server is not the run's to kill.
    return ["kill-llm" if k == "kill-server" and mode != "temporary-server" else k for k in events]


def play(request, mode: str, tmp_path: Path, llm: FakeLLM, data: Path) -> None:
    """The whole soak on one PREFECT_HOME: `mode` is "temporary-server" (no PREFECT_API_URL,
    as a user's first runs), "sqlite-server" or "postgres-server" (a long-lived `prefect
    server start` on that home). Ends with the checks of a machine left clean."""
    from conftest import _free_port, create_database, start_prefect_server

    home = tmp_path / "home"
    env = base_env(tmp_path, llm, home)
    server = None
    if mode != "temporary-server":
        port = _free_port()
        server_env = dict(env)
        if mode == "postgres-server":
            name = f"prefect_{uuid.uuid4().hex[:8]}"
            database = create_database(request.getfixturevalue("postgres_url"), name, "asyncpg")
            server_env["PREFECT_API_DATABASE_CONNECTION_URL"] = database
        server = start_prefect_server(server_env, port, tmp_path / "server.log")
        env["PREFECT_API_URL"] = f"http://127.0.0.1:{port}/api"
    try:
        # What the soak's runs must leave counted: nothing of their own. On a temporary server
        # the runs bound themselves in the process and never touch the seeded counts.
        stuck = {}
        if mode == "temporary-server":
            stuck = seed_stuck_counts(env)  # the first run used to wait forever on dsstar-exec
        seed = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(10**6))
        rng = random.Random(seed)
        soak = Soak(llm, env, data, rng)
        started = time.monotonic()
        events = planned(mode, rng)
        for number, kind in enumerate(events):
            soak.event(number, kind)
        left = processes_of(home, {server.pid} if server else set())
        state = limits_state(env)
        running = runs_left_running(Path(env["DSSTAR_STORAGE"]))
        scratch = [p.name for p in (Path(env["DSSTAR_WORK_DIR"]) / "dsstar-cache").glob("p*")]
        report(
            request,
            f"chaos soak on a {mode}",
            soak,
            {
                "seed (SOAK_SEED)": seed,
                "events": " ".join(events),
                "wall time": f"{time.monotonic() - started:.0f} s",
                "slots held at the end": held(state),
                "processes left": len(left),
                "run.json still running": len(running),
                "scratch folders left": len(scratch),
            },
        )
        assert all(count == stuck.get(name, 0) for name, count in held(state).items()), state
        assert left == []
        assert running == []
        assert scratch == []
    finally:
        if server is not None:
            stop(server)
