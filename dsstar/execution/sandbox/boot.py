"""The program that runs inside the sandbox before each script. Standard library only.

It is started as `python -I -u -c <this source> <spec json>`, as root of the new mount, PID,
network and IPC namespaces (made by bwrap or unshare), or as a plain child by a backend that
does not isolate (mode 'none'; the spec then names the host's folder as 'workdir').
Roles:
- 'cold': prepare one script's filesystem, run it as an unprivileged uid, report its status;
- 'zygote': import the data stack once, then fork one child per script request received on
  stdin (a unix socket); each child gets its own mount namespace and fresh working directory,
  runs exactly one script and exits.
In both, a root supervisor forks the script under the sandbox uid, reaps every orphan, kills
what the script left behind and writes the exit status, with the files the script wrote
(keep.py), as JSON to a status pipe. host.py puts the sources of mounts.py (the sandbox's
filesystem), keep.py and seccomp.py before this one: together they are one program.
"""

import json
import os
import resource
import signal
import socket
import struct
import sys

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 4, 36, 38
HEADER = struct.Struct("!I")
CLONE_NEWIPC = 0x08000000


def drop_privileges(spec):
    """Caps for this process and its children, then the sandbox uid, for good."""
    caps = spec["limits"]
    # The address-space cap is a backstop for one huge allocation between two samples of the
    # tree watchdog (which enforces the memory cap); it counts from what is already mapped, so
    # a script forked from a warm interpreter with pandas loaded gets the same room as a cold one.
    with open("/proc/self/statm") as statm:
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    for limit, value in (
        (resource.RLIMIT_AS, caps["memory"] + mapped),
        (resource.RLIMIT_CPU, caps["cpu"]),
        (resource.RLIMIT_FSIZE, caps["disk"]),
        (resource.RLIMIT_NPROC, caps["processes"]),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(limit, (value, value))
    uid = spec["uid"]
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        prctl(PR_SET_DUMPABLE, 1)  # /proc/<pid> then belongs to the uid the host watches
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # cleared by setuid, so set afterwards
    install_filter()  # noqa: F821 - seccomp.py, prepended: no namespaces, keyrings, mounts...


def reset_signals():
    """Signals as a fresh interpreter started from a shell has them: none blocked, none
    ignored, whatever the host's thread that started the sandbox had (a blocked or ignored
    SIGINT is inherited through fork and exec, and the script's Ctrl-C would do nothing).
    Python then installs its own handlers: at start-up when cold, in `run_warm` when warm."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for signum in signal.valid_signals():
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(signum, signal.SIG_DFL)
            except (OSError, ValueError):
                pass  # one the kernel keeps for itself (the real-time signals' first few)


def kill_leftovers(uid):
    """SIGKILL every process of the sandbox uid: orphans, setsid grandchildren, all."""
    if uid is None:
        kill_descendants()
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)  # every process this uid may signal, but itself
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def kill_descendants():
    """Without a uid of its own: kill the orphans reparented here, until none are left."""
    import time

    me = str(os.getpid()).encode()
    for _ in range(200):
        children = []
        for name in os.listdir("/proc"):
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    if handle.read().rsplit(b")", 1)[1].split()[1] == me:
                        children.append(int(name))
            except (OSError, IndexError):
                continue
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass


def supervise(spec, status_fd, start_script, keep_fds=()):
    """Fork the script, reap until it ends, clean up, report {'exit': n} or {'signal': n}."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphans of the script come back here to be reaped
    pid = os.fork()
    if pid == 0:
        try:
            os.close(status_fd)
            for fd in keep_fds:
                os.close(fd)
            reset_signals()
            drop_privileges(spec)
            os.chdir(spec.get("workdir", WORK))
            start_script()
        except BaseException as exc:  # noqa: BLE001 - report any setup failure, then stop
            os.write(2, f"[dsstar] the sandbox could not start the script: {exc!r}\n".encode())
        os._exit(127)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)  # the output pipes close once the script's processes are gone
    status = _reap(pid)
    if _has_children():  # as subreaper, every process the script left is a child here
        kill_leftovers(spec["uid"])
        _reap(None)
    if isinstance(status, dict):
        status.update(_outputs(spec))
    blob = json.dumps(status).encode()
    while blob:  # the host reads the pipe to its end: no size limit
        blob = blob[os.write(status_fd, blob) :]
    os.close(status_fd)


def _outputs(spec):
    """The files the script left in its working directory (keep.py, prepended)."""
    caps = spec["limits"]
    try:
        workdir = spec.get("workdir", WORK)
        return collect(workdir, caps.get("outputs", 0), caps.get("outputs_bytes", 0))  # noqa: F821
    except Exception as exc:  # noqa: BLE001 - a report without outputs beats no report
        return {"outputs": [], "left_out": [], "outputs_error": repr(exc)}


def _has_children():
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _reap(main_pid):
    status = None
    while True:
        try:
            pid, code, usage = os.wait4(-1, 0)
        except ChildProcessError:
            return status
        except InterruptedError:
            continue
        if pid == main_pid:
            if os.WIFSIGNALED(code):
                # Its CPU time tells the kernel's SIGKILL at the CPU cap from a kill by another
                # process (the host then runs the script again).
                cpu = round(usage.ru_utime + usage.ru_stime, 3)
                return {"signal": os.WTERMSIG(code), "cpu_s": cpu}
            return {"exit": os.WEXITSTATUS(code)}


def exec_cold(spec):
    """A fresh interpreter runs prelude.py, which runs the script as `python -I -u` would."""
    prelude = spec["prelude"] + "\nrun_cold()\n"
    script = os.path.abspath("script.py")
    os.execv(sys.executable, [sys.executable, "-I", "-u", "-c", prelude, script])


def run_warm():
    """Run the script in this forked interpreter as `python -I -u script.py` would."""
    import atexit
    import builtins
    import threading
    import types

    atexit._clear()  # the zygote's exit handlers are not the script's
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as Python sets them at start
    for name in ("SIGPIPE", "SIGXFSZ"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    for name in ("numpy.random",):
        if name in sys.modules:
            sys.modules[name].seed()  # each script draws its own random state
    sys.argv = [SCRIPT]
    main = types.ModuleType("__main__")
    main.__file__, main.__builtins__, main.__cached__ = SCRIPT, builtins, None
    sys.modules["__main__"] = main
    code = 0
    try:
        install_chart_hook()  # noqa: F821 - prelude.py, prepended
        raise_no_effect()  # noqa: F821 - prelude.py, prepended
        with open(SCRIPT, "rb") as handle:
            source = handle.read()
        exec(compile(source, SCRIPT, "exec"), main.__dict__)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException as exc:  # noqa: BLE001 - printed as the interpreter would
        tb = exc.__traceback__
        tb = tb.tb_next if tb is not None and not isinstance(exc, SyntaxError) else None
        sys.excepthook(type(exc), exc, exc.with_traceback(tb).__traceback__)
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream at exit is the script's business
            pass
    os._exit(code)


def _exit_code(value):
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


def zygote(spec):
    """Import the data stack once, then serve one forked child per request on stdin.

    pyarrow's jemalloc keeps a background thread here; jemalloc takes its locks around fork,
    so the single-threaded children start with a consistent heap.
    """
    loaded = []
    for name in spec.get("preload", ()):
        try:
            __import__(name)
            loaded.append(name)
        except Exception:  # noqa: BLE001 - import what is installed
            pass
    if "pandas" in loaded:
        _exercise_pandas()
    conn = socket.socket(fileno=0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # request children reap themselves
    conn.sendall(json.dumps({"ready": loaded}).encode() + b"\n")
    while True:
        request, fds = _receive(conn)
        if request is None:
            os._exit(0)  # the host closed the pool or died
        if os.fork() == 0:
            conn.close()
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # stdin as in a cold run
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _serve(spec, request, fds)
        for fd in fds:
            os.close(fd)


def _exercise_pandas():
    """Run pandas' common paths once, so the modules they import lazily are loaded too."""
    import io

    import pandas as pd

    try:
        frame = pd.read_csv(io.StringIO("k,v,d\na,1,2024-01-02\nb,2.5,2024-02-03\n"))
        frame["d"] = pd.to_datetime(frame["d"])
        summary = frame.groupby("k")["v"].agg(["sum", "mean"]).reset_index().merge(frame, on="k")
        repr(summary), repr(frame.describe()), frame.to_csv(io.StringIO())
    except Exception:  # noqa: BLE001 - only a head start; a cold import would do the same
        pass


def _receive(conn):
    fds = []
    head, ancillary, _, _ = conn.recvmsg(HEADER.size, socket.CMSG_SPACE(3 * 4))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += list(struct.unpack(f"{len(data) // 4}i", data[: len(data) - len(data) % 4]))
    if len(head) < HEADER.size:
        return None, fds
    (size,) = HEADER.unpack(head)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            return None, fds
        body += chunk
    return json.loads(body), fds


def _serve(spec, request, fds):
    """One script in a child of the zygote: its own mount namespace, tmpfs and uid."""
    out, err, status_fd = fds
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        spec = {**spec, **request["spec"]}
        # A mount namespace for its own working directory, and an IPC namespace so that no
        # SysV segment or message queue of one script is seen by the next (they die with it).
        _check(LIBC.unshare(CLONE_NEWNS | CLONE_NEWIPC), "unshare")
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        prepare_workdir(spec, request["code"])
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        supervise(spec, status_fd, run_warm)
    except BaseException as exc:  # noqa: BLE001 - the host reads this as a failed start
        os.write(status_fd, json.dumps({"error": repr(exc)}).encode())
    os._exit(0)


def main():
    spec = json.loads(sys.argv[1])
    if spec.get("newroot"):
        build_root(spec)
    if spec["role"] == "zygote":
        zygote(spec)
        return
    status_fd = spec["status_fd"]
    try:
        if "workdir" not in spec:  # else a plain folder the host wrote the script into
            with open("/.dsstar/script.py", encoding="utf-8", errors="surrogatepass") as handle:
                prepare_workdir(spec, handle.read())
    except BaseException as exc:  # noqa: BLE001 - the host reads this as a failed start
        os.write(status_fd, json.dumps({"error": repr(exc)}).encode())
        os._exit(0)
    supervise(spec, status_fd, lambda: exec_cold(spec))


if __name__ == "__main__":
    main()
