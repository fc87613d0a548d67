"""The sandbox's runner as a module of its own (tools/sandbox/runner.py): what it imports, how it turns results
and errors into what the model reads, and one job run through it without the sandbox around it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from kgagents.tools import sandbox
from kgagents.tools.sandbox import environment
from kgagents.tools.sandbox import runner as sandbox_runner
from kgagents.tools.sandbox.runner import _jsonable, _llm_error, mount_points

RUNNER = Path(sandbox_runner.__file__)


def test_the_runner_imports_the_standard_library_only():
    """It runs in an interpreter that sees nothing of kgagents (``-s -P``, no site-packages of ours)."""
    imported = set()
    for node in ast.walk(ast.parse(RUNNER.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").partition(".")[0])
    assert imported and imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_the_sandbox_hands_over_the_runners_own_text():
    assert RUNNER.read_text(encoding="utf-8") == environment._RUNNER
    assert sandbox.LLM_FILENAME == sandbox_runner.LLM_FILENAME


def test_results_become_json_with_a_note_for_each_conversion():
    loop: list = []
    loop.append(loop)
    notes: list[str] = []
    value = {"s": {3, 1, 2}, 1: (True, None), "loop": loop, "obj": object}
    out = _jsonable(value, "result", notes)
    assert out["s"] == [1, 2, 3] and out["1"] == [True, None]
    assert out["loop"][0].startswith("[[...]]") and out["obj"] == repr(object)
    assert json.loads(json.dumps(out)) == out
    assert any("set converted to a list" in n for n in notes)
    assert any("refers to itself" in n for n in notes) and any("type is not JSON" in n for n in notes)


def test_the_mount_points_of_a_mountinfo_text():
    """Where weak isolation finds no mount_setattr(2), it remounts each mount point read-only: the fifth field of
    each line, with the kernel's octal escapes (space, tab, newline, backslash) undone."""
    text = ("22 27 0:21 / /proc rw,relatime - proc proc rw\n"
            "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
            "30 25 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw\n"
            "41 27 0:40 / /srv/my\\040disk\\011x\\134y rw shared:1 - ext4 /dev/vdb rw\n")
    assert mount_points(text) == ["/proc", "/", "/dev/shm", "/srv/my disk\tx\\y"]
    assert mount_points("") == []


def test_an_error_shows_the_llm_codes_frames_only_and_at_most_max_frames():
    code = "def f(n):\n    return f(n - 1) if n else 1 / 0\nf(9)\n"
    try:
        exec(compile(code, sandbox_runner.LLM_FILENAME, "exec"), {})
    except ZeroDivisionError as exc:
        text = _llm_error(exc, 256, 3)
    assert text.startswith("ZeroDivisionError: division by zero (line 2)")
    assert "8 earlier frames left out" in text and text.count(f'File "{sandbox_runner.LLM_FILENAME}"') == 3
    try:
        compile("x = (", sandbox_runner.LLM_FILENAME, "exec")
    except SyntaxError as exc:
        assert _llm_error(exc, 256, 3).startswith("SyntaxError: '(' was never closed (line 1)")


def test_a_job_runs_through_the_runner_file(tmp_path):
    """The runner as the sandbox starts it (``-c`` with its text), here without bubblewrap around it."""
    job = {"inputs": {"n": 4}, "prelude": "base = 10", "code": "out = base + inputs['n']\nprint('hi')",
           "postlude": "", "result_var": "out", "memory_mb": 256, "max_threads": 2, "max_frames": 6,
           "seccomp": None}
    (tmp_path / "job.json").write_text(json.dumps(job), encoding="utf-8")
    done = subprocess.run([sys.executable, "-s", "-P", "-B", "-c", environment._RUNNER, str(tmp_path / "job.json"),
                           str(tmp_path / "result.json")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\n"
    assert json.loads((tmp_path / "result.json").read_text()) == {"ok": True, "error": None, "result": 14,
                                                                   "notes": []}
