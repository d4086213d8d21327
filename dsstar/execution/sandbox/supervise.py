"""The host side of one script: its uid, the watchdog over its process tree, its output.

Each running script owns a dedicated unprivileged host uid (uids.py: held machine-wide, so
concurrent scripts of any dsstar process on the host never share one). Everything the script
starts runs under that uid, so the uid *is* the process tree: RLIMIT_NPROC caps its processes,
a watchdog sums its resident memory, and `kill -9 -1` run as that uid ends every last process,
setsid grandchildren included.
"""

from __future__ import annotations

import base64
import json
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from dsstar.execution.sandbox.keep import OVER_BOUNDS, name_problem
from dsstar.execution.sandbox.shared import held_bytes
from dsstar.execution.sandbox.treecpu import Sample, TreeCpu, read_stat
from dsstar.execution.sandbox.types import ExecResult, Limits

__all__ = [
    "kept_outputs",
    "left_out_error",
    "kill_tree",
    "kill_uid",
    "result",
    "scan",
    "shown_name",
    "watch",
]

_TICK_S = 0.1
_NAMED = 10  # files left out named in the error, per reason; the rest counted


def scan(uid: int, pids: list[int] | None = None, cpu: Sample | None = None) -> tuple[int, int]:
    """(tasks, proportional resident bytes) of every process running as `uid`; their pids
    are appended to `pids`, and their CPU times put in `cpu` (treecpu.py), when given.

    Proportional (Pss) rather than resident: pages a forked child shares with its parent or
    with the pool interpreter count once, not once per process.
    """
    tasks = memory = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/stat", "rb") as handle:
                tasks += read_stat(handle.read(), int(name), {} if cpu is None else cpu)
            with open(f"/proc/{name}/smaps_rollup", "rb") as handle:
                for line in handle:
                    if line.startswith(b"Pss:"):
                        memory += int(line.split()[1]) * 1024
                        break
            if pids is not None:
                pids.append(int(name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return tasks, memory


def kill_uid(uid: int | None) -> None:
    """SIGKILL every process of `uid`, atomically with respect to forks."""
    if uid is None:
        return
    subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "kill", "-9", "-1"],
        capture_output=True,
        check=False,
    )


def kill_tree(root: int) -> None:
    """SIGKILL the descendants of `root` (not `root` itself), for hosts without a uid slot."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                ppid = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(name))
    stack = list(parents.get(root, ()))
    while stack:
        pid = stack.pop()
        stack += parents.get(pid, ())
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class _Capture:
    """Keeps the first bytes of a stream and a rolling tail, dropping the middle."""

    def __init__(self, fd: int, limit: int) -> None:
        self.tail_limit = min(limit // 4, 32_000)
        self.head_limit = limit - self.tail_limit
        self.head, self.tail, self.dropped = bytearray(), bytearray(), 0
        self.thread = threading.Thread(target=self._drain, args=(fd,), daemon=True)
        self.thread.start()

    def _drain(self, fd: int) -> None:
        with open(fd, "rb") as stream:
            for chunk in iter(lambda: stream.read1(65536), b""):
                room = self.head_limit - len(self.head)
                self.head += chunk[:room]
                self.tail += chunk[room:] if room > 0 else chunk
                if len(self.tail) > self.tail_limit:
                    self.dropped += len(self.tail) - self.tail_limit
                    del self.tail[: len(self.tail) - self.tail_limit]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.dropped:
            return f"{head}\n[dsstar] ... {self.dropped} bytes of output left out ...\n{tail}"
        return head + tail


class _Watchdog(threading.Thread):
    """Samples the uid's processes: kills the tree over the memory cap (resident memory plus
    what it holds in tmpfs, memfds and SysV segments: shared.py) or over the CPU cap (the
    CPU time of its processes together: treecpu.py), notes the nproc cap."""

    def __init__(self, uid: int | None, limits: Limits, isolated: bool) -> None:
        super().__init__(daemon=True)
        self.uid, self.limits, self.isolated = uid, limits, isolated
        self.hits: set[str] = set()
        self.done = threading.Event()

    def run(self) -> None:
        if self.uid is None:
            return
        memory = self.limits.memory_mb * 1024 * 1024
        tree = TreeCpu()
        pause = _TICK_S
        while not self.done.wait(pause):
            began = time.monotonic()
            pids: list[int] = []
            cpu: Sample = {}
            tasks, rss = scan(self.uid, pids, cpu)
            rss += held_bytes(pids, self.isolated)
            pause = max(_TICK_S, 2 * (time.monotonic() - began))  # at most a third of a core
            if tasks >= self.limits.processes:
                self.hits.add("processes")
            over = {"memory": rss > memory, "cpu": tree.seconds(cpu) > self.limits.cpu_seconds}
            if any(over.values()):
                self.hits.update(cap for cap, hit in over.items() if hit)
                kill_uid(self.uid)


def watch(
    fds: tuple[int, int, int],
    uid: int | None,
    limits: Limits,
    kill: Callable[[], None],
    isolated: bool = True,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Collect one script's output and status; enforce the wall clock and the tree caps.

    `fds` are the read ends of stdout, stderr and the status pipe; `isolated`: the script
    has its own tmpfs and IPC namespace. Returns the status the supervisor inside reported
    ({} when it reported none) and the facts for the result.
    """
    started = time.monotonic()
    out, err = _Capture(fds[0], limits.output_bytes), _Capture(fds[1], limits.output_bytes)
    dog = _Watchdog(uid, limits, isolated)
    dog.start()
    raw, timed_out = b"", False
    deadline = started + limits.timeout_s
    with open(fds[2], "rb", buffering=0) as status:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 and not timed_out:
                timed_out = True
                kill()
                deadline = time.monotonic() + 10  # grace for the supervisor to report
                continue
            if left <= 0:
                break  # the supervisor itself is stuck: report what we have
            ready, _, _ = select.select([status], [], [], left)
            if ready:
                chunk = status.read(65536)
                if not chunk:
                    break
                raw += chunk
    dog.done.set()
    if uid is None or scan(uid)[0]:
        kill()  # nothing of the script outlives it
    for capture in (out, err):
        capture.thread.join(timeout=5)
    try:
        report = json.loads(raw) if raw else {}
    except ValueError:
        report = {}
    facts = {
        "stdout": out.text(),
        "stderr": err.text(),
        "timed_out": timed_out,
        "duration_s": round(time.monotonic() - started, 3),
        "truncated": bool(out.dropped or err.dropped),
        "hits": dog.hits,
    }
    return report, facts


def result(
    report: dict[str, Any], facts: dict[str, Any], limits: Limits, mode: str, **extra: Any
) -> ExecResult:
    """The ExecResult of a finished script, each cap it hit stated in its output."""
    stdout, stderr = facts["stdout"], facts["stderr"]
    exit_code = report.get("exit", -report["signal"] if "signal" in report else None)
    if "error" in report:
        stderr += f"\n[dsstar] the sandbox could not start the script: {report['error']}"
    hits = set(facts["hits"])
    if exit_code and "MemoryError" in stderr:
        hits.add("memory")
    both = stdout + stderr  # scripts often print the errors they catch
    if "Resource temporarily unavailable" in both:  # EAGAIN from fork: RLIMIT_NPROC
        hits.add("processes")
    if "No space left on device" in both or "File too large" in both:
        hits.add("disk")
    # The CPU cap's soft and hard limits are one: the kernel sends SIGKILL, not SIGXCPU.
    at_cap = report.get("cpu_s", 0) >= limits.cpu_seconds - 0.5
    if exit_code == -signal.SIGXCPU or (exit_code == -signal.SIGKILL and at_cap):
        hits.add("cpu")
    if facts["timed_out"]:
        hits.add("timeout")
    if facts["truncated"]:
        hits.add("output")
    output = stdout + ("\n" if stdout and not stdout.endswith("\n") else "") + stderr
    output += "".join(_message(hit, limits) for hit in sorted(hits))
    outputs = kept_outputs(report, limits)
    outputs_error = left_out_error(report.get("left_out"), limits)
    if report.get("outputs_error"):  # collecting failed: boot.py's `_outputs`
        outputs_error = f"the files the script wrote could not be read: {report['outputs_error']}"
    if outputs_error:
        output += f"\n[dsstar] {outputs_error}"
    if exit_code is not None and exit_code < 0 and not hits:
        output += f"\n[dsstar] the script was terminated by {signal.Signals(-exit_code).name}"
        output += (
            ", which none of its limits sent (another process, or the machine out of memory)."
            if exit_code == -signal.SIGKILL
            else "."
        )
    return ExecResult(
        ok=exit_code == 0 and not facts["timed_out"] and "memory" not in facts["hits"],
        exit_code=exit_code,
        output=output,
        timed_out=facts["timed_out"],
        duration_s=facts["duration_s"],
        truncated=facts["truncated"],
        sandbox=mode,
        stdout=stdout,
        limits_hit=sorted(hits),
        outputs=outputs,
        outputs_error=outputs_error,
        **extra,
    )


def left_out_error(left_out: Any, limits: Limits) -> str:
    """The error that names each file left out (keep.collect's `left_out`) under the reason
    it was, the first `_NAMED` of each reason by name and the rest counted; '' when none was."""
    if not left_out or not isinstance(left_out, list):
        return ""
    reasons: dict[str, list[Any]] = {}
    for item in left_out:
        name, why = _named(item)
        reasons.setdefault(why, []).append(name)
    parts = []
    for why, names in reasons.items():
        more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
        parts.append(f"{why}: {', '.join(map(shown_name, names[:_NAMED]))}{more}")
    text = f"{len(left_out)} file(s) the script wrote were not kept, {'; '.join(parts)}."
    if OVER_BOUNDS in reasons:
        text += (
            f" The bounds: at most {limits.outputs} files (DSSTAR_EXEC_OUTPUTS) and"
            f" {limits.outputs_mb:g} MB (DSSTAR_EXEC_OUTPUTS_MB) are kept."
        )
    return text


def _named(item: Any) -> tuple[Any, str]:
    """(name, why) of one entry of `left_out`."""
    if isinstance(item, list) and len(item) == 2 and isinstance(item[1], str):
        return item[0], item[1][:100]
    return item, OVER_BOUNDS


def shown_name(name: Any) -> str:
    """A file name as one line of printable text: as it is when it is printable UTF-8, else
    as Python writes it (`b'caf\\xe9.csv'` for bytes that are not UTF-8, `'a\\nb.csv'`);
    at most 100 characters."""
    text = str(name)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes, as os.scandir gives them
        text = repr(text.encode("utf-8", "surrogateescape"))
    else:
        text = text if text.isprintable() else repr(text)
    return text if len(text) <= 100 else text[:99] + "…"


def kept_outputs(report: dict[str, Any], limits: Limits) -> list[dict[str, Any]]:
    """The files the supervisor reported, checked again here: safe relative names, valid
    base64, within the count and the byte budget; a chart description only as a JSON object.
    The supervisor applied the same rules, and named in `left_out` what it did not keep."""
    kept: list[dict[str, Any]] = []
    budget = limits.outputs_bytes
    for item in report.get("outputs") or []:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or name_problem(name) is not None:
            continue
        if len(kept) >= limits.outputs:
            continue
        parts = name.split("/")
        if len(parts) > 2 or any(p in ("", ".", "..") or "\\" in p for p in parts):
            continue
        try:
            size = len(base64.b64decode(item.get("data", ""), validate=True))
        except (ValueError, TypeError):
            continue
        if size + sum(f["bytes"] for f in kept) <= budget:
            chart = item.get("chart")
            chart = {"chart": chart} if isinstance(chart, dict) else {}
            kept.append({"name": name, "bytes": size, "data": item["data"], **chart})
    return kept


def _message(hit: str, limits: Limits) -> str:
    text = {
        "timeout": f"was killed after {limits.timeout_s:g} s (exec timeout)",
        "memory": f"went over {limits.memory_mb} MB of memory for its processes together"
        " (exec memory limit)",
        "processes": f"reached the limit of {limits.processes} processes and threads; further"
        " forks failed (exec process limit)",
        "disk": f"ran out of its {limits.disk_mb} MB for /tmp and the working directory"
        " (exec disk limit)",
        "cpu": f"used more than {limits.cpu_seconds} s of CPU time, its processes together"
        " (exec CPU limit)",
        "output": f"printed more than {limits.output_bytes} bytes; the middle was left out"
        " (exec output limit)",
    }[hit]
    return f"\n[dsstar] the script {text}."
