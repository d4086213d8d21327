"""Runs inside the sandbox (its source is sent as the script, with `JOBS` appended): several
like files' analysis scripts in one sandboxed process, each in a forked child of its own, so
that one sandbox start serves them all.

Each child gets fresh globals, its stdout and stderr in a file of its own, and is killed past
`TIMEOUT` seconds; what it printed (at most `CAP` bytes) is printed as one JSON line after
`MARK` as soon as it ends, so a batch cut short still reports the members that finished.
Only the standard library: it runs where pandas may be absent.
"""

import json
import os
import signal
import sys
import tempfile
import time
import traceback

MARK = "@@dsstar-member@@ "


def _child(code, out):
    os.dup2(out, 1)
    os.dup2(out, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    status = 0
    try:
        exec(compile(code, "script.py", "exec"), {"__name__": "__main__", "__file__": "script.py"})
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _run(path, code, timeout, cap, folder):
    out_path = os.path.join(folder, "out")
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    pid = os.fork()
    if pid == 0:
        _child(code, out)
    os.close(out)
    deadline, status = time.monotonic() + timeout, None
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
        elif time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = "timeout"
        else:
            time.sleep(0.002)
    with open(out_path, "rb") as handle:
        text = handle.read(cap + 1)
    output = text[:cap].decode("utf-8", "replace")
    return {"path": path, "status": status, "output": output, "truncated": len(text) > cap}


def main(jobs, timeout, cap):
    folder = tempfile.mkdtemp(prefix="members-", dir=".")
    for path, code in jobs:
        report = _run(path, code, timeout, cap, folder)
        sys.stdout.write(MARK + json.dumps(report) + "\n")
        sys.stdout.flush()
