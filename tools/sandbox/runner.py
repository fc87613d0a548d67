"""The program the sandboxed interpreter runs: one job of LLM-written code (:mod:`kgagents.tools.sandbox`).

:class:`~kgagents.tools.sandbox.Sandbox` starts ``python -s -P -B -u -X utf8 -c <this file's text> JOB
RESULT`` inside bubblewrap (or, in weak isolation, as a plain child process): the program reads the job (the
code, its inputs, the trusted prelude and postlude, the limits), refuses package installs and threads beyond
the limit, loads the seccomp filter itself in weak isolation, runs the prelude, the code and the postlude in
one namespace, and writes the result — the value of ``result_var`` as JSON, or the error as the model should
read it (LLM code frames only) — to ``RESULT``.

In weak isolation with a mount plan (``job["mounts"]``, made by the sandbox where the kernel gives an
unprivileged process a user namespace) the runner first confines itself (:func:`_confine`): new user, mount,
pid, ipc (and network) namespaces; the whole file system read-only, empty tmpfs mounts over the host folders
the plan hides, the work dir and its job folder bound back writable and the Python installation read-only; a
fresh, read-only ``/proc`` that shows only the call's own processes; and the code then runs in a grandchild
that is moved into a further user and mount namespace, where every mount is locked (it can neither unmount
what hides the host's folders, nor make a read-only mount writable, nor see other processes' roots).

It runs in another interpreter that sees nothing of kgagents: it imports the standard library only, and is
handed over as text rather than imported (``exec`` is what it is for: it runs inside the sandbox). It is a
module of its own so that it is read, linted and tested like the rest of the code.
"""

import _thread
import builtins
import errno
import json
import linecache
import os
import re
import signal
import sys
import traceback

#: The file name LLM code is compiled under: its frames are the ones an error shows.
LLM_FILENAME = _LLM = "<llm-code>"


class _NoInstall:
    """Refuses pip/ensurepip: packages cannot be installed in the sandbox."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("pip", "ensurepip"):
            raise ModuleNotFoundError("installing packages is disabled in the sandbox; "
                                      "use the packages that are installed", name=name)
        return None


def _limit_threads(limit):
    """Refuses more than ``limit`` live threads (the pids cgroup, where there is one, is the hard cap)."""
    lock, live = _thread.allocate_lock(), [0]

    def guard(start):
        def guarded(function, *args, **kwargs):
            with lock:
                if live[0] >= limit:
                    raise RuntimeError(f"can't start new thread: the sandbox allows at most {limit} threads")
                live[0] += 1

            def run(*a, **k):
                try:
                    return function(*a, **k)
                finally:
                    with lock:
                        live[0] -= 1
            try:
                return start(run, *args, **kwargs)
            except BaseException:
                with lock:
                    live[0] -= 1
                raise
        return guarded

    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        if hasattr(_thread, name):
            setattr(_thread, name, guard(getattr(_thread, name)))
    threading = sys.modules.get("threading")
    if threading is not None and hasattr(threading, "_start_new_thread"):
        threading._start_new_thread = _thread.start_new_thread


def _type_name(exc):
    t = type(exc)
    mod = getattr(t, "__module__", "builtins")
    return t.__qualname__ if mod in ("builtins", "__main__") else mod + "." + t.__qualname__


def _message(exc):
    try:
        return str(exc)
    except Exception:
        return "<unprintable>"


def _llm_error(exc, memory_mb, max_frames):
    if isinstance(exc, SyntaxError) and exc.filename == _LLM:
        msg = f"{_type_name(exc)}: {exc.msg} (line {exc.lineno})"
        if exc.text:
            line = exc.text.rstrip("\n")
            msg += "\n    " + line.strip()
            if exc.offset:
                indent = len(line) - len(line.lstrip())
                msg += "\n    " + " " * max(0, exc.offset - 1 - indent) + "^"
        return msg
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == _LLM]
    line = f" (line {frames[-1].lineno})" if frames else ""
    if isinstance(exc, MemoryError):
        head = f"memory limit of {memory_mb} MB exceeded (MemoryError){line}"
    else:
        text = _message(exc)
        head = _type_name(exc) + (": " + text if text else "") + line
        if isinstance(exc, PermissionError) and exc.filename is None:
            head += " (not allowed in the sandbox, which cannot start processes)"
    if frames:
        shown = frames[-max_frames:]
        more = len(frames) - len(shown)
        head += "\nTraceback (LLM code only{}):\n".format(f", {more} earlier frames left out" if more else "")
        head += "".join(traceback.format_list(shown)).rstrip("\n")
    return head


def _load_seccomp(program):
    """Weak isolation: load the filter that bubblewrap loads otherwise into this process, before any code of
    the job runs (``program``: the ``struct sock_filter`` array)."""
    import ctypes  # only in weak isolation, where this process loads the filter itself

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    for call in ((pr_set_no_new_privs, 1, 0, 0, 0),
                 (pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0)):
        if libc.prctl(*call) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"prctl({call[0]}): {os.strerror(errno)}")


# mount(2) flags (linux/mount.h) and the statvfs flags that a remount must repeat (a mount from the parent
# namespace keeps them locked)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT = 1, 2, 4, 8, 32
_MS_NOATIME, _MS_NODIRATIME, _MS_BIND, _MS_REC, _MS_PRIVATE = 1024, 2048, 4096, 16384, 1 << 18
_MS_RELATIME, _MS_STRICTATIME = 1 << 21, 1 << 24
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4


def _libc():
    import ctypes  # only in weak isolation, where this process sets itself up

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc, ctypes.get_errno


def _encoded(value):
    return None if value is None else os.fsencode(value)


def _mount(lib, source, target, fstype, flags, data=None):
    libc, get_errno = lib
    if libc.mount(_encoded(source), _encoded(target), _encoded(fstype), flags, _encoded(data)) != 0:
        errno = get_errno()
        raise OSError(errno, f"mount {fstype or source or ''} on {target}: {os.strerror(errno)}")


def _prctl(lib, option, value):
    libc, get_errno = lib
    if libc.prctl(option, value, 0, 0, 0) != 0:
        errno = get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")


def _map_ids(uid, gid):
    """Map this process's uid and gid to themselves in the user namespace it has just entered."""
    maps = (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1\n"), ("gid_map", f"{gid} {gid} 1\n"))
    for name, text in maps:
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _kept_flags(path):
    """The flags a read-only remount of ``path`` must repeat: those the parent namespace locked."""
    got = os.statvfs(path).f_flag
    flags = 0
    for st, ms in ((os.ST_NOSUID, _MS_NOSUID), (os.ST_NODEV, _MS_NODEV), (os.ST_NOEXEC, _MS_NOEXEC),
                   (os.ST_NOATIME, _MS_NOATIME), (os.ST_NODIRATIME, _MS_NODIRATIME),
                   (os.ST_RELATIME, _MS_RELATIME)):
        if got & st:
            flags |= ms
    if not got & (os.ST_NOATIME | os.ST_RELATIME):
        flags |= _MS_STRICTATIME
    return flags


def mount_points(mountinfo):
    """The mount points that ``/proc/self/mountinfo`` text lists, in its order (its octal escapes undone)."""
    points = []
    for line in mountinfo.splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            points.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


_SYS_MOUNT_SETATTR, _AT_FDCWD, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 1


def _read_only_tree(lib, path):
    """Make every mount at and under ``path`` read-only: mount_setattr(2) where the kernel has it (5.12), else
    a read-only remount of each mount point that ``/proc/self/mountinfo`` lists under ``path`` (one covered by
    a later mount is out of reach and needs none)."""
    import ctypes  # only in weak isolation, where this process sets itself up

    class MountAttr(ctypes.Structure):  # struct mount_attr
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    libc, get_errno = lib
    attr = MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
    long = ctypes.c_long  # syscall(2) reads each argument as a long
    if libc.syscall(long(_SYS_MOUNT_SETATTR), long(_AT_FDCWD), ctypes.c_char_p(os.fsencode(path)),
                    long(_AT_RECURSIVE), ctypes.byref(attr), long(ctypes.sizeof(attr))) == 0:
        return
    failed = get_errno()
    if failed != errno.ENOSYS:
        raise OSError(failed, f"mount_setattr {path} read-only: {os.strerror(failed)}")
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        points = [p for p in mount_points(f.read()) if p == path or p.startswith(path.rstrip("/") + "/")]
    for point in points:
        try:
            flags = _kept_flags(point)
        except OSError:  # covered by a later mount: out of reach
            continue
        _mount(lib, None, point, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags)


def _apply_mounts(lib, steps, tmp_size):
    """Carry out the sandbox's mount plan, in order: ``["readonly", path, False]`` makes every mount under
    ``path`` read-only, ``["tmpfs", path, writable]`` mounts an empty tmpfs over ``path`` (hiding what the
    host has there), ``["bind", path, writable]`` binds the host folder ``path`` back (opened before anything
    was hidden), writable or read-only; tmpfs steps that are read-only are made so at the end (the binds into
    them need their folders first)."""
    kept = {}
    try:
        for kind, path, _ in steps:
            if kind == "bind":
                kept[path] = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        read_only = []
        for kind, path, writable in steps:
            if kind == "readonly":
                _read_only_tree(lib, path)
            elif kind == "tmpfs":
                options = f"mode=1777,size={tmp_size}" if writable else "mode=0755,size=65536"
                _mount(lib, "tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, options)
                if not writable:
                    read_only.append(path)
            else:
                os.makedirs(path, exist_ok=True)  # in a tmpfs of an earlier step
                _mount(lib, f"/proc/self/fd/{kept[path]}", path, None, _MS_BIND | _MS_REC)
                # a bind takes the flags of what it binds, read-only since the first step: set its own
                flags = _MS_REMOUNT | _MS_BIND | _kept_flags(path)
                _mount(lib, None, path, None, flags if writable else flags | _MS_RDONLY)
        for path in read_only:
            _mount(lib, None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _kept_flags(path))
    finally:
        for fd in kept.values():
            os.close(fd)


def _mirror(status):
    """End this process as the waited-for process ended (its exit code, or the signal that killed it)."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _confine(spec, status_path):
    """Weak isolation with a mount plan: returns in the process that runs the job, confined; the processes
    around it wait for it and end as it ends. A failure before the job's process exists is written to
    ``status_path`` as the sandbox's error (the file is opened before anything is hidden)."""
    cwd, uid, gid = os.getcwd(), os.getuid(), os.getgid()
    status_fd = os.open(status_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)

    def fail(phase, exc):
        text = json.dumps({"ok": False, "error": _trusted_error(phase, exc), "result": None, "notes": []})
        os.write(status_fd, text.encode("utf-8"))
        os._exit(1)

    try:
        lib = _libc()
        flags = os.CLONE_NEWUSER | os.CLONE_NEWNS | os.CLONE_NEWPID | os.CLONE_NEWIPC
        os.unshare(flags | (os.CLONE_NEWNET if spec.get("net") else 0))
        _map_ids(uid, gid)
        _mount(lib, None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing of what follows reaches the host
        _apply_mounts(lib, spec["steps"], spec["tmp_size"])
        read_end, write_end = os.pipe()
        first = os.fork()  # pid 1 of the new pid namespace
    except BaseException as exc:  # reported as the call's error
        fail("mount namespace setup", exc)
    if first:
        os.close(write_end)
        os.close(status_fd)
        _, status = os.waitpid(first, 0)
        with os.fdopen(read_end, "rb") as pipe:
            report = pipe.read().decode("utf-8", "replace")
        if report.startswith("error:"):
            status_fd = os.open(status_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            os.write(status_fd, report[len("error:"):].encode("utf-8"))
            os._exit(1)
        _mirror(int(report[len("status:"):]) if report.startswith("status:") else status)
    os.close(read_end)

    def report_failure(phase, exc):  # pid 1: through the first process
        text = json.dumps({"ok": False, "error": _trusted_error(phase, exc), "result": None, "notes": []})
        os.write(write_end, ("error:" + text).encode("utf-8"))
        os._exit(1)

    try:  # pid 1: a /proc of this pid namespace, then the job's process
        _prctl(lib, _PR_SET_PDEATHSIG, signal.SIGKILL)
        _mount(lib, "proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        _prctl(lib, _PR_SET_DUMPABLE, 0)  # the job's process cannot look into this one through /proc/1
        mapped_r, mapped_w = os.pipe()
        go_r, go_w = os.pipe()
        job_process = os.fork()
    except BaseException as exc:
        report_failure("pid namespace setup", exc)
    if job_process:
        os.close(status_fd)
        os.close(mapped_w)
        os.close(go_r)
        try:  # once the job's process has mapped its ids (through /proc), /proc becomes read-only (sysctls)
            if os.read(mapped_r, 1) == b"m":
                _mount(lib, None, "/proc", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _kept_flags("/proc"))
                os.write(go_w, b"g")
        except BaseException as exc:
            os.kill(job_process, signal.SIGKILL)
            os.waitpid(job_process, 0)
            report_failure("pid namespace setup", exc)
        os.close(go_w)
        os.close(mapped_r)
        _, status = os.waitpid(job_process, 0)
        os.write(write_end, f"status:{status}".encode())
        os._exit(0)
    os.close(write_end)
    os.close(mapped_r)
    os.close(go_w)
    try:  # the job's process: every mount locked (read-only ones stay so), the work dir its current directory
        os.unshare(os.CLONE_NEWUSER)
        _map_ids(uid, gid)
        os.write(mapped_w, b"m")
        if os.read(go_r, 1) != b"g":
            raise OSError("/proc was not made read-only")
        os.unshare(os.CLONE_NEWNS)
        os.chdir(cwd)
    except BaseException as exc:  # reported as the call's error
        fail("mount namespace setup", exc)
    os.close(mapped_w)
    os.close(go_r)
    os.close(status_fd)


def _trusted_error(phase, exc):
    head = f"sandbox {phase} failed: {_type_name(exc)}: {_message(exc)}"
    if type(exc).__module__ == "__main__":  # an error class of the prelude/postlude: a deliberate message
        return head
    frames = traceback.extract_tb(exc.__traceback__)[1:][-3:]
    return head + ("\n" + "".join(traceback.format_list(frames)).rstrip("\n") if frames else "")


def _jsonable(value, path, notes, depth=0, seen=None):
    if value is None or type(value) in (bool, int, float, str):
        return value
    for base in (bool, int, float, str):  # subclasses (IntEnum, numpy.float64, ...) as the plain type
        if isinstance(value, base):
            return base(value)
    if depth > 64:
        notes.append(f"{path}: nested too deeply, converted to its repr")
        return _repr(value)
    seen = seen if seen is not None else set()
    if id(value) in seen:
        notes.append(f"{path}: refers to itself, converted to its repr")
        return _repr(value)
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        seen = seen | {id(value)}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, str):
                key = k
            elif k is None or isinstance(k, (bool, int, float)):
                key = json.dumps(k)
            else:
                key = _repr(k)
                notes.append(f"{path}: key {type(k).__name__} converted to its repr")
            out[key] = _jsonable(v, f"{path}[{key!r}]", notes, depth + 1, seen)
        return out
    if isinstance(value, (list, tuple)):
        return [_jsonable(v, f"{path}[{i}]", notes, depth + 1, seen) for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        notes.append(f"{path}: {type(value).__name__} converted to a list")
        items = list(value)
        try:
            items.sort()
        except Exception:
            pass
        return [_jsonable(v, f"{path}[{i}]", notes, depth + 1, seen) for i, v in enumerate(items)]
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars
    if callable(tolist) and type(value).__module__.startswith("numpy"):
        try:
            return _jsonable(tolist(), path, notes, depth + 1, seen)
        except Exception:
            pass
    notes.append(f"{path}: {type(value).__name__} is not JSON, converted to its repr")
    return _repr(value)


def _repr(value):
    try:
        text = repr(value)
    except Exception as exc:
        text = f"<unrepresentable {type(value).__name__}: {exc}>"
    return text if len(text) <= 100000 else text[:100000] + "...<cut>"


def _main():
    job_path, status_path = sys.argv[1], sys.argv[2]
    dumps, _open, _exit = json.dumps, builtins.open, os._exit
    with _open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    if job.get("mounts"):  # weak isolation with namespaces: only the job's own process returns
        _confine(job["mounts"], status_path)
    sys.meta_path.insert(0, _NoInstall())
    _limit_threads(job["max_threads"])
    memory_mb = job["memory_mb"]
    max_frames = job["max_frames"]
    result_var = job["result_var"]
    g = {"__name__": "__main__", "__builtins__": builtins, "inputs": job["inputs"]}
    status = {"ok": True, "error": None, "result": None, "notes": []}

    def finish():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        try:
            text = dumps(status)
        except Exception as exc:
            text = dumps({"ok": False, "error": f"result could not be written: {exc}", "result": None,
                          "notes": []})
        try:
            with _open(status_path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            status.update(ok=False, error=f"result too large to return ({exc.strerror})", result=None)
            with _open(status_path, "w", encoding="utf-8") as f:
                f.write(dumps(status))
        _exit(0 if status["ok"] else 1)

    def trusted(what, step):
        """Run one of the runner's own steps; its failure ends the call with a trusted error."""
        try:
            step()
        except BaseException as exc:
            if exc.__traceback__ is not None:  # from the step's own frame on, as if it ran here
                exc = exc.with_traceback(exc.__traceback__.tb_next)
            status.update(ok=False, error=_trusted_error(what, exc))
            finish()

    if job.get("unshare_net"):  # weak isolation: no network (new user and network namespaces), before seccomp
        trusted("network namespace setup", lambda: os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNET))
    if job["seccomp"]:
        trusted("seccomp setup", lambda: _load_seccomp(bytes.fromhex(job["seccomp"])))
    if job["prelude"]:
        trusted("prelude", lambda: exec(compile(job["prelude"], "<sandbox-prelude>", "exec"), g))
    code = job["code"]
    linecache.cache[_LLM] = (len(code), None, code.splitlines(True), _LLM)
    try:
        exec(compile(code, _LLM, "exec"), g)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            error = _llm_error(exc, memory_mb, max_frames) if str(exc.code) else "SystemExit"
            status.update(ok=False, error=error)
            finish()
    except BaseException as exc:
        if isinstance(exc, MemoryError):
            g.clear()
        status.update(ok=False, error=_llm_error(exc, memory_mb, max_frames))
        del exc
        finish()
    if job["postlude"]:
        trusted("postlude", lambda: exec(compile(job["postlude"], "<sandbox-postlude>", "exec"), g))
    if result_var:
        try:
            value = g.get(result_var)
            notes = []
            status["result"] = _jsonable(value, result_var, notes)
            if notes:
                status["notes"] = notes[:10] + ([f"... {len(notes) - 10} more conversions"]
                                                if len(notes) > 10 else [])
        except MemoryError:
            status.update(ok=False, result=None, error=f"memory limit of {memory_mb} MB exceeded "
                                                       f"(MemoryError) while converting {result_var}")
        except BaseException as exc:
            status.update(ok=False, result=None, error=f"{result_var} could not be converted to JSON: "
                                                       f"{_type_name(exc)}: {_message(exc)}")
    finish()


if __name__ == "__main__":
    _main()
