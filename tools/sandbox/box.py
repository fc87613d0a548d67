"""The :class:`Sandbox`: one call of LLM-written code prepared (its job folder, the command line), started at
the gate and confined, watched within its limits, and finished into a :class:`SandboxResult` (the package's
documentation, :mod:`kgagents.tools.sandbox`, describes the walls)."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgagents.tools.sandbox import bwrap, environment, rlimits, seccomp, weak
from kgagents.tools.sandbox.bwrap import _Bwrap
from kgagents.tools.sandbox.cgroups import _PidsCgroup
from kgagents.tools.sandbox.child import _READ_SIZE, _Capture, _Child, _outlast, kill_group
from kgagents.tools.sandbox.environment import _child_env, _host_env_for_bwrap
from kgagents.tools.sandbox.limits import (
    _WEAK_HINT,
    MAX_TRACEBACK_FRAMES,
    RUN_DIR_NAME,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailable,
)
from kgagents.tools.sandbox.quota import _QuotaWatch
from kgagents.tools.sandbox.workdir import _known_work_dir, read_result_file


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


#: Every call's process starts as this shell: it waits for a line on its stdin (the gate), then execs the
#: call's command in its place, with stdin from /dev/null. Without that line (stdin closed) it exits with 1.
_GATE = ("/bin/sh", "-c", 'read -r go && exec "$@" </dev/null', "kgagents-sandbox-gate")


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
        info = bwrap._bwrap()
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
               "seccomp": None if self._bwrap is not None else seccomp._weak_seccomp_program(),
               "mounts": None, "unshare_net": False}
        if self._bwrap is None and weak.weak_mount_isolation():
            job["mounts"] = weak._weak_mounts(self.work_dir, run_dir, self.limits,
                                              network=weak.weak_network_isolation())
        elif self._bwrap is None:
            job["unshare_net"] = weak.weak_network_isolation()
        try:
            text = json.dumps(job, default=_input_default, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise TypeError(f"sandbox inputs must be JSON values: {exc}") from None
        job_path = run_dir / "job.json"
        job_path.write_text(text, encoding="utf-8")
        status_path = run_dir / "result.json"
        quota = _QuotaWatch(self.work_dir, run_dir, self.limits.quota)
        python = [sys.executable, "-s", "-P", "-B", "-u", "-X", "utf8", "-c", environment._RUNNER,
                  str(job_path), str(status_path)]
        fds: list[int] = []
        try:
            if self._bwrap is not None:
                env = _child_env(self.work_dir, "/tmp")
                argv = bwrap._bwrap_argv(self._bwrap, self.work_dir, env, fds, self.limits, run_dir) + python
                host_env = _host_env_for_bwrap()
            else:
                tmp = run_dir / "tmp"
                tmp.mkdir()
                host_env = _child_env(self.work_dir, tmp)
                argv = python
            nproc = rlimits._nproc_limit(self.limits.max_processes)
        except BaseException:
            for fd in fds:
                os.close(fd)
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        cgroup = _PidsCgroup(self.limits.max_processes + 3)  # + bwrap, its pid 1 and the interpreter
        return _Launch(argv, host_env, self.work_dir, run_dir, status_path, fds,
                       rlimits._rlimits(self.limits, nproc), cgroup, quota)

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
        """SIGKILL the call's process group (:func:`~kgagents.tools.sandbox.child.kill_group`)."""
        kill_group(pid)

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
            rlimits._confine(proc.pid, launch.rlimits, launch.cgroup.procs_file)
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
