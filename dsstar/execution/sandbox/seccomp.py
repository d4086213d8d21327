"""A seccomp filter for scripts: the system calls a data script never needs are refused.

Standard library only: host.py puts this source before boot.py's, and boot.py installs the
filter in the script's process after dropping privileges (no_new_privs is set), so it holds
for the script and everything it starts, cold or warm, in every mode.

Refused with EPERM: new namespaces of any kind (unshare, setns, clone with a CLONE_NEW* flag;
clone3, whose flags seccomp cannot read, gets ENOSYS so libc falls back to clone), the kernel
keyrings (add_key, request_key, keyctl: a key in the user keyring outlives the script and is
readable by the next one under the same uid), mounts, ptrace and reading other processes'
memory, bpf, perf events, userfaultfd, io_uring, modules, kexec, swap, reboot and the kernel
log. A system call of another ABI (i386 or x32 on x86_64) kills the process: Python never
makes one, and a filter keyed on x86_64 numbers would not see it.
"""

import ctypes
import errno
import os
import struct

__all__ = ["install_filter"]

# (audit arch, clone, clone3, refused) per machine; numbers from the kernel's syscall tables.
_TABLES = {
    "x86_64": (0xC000003E, 56, 435, {
        248, 249, 250,  # add_key, request_key, keyctl
        272, 308,  # unshare, setns
        165, 166, 155, 428, 429, 430, 431, 432, 442,  # mount ... mount_setattr
        101, 310, 311,  # ptrace, process_vm_readv/writev
        321, 298, 323,  # bpf, perf_event_open, userfaultfd
        425, 426, 427,  # io_uring
        175, 176, 313, 246, 320,  # modules, kexec
        163, 167, 168, 169, 103, 179, 304,  # acct, swap, reboot, syslog, quotactl, by_handle
    }),
    "aarch64": (0xC00000B7, 220, 435, {
        217, 218, 219,
        97, 268,
        40, 39, 41, 428, 429, 430, 431, 432, 442,
        117, 270, 271,
        280, 241, 282,
        425, 426, 427,
        105, 106, 273, 104, 294,
        89, 224, 225, 142, 116, 60, 265,
    }),
}  # fmt: skip
_NEW_NAMESPACES = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
_X32_BIT = 0x40000000

_LD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


def _program(arch, clone, clone3, refused):
    """The BPF program as (code, jt, jf, k) instructions, over struct seccomp_data."""
    deny = (_RET, 0, 0, _ERRNO | errno.EPERM)
    prog = [(_LD, 0, 0, 4), (_JEQ, 1, 0, arch), (_RET, 0, 0, _KILL), (_LD, 0, 0, 0)]
    if arch == 0xC000003E:
        prog += [(_JGE, 0, 1, _X32_BIT), (_RET, 0, 0, _KILL)]
    for number in sorted(refused):
        prog += [(_JEQ, 0, 1, number), deny]
    prog += [(_JEQ, 0, 1, clone3), (_RET, 0, 0, _ERRNO | errno.ENOSYS)]
    # clone: refused when its flags (the first argument, low word) ask for a new namespace
    prog += [(_JEQ, 0, 3, clone), (_LD, 0, 0, 16), (_JSET, 0, 1, _NEW_NAMESPACES), deny]
    return prog + [(_RET, 0, 0, _ALLOW)]


def install_filter():
    """Install the filter in this process (inherited by its children). False on a machine
    without a table here; raises OSError when the kernel refuses it."""
    table = _TABLES.get(os.uname().machine)
    if table is None:
        return False
    program = _program(*table)
    blob = b"".join(struct.pack("HBBI", *ins) for ins in program)
    buffer = ctypes.create_string_buffer(blob, len(blob))

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Fprog(len(program), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                           ctypes.c_ulong]  # fmt: skip
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")
    return True
