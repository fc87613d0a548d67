"""The file tools read only the task's attachments, the run's work dir and the user's roots: absolute paths,
``~``, ``file://``, ``../``, symbolic links (also ones swapped in after the check), /proc, /sys and /dev, FIFOs."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from kgagents.core.config import Settings, get_settings
from kgagents.tools.base import ToolFailure, run_tool_with_retry
from kgagents.tools.files import access
from kgagents.tools.files.image import make_image_inspector
from kgagents.tools.files.inspector import make_extract_zip, make_text_inspector
from kgagents.tools.manager import ToolEnv
from tests.tools import files as F
from tests.tools.conftest import make_env, scripted

SECRET = "kgagents-secret-7f3a"
OUTSIDE = "outside the files this task may read"


async def run(tool, args, env):
    return await run_tool_with_retry(tool, args, max_retries=env.max_retries, backoff_base_s=0.01,
                                     backoff_max_s=0.02, max_output_chars=env.max_output_chars)


@pytest.fixture
def secret(tmp_path) -> Path:
    """Another folder's ``.env`` next to the run's work dir (``tmp_path/work``)."""
    other = tmp_path / "other-project"
    other.mkdir()
    path = other / ".env"
    path.write_text(f"OPENAI_API_KEY={SECRET}\n")
    return path


@pytest.fixture
def tool_env(tmp_path, settings) -> ToolEnv:
    """A tool environment with a model (so that the image tool gets as far as reading the file)."""
    env = make_env(tmp_path, settings, llm=scripted({"content": f"the model saw {SECRET}?", "times": 0}))
    env.work_dir.mkdir(parents=True)
    return env


def tools_of(env: ToolEnv) -> list[tuple[object, str]]:
    return [(make_text_inspector(env), "file_path"), (make_image_inspector(env), "image_path"),
            (make_extract_zip(env), "zip_path")]


def refused_paths(secret: Path) -> list[str]:
    return [str(secret), f"file://{secret}", f"../{secret.parent.name}/.env", "/etc/passwd", "~/.env",
            "/proc/self/environ", "/proc/self/cmdline", "/sys/kernel/osrelease", "/dev/null", "/dev/shm",
            "notes.txt\0/../../etc/passwd"]


async def test_every_file_tool_refuses_paths_outside_the_task(tool_env, secret):
    for tool, arg in tools_of(tool_env):
        for path in refused_paths(secret):
            result = await run(tool, {arg: path}, tool_env)
            assert not result.ok and result.attempts == 1, (tool.name, path, result.output)
            assert any(why in result.output for why in (OUTSIDE, "which the file tools never read", "NUL")), \
                result.output
            assert SECRET not in result.output and "root:" not in result.output
    assert not any(SECRET in prompt for prompt in tool_env.llm.calls)


async def test_proc_sys_and_dev_stay_closed_even_under_a_root_of_everything(tmp_path, settings):
    env = make_env(tmp_path, Settings(file_roots=(Path("/"),)))
    tool = make_text_inspector(env)
    for path in ["/proc/self/environ", "/proc/1/status", "/sys/kernel/osrelease", "/dev/null", "/dev/../dev/null"]:
        result = await run(tool, {"file_path": path}, env)
        assert not result.ok and "which the file tools never read" in result.output, result.output
    hosts = await run(tool, {"file_path": "/etc/hostname" if Path("/etc/hostname").exists() else "/etc/passwd"}, env)
    assert hosts.ok, hosts.output  # the user's root allows the rest


async def test_links_are_resolved_before_the_check(tool_env, secret):
    (tool_env.work_dir / "notes.txt").symlink_to(secret)
    (tool_env.work_dir / "elsewhere").symlink_to(secret.parent, target_is_directory=True)
    (tool_env.work_dir / "inside.txt").write_text("inside the work dir")
    (tool_env.work_dir / "alias.txt").symlink_to(tool_env.work_dir / "inside.txt")
    tool = make_text_inspector(tool_env)
    for path in ["notes.txt", str(tool_env.work_dir / "notes.txt"), "elsewhere/.env", "./elsewhere/../notes.txt"]:
        result = await run(tool, {"file_path": path}, tool_env)
        assert not result.ok and OUTSIDE in result.output and SECRET not in result.output, (path, result.output)
    assert "inside the work dir" in (await run(tool, {"file_path": "alias.txt"}, tool_env)).output


async def test_attachments_are_readable_but_not_their_folders(tmp_path, settings, secret):
    report = secret.parent / "report.txt"
    report.write_text("Visitors in 2023: 48,211")
    env = make_env(tmp_path, settings)
    env.attachments = (str(report),)
    tool = make_text_inspector(env)
    for path in [str(report), "report.txt", f"file://{report}"]:
        assert "48,211" in (await run(tool, {"file_path": path}, env)).output, path
    for path in [str(secret), str(secret.parent), str(secret.parent / "missing.txt")]:
        result = await run(tool, {"file_path": path}, env)
        assert not result.ok and OUTSIDE in result.output, result.output


async def test_attached_folders_and_user_roots_are_readable(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "table.csv").write_text("city,people\nZurich,421878\n")
    (data / "escape.txt").symlink_to("/etc/passwd")
    monkeypatch.setenv("KGAGENTS_FILE_ROOTS", f"{data}{os.pathsep} {os.pathsep}{tmp_path / 'more'}")
    settings = get_settings()
    assert settings.file_roots == (data, tmp_path / "more")
    for env in [make_env(tmp_path, settings), make_env(tmp_path, Settings())]:
        if not env.settings.file_roots:
            env.attachments = (str(data),)
        tool = make_text_inspector(env)
        assert "Zurich" in (await run(tool, {"file_path": str(data / "sub" / "table.csv")}, env)).output
        result = await run(tool, {"file_path": str(data / "escape.txt")}, env)
        assert not result.ok and OUTSIDE in result.output
        assert "KGAGENTS_FILE_ROOTS" in result.output


async def test_a_fifo_is_refused_without_blocking(tool_env):
    fifo = tool_env.work_dir / "pipe.txt"
    os.mkfifo(fifo)
    try:
        result = await asyncio.wait_for(run(make_text_inspector(tool_env), {"file_path": str(fifo)}, tool_env), 10)
    finally:  # should a reader hang on the FIFO, a writer that opens and closes it ends its read
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    assert not result.ok and "not a regular file" in result.output


def test_a_link_swapped_in_after_the_check_is_not_followed(tool_env, secret, monkeypatch):
    """Code in the sandbox writes into the work dir, so it could swap a checked path for a link: the open
    follows no final link and checks where the opened file really is."""
    checked = access.allowed_path
    (tool_env.work_dir / "d").mkdir()
    (tool_env.work_dir / "d" / ".env").write_text("harmless")
    (tool_env.work_dir / "plain.txt").write_text("harmless")

    def swap_file(env, source, roots=None):
        path = checked(env, source, roots)
        path.unlink()
        path.symlink_to(secret)
        return path

    monkeypatch.setattr(access, "allowed_path", swap_file)
    with pytest.raises(ToolFailure, match="cannot open"):
        access.read_allowed(tool_env, "plain.txt", 1000)

    def swap_folder(env, source, roots=None):
        path = checked(env, source, roots)
        folder = tool_env.work_dir / "d"
        folder.rename(tool_env.work_dir / "d-old")
        folder.symlink_to(secret.parent, target_is_directory=True)
        return path

    monkeypatch.setattr(access, "allowed_path", swap_folder)
    with pytest.raises(access.FileAccessError, match=OUTSIDE):
        access.read_allowed(tool_env, "d/.env", 1000)


async def test_zip_extraction_reads_back_only_what_it_wrote(tool_env):
    archive = tool_env.work_dir / "a.zip"
    archive.write_bytes(F.make_zip({"a.txt": b"from the archive"}, symlinks={"b.txt": "/etc/passwd"}))
    out = (await run(make_extract_zip(tool_env), {"zip_path": "a.zip"}, tool_env)).output
    assert "from the archive" in out and "skipped 'b.txt': symbolic link" in out and "root:" not in out
