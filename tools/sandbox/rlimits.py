"""The resource limits of a sandboxed call's process, set on it from outside (``prlimit``) while it waits at
the gate, together with the move into its pids cgroup."""

from __future__ import annotations

import os
import resource

from kgagents.tools.sandbox.limits import SandboxLimits


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
