"""The temporary folders kgagents makes: gone when the process ends, and what killed processes left is removed
by ``kgagents clean`` (never a folder in use or one the user made)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kgagents import cli
from kgagents.core import tempdirs
from kgagents.tools.sandbox import isolation_status

pytestmark = pytest.mark.slow

PROJECT_DIR = Path(__file__).resolve().parents[1]
requires_bwrap = pytest.mark.skipif(isolation_status()[0] != "bwrap", reason="no bubblewrap here")

#: A run without a checkpointer (its work dir, a sandbox call in it) in the main process and in a
#: multiprocessing worker from a fork server (as ``kgagents eval --processes`` starts them), which ends with
#: os._exit and so skips atexit.
RUNS = """
import multiprocessing
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.runtime import for_run, new_run_key, work_dir_for
from kgagents.tools.sandbox import Sandbox


def run():
    work = work_dir_for(KGoTContext(), for_run(None, new_run_key(None)))
    result = Sandbox(work / "kg").run_sync("open('out.txt', 'w').write('x')\\n"
                                           "result = open('/etc/passwd').read()")
    assert result.ok and result.result.startswith("sandbox:"), result.error
    (work / "tools").mkdir()
    (work / "tools" / "notes.txt").write_text("a tool's file")


if __name__ == "__main__":
    run()
    worker = multiprocessing.get_context("forkserver").Process(target=run)
    worker.start()
    worker.join()
    assert worker.exitcode == 0
"""


def _run_python(script: Path, temp_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(temp_dir)}
    return subprocess.run([sys.executable, str(script)], env=env, cwd=PROJECT_DIR, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.slow
@requires_bwrap
def test_processes_leave_nothing_in_the_temporary_directory(tmp_path: Path) -> None:
    temp_dir = tmp_path / "tmp"
    temp_dir.mkdir()
    script = tmp_path / "runs.py"
    script.write_text(RUNS)
    done = _run_python(script, temp_dir)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(temp_dir)) == []
    # a process that runs code in a work dir of its own and is then killed: it had nothing in the temp dir
    script.write_text("import os\nfrom kgagents.tools.sandbox import Sandbox\n"
                      f"assert Sandbox({str(tmp_path / 'work')!r}).run_sync('result = 1').ok\nos._exit(0)\n")
    done = _run_python(script, temp_dir)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(temp_dir)) == []


def test_clean_removes_what_ended_processes_left_and_nothing_else(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    temp_dir = tmp_path / "tmp"
    temp_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp_dir))
    # a process that was killed (os._exit: no clean-up) with a run's files, a read-only folder among them
    script = tmp_path / "killed.py"
    script.write_text("import os\nfrom kgagents.core.tempdirs import process_dir\n"
                      "run = process_dir() / 'runs' / 'r1'\n(run / 'ro').mkdir(parents=True)\n"
                      "(run / 'ro' / 'out.txt').write_text('x' * 5000)\nos.chmod(run / 'ro', 0o500)\n"
                      "print(os.getpid(), flush=True)\nos._exit(0)\n")
    done = _run_python(script, temp_dir)
    assert done.returncode == 0, done.stderr
    dead_pid = int(done.stdout)
    [killed] = temp_dir.glob(f"{tempdirs.PREFIX}{dead_pid}-*")
    probe = temp_dir / f"{tempdirs.PREFIX}{dead_pid}-sandbox-probe-x1y2z3"  # killed while probing bubblewrap
    probe.mkdir()
    # in use: this process's folder, and one held by a process of another pid namespace (its pid unknown here)
    monkeypatch.setattr(tempdirs, "_current", None)
    mine = tempdirs.process_dir()
    elsewhere = temp_dir / f"{tempdirs.PREFIX}{dead_pid}-held"
    elsewhere.mkdir()
    held = os.open(elsewhere, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_SH)
    # an earlier version's /etc folders, one unused for two days, one made a minute ago; folders of the user's
    old_etc, new_etc = temp_dir / "kgagents-sandbox-etc-ab12cd34", temp_dir / "kgagents-sandbox-etc-ef56gh78"
    users = [temp_dir / "kgagents-sandbox-etc-notes123", temp_dir / "kgagents-my-run", temp_dir / "other"]
    for folder in [old_etc, new_etc, *users]:
        folder.mkdir()
        (folder / "passwd").write_text("sandbox:x:65534:65534:")
    (users[0] / "notes.txt").write_text("the user's")
    two_days_ago = time.time() - 2 * 86400
    for path in [old_etc / "passwd", old_etc, users[0] / "passwd", users[0] / "notes.txt", users[0]]:
        os.utime(path, (two_days_ago, two_days_ago))
    try:
        assert cli.main(["clean", "--dry-run"]) == 0
        listed = capsys.readouterr().out
        assert f"would remove {killed} (4.9 KB; process {dead_pid} has ended)" in listed
        assert f"would remove {old_etc} (22 bytes; sandbox /etc of an earlier kgagents version" in listed
        assert f"would remove {probe} (0 bytes; process {dead_pid} has ended)" in listed
        assert len(listed.splitlines()) == 3 and killed.exists() and old_etc.exists() and probe.exists()
        assert cli.main(["clean"]) == 0
        assert capsys.readouterr().out.count("removed ") == 3
        assert sorted(temp_dir.iterdir()) == sorted([mine, elsewhere, new_etc, *users])
        assert cli.main(["clean"]) == 0
        assert capsys.readouterr().out == f"nothing to clean in {temp_dir}\n"
    finally:
        os.close(held)
    assert [s.path for s in tempdirs.stale_dirs()] == [elsewhere]  # no longer held: its process is gone
