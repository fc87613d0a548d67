"""The tools and the surfer never block the event loop (``langgraph dev`` refuses blocking calls): they run
here under the same blocking-call detector, configured as ``langgraph dev`` configures it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kgagents.graphs import surfer
from kgagents.nodes.kgot import KGoTContext
from kgagents.tools.base import run_tool_with_retry
from kgagents.tools.files.image import make_image_inspector
from kgagents.tools.files.inspector import make_extract_zip, make_text_inspector
from tests.tools import files as F
from tests.tools.conftest import make_env, scripted
from tests.tools.test_surfer import QUESTION, research_script

blockbuster = pytest.importorskip("blockbuster")

#: What ``langgraph dev`` lets pass (langgraph_runtime_inmem.queue._enable_blockbuster).
ALLOWED = ("os.stat", "os.listdir", "os.remove", "io.BufferedReader.read", "io.BufferedWriter.write",
           "io.TextIOWrapper.read", "io.TextIOWrapper.write", "threading.Lock.acquire")


@contextmanager
def like_langgraph_dev() -> Iterator[None]:
    bb = blockbuster.BlockBuster(excluded_modules=[])
    for name in list(bb.functions):
        if name in ALLOWED or name.startswith("os.path."):
            bb.functions.pop(name)
    bb.activate()
    try:
        yield
    finally:
        bb.deactivate()


@pytest.mark.slow
async def test_surfer_run_does_not_block(tmp_path, settings, web):
    env = make_env(tmp_path, settings, llm=scripted(*research_script(web)))
    tool = surfer.make_surfer_tool(env)
    with like_langgraph_dev():
        out = await tool.ainvoke({"query": QUESTION})
    assert "Ilse Brandt opened it in 1923." in out


@pytest.mark.slow
async def test_standalone_surfer_does_not_block(tmp_path, monkeypatch, web):
    monkeypatch.setenv("KGAGENTS_SEARCH_API_BASE", web.url("/search"))
    ctx = KGoTContext(tools_model=scripted(*research_script(web)), work_dir=str(tmp_path / "w"))
    with like_langgraph_dev():
        result = await surfer.graph.ainvoke({"question": QUESTION}, context=ctx)
    assert "Ilse Brandt" in result["final_answer"]


async def test_file_tools_do_not_block(tmp_path, settings, web):
    env = make_env(tmp_path, settings, llm=scripted({"content": "answer", "times": 0}))
    env.work_dir.mkdir(parents=True)
    pdf = env.work_dir / "r.pdf"
    pdf.write_bytes(F.make_pdf(["Visitors in 2023: 48,211"]))
    archive = env.work_dir / "a.zip"
    archive.write_bytes(F.make_zip({"x/notes.txt": b"notes", "y.pdf": F.make_pdf(["inside"])}))
    image = env.work_dir / "b.svg"
    image.write_bytes(F.fixture("badge.svg"))
    with like_langgraph_dev():
        runs = [await run_tool_with_retry(make_text_inspector(env), {"file_path": str(pdf)}, max_retries=1),
                await run_tool_with_retry(make_text_inspector(env), {"file_path": web.url("/files/budget.xlsx"),
                                                                     "question": "q"}, max_retries=1),
                await run_tool_with_retry(make_extract_zip(env), {"zip_path": str(archive)}, max_retries=1),
                await run_tool_with_retry(make_image_inspector(env), {"image_path": str(image), "question": "q"},
                                          max_retries=1)]
    assert all(r.ok for r in runs), [r.output for r in runs]


async def test_the_detector_detects(tmp_path):
    with like_langgraph_dev(), pytest.raises(blockbuster.BlockingError):
        (tmp_path / "made-in-the-loop").mkdir()
