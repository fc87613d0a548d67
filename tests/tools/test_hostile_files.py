"""Hostile files end in a clear tool error, in bounded time and memory: a 2 GB attachment, images that declare
gigapixels, an SVG with a huge canvas, an office file that is a zip bomb, corrupt PDFs and images, archives with
nested bombs and entries that try to leave the extraction folder."""

from __future__ import annotations

import base64
import io
import os
import struct
import time
import tracemalloc
import zipfile
import zlib

import pytest

from kgagents.graphs.io import final_state
from kgagents.tools.base import ToolFailure, run_tool_with_retry
from kgagents.tools.files.image import MAX_SIDE, make_image_inspector, prepare_image
from kgagents.tools.files.inspector import make_extract_zip, make_text_inspector
from tests.tools import files as F
from tests.tools.conftest import make_env, scripted

GB = 1024 ** 3


async def run(tool, args, env):
    return await run_tool_with_retry(tool, args, max_retries=env.max_retries, backoff_base_s=0.01,
                                     backoff_max_s=0.02, max_output_chars=env.max_output_chars)


@pytest.fixture
def env(tmp_path, settings):
    env = make_env(tmp_path, settings, llm=scripted({"content": "The model answered.", "times": 0}))
    env.work_dir.mkdir(parents=True)
    return env


def png(width: int, height: int) -> bytes:
    """A black 1-bit PNG of any size: a few kilobytes that decode to ``width * height`` bytes."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\0" * (1 + (width + 7) // 8)
    packer = zlib.compressobj(9)
    idat = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
            + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def docx_bomb(mb: int = 20) -> bytes:
    """A Word document whose body is ``mb`` MB of empty paragraphs, compressed about a thousand times."""
    with zipfile.ZipFile(io.BytesIO(F.make_docx([]))) as zf:
        parts = {i.filename: zf.read(i) for i in zf.infolist()}
    head, tail = parts["word/document.xml"].split(b"<w:body>")
    parts["word/document.xml"] = head + b"<w:body>" + b"<w:p/>" * (mb * 2**20 // 6) + tail
    return F.make_zip(parts)


async def test_a_2gb_attachment_is_refused_at_once_in_little_memory(tmp_path, env):
    tracemalloc.start()
    try:
        for name, tool, arg in [("scan.pdf", make_text_inspector(env), "file_path"),
                                ("photo.png", make_image_inspector(env), "image_path"),
                                ("bundle.zip", make_extract_zip(env), "zip_path")]:
            big = tmp_path / "attachments" / name
            big.parent.mkdir(exist_ok=True)
            big.touch()
            os.truncate(big, 2 * GB)  # sparse: nothing is written
            env.attachments = (str(big),)
            started = time.monotonic()
            result = await run(tool, {arg: name}, env)
            assert not result.ok and result.attempts == 1, result.output
            assert "2048.0 MB; the limit is" in result.output
            assert time.monotonic() - started < 5
        assert tracemalloc.get_traced_memory()[1] < 50 * 2**20
    finally:
        tracemalloc.stop()


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
async def test_an_image_that_declares_gigapixels_is_refused_before_decoding(env):
    bomb = png(11_000, 11_000)  # 121 M pixels: Pillow itself would only warn and decode it
    assert len(bomb) < 100_000
    (env.work_dir / "bomb.png").write_bytes(bomb)
    started = time.monotonic()
    result = await run(make_image_inspector(env), {"image_path": "bomb.png", "question": "q"}, env)
    assert not result.ok and "declares 11000x11000 pixels" in result.output
    assert "refused before decoding" in result.output
    assert time.monotonic() - started < 2


@pytest.mark.slow
def test_an_svg_with_a_huge_canvas_is_rendered_scaled_down():
    svg = (b'<svg xmlns="http://www.w3.org/2000/svg" width="30000" height="20000">'
           b'<rect width="30000" height="20000" fill="red"/></svg>')  # 2.4 GB as a canvas
    started = time.monotonic()
    b64, mime = prepare_image(svg, "huge.svg")
    assert time.monotonic() - started < 5

    from PIL import Image

    image = Image.open(io.BytesIO(base64.b64decode(b64)))
    assert mime == "image/png" and max(image.size) <= MAX_SIDE and image.getpixel((5, 5))[:3] == (255, 0, 0)


def test_a_cairosvg_whose_canvas_cannot_be_bounded_renders_no_svg(monkeypatch):
    """The bound rests on cairosvg's private ``_create_surface``: without it no SVG is rendered at all."""
    from cairosvg.surface import PNGSurface, Surface

    monkeypatch.delattr(PNGSurface, "_create_surface")
    monkeypatch.delattr(Surface, "_create_surface")
    with pytest.raises(ToolFailure, match="size of an SVG cannot be bounded"):
        prepare_image(b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>', "small.svg")


@pytest.mark.parametrize("name,data,expected", [
    ("cut.pdf", F.make_pdf(["A report that was cut."])[:300], "could not read the PDF"),
    ("fake.pdf", b"%PDF-1.7\n" + bytes(range(256)) * 40, "could not read the PDF"),
    ("zip-as.docx", b"PK\x03\x04 not really a package", "damaged zip package"),
    ("bomb.docx", docx_bomb(), "likely zip bomb"),
])
async def test_corrupt_and_hostile_documents_give_a_clear_error(env, name, data, expected):
    (env.work_dir / name).write_bytes(data)
    started = time.monotonic()
    result = await run(make_text_inspector(env), {"file_path": name}, env)
    assert not result.ok and result.attempts == 1 and expected in result.output, result.output
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("name,data", [
    ("cut.png", F.make_png()[:60]),
    ("noise.jpg", bytes(range(256)) * 8),
    ("header-only.gif", b"GIF89a\x10\x00\x10\x00"),
    ("broken.svg", b"<svg xmlns='http://www.w3.org/2000/svg'><rect width='10'"),
    ("entities.svg", (b'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]>'
                      b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>&b;&b;</text></svg>')),
])
async def test_corrupt_images_give_a_clear_error(env, name, data):
    (env.work_dir / name).write_bytes(data)
    result = await run(make_image_inspector(env), {"image_path": name, "question": "q"}, env)
    assert not result.ok and result.attempts == 1, result.output
    assert "not a readable image" in result.output or "cannot render the SVG" in result.output


@pytest.mark.slow
async def test_nested_bombs_are_listed_not_expanded(env):
    outer = F.make_zip({"readme.txt": b"the outer archive", "inner.zip": F.zip_bomb(50)})
    (env.work_dir / "outer.zip").write_bytes(outer)
    out = (await run(make_extract_zip(env), {"zip_path": "outer.zip"}, env)).output
    inner = env.work_dir / "extracted" / "outer" / "inner.zip"
    assert "the outer archive" in out and f"inner.zip (nested archive: extract_zip on {inner}" in out
    assert sum(p.stat().st_size for p in (env.work_dir / "extracted").rglob("*") if p.is_file()) < 1_000_000
    result = await run(make_extract_zip(env), {"zip_path": str(inner)}, env)
    assert not result.ok and "likely zip bomb" in result.output


async def test_entries_that_leave_the_folder_in_other_spellings_are_skipped(env):
    names = ["..\\evil.txt", "a/./../../evil.txt", "//server/share/evil.txt", "\\abs\\evil.txt", "D:evil.txt"]
    archive = F.make_zip({**{n: b"evil" for n in names}, "good.txt": b"good"},
                         symlinks={"inside-link": "good.txt"})
    (env.work_dir / "t.zip").write_bytes(archive)
    out = (await run(make_extract_zip(env), {"zip_path": "t.zip"}, env)).output
    assert "Extracted 1 file(s)" in out
    for name in names:
        assert f"skipped {name!r}: unsafe path" in out
    assert "skipped 'inside-link': symbolic link" in out
    written = sorted(p.relative_to(env.work_dir).as_posix() for p in env.work_dir.rglob("*") if p.is_file())
    assert written == ["extracted/t/good.txt", "t.zip"]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
async def test_a_kgot_run_goes_on_past_hostile_attachments(tmp_path):
    """The tool calls of a run hit a 2 GB PDF, a cut PDF, a gigapixel PNG and a Word zip bomb: each is a clear
    error in the run's state, and the run answers."""
    from langgraph.checkpoint.memory import InMemorySaver

    from kgagents.core.scripted import ScriptedChatModel
    from kgagents.graphs.kgot import compile_graph
    from kgagents.nodes.kgot import KGoTContext
    from tests import kgot_script as S

    folder = tmp_path / "attachments"
    folder.mkdir()
    (folder / "scan.pdf").touch()
    os.truncate(folder / "scan.pdf", 2 * GB)
    (folder / "cut.pdf").write_bytes(F.make_pdf(["A report that was cut."])[:300])
    (folder / "bomb.png").write_bytes(png(11_000, 11_000))
    (folder / "bomb.docx").write_bytes(docx_bomb())
    calls = [("inspect_file_as_text", {"file_path": "scan.pdf"}), ("inspect_file_as_text", {"file_path": "cut.pdf"}),
             ("image_inspector", {"image_path": "bomb.png", "question": "What does it show?"}),
             ("inspect_file_as_text", {"file_path": "bomb.docx"})]
    model = ScriptedChatModel(steps=[
        *S.votes("INSERT", 1), *S.votes("RETRIEVE", 1), *S.tool_calls(*calls), *S.write("", times=0),
        *S.direct("The attachments could not be read; the answer is 42."), *S.need_math(False), *S.parse("42")])
    ctx = KGoTContext(model=model, work_dir=str(tmp_path / "work"), num_next_steps_decision=1,
                      max_final_solution_parsing=1, solve_mode="direct", tool_backoff_base_s=0.001)
    state = await final_state(
        compile_graph(InMemorySaver()),
        {"question": "What do the attachments say?", "attachments": [str(p) for p in sorted(folder.iterdir())]},
        {"configurable": {"thread_id": "hostile-attachments"}, "recursion_limit": 100}, context=ctx)
    assert state["final_answer"] == "42"
    errors = {c["args"].get("file_path") or c["args"]["image_path"]: c["output"] for c in state["tool_calls"]}
    assert not any(c["ok"] for c in state["tool_calls"]) and all(c["attempts"] == 1 for c in state["tool_calls"])
    assert "2048.0 MB; the limit is" in errors["scan.pdf"] and "could not read the PDF" in errors["cut.pdf"]
    assert "refused before decoding" in errors["bomb.png"] and "likely zip bomb" in errors["bomb.docx"]
