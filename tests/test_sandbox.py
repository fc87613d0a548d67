"""The sandbox for LLM-written Python: hostile code is contained with a clear error and the host unharmed;
ordinary code gets its output, result, inputs, prelude and postlude."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from kgagents.core.tempdirs import process_dir
from kgagents.tools import sandbox as sb
from kgagents.tools.sandbox import (
    DiskQuota,
    Sandbox,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailable,
    isolation_status,
)
from kgagents.tools.sandbox import bwrap as sb_bwrap
from kgagents.tools.sandbox import cgroups as sb_cgroups
from kgagents.tools.sandbox import child as sb_child
from kgagents.tools.sandbox import environment as sb_environment
from kgagents.tools.sandbox import rlimits as sb_rlimits
from kgagents.tools.sandbox import seccomp as sb_seccomp
from kgagents.tools.sandbox import weak as sb_weak

PROJECT_DIR = Path(__file__).resolve().parents[1]
HAVE_BWRAP = isolation_status()[0] == "bwrap"
requires_bwrap = pytest.mark.skipif(not HAVE_BWRAP, reason=f"no bubblewrap here: {isolation_status()[1]}")

FAST = SandboxLimits(timeout_s=5, memory_mb=512)
HOSTILE = SandboxLimits(timeout_s=2, memory_mb=256, max_processes=16)


# ---------------------------------------------------------------------------------------------------------
# helpers: what runs on the host
# ---------------------------------------------------------------------------------------------------------


def _processes_mentioning(text: str) -> list[int]:
    """Host processes whose command line contains ``text`` (the work dir is in every sandbox command line)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


#: The test process's descendants when each work dir was made: long-lived helpers that other tests of the same
#: session started (embedded database servers, multiprocessing's resource tracker) are not the sandbox's.
_BASELINE: dict[Path, set[int]] = {}


def _stray_children(work_dir: Path) -> list[int]:
    return sorted(set(_descendants(os.getpid())) - _BASELINE.get(work_dir, set()))


def assert_host_unharmed(work_dir: Path) -> None:
    """No sandbox process is left, the test process has no stray children, and the host can still spawn."""
    deadline = time.monotonic() + 3
    while (_processes_mentioning(str(work_dir)) or _stray_children(work_dir)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_mentioning(str(work_dir)) == []
    assert _stray_children(work_dir) == []
    assert subprocess.run(["true"], timeout=10).returncode == 0
    assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True,
                          timeout=30).stdout.strip() == "42"
    assert not (work_dir / sb.RUN_DIR_NAME).exists()  # the per-call folders are cleaned up
    parent = sb_cgroups._pids_cgroup_parent()
    if parent is not None:
        assert not [p for p in parent.iterdir() if p.name.startswith(f"kgagents-sandbox-{os.getpid()}-")]


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    _BASELINE[path] = set(_descendants(os.getpid()))
    return path


@pytest.fixture
def box(work_dir: Path) -> Sandbox:
    return Sandbox(work_dir, FAST)


@pytest.fixture
def hostile(work_dir: Path) -> Sandbox:
    return Sandbox(work_dir, HOSTILE)


# ---------------------------------------------------------------------------------------------------------
# ordinary behaviour
# ---------------------------------------------------------------------------------------------------------


@requires_bwrap
def test_isolation_status_reports_bubblewrap() -> None:
    kind, description = isolation_status()
    assert kind == "bwrap"
    assert "bubblewrap" in description and "namespaces" in description and "rlimits" in description


@pytest.mark.slow
@requires_bwrap
async def test_stdout_result_and_installed_packages(box: Sandbox, work_dir: Path) -> None:
    r = await box.run("import networkx as nx\nG = nx.path_graph(4)\nprint('edges', G.number_of_edges())\n"
                      "result = {'path': nx.shortest_path(G, 0, 3), 'cwd': __import__('os').getcwd()}\n")
    assert r.ok, r.error
    assert r.error is None and r.exit_code == 0 and not r.timed_out
    assert r.stdout == "edges 3\n"
    assert r.result == {"path": [0, 1, 2, 3], "cwd": str(work_dir)}
    assert r.isolation == "bwrap"


@pytest.mark.slow
@requires_bwrap
async def test_inputs_prelude_and_postlude(box: Sandbox) -> None:
    prelude = "import networkx as nx\nG = nx.Graph()\nG.add_edges_from(inputs['edges'])\n"
    postlude = "result = sorted(sorted(e) for e in G.edges())\n"
    r = await box.run("G.add_edge('c', 'd')\nprint(len(G))", inputs={"edges": [["a", "b"], ["b", "c"]]},
                      prelude=prelude, postlude=postlude)
    assert r.ok, r.error
    assert r.stdout == "4\n"
    assert r.result == [["a", "b"], ["b", "c"], ["c", "d"]]


@requires_bwrap
async def test_postlude_is_skipped_when_the_code_fails(box: Sandbox) -> None:
    r = await box.run("result = 1\nraise ValueError('bad')", postlude="result = 'postlude ran'")
    assert not r.ok and r.result is None
    assert r.error.startswith("ValueError: bad (line 2)")


@pytest.mark.slow
@requires_bwrap
async def test_result_var_other_name_none_and_unset(box: Sandbox) -> None:
    assert (await box.run("answer = [1, 2]", result_var="answer")).result == [1, 2]
    r = await box.run("result = 5", result_var=None)
    assert r.ok and r.result is None
    r = await box.run("x = 5")
    assert r.ok and r.result is None


@requires_bwrap
async def test_exception_reported_with_line_and_llm_frames_only(box: Sandbox) -> None:
    r = await box.run("a = 1\nb = 2\nc = a + x\n")
    assert not r.ok and r.exit_code == 1
    assert r.error.splitlines()[0] == "NameError: name 'x' is not defined (line 3)"
    assert 'File "<llm-code>", line 3' in r.error and "c = a + x" in r.error
    assert "sandbox.py" not in r.error and "<string>" not in r.error  # the runner's frames are hidden


@pytest.mark.slow
@requires_bwrap
async def test_exception_from_a_library_names_the_llm_line(box: Sandbox) -> None:
    code = "import networkx as nx\n\ndef f(G):\n    return nx.shortest_path(G, 0, 9)\n\nf(nx.path_graph(3))\n"
    r = await box.run(code)
    assert not r.ok
    assert r.error.splitlines()[0].startswith("networkx.exception.NodeNotFound: ")
    assert "(line 4)" in r.error.splitlines()[0]
    assert 'line 6, in <module>' in r.error and 'line 4, in f' in r.error
    assert "networkx/algorithms" not in r.error


@requires_bwrap
async def test_syntax_error_reported_with_line(box: Sandbox) -> None:
    r = await box.run("x = 1\nif x == 1\n    print(x)\n")
    assert not r.ok
    assert r.error.splitlines()[0] == "SyntaxError: expected ':' (line 2)"
    assert "if x == 1" in r.error


@pytest.mark.slow
@requires_bwrap
async def test_non_json_result_is_converted_and_said_so(box: Sandbox) -> None:
    code = ("import numpy as np\nclass Thing:\n    def __repr__(self):\n        return 'Thing()'\n"
            "result = {'s': {3, 1, 2}, 't': (1, 2), 'o': Thing(), (1, 2): 'tuple key', 'a': np.arange(3),"
            " 'f': np.float64(1.5)}\n")
    r = await box.run(code)
    assert r.ok, r.error
    assert r.result == {"s": [1, 2, 3], "t": [1, 2], "o": "Thing()", "(1, 2)": "tuple key", "a": [0, 1, 2],
                        "f": 1.5}
    assert any("set converted to a list" in n for n in r.notes)
    assert any("Thing is not JSON, converted to its repr" in n for n in r.notes)
    assert "[sandbox] note:" in r.stderr


@pytest.mark.slow
@requires_bwrap
async def test_sys_exit_zero_is_a_normal_end_and_os_exit_is_reported(box: Sandbox) -> None:
    r = await box.run("print('a')\nresult = 1\nimport sys\nsys.exit(0)\nprint('b')")
    assert r.ok and r.stdout == "a\n" and r.result == 1
    r = await box.run("import sys\nsys.exit(3)")
    assert not r.ok and r.error.startswith("SystemExit: 3 (line 2)")
    r = await box.run("import os\nos._exit(0)")
    assert not r.ok and "before the sandbox could collect the result" in r.error


@requires_bwrap
async def test_output_is_truncated_to_the_limit(work_dir: Path) -> None:
    box = Sandbox(work_dir, SandboxLimits(timeout_s=5, max_output_bytes=1000))
    r = await box.run("print('x' * 5000)\nimport sys\nprint('e' * 3000, file=sys.stderr)\nresult = 'done'")
    assert r.ok and r.result == "done"
    assert r.stdout.startswith("x" * 1000) and "x" * 1001 not in r.stdout
    assert "output truncated: 4001 more bytes" in r.stdout
    assert r.stderr.startswith("e" * 1000) and "output truncated: 2001 more bytes" in r.stderr


@requires_bwrap
async def test_endless_printing_is_stopped_early(work_dir: Path) -> None:
    box = Sandbox(work_dir, SandboxLimits(timeout_s=20, max_output_bytes=10_000))
    r = await box.run("while True:\n    print('y' * 1000)\n")
    assert not r.ok and not r.timed_out  # stopped after ~1 MB, before the timeout
    assert r.error.startswith("output limit exceeded")
    assert len(r.stdout) < 11_000
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_concurrent_runs(box: Sandbox, work_dir: Path) -> None:
    # Each run says when its sleep began and ended (the host's clock): runs that overlap have intervals that
    # intersect (a bound on the total wall-clock time would be flaky on a loaded machine).
    codes = [f"import time\nbegan = time.time()\ntime.sleep(0.3)\nresult = {i} * {i}\n"
             f"print('run', {i}, began, time.time())" for i in range(6)]
    results = await asyncio.gather(*(box.run(c) for c in codes))
    assert [r.result for r in results] == [i * i for i in range(6)]
    lines = [r.stdout.split() for r in results]
    assert [line[:2] for line in lines] == [["run", str(i)] for i in range(6)]
    spans = [(float(line[2]), float(line[3])) for line in lines]
    assert any(a[0] < b[1] and b[0] < a[1] for i, a in enumerate(spans) for b in spans[i + 1:]), spans
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_concurrent_runs_cannot_see_each_others_files(box: Sandbox) -> None:
    code = ("import os, time\nhere = os.listdir('.sandbox')\ntime.sleep(0.5)\n"
            "result = [here, os.listdir('.sandbox')]")
    results = await asyncio.gather(*(box.run(code) for _ in range(3)))
    for r in results:
        assert r.ok, r.error
        assert len(r.result[0]) == 1 and r.result[0] == r.result[1]  # only its own call's folder


@pytest.mark.slow
@requires_bwrap
async def test_run_does_not_block_the_event_loop(box: Sandbox, work_dir: Path) -> None:
    # `langgraph dev` fails a run that makes a blocking call on the event loop; check the same way it does
    blockbuster = pytest.importorskip("blockbuster")
    bb = blockbuster.BlockBuster()
    bb.functions.pop("threading.Lock.acquire").deactivate()  # as langgraph dev: thread pools need it
    bb.activate()
    try:
        r = await box.run("print('hi')\nresult = 2")
        assert r.ok and r.result == 2, r.error
        r = await box.run("while True:\n    print('x' * 1000)")
        assert r.error.startswith("output limit exceeded")
        task = asyncio.ensure_future(box.run("while True:\n    pass"))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        bb.deactivate()
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_processes_start_in_worker_threads_while_the_loop_runs(
        box: Sandbox, work_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a process started on the event loop's thread stops the loop until the child has exec'd; with a
    # preexec_fn CPython cannot use vfork and copies this process's page tables while it holds the GIL
    loop, loop_thread = asyncio.get_running_loop(), threading.get_ident()
    starts: list[tuple[bool, object, bool]] = []

    class RecordingPopen(subprocess.Popen):
        def __init__(self, *args, **kwargs) -> None:
            off_loop = threading.get_ident() != loop_thread
            loop_ran = threading.Event()
            loop.call_soon_threadsafe(loop_ran.set)  # run by the loop while this process starts, if it can
            starts.append((off_loop, kwargs.get("preexec_fn"), off_loop and loop_ran.wait(60)))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", RecordingPopen)
    results = await asyncio.gather(*(box.run(f"result = {i}") for i in range(10)))
    monkeypatch.undo()
    assert [r.result for r in results] == list(range(10))
    assert starts == [(True, None, True)] * 10
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_the_process_gets_its_resource_limits(hostile: Sandbox, work_dir: Path) -> None:
    import resource

    def expected(kind: int, soft: int, hard: int) -> list[int]:
        ceiling = resource.getrlimit(kind)[1]
        return [soft, hard] if ceiling == resource.RLIM_INFINITY else [min(soft, ceiling), min(hard, ceiling)]

    mb, cpu = 1024 * 1024, HOSTILE.cpu_seconds
    names = {"AS": (HOSTILE.memory_mb * mb,) * 2, "CPU": (cpu, cpu + 1),
             "FSIZE": (HOSTILE.max_file_mb * mb,) * 2, "NOFILE": (512, 512), "CORE": (0, 0)}
    code = ("import resource\n"
            f"result = {{n: resource.getrlimit(getattr(resource, 'RLIMIT_' + n)) for n in {list(names)}}}")
    for r in (await hostile.run(code), hostile.run_sync(code)):
        assert r.ok, r.error
        assert r.result == {n: expected(getattr(resource, "RLIMIT_" + n), *v) for n, v in names.items()}
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
@pytest.mark.parametrize("cancellations", [1, 2])
async def test_cancelling_a_run_while_its_process_starts_leaves_nothing(
        hostile: Sandbox, work_dir: Path, monkeypatch: pytest.MonkeyPatch, cancellations: int) -> None:
    held, release = threading.Event(), threading.Event()
    confine = sb_rlimits._confine

    def slow_confine(*args) -> None:  # the process exists and waits at the gate until this returns
        held.set()
        release.wait(60)
        confine(*args)

    monkeypatch.setattr(sb_rlimits, "_confine", slow_confine)
    task = asyncio.ensure_future(hostile.run("open('ran', 'w').close()\nwhile True:\n    pass\n"))
    assert await asyncio.to_thread(held.wait, 60)
    for _ in range(cancellations):
        task.cancel()
        await asyncio.sleep(0.1)
    assert task.done() == (cancellations == 2)  # once: the run waits for the start, then stops the process
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.gather(*sb_child._background)  # after a second cancellation the stopping goes on without the run
    assert_host_unharmed(work_dir)


@requires_bwrap
async def test_a_process_that_cannot_be_confined_never_runs_the_code(
        box: Sandbox, work_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args) -> None:
        raise RuntimeError("cannot confine")

    monkeypatch.setattr(sb_rlimits, "_confine", refuse)
    with pytest.raises(RuntimeError, match="cannot confine"):
        await box.run("open('ran', 'w').close()")
    with pytest.raises(RuntimeError, match="cannot confine"):
        box.run_sync("open('ran', 'w').close()")
    assert not (work_dir / "ran").exists()
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
def test_run_sync(hostile: Sandbox, work_dir: Path) -> None:
    r = hostile.run_sync("print('sync')\nresult = sum(inputs['xs'])", inputs={"xs": [1, 2, 3]})
    assert r.ok and r.stdout == "sync\n" and r.result == 6
    r = hostile.run_sync("while True:\n    pass")
    assert not r.ok and r.timed_out and r.error == "timed out after 2 s"
    r = hostile.run_sync("x = (")
    assert r.error.startswith("SyntaxError: '(' was never closed (line 1)")
    assert_host_unharmed(work_dir)


@requires_bwrap
async def test_files_written_in_the_work_dir_stay(box: Sandbox, work_dir: Path) -> None:
    (work_dir / "data.csv").write_text("a,b\n1,2\n")
    r = await box.run("rows = open('data.csv').read().splitlines()\nopen('out.txt', 'w').write(rows[1])\n"
                      "result = rows")
    assert r.ok, r.error
    assert r.result == ["a,b", "1,2"]
    assert (work_dir / "out.txt").read_text() == "1,2"
    assert not (work_dir / sb.RUN_DIR_NAME).exists()


def test_bad_inputs_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    box = Sandbox(tmp_path, FAST, allow_weak=True)
    with pytest.raises(TypeError, match="JSON"):
        box.run_sync("pass", inputs={"x": object()})


# ---------------------------------------------------------------------------------------------------------
# hostile code
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@requires_bwrap
async def test_infinite_loop_times_out(hostile: Sandbox, work_dir: Path) -> None:
    started = time.monotonic()
    r = await hostile.run("while True:\n    pass\n")
    assert time.monotonic() - started < 2 + 3
    assert not r.ok and r.timed_out
    assert r.error == "timed out after 2 s"
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_cpu_limit(work_dir: Path) -> None:
    box = Sandbox(work_dir, SandboxLimits(timeout_s=20, cpu_s=1))
    r = await box.run("while True:\n    pass\n")
    assert not r.ok and not r.timed_out
    assert r.error.startswith("CPU time limit of 1 s exceeded")
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
@pytest.mark.parametrize("code", [
    "data = []\nwhile True:\n    data.append(bytearray(10 ** 6))\n",
    "x = bytearray(10 ** 10)\n",
    "import numpy as np\na = np.ones((20000, 20000))\n",
])
async def test_memory_bomb(hostile: Sandbox, work_dir: Path, code: str) -> None:
    r = await hostile.run(code)
    assert not r.ok and not r.timed_out
    assert r.error.startswith("memory limit of 256 MB exceeded (MemoryError)"), r.error
    assert "(line " in r.error.splitlines()[0]
    assert_host_unharmed(work_dir)


@requires_bwrap
@pytest.mark.parametrize("code", [
    "import os\nwhile True:\n    os.fork()\n",
    "import subprocess, sys\nwhile True:\n    subprocess.Popen([sys.executable, '-c', 'pass'])\n",
    "import os\nos.system('sleep 60 &')\nraise SystemExit(0 if os.system('true') == 0 else 1)\n",
    "import multiprocessing\nwhile True:\n    multiprocessing.Process(target=print).start()\n",
])
async def test_fork_bomb_cannot_start_processes(hostile: Sandbox, work_dir: Path, code: str) -> None:
    r = await hostile.run(code)
    assert not r.ok and not r.timed_out
    assert "PermissionError" in r.error or "SystemExit: 1" in r.error, r.error
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
@pytest.mark.skipif(sb_cgroups._pids_cgroup_parent() is None, reason="no pids cgroup can be created here")
async def test_fork_bomb_without_seccomp_is_capped_by_the_pids_cgroup(
        hostile: Sandbox, work_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sb_seccomp, "_seccomp_program", lambda: None)  # take away the first line of defence
    code = ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n")
    r = await hostile.run(code)
    assert not r.ok and r.timed_out and r.error == "timed out after 2 s"
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_process_tree_dies_with_the_pid_namespace(
        hostile: Sandbox, work_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # without seccomp and cgroup, children that leave the process group still die with bwrap's pid 1
    monkeypatch.setattr(sb_seccomp, "_seccomp_program", lambda: None)
    monkeypatch.setattr(sb_cgroups, "_pids_cgroup_parent", lambda: None)
    code = ("import os, time\nfor _ in range(4):\n    if os.fork() == 0:\n        os.setsid()\n"
            "        time.sleep(60)\n        os._exit(0)\n"
            "print('forked', flush=True)\nwhile True:\n    pass\n")
    r = await hostile.run(code)
    assert r.timed_out and r.stdout == "forked\n"
    assert_host_unharmed(work_dir)


@requires_bwrap
async def test_thread_bomb_is_contained(hostile: Sandbox, work_dir: Path) -> None:
    cap = 100000 if sb_cgroups._pids_cgroup_parent() is not None else 2000  # stay gentle where nothing else caps it
    code = (f"import threading, time\nthreading.stack_size(32768)\nn = 0\ntry:\n    while n < {cap}:\n" +
            "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n        n += 1\n"
            "except Exception as exc:\n    print(type(exc).__name__)\nresult = n\n")
    r = await hostile.run(code)
    assert r.ok, r.error
    assert r.result <= HOSTILE.max_processes  # the runner's guard, and the pids cgroup where there is one
    assert r.stdout.strip() == "RuntimeError"
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_cancelling_a_run_kills_it(hostile: Sandbox, work_dir: Path) -> None:
    task = asyncio.ensure_future(hostile.run("while True:\n    pass\n"))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_etc_passwd_and_home_secrets_are_not_visible(
        hostile: Sandbox, work_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    fake_home = tmp_path_factory.mktemp("home")
    (fake_home / ".ssh").mkdir()
    key = fake_home / ".ssh" / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY----- SECRET-KEY-4711\n")
    host_root_line = next((line for line in Path("/etc/passwd").read_text().splitlines()
                           if line.startswith("root:")), "root:x:0:0:")
    code = f"""
import os
seen = {{}}
for path in ["/etc/passwd", "/etc/shadow", {str(key)!r}, os.path.expanduser("~/.ssh/id_rsa"),
             "/root/.ssh/id_rsa", {str(PROJECT_DIR / "pyproject.toml")!r}, {str(PROJECT_DIR / ".env")!r}]:
    try:
        seen[path] = open(path).read()
    except OSError as exc:
        seen[path] = type(exc).__name__
seen["ls /"] = sorted(os.listdir("/"))
seen["ls /root"] = sorted(os.listdir("/root")) if os.path.isdir("/root") else None
seen["ls /etc"] = sorted(os.listdir("/etc"))
result = seen
"""
    r = await hostile.run(code)
    assert r.ok, r.error
    seen = r.result
    text = json.dumps(seen)
    assert host_root_line not in text and "root:x:0:0" not in text
    assert seen["/etc/passwd"].startswith("sandbox:x:65534:65534:")  # a synthetic file naming nobody real
    assert seen["/etc/shadow"] == "FileNotFoundError"
    assert seen[str(key)] == "FileNotFoundError" and "SECRET-KEY-4711" not in text
    assert seen["/root/.ssh/id_rsa"] == "FileNotFoundError"
    assert seen[str(PROJECT_DIR / "pyproject.toml")] == "FileNotFoundError"  # the project dir is not there
    assert seen[str(PROJECT_DIR / ".env")] == "FileNotFoundError"
    assert ".ssh" not in (seen["ls /root"] or [])
    assert "home" not in seen["ls /"] and "run" not in seen["ls /"] and "var" not in seen["ls /"]
    assert "shadow" not in seen["ls /etc"] and "ssh" not in seen["ls /etc"]
    assert_host_unharmed(work_dir)


@requires_bwrap
def test_etc_files_come_from_this_process_s_folder_where_bubblewrap_takes_no_pipes(
        work_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = sb_bwrap._bwrap()
    old = dataclasses.replace(info, options=info.options - {"--ro-bind-data", "--perms"})  # bubblewrap < 0.4
    monkeypatch.setitem(sb_bwrap._probes, info.path, old)
    r = Sandbox(work_dir, FAST).run_sync("result = open('/etc/passwd').read()")
    assert r.ok and r.result.startswith("sandbox:x:65534:65534:"), r.error
    assert (process_dir() / "etc" / "passwd").read_text() == r.result  # removed with the folder at exit


@pytest.mark.slow
@requires_bwrap
async def test_environment_secrets_are_not_inherited(
        hostile: Sandbox, work_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-0815")
    monkeypatch.setenv("KGAGENTS_TEST_SECRET", "hunter2")
    code = """
import os
environs = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            environs[pid] = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
        except OSError as exc:
            environs[pid] = type(exc).__name__
result = {"environ": dict(os.environ), "proc": environs}
"""
    r = await hostile.run(code)
    assert r.ok, r.error
    assert "sk-secret-0815" not in json.dumps(r.result) and "hunter2" not in json.dumps(r.result)
    env = r.result["environ"]
    assert "OPENAI_API_KEY" not in env and "KGAGENTS_TEST_SECRET" not in env
    assert env["HOME"] == str(work_dir)
    assert set(env) <= set(sb_environment._child_env(work_dir, "/tmp")) | {"PWD"}
    assert r.result["proc"]  # bwrap's pid 1 is visible, with a clean environment as well
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_no_network_not_even_loopback(hostile: Sandbox, work_dir: Path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    port = server.getsockname()[1]
    try:
        code = f"""
import socket
outcome = {{}}
for host, port in [("127.0.0.1", {port}), ("1.1.1.1", 53)]:
    try:
        socket.create_connection((host, port), timeout=1).close()
        outcome[host] = "connected"
    except OSError as exc:
        outcome[host] = type(exc).__name__ + ": " + str(exc)
try:
    socket.getaddrinfo("pypi.org", 443)
    outcome["dns"] = "resolved"
except OSError as exc:
    outcome["dns"] = type(exc).__name__
result = outcome
"""
        r = await hostile.run(code)
        assert r.ok, r.error
        assert "connected" not in r.result.values() and r.result["dns"] != "resolved"
        assert r.result["127.0.0.1"].startswith(("ConnectionRefusedError", "OSError"))
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing ever reached the host's server
    finally:
        server.close()
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_writes_outside_the_work_dir_do_not_reach_the_host(
        hostile: Sandbox, work_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    targets = [elsewhere / "planted.txt", PROJECT_DIR / f"planted-{uuid.uuid4().hex}.txt",
               Path(sys.prefix) / "planted.txt", Path("/usr/planted-by-sandbox.txt"),
               Path(sb_environment._python_dirs()[0]) / "lib" / "planted.py"]
    code = f"""
import os
outcome = {{}}
for path in {[str(t) for t in targets]!r}:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("planted")
        outcome[path] = "written (inside the sandbox)"
    except OSError as exc:
        outcome[path] = type(exc).__name__
result = outcome
"""
    try:
        r = await hostile.run(code)
        assert r.ok, r.error
        for target in targets:
            assert not target.exists(), f"{target} appeared on the host"
        # the project dir and the Python installation are read-only; /tmp inside is a private tmpfs (a checkout
        # that lives under /tmp is not visible inside at all, so a write there lands in that private tmpfs)
        refused = {"OSError", "PermissionError"}
        if Path("/tmp") in PROJECT_DIR.parents:
            refused.add("written (inside the sandbox)")
        assert r.result[str(targets[1])] in refused
        assert r.result[str(targets[2])] in {"OSError", "PermissionError"}
    finally:
        for target in targets:
            if target.exists() and target.read_text() == "planted":
                target.unlink()
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_pip_install_fails(hostile: Sandbox, work_dir: Path) -> None:
    code = """
import os, runpy, sys, site
outcome = {}
try:
    import pip
    outcome["import pip"] = "imported"
except ImportError as exc:
    outcome["import pip"] = str(exc)
try:
    sys.argv = ["pip", "install", "six"]
    runpy.run_module("pip", run_name="__main__")
    outcome["runpy pip"] = "ran"
except (ImportError, SystemExit) as exc:
    outcome["runpy pip"] = type(exc).__name__
try:
    import subprocess
    subprocess.run([sys.executable, "-m", "pip", "install", "six"])
    outcome["subprocess pip"] = "ran"
except OSError as exc:
    outcome["subprocess pip"] = type(exc).__name__
try:
    open(os.path.join(site.getsitepackages()[0], "six.py"), "w").write("x = 1")
    outcome["site-packages"] = "writable"
except OSError as exc:
    outcome["site-packages"] = type(exc).__name__
result = outcome
"""
    r = await hostile.run(code)
    assert r.ok, r.error
    assert "installing packages is disabled in the sandbox" in r.result["import pip"]
    assert r.result["runpy pip"] == "ImportError"
    assert r.result["subprocess pip"] == "PermissionError"
    assert r.result["site-packages"] == "OSError"  # read-only file system
    assert_host_unharmed(work_dir)


# ---------------------------------------------------------------------------------------------------------
# disk quota: what the code writes into the work dir, per call and per run
# ---------------------------------------------------------------------------------------------------------

QUOTA = SandboxLimits(timeout_s=10, memory_mb=512,
                      quota=DiskQuota(call_mb=4, call_files=200, run_mb=6, run_files=300))
#: 100 files of 1 MB (each far under the file-size limit) at some 50 MB/s: 4 MB are crossed within a tenth of
#: a second; without a quota it writes all of them (100 MB) and ends well.
WRITE_LOOP = """
import os, time
os.makedirs("out/deep", exist_ok=True)
for i in range(100):
    with open(f"out/deep/part-{i}", "wb") as f:
        f.write(b"x" * 1_000_000)
    time.sleep(0.02)
print("wrote everything")
"""


@pytest.mark.slow
@requires_bwrap
async def test_disk_quota_stops_a_call_while_it_writes(work_dir: Path) -> None:
    (work_dir / "notes.txt").write_text("there before")
    r = await Sandbox(work_dir, QUOTA).run(WRITE_LOOP)
    assert not r.ok and r.error.startswith("disk quota exceeded: the code wrote ")
    assert "MB into its work dir (a call may write 4 MB); it was stopped and what it made there was removed" \
           " (" in r.error
    assert "wrote everything" not in r.stdout and not r.timed_out  # stopped by the quota, mid-loop
    assert sorted(os.listdir(work_dir)) == ["notes.txt"]  # what the call made is gone, the rest is kept
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
def test_disk_quota_counts_files_and_folders(work_dir: Path) -> None:
    code = "import os\nfor i in range(20_000):\n    os.mkdir(f'd{i}')\n    open(f'd{i}/empty', 'w').close()\n"
    r = Sandbox(work_dir, QUOTA).run_sync(code + "print('made them all')")
    assert not r.ok and "files and folders (a call may make 200)" in r.error, r.error
    assert "made them all" not in r.stdout and os.listdir(work_dir) == []
    assert_host_unharmed(work_dir)


@pytest.mark.slow
@requires_bwrap
async def test_disk_quota_of_a_run_adds_up_its_calls(work_dir: Path) -> None:
    box = Sandbox(work_dir, QUOTA)
    write = "open(inputs['name'], 'wb').write(b'x' * 3_500_000)"
    first = await box.run(write, inputs={"name": "first"})
    assert first.ok, first.error  # 3.3 MB: within a call's 4 MB and the run's 6 MB
    r = await box.run(write, inputs={"name": "second"})  # as much again: within a call's quota, not the run's
    assert not r.ok and r.error.startswith("disk quota exceeded: its work dir came to ")
    assert "MB (a run may keep 6 MB)" in r.error and "(1 files and folders)" in r.error
    assert sorted(os.listdir(work_dir)) == ["first"]
    (work_dir / "big").write_bytes(b"x" * 4_000_000)  # the host put more there: the run is over its quota
    r = await box.run("open('tiny', 'w').write('x')")
    assert not r.ok and "(a run may keep 6 MB)" in r.error and not (work_dir / "tiny").exists()
    r = await box.run("import os\nos.remove('big')\nopen('tiny', 'w').write('x')")  # a call may free room
    assert r.ok, r.error
    assert sorted(os.listdir(work_dir)) == ["first", "tiny"]
    assert_host_unharmed(work_dir)


# ---------------------------------------------------------------------------------------------------------
# without bubblewrap
# ---------------------------------------------------------------------------------------------------------


def test_missing_bubblewrap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    kind, description = isolation_status()
    assert kind == "none" and "bubblewrap not found" in description
    with pytest.raises(SandboxUnavailable) as info:
        Sandbox(tmp_path)
    message = str(info.value)
    assert "bubblewrap" in message and "KGAGENTS_ALLOW_WEAK_SANDBOX=1" in message


def test_unusable_bubblewrap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: "/bin/false")
    kind, description = isolation_status()
    assert kind == "none" and "unusable" in description
    with pytest.raises(SandboxUnavailable, match="KGAGENTS_ALLOW_WEAK_SANDBOX=1"):
        Sandbox(tmp_path)


@pytest.mark.slow
async def test_weak_mode_when_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-0815")
    work_dir = tmp_path / "work"
    _BASELINE[work_dir] = set(_descendants(os.getpid()))
    box = Sandbox(work_dir, SandboxLimits(timeout_s=2, memory_mb=256), allow_weak=True)
    r = await box.run("import os, networkx\nprint(os.getcwd())\nresult = os.environ.get('OPENAI_API_KEY')")
    assert r.ok, r.error
    assert r.isolation == "weak" and r.result is None and r.stdout == f"{work_dir}\n"
    r = await box.run("while True:\n    pass\n")
    assert r.timed_out and r.error == "timed out after 2 s" and r.isolation == "weak"
    r = await box.run("x = bytearray(10 ** 10)")
    assert r.error.startswith("memory limit of 256 MB exceeded")
    r = box.run_sync("result = 1 + 1")
    assert r.ok and r.result == 2 and r.isolation == "weak"
    if sb_seccomp._weak_seccomp_program() is not None:  # the seccomp filter still keeps it from starting processes
        r = await box.run("import os\nos.fork()")
        assert "PermissionError" in r.error
    assert_host_unharmed(work_dir)


def test_result_type() -> None:
    r = SandboxResult(ok=True, stdout="", stderr="", error=None)
    assert r.result is None and r.exit_code is None and r.timed_out is False and r.isolation == "bwrap"
    assert SandboxLimits().cpu_seconds == 31 and SandboxLimits(timeout_s=2.5).cpu_seconds == 4


@pytest.mark.slow
def test_output_pipes_are_closed_once_under_uvloop(work_dir):
    """Under uvloop (what ``langgraph dev`` runs), concurrent calls while the process opens and closes many
    sockets: every call's output arrives and every connection works. A pipe fd closed twice (by the loop and
    again through its file object) closes whatever got that number in between; under ``langgraph dev``'s load
    that broke runs (tests/test_studio.py's fifty concurrent runs show it)."""
    import uvloop

    box = Sandbox(work_dir, FAST)

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    async def main() -> tuple[list[str], int]:
        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        async def talk(i: int) -> bool:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"hello {i}\n".encode())
            await writer.drain()
            ok = await reader.readline() == f"hello {i}\n".encode()
            writer.close()
            return ok

        async def chatter() -> int:
            done = 0
            for round_ in range(40):
                done += sum(await asyncio.gather(*(talk(round_ * 10 + i) for i in range(10))))
            return done

        calls = asyncio.gather(*(box.run(f"print('call {i}')", result_var=None) for i in range(16)))
        results, talked = await asyncio.gather(calls, chatter())
        server.close()
        return [r.stdout.strip() for r in results], talked

    outputs, talked = uvloop.run(main())
    assert outputs == [f"call {i}" for i in range(16)] and talked == 400


def _off_network_or_skip() -> None:
    """Weak isolation's network namespace needs a kernel that gives unprivileged user namespaces: CI's does."""
    if not sb.weak_network_isolation():
        if os.environ.get("KGAGENTS_CI"):
            pytest.fail("this machine gives no unprivileged network namespace")
        pytest.skip("no unprivileged network namespace here (weak isolation reaches the network)")


@pytest.mark.slow
async def test_weak_mode_keeps_code_off_the_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bubblewrap, a call still gets a network namespace of its own: the host's loopback is out of
    reach, and the start-up message says so."""
    _off_network_or_skip()
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        box = Sandbox(tmp_path / "work", SandboxLimits(timeout_s=10), allow_weak=True)
        r = await box.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)")
        assert r.isolation == "weak" and not r.ok and ("OSError" in r.error or "unreachable" in r.error), r.error
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
        r = await box.run("result = open('x.txt', 'w').write('still writes its work dir')")
        assert r.ok and (tmp_path / "work" / "x.txt").read_text() == "still writes its work dir"
    finally:
        listener.close()
    kind, description = isolation_status()
    assert kind == "none" and "a network namespace of their own: no network" in description


def test_weak_mount_plan_hides_folders_and_binds_the_kept_ones_back() -> None:
    """The plan makes the whole file system read-only first, then runs from the root down; a folder kept wins
    over the same folder hidden; steps that change nothing are left out; / , the system's folders and what
    holds them are never hidden, a folder inside one is (``/dev/shm``, a project in ``/usr``)."""
    plan = sb.weak_mount_plan(
        hidden=["/tmp", "/tmp/kgagents-proc-1", "/root", "/", "/usr/src/app", "/var/tmp", "/srv/runs/work",
                "/srv/runs/work/a/.sandbox", "/etc", "/dev/shm"],
        writable_hidden=["/tmp", "/dev/shm"],
        keep_rw=["/srv/runs/work/a", "/srv/runs/work/a/.sandbox/run-1", "/home/me/w"],
        keep_ro=["/root/.pyenv/versions/3.12", "/opt/venv", "/srv/runs/work/a"])
    assert [(s.kind, s.path, s.writable) for s in plan] == [
        ("readonly", "/", False), ("tmpfs", "/root", False), ("tmpfs", "/tmp", True),
        ("tmpfs", "/dev/shm", True), ("tmpfs", "/var/tmp", False), ("bind", "/home/me/w", True),
        ("tmpfs", "/srv/runs/work", False), ("tmpfs", "/usr/src/app", False),
        ("bind", "/root/.pyenv/versions/3.12", False), ("bind", "/srv/runs/work/a", True),
        ("tmpfs", "/srv/runs/work/a/.sandbox", False), ("bind", "/srv/runs/work/a/.sandbox/run-1", True)]
    # a writable folder is bound back writable wherever it lies; a read-only one only over a hidden folder
    plan = sb.weak_mount_plan([], [], ["/opt/venv/work", "/srv/w"], ["/opt/venv"])
    assert [(s.kind, s.path, s.writable) for s in plan] == [("readonly", "/", False), ("bind", "/srv/w", True),
                                                          ("bind", "/opt/venv/work", True)]
    # a folder that holds the system is not hidden, nor one of the system's own
    assert sb.weak_mount_plan(["/", "/usr", "/lib", "/dev", "/proc", "/etc"], [], [], []) == [
        sb.MountStep("readonly", "/", False)]
    assert [sb.may_hide(p) for p in ("/", "/usr", "/dev", "/usr/local", "/dev/shm", "/usr/src/app", "/srv")] == [
        False, False, False, True, True, True, True]


def test_a_python_installation_under_usr_stays_read_only_and_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python Docker image (``sys.prefix == /usr/local``, no virtual environment) run from
    ``WORKDIR /usr/src/app``: the plan leaves nothing of the installation writable (code cannot plant a ``.pth``
    or ``sitecustomize.py`` that runs at kgagents' next start), and binds it back where a hidden folder holds
    it (run from ``/usr/local`` or ``/usr/local/lib``)."""
    import site
    import sysconfig

    for name in ("prefix", "exec_prefix", "base_prefix", "base_exec_prefix"):
        monkeypatch.setattr(sys, name, "/usr/local")
    stdlib, site_packages = "/usr/local/lib/python3.12", "/usr/local/lib/python3.12/site-packages"
    monkeypatch.setattr(site, "getsitepackages", lambda: [site_packages])
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"stdlib": stdlib, "platstdlib": stdlib,
                                                         "purelib": site_packages, "platlib": site_packages})
    monkeypatch.setattr(Path, "exists", lambda self: str(self).startswith("/usr/local"))
    kept = [os.fspath(p) for p in sb_environment._python_dirs(weak=True)]
    assert kept[:3] == ["/usr/local", stdlib, site_packages]
    assert sb_environment._python_dirs() == []  # bubblewrap binds all of /usr
    for hidden in (["/usr/src/app"], ["/usr/local"], ["/usr/local/lib"]):
        plan = sb.weak_mount_plan(hidden + ["/usr/local/lib/python3.12/site-packages/x"], [], ["/srv/w"], kept)
        for needed in (stdlib, site_packages, os.path.join(site_packages, "numpy")):
            steps = [step for step in plan if sb_weak._within(needed, step.path)]
            assert steps[-1].kind in ("readonly", "bind") and not steps[-1].writable, (hidden, needed, plan)


def test_weak_isolation_says_what_it_shares() -> None:
    for network in (True, False):
        hidden, shared = sb.weak_isolation_text(network, True), sb.weak_isolation_text(network, False)
        assert "are hidden" in hidden and "share" not in hidden
        assert "share the temp folders (where the KG servers keep their sockets and files)" in shared
        for text in (hidden, shared):
            assert ("no network" in text) == network and ("can reach the network" in text) != network


def test_without_a_mount_namespace_the_start_up_line_says_weak_mode_shares_the_servers_files(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    monkeypatch.setattr(sb_weak, "weak_mount_isolation", lambda: False)
    kind, description = isolation_status()
    assert kind == "none"
    assert "share the temp folders (where the KG servers keep their sockets and files)" in description


def _mount_namespace_or_skip() -> None:
    if not sb.weak_mount_isolation():
        if os.environ.get("KGAGENTS_CI"):
            pytest.fail("this machine gives no unprivileged mount namespace")
        pytest.skip("no unprivileged mount namespace here (weak isolation shares the host's folders)")


@pytest.mark.slow
async def test_weak_mode_hides_the_hosts_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bubblewrap, a call gets a mount namespace of its own: the user's home, the project folder the
    application runs in (its ``.env``), the data folder, other runs' work dirs, the temp folder and ``/run`` are
    empty; other processes' ``/proc`` entries (a way round the mounts) do not exist; the code cannot unmount
    what hides them nor write the Python installation; its work dir and a private ``/tmp`` still work."""
    _mount_namespace_or_skip()
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    secret, scratch = f"secret-{uuid.uuid4().hex}", f"scratch-{uuid.uuid4().hex}"
    planted = f"kgagents-test-planted-{uuid.uuid4().hex}.pth"  # an empty file: nothing runs if it gets there
    home, project, data = tmp_path / "home", tmp_path / "project", tmp_path / "data"
    for folder in (home / ".ssh", project / ".kgagents", data / "runs" / "work" / "other"):
        folder.mkdir(parents=True)
    for path in (home / ".ssh" / "id_ed25519", project / ".env", data / "runs" / "work" / "other" / "notes.txt"):
        path.write_text(secret)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KGAGENTS_HOME", str(data))
    monkeypatch.chdir(project)
    work_dir = data / "runs" / "work" / "mine"
    _BASELINE[work_dir] = set(_descendants(os.getpid()))
    box = Sandbox(work_dir, SandboxLimits(timeout_s=20), allow_weak=True)
    paths = [str(home / ".ssh" / "id_ed25519"), str(project / ".env"),
             str(data / "runs" / "work" / "other" / "notes.txt"), f"/proc/{os.getpid()}/root{project}/.env",
             f"/proc/{os.getpid()}/environ", f"/proc/{os.getpid()}/cwd/.env"]
    code = f"""
import ctypes, os, sys
read = {{}}
for path in {paths!r}:
    try:
        read[path] = open(path).read()
    except OSError as exc:
        read[path] = type(exc).__name__
libc = ctypes.CDLL(None, use_errno=True)
unmounted = [libc.umount2(p.encode(), 2) == 0 for p in ("/tmp", {str(home)!r}, "/run")]
try:
    open(os.path.join(sys.prefix, {planted!r}), "w").write("")
    planted = True
except OSError:
    planted = False
open("/tmp/{scratch}", "w").write("x")
open("mine.txt", "w").write("mine")
result = {{"read": read, "unmounted": unmounted, "planted": planted, "pid": os.getpid(),
          "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
          "tmp": sorted(os.listdir("/tmp")), "run": os.listdir("/run")}}
"""
    try:
        r = await box.run(code)
    finally:  # what the code could write where it can reach the host's folders is not left there
        (Path(sys.prefix) / planted).unlink(missing_ok=True)
        shared_tmp = Path(tempfile.gettempdir(), scratch)
        wrote_shared_tmp = shared_tmp.exists()
        shared_tmp.unlink(missing_ok=True)
    assert r.ok, r.error
    assert r.isolation == "weak"
    got = r.result
    assert secret not in json.dumps(got["read"]), got["read"]
    assert got["unmounted"] == [False, False, False] and not got["planted"]
    assert got["pid"] == 2 and got["processes"] == [1, 2]  # its own pid namespace: no other process to look into
    assert got["run"] == [] and scratch in got["tmp"] and not wrote_shared_tmp
    assert (work_dir / "mine.txt").read_text() == "mine"
    assert_host_unharmed(work_dir)


def _scratch_in(*parents: str) -> Path:
    """A folder of the test's own in the first of ``parents`` that this user may write (folders the weak mode does
    not hide), removed by the caller; a skip where there is none."""
    for parent in parents:
        if os.path.isdir(parent) and os.access(parent, os.W_OK):
            return Path(tempfile.mkdtemp(prefix="kgagents-test-", dir=parent))
    pytest.skip(f"none of {', '.join(parents)} is writable here")


#: Weak-mode code that tries to write: each path opened for writing (created if ``O_CREAT`` is given), the whole
#: file system remounted writable, and what happened to each.
_WRITER = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
tried = {}
for path, create in TARGETS:
    try:
        os.close(os.open(path, os.O_WRONLY | (os.O_CREAT if create else 0), 0o600))
        tried[path] = "opened for writing"
    except OSError as exc:
        tried[path] = type(exc).__name__ + ": " + os.strerror(exc.errno)
class MountAttr(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in ("attr_set", "attr_clr", "propagation", "userns_fd")]
long = ctypes.c_long
writable = MountAttr(0, 1, 0, 0)  # clear MOUNT_ATTR_RDONLY, recursively (AT_RECURSIVE)
remounted = [libc.mount(None, p.encode(), None, 32 | 4096, None) == 0 for p in ("/", "/proc")] + [
    libc.syscall(long(442), long(-100), ctypes.c_char_p(p.encode()), long(0x8000), ctypes.byref(writable),
                 long(32)) == 0 for p in ("/", "/proc")]
result = {"tried": tried, "remounted": remounted}
'''


@pytest.mark.slow
@pytest.mark.parametrize("how", ["mount_setattr", "a remount per mount"])
def test_weak_mode_code_writes_nothing_but_its_work_dir_and_private_temp_folders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Weak mode makes the whole file system read-only (with mount_setattr(2), or on a kernel without it a
    read-only remount of each mount point), ``/proc`` included, and binds back only the work dir writable:
    where the application runs as root (a container; uid 0 is itself in the call's user namespace) the code can
    plant no ``.pth`` under ``/usr`` that runs at kgagents' next start, write no ``/etc`` file, no cgroup file,
    no sysctl (``core_pattern`` names a program the kernel runs as root), nor anything in a folder beside the
    hidden ones; and it cannot remount a mount writable. Its work dir, ``/tmp`` and ``/dev/shm`` still work."""
    _mount_namespace_or_skip()
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    if how != "mount_setattr":  # a syscall number no kernel has: ENOSYS, as from a kernel before 5.12
        runner = sb_environment._RUNNER.replace("_MOUNT_ATTR_RDONLY = 442,", "_MOUNT_ATTR_RDONLY = 99999,")
        assert runner != sb_environment._RUNNER
        monkeypatch.setattr(sb_environment, "_RUNNER", runner)
    beside = _scratch_in("/srv", "/opt", "/var/lib", "/usr/local/lib")  # none of them hidden
    planted = [beside / "planted.pth"]
    under_usr = Path(tempfile.mkdtemp(prefix="kgagents-test-", dir="/usr/local/lib")) if os.access(
        "/usr/local/lib", os.W_OK) else None
    if under_usr is not None:
        planted.append(under_usr / "planted.pth")
    targets = [(str(p), True) for p in planted] + [
        (p, False) for p in ("/etc/hostname", "/proc/sys/kernel/core_pattern", "/proc/self/oom_score_adj",
                             "/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/pids/cgroup.procs")
        if os.path.exists(p) and os.access(p, os.W_OK)]  # opened, never written: the host's own stay as they are
    scratch = [f"/tmp/kgagents-test-{uuid.uuid4().hex}", f"/dev/shm/kgagents-test-{uuid.uuid4().hex}"]
    targets += [("mine.txt", True)] + [(path, True) for path in scratch]
    try:
        box = Sandbox(tmp_path / "work", SandboxLimits(timeout_s=20), allow_weak=True)
        r = box.run_sync(f"TARGETS = {targets!r}\n" + _WRITER)
        left = [str(p) for p in planted if p.exists()] + [p for p in scratch if os.path.exists(p)]
    finally:
        shutil.rmtree(beside, ignore_errors=True)
        for path in scratch:  # where private folders hid nothing
            Path(path).unlink(missing_ok=True)
        if under_usr is not None:
            shutil.rmtree(under_usr, ignore_errors=True)
    assert r.ok, r.error
    tried = r.result["tried"]
    writable = {"mine.txt", *scratch}
    assert {path for path, how in tried.items() if how == "opened for writing"} == writable, tried
    assert all("Read-only file system" in how for path, how in tried.items() if path not in writable), tried
    assert left == [] and r.result["remounted"] == [False] * 4
    assert (tmp_path / "work" / "mine.txt").exists()


@pytest.mark.slow
def test_weak_mode_code_gets_a_private_dev_shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``/dev/shm`` is a folder in a system folder, and yet the host's is hidden: the code sees a tmpfs of its
    own there (of ``max_file_mb``), not what other processes keep in the host's, and what it writes there stays
    out of the host's memory."""
    _mount_namespace_or_skip()
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    host = _scratch_in("/dev/shm")
    planted = Path("/dev/shm") / f"kgagents-test-planted-{uuid.uuid4().hex}"
    try:
        (host / "secret").write_text("secret-of-the-host")
        box = Sandbox(tmp_path / "work", SandboxLimits(timeout_s=20), allow_weak=True)
        r = box.run_sync(f"""
import os
try:
    seen = open({str(host / 'secret')!r}).read()
except OSError as exc:
    seen = type(exc).__name__
open({str(planted)!r}, "w").write("from the sandbox")
result = [seen, os.listdir("/dev/shm")]
""")
        wrote_to_host = planted.exists()
    finally:
        shutil.rmtree(host, ignore_errors=True)
        planted.unlink(missing_ok=True)
    assert r.ok, r.error
    assert r.result == ["FileNotFoundError", [planted.name]] and not wrote_to_host


@pytest.mark.slow
def test_a_project_under_usr_keeps_its_env_and_data_folder_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python Docker image's layout runs the application from ``WORKDIR /usr/src/app``: its ``.env`` and
    its ``./.kgagents`` data folder (other runs' work dirs) are hidden as anywhere else, as the start-up line
    says."""
    _mount_namespace_or_skip()
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    project = _scratch_in("/usr/src", "/usr/local")
    try:
        (project / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
        other = project / ".kgagents" / "runs" / "work" / "other-thread" / "python"
        other.mkdir(parents=True)
        (other / "notes.txt").write_text("another run's notes")
        monkeypatch.chdir(project)
        monkeypatch.delenv("KGAGENTS_HOME", raising=False)
        monkeypatch.delenv("KGAGENTS_RUNS_DIR", raising=False)
        work = project / ".kgagents" / "runs" / "work" / "my-thread" / "python"
        box = Sandbox(work, SandboxLimits(timeout_s=20), allow_weak=True)
        r = box.run_sync(f"""
found = {{}}
for p in ({str(project / '.env')!r}, {str(other / 'notes.txt')!r}):
    try:
        found[p] = open(p).read()
    except OSError as exc:
        found[p] = type(exc).__name__
result = found
""")
    finally:
        shutil.rmtree(project, ignore_errors=True)
    assert r.ok, r.error
    assert set(r.result.values()) == {"FileNotFoundError"}, r.result
    assert "the folder kgagents runs in" in sb.weak_isolation_text(True, True)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["weak", "bwrap"])
def test_the_result_file_is_not_read_through_a_link_the_code_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """The code can replace its job folder's ``result.json`` with a symbolic link (or a FIFO, or a hard link):
    the application reads the result outside every namespace, so it would follow the link to any JSON file its
    user may read (the hidden home, another run's work dir) and hand its ``error`` and ``result`` to the model.
    The result file is taken only as a regular file of its own; else the call has no result."""
    if mode == "weak":
        _mount_namespace_or_skip()
        monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    elif not HAVE_BWRAP:
        pytest.skip("no bubblewrap here")
    home = tmp_path / "home"
    home.mkdir()
    (home / "creds.json").write_text('{"ok": true, "error": "token=hunter2", "result": "a secret of the home"}')
    monkeypatch.setenv("HOME", str(home))
    box = Sandbox(tmp_path / "work", SandboxLimits(timeout_s=20), allow_weak=True)
    assert box.isolation == mode
    for replace in ("os.symlink({secret!r}, status)", "os.mkfifo(status)", "os.link(sys.argv[1], status)"):
        r = box.run_sync(f"""
import os, sys
try:
    open({str(home / 'creds.json')!r})
    print("the code sees the file itself")
except OSError:
    pass
status = sys.argv[2]
if os.path.lexists(status):
    os.unlink(status)
{replace.format(secret=str(home / 'creds.json'))}
os._exit(0)
""")
        assert "sees the file itself" not in r.stdout
        assert r.result is None and "hunter2" not in str(r.error), (replace, r)
        assert r.error == "the process ended before the sandbox could collect the result (os._exit?)", r.error


def test_the_result_file_is_taken_only_as_a_regular_file_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.json").write_text('{"result": "elsewhere"}')
    (tmp_path / "result.json").write_text('{"result": 1}')
    assert sb.read_result_file(tmp_path / "result.json", 100) == {"result": 1}
    assert sb.read_result_file(tmp_path / "result.json", 5) is None  # over the size limit
    os.link(tmp_path / "result.json", tmp_path / "second")
    assert sb.read_result_file(tmp_path / "result.json", 100) is None  # a hard link: which file is it?
    (tmp_path / "link.json").symlink_to(tmp_path / "elsewhere.json")
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "list.json").write_text("[1]")
    for name in ("link.json", "fifo.json", "list.json", "missing.json"):
        assert sb.read_result_file(tmp_path / name, 100) is None, name
