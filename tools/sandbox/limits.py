"""What a sandboxed call may do and what it gives back: the limits, the disk quota, the result, the error of a
host where no sandbox can be had, and the constants the sandbox's parts share."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kgagents.core.errors import KGAgentsError
from kgagents.tools.sandbox import runner

#: Name of the hidden folder in the work dir that holds one sub-folder per call (job, result).
RUN_DIR_NAME = ".sandbox"
#: The file name LLM code is compiled with (tracebacks are cut down to frames of this file).
LLM_FILENAME = runner.LLM_FILENAME
#: Past this multiple of ``max_output_bytes`` on one stream the process is stopped (a print loop).
OUTPUT_KILL_FACTOR = 10
#: How often the work dir's size and entries are counted while a call runs (see :class:`DiskQuota`).
QUOTA_POLL_S = 0.05
#: Traceback frames of the LLM code shown with an error (the innermost ones).
MAX_TRACEBACK_FRAMES = 6
_WEAK_HINT = ("install the Debian package `bubblewrap` (apt-get install bubblewrap), or opt in to weak "
              "isolation with KGAGENTS_ALLOW_WEAK_SANDBOX=1")


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

