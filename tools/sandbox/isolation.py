"""Which isolation this process gives LLM-written code (:func:`isolation_status`), probed once per PATH, and
the probe handed to worker processes of the same machine so that they need none of their own."""

from __future__ import annotations

from kgagents.tools.sandbox import bwrap, cgroups, seccomp, weak
from kgagents.tools.sandbox.bwrap import _Bwrap, _search_path
from kgagents.tools.sandbox.limits import _WEAK_HINT

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
    path = bwrap._find_bwrap()
    return _search_path(), path, bwrap._probes.get(path) if path else None


def adopt_isolation_probe(probe: tuple[str, str | None, _Bwrap | None]) -> None:
    """Take the probe of another process of this machine (:func:`isolation_probe`); ignored if this process
    has another PATH. The remaining checks (the pids cgroup) are cheap and run here."""
    search_path, path, info = probe
    if search_path != _search_path():
        return
    with bwrap._probe_lock:
        bwrap._found.setdefault(search_path, path)
        if path and info is not None and path == bwrap._found[search_path]:
            bwrap._probes.setdefault(path, info)
    isolation_status()


def isolation_status() -> tuple[str, str]:
    """``("bwrap", description)`` when LLM code runs in bubblewrap, else ``("none", why and what to do)``."""
    search_path = _search_path()
    info = bwrap._bwrap()
    if info is None or not info.usable:
        weak_text = weak.weak_isolation_text(weak.weak_network_isolation(), weak.weak_mount_isolation())
        why = "bubblewrap not found" if info is None else info.problem
        status = "none", f"{why}; {_WEAK_HINT} ({weak_text})"
    else:
        layers = ["namespaces (user, pid, net, ipc, uts, cgroup, mount)"]
        if seccomp._seccomp_program() is not None and "--seccomp" in info.options:
            layers.append("seccomp (no child processes)")
        layers.append("rlimits")
        if cgroups._pids_cgroup_parent() is not None:
            layers.append("pids cgroup")
        status = "bwrap", f"{info.version}: {' + '.join(layers)}"
    _isolation_checked.add(search_path)  # only now: a concurrent caller must not take a probe in progress
    return status
