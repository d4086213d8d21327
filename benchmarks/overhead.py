"""What a small question costs end to end through dsstar, next to a plain loop doing the same
work, and how long `dsstar describe` of already-described files and the CLI's start take.

One run measures, against a scripted OpenAI-compatible server (tests/fake_llm.py, instant
replies) and the retail question over examples/sales (verifier "No", then "Yes"):

- `dsstar run` as a user runs it, a fresh storage each time (so every file is analyzed) and
  the ledger kept across runs, as a user's is:
  without PREFECT_API_URL (the command starts its own temporary Prefect server), and with
  PREFECT_API_URL pointing at a started `prefect server start`;
- the plain loop: a fresh python process that sends the very same HTTP requests (the bodies
  dsstar sent) with httpx and runs the same scripts (analyzer, round and final scripts) with
  `subprocess` in a folder whose data/ holds the files;
- `dsstar describe --json` of the same files once they are in the catalog (no PREFECT_API_URL);
- from the start of `dsstar run` to the scripted server's first chat request: wall time, and
  the CPU time (user + system) that the command and the processes it started (a temporary
  server, readers, sandboxes) had used by then.

With --first-request, only that last measure is taken (a minute instead of several):

    .venv/bin/python benchmarks/overhead.py --first-request --repeat 5 --compare /tmp/base

Every figure is wall time of whole processes, repeated; medians are printed with every value
and the load average before and after. With --compare DIR, the same measures run
interleaved (one of each per repeat) for the checkout at DIR, e.g. an older commit:

    mkdir /tmp/base && git archive HEAD~5 | tar -x -C /tmp/base   # a checkout, not installed
    .venv/bin/python benchmarks/overhead.py --repeat 3 --compare /tmp/base

(A commit from before flows/, tasks/ and prompts/ were top-level packages imported them as
dsstar.flows, dsstar.tasks and dsstar/prompts: link each folder into /tmp/base/dsstar/.)

Each tree runs with PYTHONPATH set to it and this interpreter (this checkout's venv).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SALES = REPO / "examples" / "sales"
QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
sys.path[:0] = [str(REPO / "tests")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def start_prefect(home: Path) -> tuple[subprocess.Popen, str]:
    """`prefect server start` on a free port, once it answers; returns it and its API URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = os.environ | {"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    log = open(home / "server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
         "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    started = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() - started > 180:
                raise SystemExit("the Prefect server did not start") from None
            time.sleep(0.5)
    print(f"prefect server ready in {time.monotonic() - started:.1f} s", file=sys.stderr)
    return proc, url


def scripted(llm) -> None:
    """The retail question in two rounds: verifier No, router Add Step, verifier Yes. The
    router's and the planner's replies beside the verifier's Yes are scripted too: a run that
    asks ahead (`DSSTAR_ASK_AHEAD=true`) asks for them and discards them, as a model's would be."""
    from scenarios import FINAL_ONLY_ANSWER, fence, two_rounds

    llm.reset()
    two_rounds(llm)
    llm.default("finalyzer", lambda req: fence(FINAL_ONLY_ANSWER))
    llm.default("router", lambda req: "Add Step")
    llm.default("planner", lambda req: "Check the answer.")


class Tree:
    """One checkout whose `dsstar` is measured, with its own storage and Prefect homes."""

    def __init__(self, root: Path, work: Path, llm, api_url: str) -> None:
        self.root, self.llm, self.api_url = root, llm, api_url
        self.work = Path(tempfile.mkdtemp(prefix="tree-", dir=work))
        self.home = self.work / "prefect-home"  # the temporary servers' database, kept warm
        self.home.mkdir()
        self.cached = self.work / "cached-storage"  # describe's catalog, filled once
        self.name = _describe_tree(root)

    def env(self, storage: Path, api: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DSSTAR_", "PREFECT_"))}
        env |= {
            "PYTHONPATH": str(self.root),
            "PREFECT_HOME": str(self.home),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "DSSTAR_MODEL": "openai/gpt-4o-mini",
            "DSSTAR_API_BASE": self.llm.base_url,
            "DSSTAR_API_KEY": "sk-overhead",
            "DSSTAR_STORAGE": str(storage),
            # One ledger per tree, kept across its runs as a user's is (its schema made once).
            "DSSTAR_DATABASE_URL": f"sqlite:///{self.work / 'ledger.db'}",
            "DSSTAR_WORK_DIR": str(self.work),
            "DSSTAR_EXEC_TIMEOUT": "60",
        }
        if api:
            env["PREFECT_API_URL"] = self.api_url
        return env

    def run(self, api: bool) -> dict:
        """One `dsstar run` on a fresh storage: wall seconds; to the first chat request, wall
        seconds and the CPU seconds of the command's process tree; the chat requests sent."""
        storage = Path(tempfile.mkdtemp(prefix="storage-", dir=self.work))
        scripted(self.llm)
        seen: list[float] = []
        started = time.time()
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsstar", "run", "--data", str(SALES), "--question", QUESTION,
             "--json", "--no-reuse"], env=self.env(storage, api), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=self.work,
        )  # fmt: skip
        self.llm.intercept(lambda req: None if seen else seen.extend([time.time(), cpu(proc.pid)]))
        out, err = proc.communicate(timeout=600)
        wall = time.time() - started
        self.llm.intercept(None)
        result = json.loads(out or "{}")
        if proc.returncode != 0 or result.get("status") != "verified":
            raise SystemExit(f"dsstar run failed ({self.root}): {err[-2000:]}")
        requests = [r for r in self.llm.requests if r.get("body", {}).get("messages")]
        first, first_cpu = seen[0] - started, seen[1]
        return {"wall": wall, "first": first, "first_cpu": first_cpu, "requests": requests}

    def describe(self) -> tuple[float, int]:
        """`dsstar describe --json` over the cached storage: wall seconds and chat requests."""
        self.llm.reset()
        from scenarios import describe_script

        self.llm.default("analyzer", describe_script)
        started = time.time()
        proc = subprocess.run(
            [sys.executable, "-m", "dsstar", "describe", "--data", str(SALES), "--json"],
            env=self.env(self.cached, api=False), capture_output=True, text=True,
            timeout=600, cwd=self.work,
        )  # fmt: skip
        wall = time.time() - started
        files = json.loads(proc.stdout or "{}").get("files") or []
        if proc.returncode != 0 or not all(f["description"] for f in files):
            raise SystemExit(f"dsstar describe failed ({self.root}): {proc.stderr[-2000:]}")
        return wall, len(self.llm.requests)


def cpu(pid: int) -> float:
    """User + system seconds used so far by process `pid` and its descendants, live ones
    and those it has waited for (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stats[int(entry)] = fh.read().rsplit(")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
    children: dict[int, list[int]] = {}
    for child, fields in stats.items():
        children.setdefault(int(fields[1]), []).append(child)
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        fields = stats.get(current)
        if fields:  # utime, stime, cutime, cstime
            total += sum(int(v) for v in fields[11:15]) / tick
        todo.extend(children.get(current, []))
    return total


def _describe_tree(root: Path) -> str:
    try:
        git = ["git", "-C", str(root)]
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run([*git, "status", "--porcelain", "--", "dsstar", "flows", "tasks"],
                               capture_output=True, text=True).stdout.strip()  # fmt: skip
        return f"{root.name} ({head}{', changed' if dirty else ''})"
    except (subprocess.CalledProcessError, FileNotFoundError):
        return str(root)


def plain(requests: list[dict], work: Path, base_url: str) -> float:
    """The plain loop in a fresh process: the same requests, the same scripts, in order."""
    folder = Path(tempfile.mkdtemp(prefix="plain-", dir=work))
    (folder / "data").symlink_to(SALES)
    bodies = [
        {
            "agent": r["agent"],
            "body": r["body"],
            "headers": {k: v for k, v in r["headers"].items() if k.startswith("x-dsstar")},
        }
        for r in requests
    ]
    (folder / "requests.json").write_text(json.dumps(bodies))
    started = time.time()
    subprocess.run([sys.executable, __file__, "--plain-loop", str(folder), base_url],
                   check=True, timeout=600)  # fmt: skip
    return time.time() - started


def plain_loop(folder: Path, base_url: str) -> None:
    """What a hand-written loop does for the same question: ask, run each script, go on."""
    import httpx

    fence = re.compile(r"```(?:python)?\n(.*?)```", re.S)
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for request in json.loads((folder / "requests.json").read_text()):
            headers = request["headers"] | {"authorization": "Bearer sk-overhead"}
            reply = client.post("/chat/completions", json=request["body"], headers=headers)
            text = reply.json()["choices"][0]["message"]["content"]
            if request["agent"] in ("analyzer", "coder", "finalyzer", "debugger"):
                (folder / "script.py").write_text(fence.search(text).group(1))
                subprocess.run([sys.executable, "script.py"], cwd=folder, capture_output=True,
                               timeout=120, check=True)  # fmt: skip


def import_seconds(root: Path, module: str) -> float:
    env = os.environ | {"PYTHONPATH": str(root), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {module}"], env=env, check=True, cwd=root)
    return time.perf_counter() - started


def figures(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):5.2f} s  (" + " ".join(f"{v:.2f}" for v in values) + ")"
    )


def first_request(repeat: int, compare: list[Path]) -> None:
    """From `dsstar run` starting to its first chat request, with and without
    PREFECT_API_URL, for each tree in turn: wall seconds and CPU seconds (user + system)."""
    from fake_llm import FakeLLM

    print(f"before: {load()}")
    work = Path(tempfile.mkdtemp(prefix="dsstar-first-"))
    (work / "prefect").mkdir()
    server, api_url = start_prefect(work / "prefect")
    rows: dict[str, dict[str, list[float]]] = {}
    try:
        with FakeLLM() as llm:
            trees = [Tree(root.resolve(), work, llm, api_url) for root in [*compare, REPO]]
            for turn in range(repeat + 1):  # the first turn warms the temporary servers' home
                for tree in trees:
                    for api in (False, True):
                        measured = tree.run(api)
                        if turn:
                            kind = "with PREFECT_API_URL" if api else "no PREFECT_API_URL"
                            row = rows.setdefault(tree.name, {})
                            row.setdefault(f"first request, {kind}", []).append(measured["first"])
                            row.setdefault(f"  CPU by then, {kind}", []).append(
                                measured["first_cpu"]
                            )
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"after: {load()}")
    for name, row in rows.items():
        print(f"\n{name}")
        for label, values in row.items():
            print(f"  {label:<36} {figures(values)}")
    print("\ntarget: first request <= 3 s at low load")
    shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="measures of each kind (default 3)")
    parser.add_argument("--compare", type=Path, action="append", default=[],
                        help="another checkout to measure the same way, interleaved")  # fmt: skip
    parser.add_argument("--first-request", action="store_true",
                        help="measure only the time to the first model request")  # fmt: skip
    parser.add_argument("--plain-loop", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_loop:
        return plain_loop(Path(args.plain_loop[0]), args.plain_loop[1])
    if args.first_request:
        return first_request(args.repeat, args.compare)
    from fake_llm import FakeLLM

    print(f"before: {load()}")
    work = Path(tempfile.mkdtemp(prefix="dsstar-overhead-"))
    (work / "prefect").mkdir()
    server, api_url = start_prefect(work / "prefect")
    rows: dict[str, dict[str, list[float]]] = {}
    try:
        with FakeLLM() as llm:
            trees = [Tree(root.resolve(), work, llm, api_url) for root in [*args.compare, REPO]]
            for tree in trees:  # warm-up: the temporary server's database, the catalog
                tree.run(api=False)
                tree.run(api=True)
                storage = tree.cached
                scripted(llm)
                from scenarios import describe_script

                llm.default("analyzer", describe_script)
                subprocess.run([sys.executable, "-m", "dsstar", "describe", "--data",
                                str(SALES), "--json"], env=tree.env(storage, api=False),
                               capture_output=True, check=True, cwd=tree.work)  # fmt: skip
            requests: list[dict] = []
            for _ in range(args.repeat):
                for tree in trees:
                    row = rows.setdefault(tree.name, {})
                    for api in (False, True):
                        measured = tree.run(api)
                        kind = "with PREFECT_API_URL" if api else "no PREFECT_API_URL"
                        row.setdefault(f"run, {kind}", []).append(measured["wall"])
                        row.setdefault(f"first request, {kind}", []).append(measured["first"])
                        row.setdefault(f"  CPU by then, {kind}", []).append(measured["first_cpu"])
                        requests = measured["requests"]
                    seconds, calls = tree.describe()
                    row.setdefault("cached describe (3 files)", []).append(seconds)
                    row.setdefault("describe LLM calls", []).append(calls)
                scripted(llm)  # the same replies, in the same order
                rows.setdefault("plain loop", {}).setdefault("run", []).append(
                    plain(requests, work, llm.base_url)
                )
    finally:
        server.terminate()
        server.wait(timeout=30)
    agents = [r["agent"] for r in requests]
    print(f"after: {load()}")
    print(f"chat requests per run: {len(agents)} ({', '.join(agents)})")
    loop = statistics.median(rows["plain loop"]["run"])
    print(f"\nplain loop, whole run: {figures(rows['plain loop']['run'])}")
    for name, row in rows.items():
        if name == "plain loop":
            continue
        print(f"\n{name}")
        for label, values in row.items():
            if label == "describe LLM calls":
                print(f"  {label}: {sorted(set(values))}")
                continue
            ratio = f"  = {statistics.median(values) / loop:.2f}x the plain loop" if (
                label.startswith("run")) else ""  # fmt: skip
            print(f"  {label:<36} {figures(values)}{ratio}")
    print("\ntargets: run <= 2x the plain loop; cached describe <= 3 s")
    for tree in trees:
        times = {m: import_seconds(tree.root, m) for m in ("dsstar.cli", "litellm", "prefect")}
        print(f"imports ({tree.name}): " + ", ".join(f"{m} {s:.2f} s" for m, s in times.items()))
    print(f"end: {load()}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
