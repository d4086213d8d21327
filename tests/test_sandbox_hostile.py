"""The hostile-script table: every isolating mode, cold and warm, real subprocesses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from dsstar.execution.sandbox import Limits, run_script
from dsstar.execution.sandbox.modes import _usable
from dsstar.execution.sandbox.shared import held_bytes

MODES = [m for m in ("bwrap", "unshare") if _usable(m)]
LIMITS = Limits(timeout_s=20, memory_mb=1024, output_bytes=20_000, processes=48, disk_mb=64)


def test_this_machine_offers_both_isolating_modes():
    assert MODES == ["bwrap", "unshare"]  # the table below must run in each


@pytest.fixture(params=[(m, s) for m in MODES for s in ("cold", "warm")], ids="-".join)
def how(request):
    return request.param


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "table.csv").write_text("a,b\n1,2\n")
    return folder


def run(code, data, how, tmp_path, **caps):
    mode, start = how
    limits = Limits(**{**vars(LIMITS), "warm": start == "warm", **caps})
    result = run_script(code, data_dir=data, limits=limits, mode=mode, work_root=tmp_path)
    assert result.sandbox == mode and result.start == start, result.note
    return result


def test_host_files_stay_private(data, how, tmp_path):
    secret = Path("/root") / f"dsstar-test-{uuid.uuid4().hex}"
    secret.write_text("root-file-secret")
    try:
        code = (
            "import os\n"
            "for path in ['/etc/shadow', '/etc/gshadow', SECRET, '/root', '/home']:\n"
            "    try:\n"
            "        print(path, open(path).read() if os.path.isfile(path) else os.listdir(path))\n"
            "    except OSError as exc:\n"
            "        print(path, 'refused', type(exc).__name__)\n"
            "print('uid', os.getuid(), 'etc', sorted(os.listdir('/etc')))\n"
        ).replace("SECRET", repr(str(secret)))
        result = run(code, data, how, tmp_path)
    finally:
        secret.unlink()
    assert result.ok, result.output
    assert "root-file-secret" not in result.output
    assert "/etc/shadow refused" in result.output and "$" not in result.output
    assert f"{secret} refused" in result.output
    assert "uid 0 " not in result.output
    listing = result.output.split("etc ")[1]
    assert "shadow" not in listing and "ssh" not in listing


def test_no_parent_secret_through_env_or_proc(data, how, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-leak-me")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, "AWS_SECRET_ACCESS_KEY": "aws-leak-me", "OPENAI_API_KEY": "sk-leak"},
    )
    try:
        code = (
            "import os\n"
            "print(sorted(os.environ.items()))\n"
            "others = [p for p in os.listdir('/proc') if p.isdigit()]\n"
            "for pid in [os.getppid(), 1, HOLDER, *others]:\n"
            "    try:\n"
            "        print(pid, open(f'/proc/{pid}/environ', 'rb').read())\n"
            "    except OSError as exc:\n"
            "        print(pid, 'refused', type(exc).__name__)\n"
        ).replace("HOLDER", str(holder.pid))
        result = run(code, data, how, tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert result.ok, result.output
    assert "leak-me" not in result.output and "sk-leak" not in result.output
    assert "PATH" in result.output


def test_writes_outside_the_work_dir_fail(data, how, tmp_path):
    venv = Path(sys.prefix)
    targets = ["/etc/dsstar-x", f"{venv}/dsstar-x", "data/table.csv", "data/new.csv",
               f"{tmp_path}/outside.txt", "/usr/dsstar-x"]  # fmt: skip
    code = (
        "for path in TARGETS:\n"
        "    try:\n"
        "        open(path, 'w').write('x'); print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', path, type(exc).__name__)\n"
        "open('mine.txt', 'w').write('ok'); print('own dir', open('mine.txt').read())\n"
    ).replace("TARGETS", repr(targets))
    result = run(code, data, how, tmp_path)
    assert result.ok, result.output
    assert "wrote" not in result.output and "own dir ok" in result.output
    assert (data / "table.csv").read_text() == "a,b\n1,2\n"
    assert not (data / "new.csv").exists() and not (venv / "dsstar-x").exists()
    assert not Path("/etc/dsstar-x").exists() and not (tmp_path / "outside.txt").exists()


def test_network_is_unreachable(data, how, tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(15)
    accepted = []
    thread = threading.Thread(target=lambda: _accept(server, accepted), daemon=True)
    thread.start()
    port = server.getsockname()[1]
    code = (
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', PORT), timeout=3); print('connected')\n"
        "except OSError as exc:\n"
        "    print('no network', exc)\n"
    ).replace("PORT", str(port))
    result = run(code, data, how, tmp_path)
    server.close()
    assert "no network" in result.output and "connected" not in result.output
    assert not accepted


def _accept(server, accepted):
    try:
        accepted.append(server.accept())
    except OSError:
        pass


def test_fork_storm_stops_at_the_process_cap(data, how, tmp_path):
    code = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    while n < 2000:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60); os._exit(0)\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print('fork failed after', n, exc)\n"
        "print('went on')\n"
    )
    result = run(code, data, how, tmp_path)
    assert "fork failed after" in result.output and "went on" in result.output, result.output
    assert int(result.output.split("fork failed after ")[1].split()[0]) < 48
    assert "processes" in result.limits_hit and "exec process limit" in result.output


def test_tree_memory_is_capped(data, how, tmp_path):
    code = (
        "import subprocess, sys\n"
        "child = \"b = b'x' * (400 * 2**20); import time; time.sleep(60)\"\n"
        "procs = [subprocess.Popen([sys.executable, '-c', child]) for _ in range(4)]\n"
        "for p in procs: p.wait()\n"
        "print('all four ran')\n"
    )
    result = run(code, data, how, tmp_path, memory_mb=512)
    assert not result.ok and "all four ran" not in result.output
    assert "memory" in result.limits_hit and "exec memory limit" in result.output


def test_disk_fill_stops_at_the_cap(data, how, tmp_path):
    code = (
        "import os\n"
        "for path in ['/tmp/a', '/tmp/b', 'c', 'd']:\n"
        "    try:\n"
        "        with open(path, 'wb') as f:\n"
        "            for _ in range(25): f.write(b'x' * 2**20)\n"
        "        print('filled', path)\n"
        "    except OSError as exc:\n"
        "        print('stopped', path, exc)\n"
        "print('went on')\n"
    )
    result = run(code, data, how, tmp_path)
    assert "stopped" in result.output and "went on" in result.output
    assert "disk" in result.limits_hit and "exec disk limit" in result.output
    assert result.output.count("filled") <= 2


def test_setsid_grandchildren_do_not_survive(data, how, tmp_path):
    marker = f"{uuid.uuid4().int % 10**6}.25"
    code = (
        "import os, subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(MARKER)'],"
        " start_new_session=True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        import time; time.sleep(MARKER)\n"
        "    os._exit(0)\n"
        "print('spawned')\n"
    ).replace("MARKER", marker)
    result = run(code, data, how, tmp_path)
    assert "spawned" in result.output
    assert not _processes_with(marker)


def _processes_with(marker):
    found = []
    for name in os.listdir("/proc"):
        try:
            if marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.append(name)
        except OSError:
            continue
    return found


def test_output_flood_is_bounded_head_and_tail(data, how, tmp_path):
    code = "print('HEAD'); print('x' * 3_000_000); print('TAIL')\nraise ValueError('last words')"
    result = run(code, data, how, tmp_path)
    assert result.truncated and "output" in result.limits_hit
    assert len(result.output) < 60_000
    assert "HEAD" in result.output and "TAIL" in result.output
    assert "ValueError: last words" in result.output


def test_output_before_a_hang_or_crash_is_kept(data, how, tmp_path):
    hang = run("import time\nprint('before the hang')\ntime.sleep(600)", data, how, tmp_path,
               timeout_s=3)  # fmt: skip
    assert hang.timed_out and "before the hang" in hang.output and "exec timeout" in hang.output
    crash = run("import os, signal\nprint('before the crash')\nos.kill(os.getpid(), 9)", data,
                how, tmp_path)  # fmt: skip
    assert not crash.ok and "before the crash" in crash.output
    assert crash.exit_code == -9 and "SIGKILL" in crash.output


def test_figure_files_never_follow_links_block_or_grow(data, how, tmp_path):
    code = (
        "import os\n"
        "os.symlink('/etc/passwd', 'chart.png')\n"
        "os.symlink('data/table.csv', 'table.png')\n"
        "os.mkdir('sub'); os.symlink('/etc/passwd', 'sub/deep.svg')\n"
        "os.symlink('/etc', 'etc')  # a folder link is not followed either\n"
        "try:\n"
        "    os.link('data/table.csv', 'hard.png')\n"
        "except OSError as exc:\n"
        "    print('no hard link', type(exc).__name__)\n"
        "os.mkfifo('x.png'); os.mkfifo('sub/y.svg')\n"
        "with open('big.png', 'wb') as f:\n"
        "    f.truncate(1 << 30)  # sparse: 1 GB long, nothing written\n"
        "open('real.png', 'wb').write(b'\\x89PNG real')\n"
        "print('made')\n"
    )
    result = run(code, data, how, tmp_path, disk_mb=2048)
    assert result.ok and "made" in result.output, result.output
    assert "no hard link" in result.output  # the data is another mount
    assert [(f["name"], f["bytes"]) for f in result.figures] == [("real.png", 9)]
    error = result.outputs_error
    assert "file(s) the script wrote were not kept," in error and error in result.output
    assert "past the bounds: big.png" in error  # over the budget
    assert "a symbolic link: " in error and "not a regular file: sub/y.svg, x.png" in error
    assert len(json.dumps(result.to_dict())) < 10_000


def test_a_flood_of_figure_files_stays_within_the_bounds(data, how, tmp_path):
    code = (
        "import os\n"
        "os.mkdir('more')\n"
        "for i in range(1000):\n"
        "    open(f'f{i:04d}.png', 'wb').write(b'p' * 10_000)\n"
        "    open(f'more/g{i:04d}.svg', 'wb').write(b's' * 10_000)\n"
        "print('flooded')\n"
    )
    result = run(code, data, how, tmp_path)
    assert result.ok, result.output
    assert [f["name"] for f in result.figures] == [f"f{i:04d}.png" for i in range(16)]
    assert "DSSTAR_EXEC_OUTPUTS" in result.outputs_error and "1984 file(s)" in result.outputs_error
    few = run(code, data, how, tmp_path, outputs=1000, outputs_mb=0.05)
    assert len(few.figures) == 5 and sum(f["bytes"] for f in few.figures) <= 0.05 * 2**20


# -- memory outside the processes, IPC objects, keyrings, namespaces (issue 19) --------------

_LIBC = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
_SHM = _LIBC + (
    "libc.shmat.restype = ctypes.c_void_p\n"
    "def segment(key, size):\n"
    "    shmid = libc.shmget(key, size, 0o1600)  # IPC_CREAT | rw\n"
    "    assert shmid >= 0, os.strerror(ctypes.get_errno())\n"
    "    return shmid\n"
)


def test_memfds_count_against_the_memory_cap(data, how, tmp_path):
    code = (
        "import os, time\n"
        "fds = []\n"
        "for i in range(6):\n"
        "    fd = os.memfd_create(f'm{i}')\n"
        "    for _ in range(192): os.write(fd, b'x' * 2**20)\n"
        "    fds.append(fd)\n"
        "    print('memfd', i, flush=True)\n"
        "time.sleep(30)\n"
        "print('kept six')\n"
    )
    # Each memfd is within the disk cap (RLIMIT_FSIZE bounds one file); six are not.
    result = run(code, data, how, tmp_path, memory_mb=512, disk_mb=256)
    assert "kept six" not in result.output and "memfd 5" not in result.output, result.output
    assert "memory" in result.limits_hit and "exec memory limit" in result.output


def test_a_host_process_of_the_scripts_uid_is_not_read_as_its_tmpfs(tmp_path):
    # When a script is ended, the host runs `kill -9 -1` as its uid; sampled at that moment,
    # that helper's root is the host's, whose /tmp is no part of the script's memory (once,
    # a script killed at its timeout was also said to be over its memory cap this way).
    (tmp_path / "ballast").write_bytes(b"x" * 2**20)  # the host's /tmp holds something
    helper = subprocess.Popen(["sleep", "30"])
    try:
        assert held_bytes([helper.pid], isolated=True) == 0
    finally:
        helper.kill()
        helper.wait()


def test_sysv_segments_count_against_the_memory_cap(data, how, tmp_path):
    code = _SHM + (
        "import time\n"
        "for i in range(6):\n"
        "    shmid = segment(0x5000 + i, 192 << 20)\n"
        "    addr = libc.shmat(shmid, None, 0)\n"
        "    ctypes.memset(addr, 1, 192 << 20)\n"
        "    libc.shmdt(ctypes.c_void_p(addr))  # detached: in no process's resident memory\n"
        "    print('segment', i, flush=True)\n"
        "time.sleep(30)\n"
        "print('kept six')\n"
    )
    result = run(code, data, how, tmp_path, memory_mb=512)
    assert "kept six" not in result.output and "segment 5" not in result.output, result.output
    assert "memory" in result.limits_hit and "exec memory limit" in result.output


def test_posix_shm_counts_against_the_memory_cap(data, how, tmp_path):
    code = (
        "import time\n"
        "for i in range(6):\n"
        "    with open(f'/dev/shm/s{i}', 'wb') as f:\n"
        "        for _ in range(192): f.write(b'x' * 2**20)\n"
        "    print('shm', i, flush=True)\n"
        "time.sleep(30)\n"
        "print('kept six')\n"
    )
    result = run(code, data, how, tmp_path, memory_mb=512, disk_mb=2048)
    assert "kept six" not in result.output and "shm 5" not in result.output, result.output
    assert "memory" in result.limits_hit


def test_no_ipc_object_of_one_script_is_seen_by_the_next(data, how, tmp_path):
    left = _SHM + (
        "shmid = segment(0x7A11, 4096)\n"
        "addr = libc.shmat(shmid, None, 0)\n"
        "ctypes.memmove(addr, b'left-behind', 11)\n"
        "print('left', shmid)\n"
    )
    first = run(left, data, how, tmp_path)
    assert first.ok and "left" in first.output, first.output
    look = _LIBC + (
        "shmid = libc.shmget(0x7A11, 0, 0)\n"
        "print('found' if shmid >= 0 else 'none', os.strerror(ctypes.get_errno()))\n"
        "print(open('/proc/sysvipc/shm').read().count(chr(10)) - 1, 'segments')\n"
    )
    second = run(look, data, how, tmp_path)
    assert second.ok, second.output
    assert "none" in second.output and "0 segments" in second.output, second.output


def test_keyrings_and_new_user_namespaces_are_refused(data, how, tmp_path):
    code = _LIBC + (
        "SYS = {'x86_64': (248, 250, 272), 'aarch64': (217, 219, 97)}[os.uname().machine]\n"
        "add_key, keyctl, unshare = SYS\n"
        "key = libc.syscall(add_key, b'user', b'dsstar-test', b'secret', 6,"
        " ctypes.c_long(-4))  # KEY_SPEC_USER_KEYRING\n"
        "print('add_key', key, os.strerror(ctypes.get_errno()))\n"
        "print('keyctl', libc.syscall(keyctl, 0, ctypes.c_long(-4), 0),"
        " os.strerror(ctypes.get_errno()))  # KEYCTL_GET_KEYRING_ID\n"
        "print('userns', libc.syscall(unshare, 0x10000000), os.strerror(ctypes.get_errno()))\n"
        "print('netns', libc.syscall(unshare, 0x40000000), os.strerror(ctypes.get_errno()))\n"
        "import subprocess\n"
        "done = subprocess.run(['unshare', '--user', '--map-root-user', 'id'],"
        " capture_output=True, text=True)\n"
        "print('unshare tool', done.returncode, done.stdout.strip())\n"
        "import threading; t = threading.Thread(target=print, args=('threads work',));"
        " t.start(); t.join()\n"
        "print('forks work', subprocess.run(['true']).returncode)\n"
    )
    result = run(code, data, how, tmp_path)
    assert result.ok, result.output
    for call in ("add_key -1", "keyctl -1", "userns -1", "netns -1"):
        assert f"{call} Operation not permitted" in result.output, result.output
    assert "unshare tool 0" not in result.output and "uid=0" not in result.output
    assert "threads work" in result.output and "forks work 0" in result.output
