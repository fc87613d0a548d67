"""bubblewrap: finding and probing it once per process, and the command line that confines one call (new
namespaces, a read-only view of what Python needs, a synthetic ``/etc``, private ``/tmp`` and ``/dev/shm``,
the work dir read-write, the seccomp filter)."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from kgagents.core.tempdirs import process_dir, short_lived_prefix
from kgagents.tools.sandbox import seccomp
from kgagents.tools.sandbox.environment import _child_env, _host_env_for_bwrap, _python_dirs
from kgagents.tools.sandbox.limits import SandboxLimits

#: The uid/gid the code has inside the bubblewrap sandbox ("nobody").
SANDBOX_UID = 65534
SANDBOX_GID = 65534


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
    """The synthetic /etc files in the folder of process ``pid``, this one (:mod:`kgagents.core.tempdirs`:
    removed at exit; a forked child makes its own)."""
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
    program = seccomp._seccomp_program()
    if program is not None and "--seccomp" in opts:
        fds.append(_pipe_with(program))  # a few hundred bytes
        argv += ["--seccomp", str(fds[-1])]
    argv.append("--")
    return argv


#: Every call's process starts as this shell: it waits for a line on its stdin (the gate), then execs the
