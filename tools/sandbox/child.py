"""A started call's process as this process sees it: its output kept within the limits, its exit and its pipes
watched by the event loop, and the stopping of its process group."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
from collections.abc import Coroutine
from typing import Any

from kgagents.tools.sandbox.limits import OUTPUT_KILL_FACTOR


def kill_group(pid: int) -> None:
    """SIGKILL the process group of a call's process ``pid``: bwrap's pid 1 dies with bwrap
    (--die-with-parent), and with it the pid namespace and everything in it. (The cgroup, if any, is emptied
    again when the call is cleaned up.)"""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

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
            kill_group(self.proc.pid)
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
