"""A sandbox for Python code written by a language model.

LLM-written code never runs in the application process. Every call starts a fresh child process that is
isolated with operating-system mechanisms:

* **bubblewrap** (``bwrap``, Debian package ``bubblewrap``) puts the child into new user, pid, network, ipc,
  uts, cgroup and mount namespaces. The child sees a read-only view of what Python needs (``/usr``, the
  ``/lib*`` and ``/bin`` links, the Python installation and the virtual environment), a synthetic ``/etc``
  with only the loader cache, time zone and a passwd/group/hosts that name nobody real (handed to bubblewrap
  through pipes, so no host folder holds them), a private ``/tmp`` (a size-limited tmpfs), its own ``/proc``
  and a minimal ``/dev``, and the work dir read-write. Nothing else of the host file system exists inside
  (no ``/root``, ``/home``, ``~/.ssh``, project ``.env``, ``/run`` sockets). The network namespace has no
  interfaces besides a loopback that is down, so even ``127.0.0.1`` of the host is out of reach. It runs as
  uid/gid 65534 without capabilities, cannot create further user namespaces, and a seccomp filter stops it
  from starting child processes (``fork``/``vfork``/``clone`` without ``CLONE_THREAD``; threads are
  allowed) and from using the kernel keyring, ``ptrace``, ``bpf``, ``perf_event_open``, ``userfaultfd`` and
  ``io_uring``.
* **resource limits** (set on the call's process before it starts bubblewrap, see below): address space
  (memory), CPU seconds, file size, number of processes, open files, no core dumps; and, where the host lets
  us create one, a ``pids`` cgroup per call that caps processes *and threads*. (``RLIMIT_NPROC`` is not
  enforced for root, and the sandbox user is mapped to the application's own uid, root in a container; so
  the seccomp filter and the cgroup are what stop a fork bomb there. The runner also refuses to start more
  than ``max_processes`` Python threads.) A wall-clock timeout kills the whole process group; bubblewrap's
  pid 1 dies with it (``--die-with-parent``) and takes the pid namespace and everything in it along.
* **a disk quota** (:class:`DiskQuota`): ``RLIMIT_FSIZE`` caps each file, not their number or sum, so a thread
  of the parent counts the work dir's bytes and entries while a call runs (every ``QUOTA_POLL_S``) and stops
  the call when it adds more than a call may, or the work dir holds more than a run may; what the call made
  there is then removed. The work dir can thus hold at most the quota plus what fast code writes in one poll.
* **a cleared environment**: the child gets only ``PATH``, ``HOME`` (the work dir), ``LANG``, ``TMPDIR`` and a
  few ``PYTHON*``/thread-count variables; API keys and other secrets of the application never reach it.
* **only the installed packages**: the interpreter is the application's own (``sys.executable``) with the
  virtual environment's site-packages mounted read-only; there is no network, and ``pip``/``ensurepip``
  cannot be imported inside.

Where bubblewrap is missing or unusable, :class:`Sandbox` refuses to start (:class:`SandboxUnavailable`)
unless the caller opts in with ``allow_weak=True`` (setting ``KGAGENTS_ALLOW_WEAK_SANDBOX=1``): the code then
runs with the resource limits, the cleared environment, the seccomp filter (loaded by the runner before the
code runs) and the work dir as its current directory, but it runs as the application's user. Where the kernel
lets an unprivileged process create a user namespace (most Linux hosts; probed once,
:func:`weak_network_isolation`), the runner first moves itself into new user and network namespaces, so the code
cannot reach the network, the host's loopback included; elsewhere (macOS, a kernel that forbids it) it can.
Where the kernel also lets it mount there (probed once, :func:`weak_mount_isolation`), the call gets mount, pid
and ipc namespaces too (:func:`weak_mount_plan`): the whole file system read-only; empty tmpfs mounts over the
temp folders (where the embedded KG servers keep their Unix sockets and database files; ``/dev/shm`` too),
``/run``, the user's home, the data and runs folders, the application's working directory and the two folders
above the work dir (the run's and the one that holds the runs); the work dir and its own job folder bound back
writable, the Python installation read-only; a read-only ``/proc`` that shows only the call's own processes;
and the code runs in a further user namespace, where those mounts are locked (it can neither unmount them nor
make them writable). The rest of the host's files stay as readable as for the user, none writable. Without that
(macOS, user namespaces off or restricted) weak mode shares all of them with the application.
:func:`isolation_status` says which applies, for a start-up message. The result file a call leaves is read
without following links (:func:`read_result_file`): the code may have put one there.

Each call writes its job (code, prelude, postlude, inputs) to ``<work dir>/.sandbox/run-<id>/``; the child
writes the result there, and the folder is removed afterwards (under bubblewrap a call sees only its own
folder there). The constructor probes bubblewrap once per process and resolves the work dir unless it lies
under a folder given to :func:`prepare_work_dir` before: once :func:`isolation_known` is true and the folder
is prepared, building a sandbox touches no file and may happen on the event loop; otherwise build it in
``asyncio.to_thread``. ``KGAGENTS_SANDBOX_NO_CGROUP=1`` turns the pids cgroup off.

:meth:`Sandbox.run` keeps file-system work and process starts off the event loop. A call's process is started
in a worker thread and without a ``preexec_fn`` (no Python code runs between fork and exec), so CPython starts
it with ``vfork`` instead of copying the page tables of this large process (torch, FAISS) while it holds the
GIL. The process begins as ``/bin/sh`` waiting at a gate (its stdin) while this process moves it into the
call's cgroup and sets its rlimits (``prlimit``); then the shell execs bubblewrap. The event loop watches the
output pipes and a pidfd of the process; a cancelled call kills the process group and waits for it to end.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import os
import platform
import pwd
import re
import resource
import selectors
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from kgagents.core.config import data_home, get_settings
from kgagents.core.errors import KGAgentsError
from kgagents.core.tempdirs import process_dir, remove_tree, short_lived_prefix
from kgagents.tools import sandbox_runner

__all__ = [
    "DiskQuota",
    "Sandbox",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailable",
    "isolation_status",
]

#: The uid/gid the code has inside the bubblewrap sandbox ("nobody").
SANDBOX_UID = 65534
SANDBOX_GID = 65534
#: Name of the hidden folder in the work dir that holds one sub-folder per call (job, result).
RUN_DIR_NAME = ".sandbox"
#: The file name LLM code is compiled with (tracebacks are cut down to frames of this file).
LLM_FILENAME = sandbox_runner.LLM_FILENAME
#: Past this multiple of ``max_output_bytes`` on one stream the process is stopped (a print loop).
OUTPUT_KILL_FACTOR = 10
#: How often the work dir's size and entries are counted while a call runs (see :class:`DiskQuota`).
QUOTA_POLL_S = 0.05
#: Traceback frames of the LLM code shown with an error (the innermost ones).
MAX_TRACEBACK_FRAMES = 6
_WEAK_HINT = ("install the Debian package `bubblewrap` (apt-get install bubblewrap), or opt in to weak "
              "isolation with KGAGENTS_ALLOW_WEAK_SANDBOX=1")


# ---------------------------------------------------------------------------------------------------------
# Public data types
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiskQuota:
    """How much sandboxed code may write into its work dir, the one host folder it can write to.

    One call may add ``call_mb`` megabytes and ``call_files`` entries (files, folders, links) to the work dir;
    the work dir may hold ``run_mb`` and ``run_files`` in all (it belongs to one run, so the files its calls
    leave add up). The work dir is polled while a call runs (every ``QUOTA_POLL_S``) and once more when it
    ends: a call that crosses a quota is stopped, fails with a clear error, and what it created in the work
    dir is removed. A call that finds the work dir over the run's quota may delete files there, not add any.
    """

    call_mb: int = 256
    call_files: int = 2_000
    run_mb: int = 1024
    run_files: int = 10_000


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed call."""

    timeout_s: float = 30.0
    memory_mb: int = 1024
    cpu_s: int | None = None  # default: ceil(timeout_s) + 1
    max_processes: int = 64  # processes and threads (pids cgroup where available, RLIMIT_NPROC)
    max_output_bytes: int = 1_000_000  # stdout/stderr each are cut to this
    max_file_mb: int = 64  # largest file the code may write (RLIMIT_FSIZE); also the size of /tmp
    quota: DiskQuota = DiskQuota()  # what the code may write into the work dir, per call and per run

    @property
    def cpu_seconds(self) -> int:
        """The CPU-time limit in effect."""
        if self.cpu_s is not None:
            return max(1, int(self.cpu_s))
        return math.ceil(self.timeout_s) + 1


@dataclass
class SandboxResult:
    """What one sandboxed call gave."""

    ok: bool  # exited 0 and the code raised nothing
    stdout: str
    stderr: str
    error: str | None  # a clear message, or None when ok
    result: Any = None  # JSON value of ``result_var`` after the code ran (None if unset)
    exit_code: int | None = None
    timed_out: bool = False
    isolation: str = "bwrap"  # "bwrap" or "weak"
    notes: list[str] = field(default_factory=list)  # e.g. how a non-JSON result was converted
    duration_s: float = 0.0


class SandboxUnavailable(KGAgentsError, RuntimeError):
    """No sandbox can be had here (bubblewrap missing or unusable) and weak isolation was not allowed."""


# ---------------------------------------------------------------------------------------------------------
# The runner: the program the sandboxed interpreter executes (tools/sandbox_runner.py), handed over as text
# ---------------------------------------------------------------------------------------------------------

_RUNNER = Path(sandbox_runner.__file__).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------
# seccomp: a classic-BPF program, handed to bubblewrap (--seccomp FD) or loaded with prctl in weak mode
# ---------------------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------------------
# bubblewrap discovery
# ---------------------------------------------------------------------------------------------------------


def _find_bwrap() -> str | None:
    """Path of the bwrap executable, or None. (Tests replace this to simulate a host without bubblewrap.)"""
    return _bwrap_on_path(_search_path())


def _search_path() -> str:
    return os.environ.get("PATH", os.defpath)


@dataclass(frozen=True)
class _Bwrap:
    path: str
    version: str
    options: frozenset[str]
    usable: bool
    problem: str = ""


#: What this process knows about bubblewrap: PATH value -> the bwrap found on it; bwrap path -> its probe.
_found: dict[str, str | None] = {}
_probes: dict[str, _Bwrap] = {}
_probe_lock = threading.Lock()  # one probe at a time: many runs may start together


def _bwrap_on_path(search_path: str) -> str | None:
    """``bwrap`` on ``search_path`` or in the usual places (cached per PATH: every run opens sandboxes)."""
    if search_path not in _found:
        _found[search_path] = shutil.which("bwrap", path=search_path) or next(
            (p for p in ("/usr/bin/bwrap", "/usr/local/bin/bwrap") if os.access(p, os.X_OK)), None)
    return _found[search_path]


def _probe_bwrap(path: str) -> _Bwrap:
    """Version, supported options and a trial run of ``path`` (cached per path)."""
    known = _probes.get(path)
    if known is not None:
        return known  # without the lock: another path may be being probed
    with _probe_lock:
        if path not in _probes:
            _probes[path] = _run_probe(path)
        return _probes[path]


def _run_probe(path: str) -> _Bwrap:
    try:
        version = subprocess.run([path, "--version"], check=False, capture_output=True, text=True, timeout=10,
                                 env=_host_env_for_bwrap()).stdout.strip() or "bubblewrap (unknown version)"
        help_text = subprocess.run([path, "--help"], check=False, capture_output=True, text=True, timeout=10,
                                   env=_host_env_for_bwrap())
        options = frozenset(re.findall(r"^\s+(--[a-z0-9-]+)", help_text.stdout + help_text.stderr,
                                       re.MULTILINE))
    except (OSError, subprocess.SubprocessError) as exc:
        return _Bwrap(path, "bubblewrap", frozenset(), False, f"{path} cannot be run: {exc}")
    with tempfile.TemporaryDirectory(prefix=short_lived_prefix("sandbox-probe")) as tmp:
        info = _Bwrap(path, version, options, True)
        work = Path(tmp).resolve()
        fds: list[int] = []
        try:
            argv = _bwrap_argv(info, work, _child_env(work, work), fds) + [
                sys.executable, "-s", "-P", "-c", "import json"]
            proc = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60,
                                  env=_host_env_for_bwrap(), pass_fds=fds, cwd=work, start_new_session=True)
        except (OSError, subprocess.SubprocessError) as exc:
            return _Bwrap(path, version, options, False, f"{version} cannot be run: {exc}")
        finally:
            for fd in fds:
                os.close(fd)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        return _Bwrap(path, version, options, False,
                      f"{version} is installed but unusable here (user namespaces disabled?): "
                      f"{detail[-1] if detail else f'exit code {proc.returncode}'}")
    return info


def _bwrap() -> _Bwrap | None:
    path = _find_bwrap()
    return _probe_bwrap(path) if path else None


#: The PATH values for which :func:`isolation_status` has run: bubblewrap found and probed, layers checked.
_isolation_checked: set[str] = set()


def isolation_known() -> bool:
    """Whether the isolation of this process is probed, so that :func:`isolation_status` and a new
    :class:`Sandbox` need no file system or subprocess any more (they may then run on an event loop)."""
    return _search_path() in _isolation_checked


def isolation_probe() -> tuple[str, str | None, _Bwrap | None]:
    """What this process found out about bubblewrap for its PATH (probing if it has not yet), to hand to
    worker processes on the same machine with :func:`adopt_isolation_probe`: they then start without a probe
    of their own (a probe runs bubblewrap three times: about 0.2 s)."""
    isolation_status()
    path = _find_bwrap()
    return _search_path(), path, _probes.get(path) if path else None


def adopt_isolation_probe(probe: tuple[str, str | None, _Bwrap | None]) -> None:
    """Take the probe of another process of this machine (:func:`isolation_probe`); ignored if this process
    has another PATH. The remaining checks (the pids cgroup) are cheap and run here."""
    search_path, path, info = probe
    if search_path != _search_path():
        return
    with _probe_lock:
        _found.setdefault(search_path, path)
        if path and info is not None and path == _found[search_path]:
            _probes.setdefault(path, info)
    isolation_status()


@functools.lru_cache(maxsize=1)
def weak_network_isolation() -> bool:
    """Whether a call of the weak mode can be put into a network namespace of its own: probed once, in a child
    process (a user namespace, which most Linux kernels allow an unprivileged process). Off with
    ``KGAGENTS_SANDBOX_NO_NETNS=1``."""
    if not hasattr(os, "unshare") or os.environ.get("KGAGENTS_SANDBOX_NO_NETNS"):
        return False
    probe = "import os; os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNET)"
    try:
        done = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.lru_cache(maxsize=1)
def weak_mount_isolation() -> bool:
    """Whether a call of the weak mode can be put into a mount namespace of its own that hides the host's temp
    folders, home and data folders (:func:`weak_mount_plan`): probed once, by running a job through the runner
    with a plan (user, mount, pid and ipc namespaces, a tmpfs, a bind mount, a fresh ``/proc``, all of which an
    unprivileged process gets on most Linux kernels; not on macOS, nor where user namespaces are off or
    restricted)."""
    if not hasattr(os, "unshare") or not sys.platform.startswith("linux"):
        return False
    with tempfile.TemporaryDirectory(prefix=short_lived_prefix("sandbox-probe")) as tmp:
        work = Path(tmp).resolve() / "work"
        run_dir = work / RUN_DIR_NAME / "run-probe"
        run_dir.mkdir(parents=True)
        job = {"inputs": {}, "prelude": "", "postlude": "", "result_var": "result", "memory_mb": 256,
               "max_threads": 4, "max_frames": 1, "seccomp": None,
               "code": "import os\nresult = [os.getpid(), os.listdir(os.path.dirname(os.getcwd()))]",
               "mounts": _weak_mounts(work, run_dir, SandboxLimits(), network=weak_network_isolation())}
        (run_dir / "job.json").write_text(json.dumps(job), encoding="utf-8")
        argv = [sys.executable, "-s", "-P", "-B", "-c", _RUNNER, str(run_dir / "job.json"),
                str(run_dir / "result.json")]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=60, check=False, cwd=work,
                                  env=_child_env(work, run_dir), start_new_session=True)
            result = read_result_file(run_dir / "result.json", 1 << 20) or {}
        except (OSError, subprocess.SubprocessError):
            return False
    # the job ran as pid 2 of its own pid namespace, and the work dir's folder showed nothing but the work dir
    return done.returncode == 0 and result.get("result") == [2, ["work"]]


#: The system the interpreter runs on: the weak mode never hides one of these folders, nor a folder that holds one
#: (a folder inside one it may hide: ``/dev/shm``, a project in ``/usr/src/app``).
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev", "/sys")
#: Hidden folders that get a writable (size-limited) tmpfs, as under bubblewrap; the others are read-only.
_WRITABLE_HIDDEN = ("/tmp", "/dev/shm")


@dataclass(frozen=True)
class MountStep:
    """One step of the weak mode's mount plan (:func:`weak_mount_plan`): ``"readonly"`` makes every mount under
    ``path`` (``/``: the whole file system) read-only; ``"tmpfs"`` mounts an empty tmpfs over ``path``, hiding
    what the host has there; ``"bind"`` binds the host's folder ``path`` back over what an earlier step hid (or
    over itself, to make it writable or read-only)."""

    kind: str
    path: str
    writable: bool


def _within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies under it (both absolute and normalised)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def may_hide(path: str) -> bool:
    """Whether the weak mode may mount an empty tmpfs over ``path``: not ``/``, not a system folder
    (:data:`_SYSTEM_DIRS`) and not a folder that holds one; a folder inside one it may."""
    return path != "/" and not any(_within(system, path) for system in _SYSTEM_DIRS)


def weak_mount_plan(hidden: list[str], writable_hidden: list[str], keep_rw: list[str],
                    keep_ro: list[str]) -> list[MountStep]:
    """The mount steps that hide the folders ``hidden`` from a weak-mode call while ``keep_rw`` stay visible and
    writable and ``keep_ro`` visible and read-only; in the order they must run (a folder before what lies in
    it). All paths are absolute, normalised and resolved.

    The first step makes the whole file system read-only: what the call may write is what is bound back
    writable (``keep_rw``) and the tmpfs of ``writable_hidden``. A folder is hidden only where :func:`may_hide`
    allows it. A folder to keep wins over the same folder to hide. A step that changes nothing is left out: a
    folder inside one already hidden, a folder to keep read-only where nothing above it was hidden."""
    keep: dict[str, bool] = {path: False for path in keep_ro}
    keep.update((path, True) for path in keep_rw)
    hide = {path: path in writable_hidden for path in hidden if path not in keep and may_hide(path)}
    steps = sorted([MountStep("tmpfs", path, writable) for path, writable in hide.items()]
                   + [MountStep("bind", path, writable) for path, writable in keep.items()],
                   key=lambda step: (step.path.rstrip("/").count("/"), step.path))
    plan = [MountStep("readonly", "/", False)]
    for step in steps:
        nearest = max((done for done in plan if done.path != step.path and _within(step.path, done.path)),
                      key=lambda done: len(done.path))
        if step.kind == "tmpfs":
            needed = nearest.kind != "tmpfs"
        else:
            needed = nearest.kind == "tmpfs" or step.writable != nearest.writable
        if needed:
            plan.append(step)
    return plan


def _weak_hidden_dirs(work_dir: Path) -> list[str]:
    """The host folders a weak-mode call should not see, those that exist, resolved: the temp folders (where the
    embedded KG servers keep their sockets and database files, and kgagents its process folders), ``/run``
    (the user's and the system's sockets), the user's home, kgagents' data folder and runs folder, the
    application's working directory (a project's ``.env``), and the two folders above the work dir: a tool's
    sandbox works in ``<run work dir>/<tool>``, so they are the run's own folder and the folder that holds the
    runs (other runs' work dirs, wherever ``Context.work_dir`` puts them)."""
    candidates: list[str | Path | None] = [tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm", "/run",
                                           "/var/run", os.environ.get("XDG_RUNTIME_DIR"), work_dir.parent,
                                           work_dir.parent.parent]
    for where in (Path.home, lambda: pwd.getpwuid(os.getuid()).pw_dir, os.getcwd, lambda: data_home()[0],
                  lambda: get_settings().runs_dir):
        try:
            candidates.append(where())
        except (OSError, RuntimeError, KeyError):  # no home, no passwd entry, a working directory removed
            pass
    found: list[str] = []
    for candidate in candidates:
        if not candidate:
            continue
        path = os.path.realpath(os.path.expanduser(candidate))
        if path not in found and os.path.isdir(path):
            found.append(path)
    return found


def _weak_mounts(work_dir: Path, run_dir: Path, limits: SandboxLimits, *, network: bool) -> dict[str, Any]:
    """The mount plan of one weak-mode call, as the runner takes it (``job["mounts"]``)."""
    hidden = _weak_hidden_dirs(work_dir) + [os.fspath(work_dir / RUN_DIR_NAME)]
    writable = [os.path.realpath(path) for path in _WRITABLE_HIDDEN]
    plan = weak_mount_plan(hidden, writable, [os.fspath(work_dir), os.fspath(run_dir)],
                           [os.fspath(p) for p in _python_dirs(weak=True)])
    return {"steps": [[step.kind, step.path, step.writable] for step in plan],
            "tmp_size": limits.max_file_mb * 1024 * 1024, "net": network}


def weak_isolation_text(network: bool, mounts: bool) -> str:
    """What weak isolation keeps a call from, in words (the start-up line and ``kgagents doctor`` show it)."""
    net = ("its calls get a network namespace of their own: no network" if network
           else "its calls can reach the network here")
    if mounts:
        return (f"{net}; they get a mount namespace of their own: the temp folders (where the KG servers keep "
                "their sockets and files), /run, your home, the folder kgagents runs in, the data folder and other "
                "runs' work dirs are hidden, the rest of the files are readable but not writable")
    return (f"{net}; and they share the temp folders (where the KG servers keep their sockets and files), /run, "
            "your home and the data folder with kgagents: no mount namespace can be had here")


def isolation_status() -> tuple[str, str]:
    """``("bwrap", description)`` when LLM code runs in bubblewrap, else ``("none", why and what to do)``."""
    search_path = _search_path()
    info = _bwrap()
    if info is None or not info.usable:
        weak = weak_isolation_text(weak_network_isolation(), weak_mount_isolation())
        why = "bubblewrap not found" if info is None else info.problem
        status = "none", f"{why}; {_WEAK_HINT} ({weak})"
    else:
        layers = ["namespaces (user, pid, net, ipc, uts, cgroup, mount)"]
        if _seccomp_program() is not None and "--seccomp" in info.options:
            layers.append("seccomp (no child processes)")
        layers.append("rlimits")
        if _pids_cgroup_parent() is not None:
            layers.append("pids cgroup")
        status = "bwrap", f"{info.version}: {' + '.join(layers)}"
    _isolation_checked.add(search_path)  # only now: a concurrent caller must not take a probe in progress
    return status


# ---------------------------------------------------------------------------------------------------------
# pids cgroup (optional: caps processes and threads where the host lets us create a cgroup)
# ---------------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _pids_cgroup_parent() -> Path | None:
    """A cgroup directory under which this process may create pids-limited children, or None."""
    if os.environ.get("KGAGENTS_SANDBOX_NO_CGROUP"):
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    candidates: list[Path] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers, rel = parts[1].split(","), parts[2].lstrip("/")
        if "pids" in controllers:
            candidates.append(Path("/sys/fs/cgroup/pids") / rel)
        elif parts[0] == "0" and parts[1] == "":
            base = Path("/sys/fs/cgroup") / rel
            try:
                if "pids" in (base / "cgroup.subtree_control").read_text().split():
                    candidates.append(base)
            except OSError:
                pass
    for base in candidates:
        probe = base / f"kgagents-sandbox-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            (probe / "pids.max").write_text("8")
            return base
        except OSError:
            continue
        finally:
            try:
                probe.rmdir()
            except OSError:
                pass
    return None


class _PidsCgroup:
    """One call's cgroup: ``pids.max`` processes/threads; the call's process is moved into it before it starts
    bubblewrap (:func:`_confine`)."""

    def __init__(self, limit: int) -> None:
        self.path: Path | None = None
        parent = _pids_cgroup_parent()
        if parent is None:
            return
        path = parent / f"kgagents-sandbox-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
            self.path = path
        except OSError:
            try:
                path.rmdir()
            except OSError:
                pass

    @property
    def procs_file(self) -> str | None:
        return str(self.path / "cgroup.procs") if self.path else None

    def kill_all(self) -> None:
        if self.path is None:
            return
        for _ in range(50):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                return
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        path = self.path
        if path is None:
            return
        self.kill_all()
        for _ in range(50):
            try:
                path.rmdir()
                self.path = None
                return
            except FileNotFoundError:
                self.path = None
                return
            except OSError:
                time.sleep(0.01)


# ---------------------------------------------------------------------------------------------------------
# Building the command line
# ---------------------------------------------------------------------------------------------------------


def _host_env_for_bwrap() -> dict[str, str]:
    # bwrap's own environment must be clean too: its pid 1 inside the sandbox keeps it in /proc/1/environ
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def _child_env(work_dir: Path, tmp_dir: Path | str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(work_dir),
        "TMPDIR": str(tmp_dir),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "PYTHONHASHSEED": "0",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": str(Path(tmp_dir) / "matplotlib"),
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PIP_NO_INDEX": "1",
        "PIP_NO_INPUT": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def _python_dirs(*, weak: bool = False) -> list[Path]:
    """Directories of the Python installation and virtual environment the child needs (read-only): the outermost
    ones, none under ``/usr`` (bubblewrap binds ``/usr`` as a whole). With ``weak``, for the weak mode's mount
    plan: every one of them, those in ``/usr`` and those inside another too (the standard library,
    site-packages), so that the plan binds each back over a folder it hides (a project in ``/usr/src/app``, a
    working directory inside the installation)."""
    import site  # only for the sandbox's read-only mounts
    import sysconfig  # only for the weak mode's mount plan

    raw: list[str] = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
                      os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))]
    try:
        raw += site.getsitepackages()
    except AttributeError:  # pragma: no cover - very old virtualenv
        pass
    if weak:
        scheme = sysconfig.get_paths()
        raw += [scheme.get(name, "") for name in ("stdlib", "platstdlib", "purelib", "platlib")]
    paths: list[Path] = []
    for entry in raw:
        if not entry:
            continue
        for p in (Path(entry).absolute(), Path(os.path.realpath(entry))):
            if p.exists() and p != Path("/") and p not in paths:
                paths.append(p)
    paths.sort(key=lambda p: len(p.parts))
    if weak:
        return paths
    kept: list[Path] = []
    for p in paths:
        if p == Path("/usr") or Path("/usr") in p.parents:
            continue  # bound as a whole
        if any(k == p or k in p.parents for k in kept):
            continue
        kept.append(p)
    return kept


#: The synthetic /etc files: a passwd, group and hosts that name nobody real, and an nsswitch.conf for them.
_ETC_FILES = {
    "passwd": f"sandbox:x:{SANDBOX_UID}:{SANDBOX_GID}:sandbox:/nonexistent:/usr/sbin/nologin\n",
    "group": f"sandbox:x:{SANDBOX_GID}:\n",
    "hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
}


def _etc_args(opts: frozenset[str], fds: list[int]) -> list[str]:
    """bwrap arguments that put the synthetic files into the sandbox's /etc: through pipes (bubblewrap 0.4 and
    later copy them from there, so no host folder is needed), else bound from this process's folder."""
    argv: list[str] = []
    if "--ro-bind-data" in opts:
        for name, text in _ETC_FILES.items():
            fds.append(_pipe_with(text.encode()))
            if "--perms" in opts:
                argv += ["--perms", "0444"]
            argv += ["--ro-bind-data", str(fds[-1]), f"/etc/{name}"]
        return argv
    etc = _etc_dir(os.getpid())
    for name in _ETC_FILES:
        argv += ["--ro-bind", str(etc / name), f"/etc/{name}"]
    return argv


@functools.cache
def _etc_dir(pid: int) -> Path:
    """The synthetic /etc files in the folder of process ``pid``, this one (:mod:`kgagents.core.tempdirs`: removed
    at exit; a forked child makes its own)."""
    path = process_dir() / "etc"
    path.mkdir(mode=0o755, exist_ok=True)
    for name, text in _ETC_FILES.items():
        (path / name).write_text(text)
        os.chmod(path / name, 0o444)
    return path


def _pipe_with(data: bytes) -> int:
    """The read end of a pipe that holds ``data`` (at most a pipe buffer: 4 KiB at the least)."""
    r, w = os.pipe()
    try:
        os.write(w, data)
    finally:
        os.close(w)
    return r


#: Host files the child may read under /etc (when they exist): loader cache, time zone, MIME types.
_ETC_PASSTHROUGH = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "mime.types")


def _bwrap_argv(info: _Bwrap, work_dir: Path, env: dict[str, str], fds: list[int],
                limits: SandboxLimits | None = None, run_dir: Path | None = None) -> list[str]:
    """The bwrap command line (without the command); appends fds that the child must inherit to ``fds``."""
    opts = info.options
    argv = [info.path, "--unshare-all"]
    if "--unshare-user" in opts:
        argv.append("--unshare-user")
        if "--disable-userns" in opts:
            argv.append("--disable-userns")
    for flag in ("--die-with-parent", "--new-session", "--clearenv"):
        if flag in opts or not opts:
            argv.append(flag)
    argv += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
    if "--hostname" in opts:
        argv += ["--hostname", "sandbox"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    argv += ["--dir", "/etc"]
    for name in _ETC_PASSTHROUGH:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    argv += _etc_args(opts, fds)
    argv += ["--proc", "/proc", "--dev", "/dev"]
    size = str((limits.max_file_mb if limits else 64) * 1024 * 1024)
    for tmpfs in ("/tmp", "/dev/shm"):
        if "--size" in opts:
            argv += ["--size", size]
        argv += ["--tmpfs", tmpfs]
    # after the private /tmp: a virtual environment that lives under /tmp must stay visible
    python_dirs = _python_dirs()
    for p in python_dirs:
        argv += ["--ro-bind", str(p), str(p)]
    argv += ["--bind", str(work_dir), str(work_dir)]
    if run_dir is not None:  # the folders of other calls running in the same work dir are not visible
        argv += ["--tmpfs", str(run_dir.parent), "--bind", str(run_dir), str(run_dir)]
        if "--remount-ro" in opts:
            argv += ["--remount-ro", str(run_dir.parent)]
    for p in python_dirs:  # a Python installation inside the work dir stays read-only
        if work_dir in p.parents:
            argv += ["--ro-bind", str(p), str(p)]
    if "--remount-ro" in opts:
        # the sandbox's own root (with the folders made in it) and /dev are read-only; /tmp, /dev/shm are not
        argv += ["--remount-ro", "/", "--remount-ro", "/dev"]
    argv += ["--chdir", str(work_dir)]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    program = _seccomp_program()
    if program is not None and "--seccomp" in opts:
        fds.append(_pipe_with(program))  # a few hundred bytes
        argv += ["--seccomp", str(fds[-1])]
    argv.append("--")
    return argv


#: Every call's process starts as this shell: it waits for a line on its stdin (the gate), then execs the
#: call's command in its place, with stdin from /dev/null. Without that line (stdin closed) it exits with 1.
_GATE = ("/bin/sh", "-c", 'read -r go && exec "$@" </dev/null', "kgagents-sandbox-gate")


def _rlimits(limits: SandboxLimits, nproc: int) -> list[tuple[int, int, int]]:
    """The resource limits of a call's process: ``(resource, soft, hard)``."""
    mem = limits.memory_mb * 1024 * 1024
    cpu = limits.cpu_seconds
    fsize = limits.max_file_mb * 1024 * 1024
    return [(resource.RLIMIT_AS, mem, mem), (resource.RLIMIT_CPU, cpu, cpu + 1),
            (resource.RLIMIT_FSIZE, fsize, fsize), (resource.RLIMIT_NPROC, nproc, nproc),
            (resource.RLIMIT_NOFILE, 512, 512), (resource.RLIMIT_CORE, 0, 0)]


def _confine(pid: int, rlimits: list[tuple[int, int, int]], cgroup_procs: str | None) -> None:
    """Move process ``pid`` (a call's, held at the gate) into the call's pids cgroup and give it ``rlimits``,
    each no higher than the hard limit it has (this process's). A limit the kernel refuses stays as it is."""
    if cgroup_procs:
        try:
            with open(cgroup_procs, "w") as f:
                f.write(str(pid))
        except OSError:
            pass
    for kind, soft, hard in rlimits:
        try:
            _, current_hard = resource.prlimit(pid, kind)
            if current_hard != resource.RLIM_INFINITY:
                soft, hard = min(soft, current_hard), min(hard, current_hard)
            resource.prlimit(pid, kind, (soft, hard))
        except (ValueError, OSError):
            pass


def _nproc_limit(max_processes: int) -> int:
    """RLIMIT_NPROC counts all processes of the real uid: leave room for the ones this user already has."""
    if os.getuid() == 0:
        return max_processes  # not enforced for root anyway; the cgroup and seccomp do the work
    mine = 0
    try:
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == os.getuid():
                        mine += 1
                except OSError:
                    pass
    except OSError:
        return resource.RLIM_INFINITY
    return mine + max_processes + 4


# ---------------------------------------------------------------------------------------------------------
# Reading output with limits
# ---------------------------------------------------------------------------------------------------------


class _Capture:
    """Keeps the first ``limit`` bytes of a stream, counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.kill_at = max(self.limit * OUTPUT_KILL_FACTOR, 1_000_000)
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> bool:
        """Take a chunk; True when the stream went past the point where the process is stopped."""
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.total += len(chunk)
        return self.total > self.kill_at

    def text(self) -> str:
        text = bytes(self.data).decode("utf-8", errors="replace")
        if self.total > len(self.data):
            text += f"\n[... output truncated: {self.total - len(self.data)} more bytes not shown ...]"
        return text


# ---------------------------------------------------------------------------------------------------------
# Disk quota: what a call writes into the work dir, counted while it runs
# ---------------------------------------------------------------------------------------------------------

_MB = 1024 * 1024


def _disk_usage(work_dir: Path, own_run: Path, *, stop_after: tuple[int, int] | None = None,
                paths: set[str] | None = None) -> tuple[int, int]:
    """``(bytes, entries)`` in ``work_dir``: the sizes of its files and the number of its files, folders and
    links, without following links. Of the calls' job folders (``.sandbox/run-*``) only ``own_run`` counts:
    every call counts its own. Stops early once ``stop_after`` is passed; adds every path it sees to
    ``paths``."""
    root = os.fspath(work_dir)
    size = entries = 0
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            scan = os.scandir(folder)
        except OSError:  # removed meanwhile, or made unreadable by the code: what it holds is not counted
            continue
        with scan:
            for entry in scan:
                if folder == root and entry.name == RUN_DIR_NAME:
                    todo.append(os.fspath(own_run))
                    continue
                entries += 1
                if paths is not None:
                    paths.add(entry.path)
                try:
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
                    else:
                        size += entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
                if stop_after is not None and (size > stop_after[0] or entries > stop_after[1]):
                    return size, entries
    return size, entries


class _QuotaWatch:
    """Counts what one call adds to its work dir against the :class:`DiskQuota`: in a thread that polls while
    the call runs (and stops the call when the quota is crossed), and once more when the call has ended."""

    def __init__(self, work_dir: Path, run_dir: Path, quota: DiskQuota) -> None:
        self.work_dir, self.run_dir, self.quota = work_dir, run_dir, quota
        self.before: set[str] = set()
        self.initial = _disk_usage(work_dir, run_dir, paths=self.before)
        size, entries = self.initial
        #: The most the work dir may hold while the call runs: the call's share, within the run's quota (a
        #: work dir already over the run's quota may not grow).
        self.limit = (min(max(quota.run_mb * _MB, size), size + quota.call_mb * _MB),
                      min(max(quota.run_files, entries), entries + quota.call_files))
        self.stopped = False
        self._crossed = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, stop_call: Callable[[], None]) -> None:
        """Poll every ``QUOTA_POLL_S`` until :meth:`finish`; call ``stop_call`` when the quota is crossed."""

        def poll() -> None:
            while not self._done.wait(QUOTA_POLL_S):
                if self._over():
                    self.stopped = True
                    stop_call()
                    return

        self._thread = threading.Thread(target=poll, name="kgagents-sandbox-quota", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling (idempotent)."""
        self._done.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _over(self) -> bool:
        size, entries = _disk_usage(self.work_dir, self.run_dir, stop_after=self.limit)
        self._crossed = self._crossed or size > self.limit[0] or entries > self.limit[1]
        return self._crossed

    def finish(self) -> str | None:
        """After the call (its processes are gone): stop polling and count once more. When the call crossed
        the quota, remove what it created in the work dir and return the error message; else None."""
        self.stop()
        if not self._crossed and not self._over():
            return None
        after: set[str] = set()
        size, entries = _disk_usage(self.work_dir, self.run_dir, paths=after)
        removed = self._remove(after - self.before)
        return self._message(size, entries, removed)

    def _remove(self, created: set[str]) -> int:
        """Remove what the call created outside its job folder (which goes anyway); returns how much."""
        job = os.fspath(self.run_dir) + os.sep
        created = {path for path in created if not path.startswith(job)}
        for path in created:
            if os.path.dirname(path) in created:
                continue  # goes with its folder
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    remove_tree(Path(path))
                else:
                    os.unlink(path)
            except OSError:
                pass
        return len(created)

    def _message(self, size: int, entries: int, removed: int) -> str:
        q, (size0, entries0) = self.quota, self.initial
        added, made = (size - size0) / _MB, entries - entries0
        if added > q.call_mb:
            what = f"the code wrote {added:,.1f} MB into its work dir (a call may write {q.call_mb:,} MB)"
        elif made > q.call_files:
            what = f"the code made {made:,} files and folders (a call may make {q.call_files:,})"
        elif size > self.limit[0]:
            what = f"its work dir came to {size / _MB:,.1f} MB (a run may keep {q.run_mb:,} MB)"
        else:
            what = f"its work dir came to {entries:,} files and folders (a run may keep {q.run_files:,})"
        steps = ["it was stopped"] if self.stopped else []
        if removed:
            steps.append(f"what it made there was removed ({removed:,} files and folders)")
        return f"disk quota exceeded: {what}" + (f"; {' and '.join(steps)}" if steps else "")


# ---------------------------------------------------------------------------------------------------------
# The sandbox
# ---------------------------------------------------------------------------------------------------------


@dataclass
class _Launch:
    """What a call's process is started with (see :meth:`Sandbox._start`)."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    run_dir: Path
    status_path: Path
    pass_fds: list[int]
    rlimits: list[tuple[int, int, int]]
    cgroup: _PidsCgroup
    quota: _QuotaWatch
    started: float = field(default_factory=time.monotonic)


# ---------------------------------------------------------------------------------------------------------
# A started process, watched by the event loop
# ---------------------------------------------------------------------------------------------------------

#: How much of a process's output is read at a time.
_READ_SIZE = 65536
#: Tasks that must run to their end although the call that started them was cancelled (see :func:`_outlast`).
_background: set[asyncio.Future[None]] = set()


class _Child:
    """A call's started process as the event loop sees it: its exit as a future (a pidfd the loop watches;
    where the kernel has no pidfds, a thread that waits), its stdout and stderr as streams (fds the loop
    watches). Nothing here blocks the loop."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._loop = asyncio.get_running_loop()
        self._readers: dict[int, asyncio.StreamReader] = {}
        #: The exit status, set once the process has ended and is reaped.
        self.exited: asyncio.Future[int | None] = self._loop.create_future()
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # Linux before 5.3, or not Linux
            threading.Thread(target=self._wait_in_thread, name="kgagents-sandbox-wait", daemon=True).start()
        else:
            self._loop.add_reader(pidfd, self._ended, pidfd)

    def _ended(self, pidfd: int) -> None:
        self._loop.remove_reader(pidfd)
        os.close(pidfd)
        self._settle(self.proc.poll())  # the process has ended: poll() reaps it

    def _wait_in_thread(self) -> None:
        code = self.proc.wait()
        try:
            self._loop.call_soon_threadsafe(self._settle, code)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _settle(self, code: int | None) -> None:
        if not self.exited.done():
            self.exited.set_result(code)

    async def streams(self) -> tuple[asyncio.StreamReader, asyncio.StreamReader]:
        """The process's stdout and stderr as streams, fed by the loop from pipe fds this object owns alone.

        Not ``loop.connect_read_pipe``: uvloop's pipe transport closes the fd in libuv *and* again through the
        file object, and a number closed twice may by then belong to another connection of the process (seen
        under load in ``langgraph dev``: sockets closed under uvicorn). Here each fd is a private duplicate,
        read when readable and closed exactly once, at its end of file or by :meth:`stop`."""
        readers = []
        for pipe in (self.proc.stdout, self.proc.stderr):
            reader = asyncio.StreamReader(limit=_READ_SIZE, loop=self._loop)
            if pipe is None:
                reader.feed_eof()
            else:
                fd = os.dup(pipe.fileno())
                pipe.close()
                os.set_blocking(fd, False)
                self._readers[fd] = reader
                self._loop.add_reader(fd, self._readable, fd)
            readers.append(reader)
        return readers[0], readers[1]

    def _readable(self, fd: int) -> None:
        try:
            data = os.read(fd, _READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self._readers[fd].feed_data(data)
        else:
            self._release(fd)

    def _release(self, fd: int) -> None:
        reader = self._readers.pop(fd, None)
        if reader is None:
            return
        self._loop.remove_reader(fd)
        os.close(fd)
        reader.feed_eof()

    async def stop(self) -> None:
        """Kill the process group unless the process has ended, wait for the end, release the output pipes."""
        if not self.exited.done():
            Sandbox._kill(self.proc.pid)
        try:
            await asyncio.shield(self.exited)
        finally:
            for fd in list(self._readers):
                self._release(fd)
            for pipe in (self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()


async def _outlast(work: Coroutine[Any, Any, None]) -> None:
    """Run the coroutine ``work`` to its end in a task of its own and wait for it; a cancellation of the
    caller (a second one, in a ``finally``) ends the wait, not the work. Its errors are not raised: the
    caller is on its way out with an exception already."""
    task = asyncio.ensure_future(work)
    _background.add(task)
    task.add_done_callback(_background.discard)
    try:
        await asyncio.shield(task)
    except BaseException:  # noqa: BLE001 - cancelled again or failed: the work goes on or is done
        pass


# ---------------------------------------------------------------------------------------------------------
# work dirs
# ---------------------------------------------------------------------------------------------------------

def read_result_file(path: Path, limit: int) -> dict[str, Any] | None:
    """The JSON object a call's runner wrote to ``path`` (its job folder's result file), or ``None`` when there
    is none to trust. The code can replace the file: with a symbolic link, which this process would follow
    outside every namespace (to a JSON file it may read and the code may not), or a FIFO, which would hang it.
    So the file is opened without following a link (``O_NOFOLLOW``) nor waiting (``O_NONBLOCK``), and taken only
    when it is a regular file with one link (no hard link to a file elsewhere), owned by this process's user,
    of at most ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # none, or a link
        return None
    try:
        info = os.fstat(fd)
        if (not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_uid != os.getuid()
                or info.st_size > limit):
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        return None
    try:
        value = json.loads(data.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError included
        return None
    return value if isinstance(value, dict) else None


#: Folders resolved (and created) in this process: the path as given -> the resolved path; most recent last.
_prepared: OrderedDict[str, Path] = OrderedDict()
_prepared_lock = threading.Lock()
_PREPARED_MAX = 4096


def prepare_work_dir(path: str | Path) -> Path:
    """``path`` created and resolved, and remembered: sandboxes for it or any folder under it then resolve
    their work dir without touching the file system (:class:`Sandbox` creates it when it first runs)."""
    resolved = Path(path).expanduser().resolve()
    resolved.mkdir(parents=True, exist_ok=True)
    with _prepared_lock:
        for key in {os.fspath(path), os.fspath(resolved)}:
            _prepared[key] = resolved
            _prepared.move_to_end(key)
        while len(_prepared) > _PREPARED_MAX:
            _prepared.popitem(last=False)
    return resolved


def _known_work_dir(path: Path) -> Path | None:
    """``path`` resolved through a prepared folder it lies in (the folders below it are ours: no links)."""
    with _prepared_lock:
        for base in (path, *path.parents):
            resolved = _prepared.get(os.fspath(base))
            if resolved is not None:
                return resolved / path.relative_to(base)
    return None


class Sandbox:
    """Runs LLM-written Python in a fresh, isolated process per call (see the module documentation).

    ``work_dir`` is the only host folder the code can see (read-write); it should be a dedicated folder
    (a run's temp dir), not a project folder with secrets in it.
    """

    def __init__(self, work_dir: str | Path, limits: SandboxLimits = SandboxLimits(), *,
                 allow_weak: bool = False) -> None:
        given = Path(work_dir).expanduser()
        known = _known_work_dir(given) if given.is_absolute() else None
        self.work_dir = known if known is not None else given.resolve()
        if self.work_dir == Path("/"):
            raise ValueError("the sandbox work dir cannot be /")
        if known is None:
            self.work_dir.mkdir(parents=True, exist_ok=True)
        self.limits = limits
        info = _bwrap()
        if info is not None and info.usable:
            self.isolation = "bwrap"
            self._bwrap: _Bwrap | None = info
        else:
            why = "bubblewrap not found" if info is None else info.problem
            if not allow_weak:
                raise SandboxUnavailable(f"cannot sandbox LLM-written code: {why}; {_WEAK_HINT}")
            self.isolation = "weak"
            self._bwrap = None

    # -- preparing and finishing a call ------------------------------------------------------------------

    def _prepare(self, code: str, inputs: dict | None, prelude: str, postlude: str,
                 result_var: str | None) -> _Launch:
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        run_dir = self.work_dir / RUN_DIR_NAME / f"run-{uuid.uuid4().hex[:16]}"
        run_dir.mkdir(parents=True)
        job = {"inputs": inputs if inputs is not None else {}, "prelude": prelude or "", "code": code,
               "postlude": postlude or "", "result_var": result_var, "memory_mb": self.limits.memory_mb,
               "max_threads": max(1, self.limits.max_processes), "max_frames": MAX_TRACEBACK_FRAMES,
               "seccomp": None if self._bwrap is not None else _weak_seccomp_program(),
               "mounts": None, "unshare_net": False}
        if self._bwrap is None and weak_mount_isolation():
            job["mounts"] = _weak_mounts(self.work_dir, run_dir, self.limits, network=weak_network_isolation())
        elif self._bwrap is None:
            job["unshare_net"] = weak_network_isolation()
        try:
            text = json.dumps(job, default=_input_default, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise TypeError(f"sandbox inputs must be JSON values: {exc}") from None
        job_path = run_dir / "job.json"
        job_path.write_text(text, encoding="utf-8")
        status_path = run_dir / "result.json"
        quota = _QuotaWatch(self.work_dir, run_dir, self.limits.quota)
        python = [sys.executable, "-s", "-P", "-B", "-u", "-X", "utf8", "-c", _RUNNER, str(job_path),
                  str(status_path)]
        fds: list[int] = []
        try:
            if self._bwrap is not None:
                env = _child_env(self.work_dir, "/tmp")
                argv = _bwrap_argv(self._bwrap, self.work_dir, env, fds, self.limits, run_dir) + python
                host_env = _host_env_for_bwrap()
            else:
                tmp = run_dir / "tmp"
                tmp.mkdir()
                host_env = _child_env(self.work_dir, tmp)
                argv = python
            nproc = _nproc_limit(self.limits.max_processes)
        except BaseException:
            for fd in fds:
                os.close(fd)
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        cgroup = _PidsCgroup(self.limits.max_processes + 3)  # + bwrap, its pid 1 and the interpreter
        return _Launch(argv, host_env, self.work_dir, run_dir, status_path, fds, _rlimits(self.limits, nproc),
                       cgroup, quota)

    def _finish(self, launch: _Launch, exit_code: int | None, out: _Capture, err: _Capture,
                timed_out: bool, overflow: str | None) -> SandboxResult:
        launch.cgroup.remove()
        over_quota = launch.quota.finish()
        try:
            status = read_result_file(launch.status_path, self.limits.max_file_mb * 1024 * 1024 + 1024)
        finally:
            self._remove_run_dir(launch)
        stdout, stderr = out.text(), err.text()
        notes = [str(n) for n in (status or {}).get("notes") or []]
        signum = self._signal_of(exit_code)
        if over_quota:
            error: str | None = over_quota
        elif timed_out:
            error = f"timed out after {self.limits.timeout_s:g} s"
        elif overflow:
            error = (f"output limit exceeded: the code wrote more than {out.kill_at} bytes to {overflow} "
                     f"and was stopped")
        elif status is not None and (status.get("error") or not status.get("ok")):
            error = str(status.get("error") or "the code failed")
        elif signum is not None:
            error = self._signal_message(signum)
        elif status is None:
            if exit_code == 0:
                error = "the process ended before the sandbox could collect the result (os._exit?)"
            elif "MemoryError" in stderr:
                error = f"memory limit of {self.limits.memory_mb} MB exceeded (MemoryError)"
            else:
                tail = [line for line in stderr.strip().splitlines() if line.strip()]
                error = f"the process exited with code {exit_code} before finishing" + (
                    f": {tail[-1].strip()}" if tail else "")
        elif exit_code != 0:
            error = f"the process exited with code {exit_code}"
        else:
            error = None
        if notes:
            stderr += ("" if not stderr or stderr.endswith("\n") else "\n") + "".join(
                f"[sandbox] note: {n}\n" for n in notes)
        ok = error is None
        return SandboxResult(ok=ok, stdout=stdout, stderr=stderr, error=error,
                             result=status.get("result") if status is not None else None,
                             exit_code=exit_code, timed_out=timed_out, isolation=self.isolation, notes=notes,
                             duration_s=round(time.monotonic() - launch.started, 3))

    def _signal_of(self, exit_code: int | None) -> int | None:
        if exit_code is None:
            return None
        if exit_code < 0:
            return -exit_code
        if self.isolation == "bwrap" and exit_code > 128 and exit_code - 128 < signal.NSIG:
            return exit_code - 128  # bwrap exits 128 + n when the command dies of signal n
        return None

    def _signal_message(self, signum: int) -> str:
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        if signum == signal.SIGXCPU:
            return (f"CPU time limit of {self.limits.cpu_seconds} s exceeded "
                    f"(killed by signal {signum}, {name})")
        if signum == signal.SIGKILL:
            return f"killed by signal 9 (SIGKILL; CPU limit of {self.limits.cpu_seconds} s?)"
        if signum == signal.SIGXFSZ:
            return (f"file size limit of {self.limits.max_file_mb} MB exceeded "
                    f"(killed by signal {signum}, {name})")
        return f"killed by signal {signum} ({name})"

    @staticmethod
    def _kill(pid: int) -> None:
        """SIGKILL the process group: bwrap's pid 1 dies with bwrap (--die-with-parent), and with it the pid
        namespace and everything in it. (The cgroup, if any, is emptied again when the call is cleaned up.)"""
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _cleanup(self, launch: _Launch) -> None:
        launch.quota.stop()
        launch.cgroup.remove()
        self._remove_run_dir(launch)

    @staticmethod
    def _remove_run_dir(launch: _Launch) -> None:
        shutil.rmtree(launch.run_dir, ignore_errors=True)
        try:
            launch.run_dir.parent.rmdir()  # only when no other call is using it
        except OSError:
            pass

    @staticmethod
    def _close_fds(launch: _Launch) -> None:
        for fd in launch.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        launch.pass_fds.clear()

    # -- starting the process ------------------------------------------------------------------------------

    def _start(self, launch: _Launch) -> subprocess.Popen[bytes]:
        """Start the call's process, confined, and its disk-quota watcher; blocks until the process runs
        (:meth:`run` calls this in a worker thread).

        No Python code runs in the child between fork and exec, so CPython starts it with ``vfork``, which
        does not copy the page tables of this process (large, with torch and FAISS loaded) and keeps the GIL
        only for a moment. The process starts as the gate (``_GATE``), a shell that waits on its stdin; this
        process moves it into the call's cgroup and sets its resource limits (:func:`_confine`), then opens
        the gate, and the shell execs the command in its place (same pid: the cgroup and the limits stay).
        The inherited fds (``pass_fds``) are closed here, once the child has them.
        """
        try:
            proc = subprocess.Popen([*_GATE, *launch.argv], bufsize=0, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=launch.env,
                                    cwd=launch.cwd, start_new_session=True, pass_fds=launch.pass_fds)
        finally:
            self._close_fds(launch)
        assert proc.stdin is not None
        try:
            _confine(proc.pid, launch.rlimits, launch.cgroup.procs_file)
            launch.quota.start(functools.partial(self._kill, proc.pid))
            proc.stdin.write(b"go\n")
        except BrokenPipeError:
            pass  # the gate is gone (killed): its exit status tells
        except BaseException:
            self._kill(proc.pid)
            proc.wait()
            for pipe in (proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            raise
        finally:
            proc.stdin.close()
        return proc

    # -- async ---------------------------------------------------------------------------------------------

    async def run(self, code: str, *, inputs: dict | None = None, prelude: str = "", postlude: str = "",
                  result_var: str | None = "result") -> SandboxResult:
        """Run ``code`` in a fresh sandboxed process.

        ``inputs`` (JSON values) is the global dict ``inputs``; ``prelude`` and ``postlude`` are trusted code
        run before and after ``code`` in the same globals (the postlude only when ``code`` succeeded); the
        JSON value of the global ``result_var`` comes back as ``result``. File-system work and starting the
        process run in worker threads, the process's output and exit are watched by the event loop, so the
        loop is never blocked. A cancelled call kills its process group and waits for it to end (a start
        in progress is waited for, then killed); its files are removed in a thread.
        """
        launch = await asyncio.to_thread(self._prepare, code, inputs, prelude, postlude, result_var)
        # shielded: a start once asked for completes in its thread, and a cancelled call stops what it started
        starting = asyncio.ensure_future(asyncio.to_thread(self._start, launch))
        child: _Child | None = None
        finished = False
        try:
            child = _Child(await asyncio.shield(starting))
            result = await self._watch(launch, child)
            finished = True
            return result
        finally:
            if not finished:
                await _outlast(self._abandon(launch, starting, child))

    async def _watch(self, launch: _Launch, child: _Child) -> SandboxResult:
        """Collect the running call's output within the limits, stop it on overflow or timeout (the quota
        watcher stops it on its own) and wait for it to end; then read its result (in a thread)."""
        out, err = _Capture(self.limits.max_output_bytes), _Capture(self.limits.max_output_bytes)
        timed_out, overflow = False, None
        pid = child.proc.pid

        async def pump(stream: asyncio.StreamReader, capture: _Capture, name: str) -> None:
            nonlocal overflow
            while chunk := await stream.read(_READ_SIZE):
                if capture.add(chunk) and overflow is None:
                    overflow = name
                    self._kill(pid)

        stdout, stderr = await child.streams()
        pumps = {asyncio.ensure_future(pump(stdout, out, "stdout")),
                 asyncio.ensure_future(pump(stderr, err, "stderr"))}
        try:
            watched: set[asyncio.Future[Any]] = {*pumps, child.exited}
            _, pending = await asyncio.wait(watched, timeout=self.limits.timeout_s)
            if pending:
                timed_out = overflow is None
                self._kill(pid)
                await asyncio.wait(pending, timeout=5)
        finally:
            for task in pumps:
                task.cancel()
        await child.stop()
        return await asyncio.to_thread(self._finish, launch, child.proc.returncode, out, err, timed_out,
                                       overflow)

    async def _abandon(self, launch: _Launch, starting: asyncio.Future[subprocess.Popen[bytes]],
                       child: _Child | None) -> None:
        """End a call that did not finish (cancelled, or failed): stop its process, once started, and wait for
        it; then remove the call's files and cgroup in a thread."""
        try:
            if child is None:
                child = _Child(await starting)
            await child.stop()
        finally:
            await asyncio.to_thread(self._cleanup, launch)

    # -- sync ----------------------------------------------------------------------------------------------

    def run_sync(self, code: str, **kw: Any) -> SandboxResult:
        """The same as :meth:`run` for callers without an event loop (uses ``subprocess`` directly)."""
        launch = self._prepare(code, kw.pop("inputs", None), kw.pop("prelude", ""), kw.pop("postlude", ""),
                               kw.pop("result_var", "result"))
        if kw:
            self._cleanup(launch)
            self._close_fds(launch)
            raise TypeError(f"unexpected arguments: {', '.join(kw)}")
        out, err = _Capture(self.limits.max_output_bytes), _Capture(self.limits.max_output_bytes)
        timed_out, overflow = False, None
        proc: subprocess.Popen[bytes] | None = None
        try:
            proc = self._start(launch)
            assert proc.stdout is not None and proc.stderr is not None
            deadline = time.monotonic() + self.limits.timeout_s
            captures = {proc.stdout.fileno(): (out, "stdout"), proc.stderr.fileno(): (err, "stderr")}
            with selectors.DefaultSelector() as sel:
                for fd in captures:
                    sel.register(fd, selectors.EVENT_READ)
                killed_at: float | None = None
                while sel.get_map():
                    now = time.monotonic()
                    if killed_at is None and now >= deadline:
                        timed_out = overflow is None
                        self._kill(proc.pid)
                        killed_at = now
                    if killed_at is not None and now - killed_at > 5:
                        break
                    wait = (deadline - now) if killed_at is None else 0.1
                    for key, _ in sel.select(timeout=max(0.0, min(wait, 1.0))):
                        chunk = os.read(key.fd, _READ_SIZE)
                        if not chunk:
                            sel.unregister(key.fd)
                            continue
                        capture, name = captures[key.fd]
                        if capture.add(chunk) and overflow is None:
                            overflow = name
                            self._kill(proc.pid)
                            killed_at = time.monotonic()
            try:
                remaining = max(0.1, deadline - time.monotonic()) if killed_at is None else 5
                proc.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                timed_out = timed_out or overflow is None
                self._kill(proc.pid)
                proc.wait()
            return self._finish(launch, proc.returncode, out, err, timed_out, overflow)
        finally:
            if proc is not None:
                if proc.returncode is None:
                    self._kill(proc.pid)
                    proc.wait()
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()
            self._cleanup(launch)


def _input_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    tolist = getattr(value, "tolist", None)
    if callable(tolist) and type(value).__module__.startswith("numpy"):
        return tolist()
    raise TypeError(f"{type(value).__name__} is not a JSON value")

