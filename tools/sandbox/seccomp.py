"""The seccomp filter of a sandboxed call: a classic-BPF program, handed to bubblewrap (``--seccomp FD``) or,
in weak isolation, loaded by the runner itself (``prctl``) before the code runs. It refuses child processes
(``fork``/``vfork``/``clone`` without ``CLONE_THREAD``; threads are allowed), the kernel keyring, ``ptrace``,
``bpf``, ``perf_event_open``, ``userfaultfd`` and ``io_uring``."""

from __future__ import annotations

import functools
import platform
import struct
import sys
from typing import TypedDict


class _SyscallTable(TypedDict):
    """One architecture's syscall numbers (:data:`_SYSCALLS`)."""

    clone: int
    clone3: int
    deny: dict[str, int]


_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# syscall numbers: clone, clone3, then the ones refused with EPERM
_SYSCALLS: dict[str, _SyscallTable] = {
    "x86_64": {"clone": 56, "clone3": 435, "deny": {
        "fork": 57, "vfork": 58, "ptrace": 101, "add_key": 248, "request_key": 249, "keyctl": 250,
        "perf_event_open": 298, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427}},
    "aarch64": {"clone": 220, "clone3": 435, "deny": {
        "ptrace": 117, "add_key": 217, "request_key": 218, "keyctl": 219, "perf_event_open": 241,
        "bpf": 280, "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427}},
}
_CLONE_THREAD = 0x00010000
_EPERM, _ENOSYS = 1, 38
_RET_ALLOW, _RET_ERRNO, _RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000


def _machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


@functools.cache
def _seccomp_program() -> bytes | None:
    """The filter as ``struct sock_filter[]`` bytes, or None on an architecture this module does not know."""
    arch = _machine()
    if arch not in _SYSCALLS or sys.byteorder != "little":
        return None
    table = _SYSCALLS[arch]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    prog: list[tuple[int, int | str, int | str, int]] = [(ld, 0, 0, 4)]  # A = seccomp_data.arch
    prog.append((jeq, 0, "kill", _AUDIT_ARCH[arch]))
    prog.append((ld, 0, 0, 0))  # A = seccomp_data.nr
    if arch == "x86_64":
        prog.append((jge, "enosys", 0, 0x40000000))  # the x32 ABI
    prog.append((jeq, "enosys", 0, table["clone3"]))  # glibc falls back to clone(2), which we can inspect
    for nr in sorted(table["deny"].values()):
        prog.append((jeq, "eperm", 0, nr))
    prog.append((jeq, 0, "allow", table["clone"]))
    prog.append((ld, 0, 0, 16))  # A = low 32 bits of args[0] (the clone flags)
    prog.append((jset, "allow", "eperm", _CLONE_THREAD))
    labels = {"allow": len(prog), "eperm": len(prog) + 1, "enosys": len(prog) + 2, "kill": len(prog) + 3}
    prog += [(ret, 0, 0, _RET_ALLOW), (ret, 0, 0, _RET_ERRNO | _EPERM), (ret, 0, 0, _RET_ERRNO | _ENOSYS),
             (ret, 0, 0, _RET_KILL_PROCESS)]
    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(prog):
        jt_n = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf_n = labels[jf] - i - 1 if isinstance(jf, str) else jf
        out += struct.pack("=HBBI", code, jt_n, jf_n, k)
    return bytes(out)


def _weak_seccomp_program() -> str | None:
    """The filter for the weak mode's runner to load (hex), or None where this module has none for the
    platform."""
    program = _seccomp_program()
    if program is None or not sys.platform.startswith("linux"):
        return None
    return program.hex()
