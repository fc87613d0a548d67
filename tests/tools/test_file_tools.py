"""The Text Inspector and the Image Tool: every file kind, local and remote, questions answered by the tools'
model without the raw text going back, audio transcription and YouTube transcripts."""

from __future__ import annotations

import base64
import dataclasses

import pytest

from kgagents.tools.base import run_tool_with_retry
from kgagents.tools.files.image import check_image_inspector, make_image_inspector, prepare_image
from kgagents.tools.files.inspector import make_text_inspector
from kgagents.tools.files.media import youtube_video_id
from kgagents.tools.manager import ToolManager
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


@pytest.mark.parametrize("name,data,expected", [
    ("report.pdf", F.make_pdf(["Visitors in 2023: 48,211"]), "Visitors in 2023: 48,211"),
    ("notes.docx", F.make_docx(["The budget for 2020 was approved."]), "The budget for 2020 was approved."),
    ("budget.xlsx", F.make_xlsx([["Year", "Budget"], [2020, 1350]]), "1350"),
    ("slides.pptx", F.make_pptx("Roadmap", "Launch in Q3"), "Launch in Q3"),
    ("page.html", b"<html><body><h2>Hours</h2><p>Open 9-17</p></body></html>", "## Hours"),
    ("cities.csv", b"city,people\nZurich,421878\n", "| Zurich | 421878 |"),
    ("data.json", b'{"area_km2": 14.2}', '"area_km2": 14.2'),
    ("data.xml", b"<lake><area>14.2</area></lake>", "<area>14.2</area>"),
    ("plain.txt", b"hello text", "hello text"),
    ("latin1.txt", F.fixture("latin1.txt"), "à la forêt"),
])
async def test_reads_every_format_without_a_question(env, name, data, expected):
    path = write(env, name, data)
    result = await run(make_text_inspector(env), {"file_path": str(path)}, env)
    assert result.ok and expected in result.output and result.output.startswith("# ")


async def test_relative_paths_resolve_in_the_work_dir(env):
    write(env, "a.txt", b"relative file")
    assert "relative file" in (await run(make_text_inspector(env), {"file_path": "a.txt"}, env)).output


async def test_question_is_answered_by_the_model_only(tmp_path, settings):
    llm = scripted({"when": r"Visitors in 2023: 48,211.*How many visitors", "content": "1. Short answer: 48,211"})
    env = make_env(tmp_path, settings, llm=llm)
    path = write(env, "report.pdf", F.make_pdf(["Visitors in 2023: 48,211", "Other secret line"]))
    result = await run(make_text_inspector(env), {"file_path": str(path), "question": "How many visitors?"}, env)
    assert result.output == "1. Short answer: 48,211"
    assert "Other secret line" not in result.output and "Other secret line" in llm.calls[0]
    assert env.usage["scripted"]["calls"] == 1


async def test_question_without_a_model_returns_the_text_with_a_note(env):
    path = write(env, "a.txt", b"content here")
    out = (await run(make_text_inspector(env), {"file_path": str(path), "question": "What?"}, env)).output
    assert "No chat model is configured" in out and "content here" in out


@pytest.mark.slow
async def test_remote_files(env, web):
    tool = make_text_inspector(env)
    assert "1350" in (await run(tool, {"file_path": web.url("/files/budget.xlsx")}, env)).output
    assert "Visitors in 2023" in (await run(tool, {"file_path": web.url("/files/report.pdf")}, env)).output
    result = await run(tool, {"file_path": web.url("/endless")}, env)
    assert not result.ok and "incomplete" in result.output


async def test_hostile_and_missing_files(env):
    tool = make_text_inspector(env)
    bad = write(env, "broken.pdf", F.corrupt_pdf())
    result = await run(tool, {"file_path": str(bad)}, env)
    assert not result.ok and result.attempts == 1 and "could not read the PDF" in result.output
    result = await run(tool, {"file_path": "no-such-file.pdf"}, env)
    assert not result.ok and "file not found" in result.output
    result = await run(tool, {"file_path": "/no/such/file.pdf"}, env)
    assert not result.ok and "outside the files this task may read" in result.output
    result = await run(tool, {"file_path": str(write(env, "pic.png", F.make_png()))}, env)
    assert not result.ok and "image_inspector" in result.output
    result = await run(tool, {"file_path": str(env.work_dir)}, env)
    assert not result.ok and "not a file" in result.output


async def test_long_output_is_cut_to_fit_a_prompt(tmp_path, settings):
    env = make_env(tmp_path, settings)
    env.max_output_chars = 2000
    path = write(env, "long.txt", b"line of text\n" * 5000)
    out = (await run(make_text_inspector(env), {"file_path": str(path)}, env)).output
    assert len(out) < 2100 and "more characters cut" in out


async def test_zip_through_the_inspector(env):
    path = write(env, "pack.zip", F.make_zip({"docs/readme.txt": b"Inside the archive."}))
    out = (await run(make_text_inspector(env), {"file_path": str(path)}, env)).output
    assert "Extracted 1 file(s) from pack.zip" in out and "Inside the archive." in out


# -- audio --------------------------------------------------------------------------------------------------
def transcribing_env(tmp_path, settings, web):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="gpt-4o-mini", base_url=web.url("/v1"), api_key="test", max_retries=0)
    return make_env(tmp_path, settings, llm=llm)


@pytest.mark.slow
async def test_audio_is_transcribed_through_an_openai_compatible_provider(tmp_path, settings, web):
    env = transcribing_env(tmp_path, settings, web)
    path = write(env, "memo.wav", F.make_wav())
    web.transcriptions.clear()
    out = (await run(make_text_inspector(env), {"file_path": str(path)}, env)).output
    assert "The meeting starts at nine o'clock." in out
    (request,) = web.transcriptions
    assert request["content_type"].startswith("multipart/form-data") and b"whisper-1" in request["body"]


@pytest.mark.parametrize("reported,expected", [
    # whisper-1 reports the seconds of audio and costs $0.006 a minute
    ({"type": "duration", "seconds": 90.0},
     {"calls": 1, "input_tokens": 0, "output_tokens": 0, "audio_seconds": 90.0, "cost_usd": pytest.approx(0.009)}),
    # an older server reports nothing: the call counts, its cost is unknown (not 0)
    (None, {"calls": 1, "input_tokens": 0, "output_tokens": 0, "cost_usd": None, "unmeasured_calls": 1}),
])
async def test_a_transcription_counts_in_the_run_usage(tmp_path, settings, web, monkeypatch, reported, expected):
    env = transcribing_env(tmp_path, settings, web)
    monkeypatch.setattr(web, "transcription_usage", reported)
    path = write(env, "memo.wav", F.make_wav())
    assert (await run(make_text_inspector(env), {"file_path": str(path)}, env)).ok
    assert env.usage == {"whisper-1": expected}


async def test_a_transcription_priced_by_token(tmp_path, settings, web, monkeypatch):
    settings = dataclasses.replace(settings, transcription_model="gpt-4o-mini-transcribe")
    env = transcribing_env(tmp_path, settings, web)
    monkeypatch.setattr(web, "transcription_usage", {"type": "tokens", "input_tokens": 1000, "output_tokens": 100,
                                                     "total_tokens": 1100})
    path = write(env, "memo.wav", F.make_wav())
    assert (await run(make_text_inspector(env), {"file_path": str(path)}, env)).ok
    assert env.usage == {"gpt-4o-mini-transcribe": {"calls": 1, "input_tokens": 1000, "output_tokens": 100,
                                                    "cost_usd": pytest.approx((1000 * 3.00 + 100 * 5.00) / 1e6)}}


async def test_audio_without_a_transcribing_provider_is_unavailable(tmp_path, settings):
    env = make_env(tmp_path, settings, llm=scripted({"content": "x"}))
    path = write(env, "memo.mp3", F.make_wav())
    result = await run(make_text_inspector(env), {"file_path": str(path)}, env)
    assert not result.ok and "Audio transcription is unavailable" in result.output
    assert "ScriptedChatModel" in result.output


# -- YouTube ------------------------------------------------------------------------------------------------
def test_youtube_urls_are_recognised():
    vid = "dQw4w9WgXcQ"
    for url in [f"https://www.youtube.com/watch?v={vid}&t=42", f"https://youtu.be/{vid}",
                f"https://youtube.com/shorts/{vid}", f"https://www.youtube.com/embed/{vid}",
                f"https://m.youtube.com/watch?v={vid}"]:
        assert youtube_video_id(url) == vid, url
    for url in ["https://example.org/watch?v=dQw4w9WgXcQ", "https://www.youtube.com/watch?v=short",
                "https://www.youtube.com/channel/abc", "not a url"]:
        assert youtube_video_id(url) is None, url


async def test_youtube_transcript_with_an_injected_fetcher(tmp_path, settings):
    calls = []

    def fetcher(video_id):
        calls.append(video_id)
        return [{"text": "Welcome to the lake.", "start": 0.0, "duration": 2.0},
                {"text": "The bridge opened in 1987.", "start": 75.5, "duration": 3.0}]

    llm = scripted({"when": r"\[01:15\] The bridge opened in 1987", "content": "It opened in 1987."})
    env = make_env(tmp_path, settings, llm=llm, youtube_fetcher=fetcher)
    tool = make_text_inspector(env)
    url = "https://www.youtube.com/watch?v=dQw4w9WgXcQ"
    out = (await run(tool, {"file_path": url}, env)).output
    assert "[00:00] Welcome to the lake." in out and "[01:15] The bridge opened in 1987." in out
    assert (await run(tool, {"file_path": url, "question": "When did the bridge open?"}, env)).output == \
        "It opened in 1987."
    assert calls == ["dQw4w9WgXcQ", "dQw4w9WgXcQ"]


async def test_youtube_errors_are_clear(tmp_path, settings):
    from youtube_transcript_api import TranscriptsDisabled

    def fetcher(video_id):
        raise TranscriptsDisabled(video_id)

    env = make_env(tmp_path, settings, youtube_fetcher=fetcher)
    result = await run(make_text_inspector(env), {"file_path": "https://youtu.be/dQw4w9WgXcQ"}, env)
    assert not result.ok and result.attempts == 1
    assert "no transcript is available for YouTube video dQw4w9WgXcQ: TranscriptsDisabled" in result.output


# -- images -------------------------------------------------------------------------------------------------
async def test_image_question_with_a_local_png(tmp_path, settings):
    llm = scripted({"when": r"What color is the square\?", "content": "It is red."})
    env = make_env(tmp_path, settings, llm=llm)
    path = write(env, "red.png", F.make_png())
    result = await run(make_image_inspector(env), {"image_path": str(path), "question": "What color is the square?"},
                       env)
    assert result.output == "It is red." and env.usage["scripted"]["calls"] == 1


@pytest.mark.slow
async def test_image_blocks_reach_an_openai_compatible_server(tmp_path, settings, web):
    from langchain_openai import ChatOpenAI

    from tests.fakes.openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        server.reply("A blue badge that reads KG 42.")
        llm = ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="test", max_retries=0)
        env = make_env(tmp_path, settings, llm=llm)
        out = (await run(make_image_inspector(env), {"image_path": web.url("/files/badge.svg"),
                                                     "question": "What does the badge say?"}, env)).output
        assert out == "A blue badge that reads KG 42."
        (request,) = server.chat_requests
    parts = request.messages[-1]["content"]
    image = next(p for p in parts if p.get("type") == "image_url")
    url = image["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")  # the SVG was rendered to PNG
    assert base64.b64decode(url.split(",", 1)[1]).startswith(b"\x89PNG")
    assert any("What does the badge say?" in p.get("text", "") for p in parts if p.get("type") == "text")


def test_prepare_image_converts_and_scales():
    b64, mime = prepare_image(F.make_png((3000, 1000), fmt="BMP"), "wide.bmp")
    import io

    from PIL import Image

    img = Image.open(io.BytesIO(base64.b64decode(b64)))
    assert mime == "image/png" and max(img.size) == 2048
    b64, mime = prepare_image(F.make_png(fmt="JPEG"), "x.jpg")
    assert mime == "image/jpeg"
    b64, mime = prepare_image(F.fixture("badge.svg"), "badge.svg")
    assert mime == "image/png"


async def test_image_tool_failures(tmp_path, settings):
    env = make_env(tmp_path, settings, llm=scripted({"content": "x", "times": 0}))
    tool = make_image_inspector(env)
    result = await run(tool, {"image_path": str(write(env, "fake.png", b"not an image at all")), "question": "q"}, env)
    assert not result.ok and "not a readable image" in result.output
    result = await run(tool, {"image_path": str(write(env, "a.wav", F.make_wav()))}, env)
    assert not result.ok and "inspect_file_as_text" in result.output
    evil = b'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="10" ' \
           b'height="10"><image xlink:href="file:///etc/passwd" width="10" height="10"/></svg>'
    result = await run(tool, {"image_path": str(write(env, "evil.svg", evil)), "question": "q"}, env)
    assert result.ok  # rendered without reading the linked file
    no_model = make_env(tmp_path, settings)
    result = await run(make_image_inspector(no_model), {"image_path": "x.png"}, no_model)
    assert not result.ok and "vision" in result.output


def test_registered_file_tools_and_statuses(env):
    manager = ToolManager(env, ["inspect_file_as_text", "image_inspector", "extract_zip"])
    assert [t.name for t in manager.get_tools()] == ["inspect_file_as_text", "image_inspector", "extract_zip"]
    assert all(len(t.description) <= 1024 for t in manager.get_tools())
    from kgagents.core.config import Settings

    assert check_image_inspector(Settings(model="openai:gpt-4o")).reason.startswith("available")
