"""The data-lake benchmark: `dsstar describe` over a generated lake of 1,560 small files, and
`dsstar retrieve --offline` over a generated lake of 1,500 files and 400 MB.

It starts a Prefect server on a free port and the scripted model of tests/fake_llm.py (its
analyzer answers with a tiny script that prints something about the file), runs the real
`dsstar` command as a subprocess, and prints:

- cold `describe` wall time, LLM calls (like files share one), peak LLM requests in flight
  (counted in the model server), peak scripts running at once (sampled with psutil, and from
  the time windows the scripts print), peak threads of the dsstar process, and peak RSS of
  its process tree (with and without the Prefect server), with what each kind of process
  held at that peak (RSS, and PSS, which counts the warm pool's shared pages once);
- warm `describe` wall time, LLM calls and peak RSS;
- the machine's load average with each `describe` figure (it is shared);
- cold and warm `retrieve --offline` wall time on the 400 MB lake (and the in-process time of
  the warm lookup, without interpreter start and imports).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/lake.py [--files 1560] [--big-mb 400]
        [--prefect-database postgresql+asyncpg://postgres@127.0.0.1:PORT/prefect]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fake_llm import FakeLLM, text_of  # noqa: E402
from generated_lakes import big_lake, small_lake  # noqa: E402
from overhead import free_port  # noqa: E402

# -- the scripted model --------------------------------------------------------------------


class Gauge:
    def __init__(self) -> None:
        self.now = self.peak = self.total = 0
        self.lock = threading.Lock()


def analyzer(gauge: Gauge, latency: float):
    script = """
import os, time
start = time.time()
path = {path!r}
with open(path, errors="replace") as handle:
    head = handle.readline().strip()[:120]
print(f"{{path}}: {{os.path.getsize(path)}} bytes; first line: {{head}}")
print(f"window {{start:.6f}} {{time.time():.6f}}")
"""

    def reply(request):
        with gauge.lock:
            gauge.now += 1
            gauge.total += 1
            gauge.peak = max(gauge.peak, gauge.now)
        try:
            time.sleep(latency)
            path = text_of(request).split("`data/", 1)[1].split("`", 1)[0]
            return "```python\n" + script.format(path=f"data/{path}") + "```\n"
        finally:
            with gauge.lock:
                gauge.now -= 1

    return reply


# -- measuring a command -------------------------------------------------------------------


def is_script(proc: psutil.Process) -> bool:
    try:
        line = proc.cmdline()
        return bool(line) and line[-1] == "script.py" and "bwrap" not in proc.name()
    except psutil.Error:
        return False


def rss(procs, each: dict[int, int] | None = None) -> int:
    """The processes' RSS in all; each one's, by pid, into `each` when given."""
    total = 0
    for proc in procs:
        try:
            value = proc.memory_info().rss
        except psutil.Error:
            continue
        total += value
        if each is not None:
            each[proc.pid] = value
    return total


def kind(proc: psutil.Process, top: psutil.Process) -> str:
    """Which part of the tree a process is: the dsstar process, a sandbox's bubblewrap, the
    warm pool's interpreter, a script (forked from it, or started cold), or another."""
    if proc.pid == top.pid:
        return "dsstar"
    if "bwrap" in proc.name():
        return "bwrap"
    if is_script(proc) or proc.uids().real != os.getuid():
        return "script"
    parent = proc.parent()
    return "pool" if parent is not None and "bwrap" in parent.name() else "pool child"


def breakdown(
    tree: list[psutil.Process], top: psutil.Process, sampled: dict[int, int]
) -> dict[str, list[int]]:
    """kind -> [processes, RSS, PSS]. RSS as sampled for the peak, so that the parts add up
    to it; PSS, read just after, shares a page among the processes that map it, so forks of
    the warm pool's interpreter (which map its pages) count them once. A process gone before
    its kind could be read is 'gone'."""
    parts: dict[str, list[int]] = {}
    for proc in tree:
        if proc.pid not in sampled:
            continue
        try:
            name = kind(proc, top)
            pss = getattr(proc.memory_full_info(), "pss", 0)
        except psutil.Error:
            name, pss = "gone", 0
        part = parts.setdefault(name, [0, 0, 0])
        part[0] += 1
        part[1] += sampled[proc.pid]
        part[2] += pss
    return parts


def measure(argv: list[str], env: dict[str, str], server: psutil.Process | None) -> dict:
    """Run the command, sampling its process tree every 50 ms (and, at each new peak of its
    RSS, what each kind of process holds)."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    top = psutil.Process(proc.pid)
    peak = {"rss": 0, "rss_with_server": 0, "scripts": 0, "threads": 0, "parts": {}}
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
    reader.start()
    errors: list[bytes] = []
    err_reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    err_reader.start()
    while proc.poll() is None:
        try:
            tree = [top, *top.children(recursive=True)]
            peak["threads"] = max(peak["threads"], top.num_threads())
        except psutil.Error:
            break
        each: dict[int, int] = {}
        used = rss(tree, each)
        if used > peak["rss"]:
            peak["rss"], peak["parts"] = used, breakdown(tree, top, each)
        if server is not None:
            server_tree = [server, *server.children(recursive=True)]
            peak["rss_with_server"] = max(peak["rss_with_server"], used + rss(server_tree))
        peak["scripts"] = max(peak["scripts"], sum(is_script(p) for p in tree))
        time.sleep(0.05)
    reader.join()
    err_reader.join()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{errors[0].decode()[-3000:]}")
    return {"wall_s": wall, "stdout": out[0].decode(), **peak}


def window_overlap(files: list[dict]) -> int:
    events = []
    for f in files:
        for line in f["description"].splitlines():
            if line.startswith("window "):
                _, start, end = line.split()
                events += [(float(start), 1), (float(end), -1)]
    now = peak = 0
    for _, step in sorted(events):
        now += step
        peak = max(peak, now)
    return peak


def start_server(home: Path, port: int, env: dict[str, str]) -> subprocess.Popen:
    log = open(home / "server.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2):
                return proc
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit((home / "server.log").read_text()[-3000:]) from None
            time.sleep(0.5)


def load() -> str:
    """The machine's load averages over 1, 5 and 15 minutes: figures depend on them."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def mb(value: int) -> str:
    return f"{value / 1e6:,.0f} MB"


def parts(found: dict[str, list[int]]) -> str:
    shown = [
        f"{name} {count}x RSS {mb(rss_)} PSS {mb(pss)}"
        for name, (count, rss_, pss) in found.items()
    ]
    pss_total = sum(pss for _, _, pss in found.values())
    return "; ".join(shown) + f"; PSS in all {mb(pss_total)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1560)
    parser.add_argument("--big-files", type=int, default=1500)
    parser.add_argument("--big-mb", type=int, default=400)
    parser.add_argument("--llm-latency", type=float, default=0.05, help="Seconds per reply.")
    parser.add_argument("--max-parallel", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--llm-concurrency", type=int, default=8)
    parser.add_argument("--skip-big", action="store_true", help="Skip the 400 MB lake.")
    parser.add_argument("--skip-describe", action="store_true", help="Only the 400 MB lake.")
    parser.add_argument(
        "--prefect-database",
        metavar="URL",
        help="The Prefect server's database, e.g. postgresql+asyncpg://user@host:5432/prefect"
        " (an empty database); default: SQLite in the work folder.",
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="dsstar-lake-bench-"))
    (work / "prefect").mkdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSSTAR_")}
    env |= {
        "PREFECT_HOME": str(work / "prefect"),
        "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": str(REPO),
    }
    if args.prefect_database:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = args.prefect_database
    database = "PostgreSQL" if args.prefect_database else "SQLite"
    print(f"cpus {os.cpu_count()}; Prefect server on {database}; work folder {work}", flush=True)
    server_proc = start_server(work / "prefect", port, env)
    server = psutil.Process(server_proc.pid)
    gauge = Gauge()
    try:
        with FakeLLM() as llm:
            llm.default("analyzer", analyzer(gauge, args.llm_latency))
            env |= {
                "DSSTAR_MODEL": "openai/gpt-4o-mini",
                "DSSTAR_API_BASE": llm.base_url,
                "DSSTAR_API_KEY": "sk-bench",
                "DSSTAR_STORAGE": str(work / "storage"),
                "DSSTAR_WORK_DIR": str(work / "scratch"),
                "DSSTAR_DATABASE_URL": f"sqlite:///{work / 'ledger.db'}",
            }
            if not args.skip_describe:
                run_describe(args, work, env, server, gauge, llm)
            if not args.skip_big:
                run_retrieve(args, work, env)
    finally:
        server_proc.terminate()
        server_proc.wait(timeout=60)


def run_describe(args, work: Path, env: dict, server, gauge: Gauge, llm: FakeLLM) -> None:
    lake = small_lake(work / "lake", args.files)
    argv = [
        sys.executable,
        "-m",
        "dsstar",
        "describe",
        "--data",
        str(lake),
        "--json",
        "--max-parallel",
        str(args.max_parallel),
        "--llm-concurrency",
        str(args.llm_concurrency),
    ]
    print(
        f"describe: {args.files} files, max-parallel {args.max_parallel}, llm-concurrency "
        f"{args.llm_concurrency}, model latency {args.llm_latency * 1000:.0f} ms",
        flush=True,
    )
    cold = measure(argv, env, server)
    files = json.loads(cold["stdout"])["files"]
    failed = sum(f["error"] is not None for f in files)
    calls = len(llm.calls())
    print(
        f"  cold describe: {cold['wall_s']:.1f} s ({cold['wall_s'] / len(files) * 1000:.0f} ms"
        f"/file), {calls} LLM calls ({calls / len(files):.1%} of the files),"
        f" {failed} files fell back to the profiler; load average {load()}"
    )
    print(f"  peak LLM requests in flight: {gauge.peak} (limit {args.llm_concurrency})")
    print(
        f"  peak scripts running: {cold['scripts']} sampled, {window_overlap(files)} by their"
        f" time windows (limit {args.max_parallel})"
    )
    print(f"  peak threads of the dsstar process: {cold['threads']}")
    print(
        f"  peak RSS: {mb(cold['rss'])} for the dsstar process tree, "
        f"{mb(cold['rss_with_server'])} with the Prefect server"
    )
    print(f"  at that peak: {parts(cold['parts'])}")
    # Twice: the first warm run follows the cold one while the server may still be writing
    # the cold run's events; the second shows the steady state.
    for attempt in ("first", "second"):
        before = len(llm.calls())
        warm = measure(argv, env, server)
        print(
            f"  warm describe ({attempt}): {warm['wall_s']:.1f} s,"
            f" {len(llm.calls()) - before} LLM calls, peak RSS {mb(warm['rss'])};"
            f" load average {load()}",
            flush=True,
        )


def run_retrieve(args, work: Path, env: dict) -> None:
    started = time.monotonic()
    lake = big_lake(work / "big", args.big_files, args.big_mb)
    size = sum(p.stat().st_size for p in lake.rglob("*") if p.is_file())
    print(
        f"retrieve --offline: {args.big_files} files, {mb(size)} "
        f"(generated in {time.monotonic() - started:.0f} s)",
        flush=True,
    )
    argv = [
        sys.executable,
        "-m",
        "dsstar",
        "retrieve",
        "--data",
        str(lake),
        "--offline",
        "--json",
        "-q",
        "amount of margin per region",
    ]
    cold = measure(argv, env, None)
    print(f"  cold retrieve --offline: {cold['wall_s']:.1f} s (hashes and profiles every file)")
    warm = [measure(argv, env, None)["wall_s"] for _ in range(3)]
    print(f"  warm retrieve --offline: {min(warm):.2f} s best of 3 (command wall time)")
    code = (
        "import time, sys; t = time.monotonic();"
        "from dsstar.api import file_descriptions; from dsstar.data.retrieval import rank;"
        f"files = file_descriptions({str(lake)!r}, offline=True);"
        "rank('amount of margin per region', {f['path']: f['description'] for f in files});"
        "print(f'{time.monotonic() - t:.3f}')"
    )
    inner = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    print(f"  warm lookup and ranking in process: {float(inner.stdout):.2f} s (imports included)")


if __name__ == "__main__":
    main()
