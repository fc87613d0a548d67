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
:func:`weak_network_isolation`), the runner first moves itself into new user and network namespaces, so the
code cannot reach the network, the host's loopback included; elsewhere (macOS, a kernel that forbids it) it
can. Where the kernel also lets it mount there (probed once, :func:`weak_mount_isolation`), the call gets
mount, pid and ipc namespaces too (:func:`weak_mount_plan`): the whole file system read-only; empty tmpfs
mounts over the temp folders (where the embedded KG servers keep their Unix sockets and database files;
``/dev/shm`` too), ``/run``, the user's home, the data and runs folders, the application's working directory
and the two folders above the work dir (the run's and the one that holds the runs); the work dir and its own
job folder bound back writable, the Python installation read-only; a read-only ``/proc`` that shows only the
call's own processes; and the code runs in a further user namespace, where those mounts are locked (it can
neither unmount them nor make them writable). The rest of the host's files stay as readable as for the user,
none writable. Without that (macOS, user namespaces off or restricted) weak mode shares all of them with the
application. :func:`isolation_status` says which applies, for a start-up message. The result file a call
leaves is read without following links (:func:`read_result_file`): the code may have put one there.

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

from kgagents.tools.sandbox.box import Sandbox
from kgagents.tools.sandbox.isolation import (
    adopt_isolation_probe,
    isolation_known,
    isolation_probe,
    isolation_status,
)
from kgagents.tools.sandbox.limits import (
    LLM_FILENAME,
    MAX_TRACEBACK_FRAMES,
    OUTPUT_KILL_FACTOR,
    QUOTA_POLL_S,
    RUN_DIR_NAME,
    DiskQuota,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailable,
)
from kgagents.tools.sandbox.weak import (
    MountStep,
    may_hide,
    weak_isolation_text,
    weak_mount_isolation,
    weak_mount_plan,
    weak_network_isolation,
)
from kgagents.tools.sandbox.workdir import prepare_work_dir, read_result_file

__all__ = [
    "LLM_FILENAME",
    "MAX_TRACEBACK_FRAMES",
    "OUTPUT_KILL_FACTOR",
    "QUOTA_POLL_S",
    "RUN_DIR_NAME",
    "DiskQuota",
    "MountStep",
    "Sandbox",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailable",
    "adopt_isolation_probe",
    "isolation_known",
    "isolation_probe",
    "isolation_status",
    "may_hide",
    "prepare_work_dir",
    "read_result_file",
    "weak_isolation_text",
    "weak_mount_isolation",
    "weak_mount_plan",
    "weak_network_isolation",
]
