"""ExtractZip: safe extraction into the run's work dir, hostile archives, then inspection of the files."""

from __future__ import annotations

import zipfile

import pytest

from kgagents.tools.base import run_tool_with_retry
from kgagents.tools.files.inspector import make_extract_zip
from kgagents.tools.files.zip import ZipBombError, ZipLimits, extract
from tests.tools import files as F
from tests.tools.conftest import make_env, scripted


async def run(tool, args, env):
    return await run_tool_with_retry(tool, args, max_retries=env.max_retries, backoff_base_s=0.01,
                                     backoff_max_s=0.02, max_output_chars=env.max_output_chars)


def write(env, name: str, data: bytes):
    env.work_dir.mkdir(parents=True, exist_ok=True)
    path = env.work_dir / name
    path.write_bytes(data)
    return path


async def test_extracts_and_reads_the_files(env):
    archive = F.make_zip({"report.pdf": F.make_pdf(["Visitors in 2023: 48,211"]),
                          "data/budget.xlsx": F.make_xlsx([["Year", "Budget"], [2020, 1350]]),
                          "data/notes.txt": b"plain notes", "pics/red.png": F.make_png(),
                          "audio/memo.wav": F.make_wav(), "inner.zip": F.make_zip({"x.txt": b"x"})})
    path = write(env, "Files 2023.zip", archive)
    result = await run(make_extract_zip(env), {"zip_path": str(path)}, env)
    out = result.output
    target = env.work_dir / "extracted" / "Files_2023"
    assert result.ok and f"Extracted 6 file(s) from Files 2023.zip into {target.resolve()}" in out
    assert "Visitors in 2023: 48,211" in out and "1350" in out and "plain notes" in out
    assert f"pics/red.png (image: ask image_inspector about {(target / 'pics/red.png').resolve()})" in out
    assert "audio/memo.wav (audio: inspect_file_as_text" in out and "inner.zip (nested archive" in out
    assert (target / "data" / "notes.txt").read_bytes() == b"plain notes"


async def test_question_about_the_archive(tmp_path, settings):
    llm = scripted({"when": r"## File: data/notes.txt.*Which file mentions the ferry\?",
                    "content": "1. Short answer: data/notes.txt"})
    env = make_env(tmp_path, settings, llm=llm)
    path = write(env, "a.zip", F.make_zip({"data/notes.txt": b"The ferry runs four times a day.",
                                           "other.txt": b"unrelated"}))
    out = (await run(make_extract_zip(env), {"zip_path": str(path), "question": "Which file mentions the ferry?"},
                     env)).output
    assert out.endswith("1. Short answer: data/notes.txt") and "four times a day" not in out


async def test_path_traversal_is_skipped(env):
    archive = F.make_zip({"../escape.txt": b"evil", "../../etc/evil.txt": b"evil", "/abs/evil.txt": b"evil",
                          "C:/windows/evil.txt": b"evil", "ok/../../evil2.txt": b"evil", "good.txt": b"good"})
    path = write(env, "t.zip", archive)
    out = (await run(make_extract_zip(env), {"zip_path": str(path)}, env)).output
    assert "Extracted 1 file(s)" in out and "good" in out
    for name in ["../escape.txt", "../../etc/evil.txt", "/abs/evil.txt", "C:/windows/evil.txt", "ok/../../evil2.txt"]:
        assert f"skipped {name!r}: unsafe path" in out
    written = sorted(p.name for p in env.work_dir.rglob("*") if p.is_file())
    assert written == ["good.txt", "t.zip"]
    assert not (env.work_dir.parent / "escape.txt").exists()


async def test_symlinks_are_not_created(env, tmp_path):
    archive = F.make_zip({"a.txt": b"a"}, symlinks={"link": "/etc/passwd", "up": "../../outside"})
    result = extract(archive, env.work_dir / "extracted", name="links.zip")
    assert [p.name for p in result.files] == ["a.txt"]
    assert ("link", "symbolic link") in result.skipped and ("up", "symbolic link") in result.skipped
    assert not any(p.is_symlink() for p in (env.work_dir / "extracted").rglob("*"))


@pytest.mark.slow
async def test_zip_bomb_is_refused(env):
    path = write(env, "bomb.zip", F.zip_bomb(50))
    assert path.stat().st_size < 200_000
    result = await run(make_extract_zip(env), {"zip_path": str(path)}, env)
    assert not result.ok and result.attempts == 1 and "likely zip bomb" in result.output
    assert not any((env.work_dir / "extracted").rglob("*.txt"))


def test_size_and_count_limits(tmp_path):
    many = F.make_zip({f"f{i}.txt": b"x" for i in range(12)})
    with pytest.raises(ZipBombError, match="holds 12 files; the limit is 10"):
        extract(many, tmp_path, limits=ZipLimits(max_files=10))
    big = F.make_zip({"a.bin": b"a" * 4000, "b.bin": b"b" * 4000}, compression=zipfile.ZIP_STORED)
    with pytest.raises(ZipBombError, match="would expand to"):
        extract(big, tmp_path, limits=ZipLimits(max_total_bytes=5000))
    assert not any(tmp_path.rglob("*.bin"))


def test_lying_sizes_are_caught(tmp_path):
    data = bytearray(F.make_zip({"a.txt": b"z" * 5000}, compression=zipfile.ZIP_STORED))
    # declare 10 bytes in both headers: the reader must not write more than declared
    zf = zipfile.ZipFile(__import__("io").BytesIO(bytes(data)))
    info = zf.infolist()[0]
    local = info.header_offset
    data[local + 22:local + 26] = (10).to_bytes(4, "little")
    central = bytes(data).rfind(b"PK\x01\x02")
    data[central + 24:central + 28] = (10).to_bytes(4, "little")
    with pytest.raises(Exception) as excinfo:
        extract(bytes(data), tmp_path, name="liar.zip")
    assert "damaged" in str(excinfo.value) or "zip bomb" in str(excinfo.value)
    assert not any(tmp_path.rglob("a.txt"))


async def test_corrupt_archive_and_wrong_type(env):
    path = write(env, "broken.zip", b"PK\x03\x04 this is not really a zip")
    result = await run(make_extract_zip(env), {"zip_path": str(path)}, env)
    assert not result.ok and "not a readable zip archive" in result.output
    path = write(env, "text.txt", b"hello")
    result = await run(make_extract_zip(env), {"zip_path": str(path)}, env)
    assert not result.ok and "not a zip archive" in result.output


async def test_remote_archive(env, web):
    out = (await run(make_extract_zip(env), {"zip_path": web.url("/files/bundle.zip")}, env)).output
    assert "readme.txt" in out and "The archive holds one text file." in out


@pytest.mark.slow
async def test_extracting_twice_replaces_the_first_copy(env):
    path = write(env, "twice.zip", F.make_zip({"a.txt": b"first"}))
    await run(make_extract_zip(env), {"zip_path": str(path)}, env)
    path.write_bytes(F.make_zip({"b.txt": b"second"}))
    out = (await run(make_extract_zip(env), {"zip_path": str(path)}, env)).output
    assert "second" in out and not (env.work_dir / "extracted" / "twice" / "a.txt").exists()
