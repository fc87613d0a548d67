"""Weak isolation, where bubblewrap cannot be had and the caller opted in: what the kernel still gives an
unprivileged process (user and network namespaces; mount, pid and ipc namespaces with a mount plan that hides
the host's temp folders, home and data folders), each probed once per process, and the words that say what
applies."""

from __future__ import annotations

import functools
import json
import os
import pwd
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgagents.core.config import data_home, get_settings
from kgagents.core.tempdirs import short_lived_prefix
from kgagents.tools.sandbox import environment
from kgagents.tools.sandbox.environment import _child_env, _python_dirs
from kgagents.tools.sandbox.limits import RUN_DIR_NAME, SandboxLimits
from kgagents.tools.sandbox.workdir import read_result_file


def weak_network_isolation() -> bool:
    """Whether a call of the weak mode can be put into a network namespace of its own: probed once, in a child
    process (a user namespace, which most Linux kernels allow an unprivileged process). Off with
    ``KGAGENTS_SANDBOX_NO_NETNS=1``."""
    if not hasattr(os, "unshare") or os.environ.get("KGAGENTS_SANDBOX_NO_NETNS"):
        return False
    probe = "import os; os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNET)"
    try:
        done = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, timeout=30,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.lru_cache(maxsize=1)
def weak_mount_isolation() -> bool:
    """Whether a call of the weak mode can be put into a mount namespace of its own that hides the host's temp
    folders, home and data folders (:func:`weak_mount_plan`): probed once, by running a job through the runner
    with a plan (user, mount, pid and ipc namespaces, a tmpfs, a bind mount, a fresh ``/proc``, all of which
    an unprivileged process gets on most Linux kernels; not on macOS, nor where user namespaces are off or
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
        argv = [sys.executable, "-s", "-P", "-B", "-c", environment._RUNNER, str(run_dir / "job.json"),
                str(run_dir / "result.json")]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=60, check=False, cwd=work,
                                  env=_child_env(work, run_dir), start_new_session=True)
            result = read_result_file(run_dir / "result.json", 1 << 20) or {}
        except (OSError, subprocess.SubprocessError):
            return False
    # the job ran as pid 2 of its own pid namespace, and the work dir's folder showed nothing but the work dir
    return done.returncode == 0 and result.get("result") == [2, ["work"]]


#: The system the interpreter runs on: the weak mode never hides one of these folders, nor a folder that holds
#: one (a folder inside one it may hide: ``/dev/shm``, a project in ``/usr/src/app``).
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/dev",
                "/sys")
#: Hidden folders that get a writable (size-limited) tmpfs, as under bubblewrap; the others are read-only.
_WRITABLE_HIDDEN = ("/tmp", "/dev/shm")


@dataclass(frozen=True)
class MountStep:
    """One step of the weak mode's mount plan (:func:`weak_mount_plan`): ``"readonly"`` makes every mount
    under ``path`` (``/``: the whole file system) read-only; ``"tmpfs"`` mounts an empty tmpfs over ``path``,
    hiding what the host has there; ``"bind"`` binds the host's folder ``path`` back over what an earlier step
    hid (or over itself, to make it writable or read-only)."""

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
    """The mount steps that hide the folders ``hidden`` from a weak-mode call while ``keep_rw`` stay visible
    and writable and ``keep_ro`` visible and read-only; in the order they must run (a folder before what lies
    in it). All paths are absolute, normalised and resolved.

    The first step makes the whole file system read-only: what the call may write is what is bound back
    writable (``keep_rw``) and the tmpfs of ``writable_hidden``. A folder is hidden only where
    :func:`may_hide` allows it. A folder to keep wins over the same folder to hide. A step that changes
    nothing is left out: a folder inside one already hidden, a folder to keep read-only where nothing above it
    was hidden."""
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
    """The host folders a weak-mode call should not see, those that exist, resolved: the temp folders (where
    the embedded KG servers keep their sockets and database files, and kgagents its process folders), ``/run``
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
        return (f"{net}; they get a mount namespace of their own: the temp folders (where the KG servers "
                "keep their sockets and files), /run, your home, the folder kgagents runs in, the data "
                "folder and other runs' work dirs are hidden, the rest of the files are readable but not "
                "writable")
    return (f"{net}; and they share the temp folders (where the KG servers keep their sockets and "
            "files), /run, your home and the data folder with kgagents: no mount namespace can be had here")
