"""The Text Inspector and ExtractZip tools (KGoT paper, §3.3 and appendix B.5).

``inspect_file_as_text`` reads a file (a path or a URL) as Markdown: PDF, DOCX, XLSX, PPTX, HTML, CSV, JSON,
XML and text through ``markitdown``; audio by transcription; YouTube videos by their transcript; zip archives
by safe extraction. With a question, the tools' LLM answers it from the file and only the answer goes back.

``extract_zip`` extracts an archive safely into the run's work directory and inspects the extracted files in
the same step.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from kgagents.tools.base import ToolFailure, truncate
from kgagents.tools.files.access import FileRoots, read_allowed, roots_of
from kgagents.tools.files.convert import MAX_CONVERT_BYTES, ConversionError, convert_bytes, kind_of
from kgagents.tools.files.media import transcribe, youtube_transcript, youtube_video_id
from kgagents.tools.files.qa import answer_about_text
from kgagents.tools.files.sources import Loaded, is_url, load
from kgagents.tools.files.zip import Extraction, ZipLimits, extract
from kgagents.tools.manager import ToolEnv

#: At most this many extracted files are read in one extract_zip call.
MAX_INSPECTED_FILES = 30


def zip_limits(env: ToolEnv) -> ZipLimits:
    """The run's zip limits (``env.extra["zip_limits"]``, else the defaults)."""
    given = env.extra.get("zip_limits")
    return given if isinstance(given, ZipLimits) else ZipLimits(**given) if isinstance(given, dict) else ZipLimits()


def _no_model_note(env: ToolEnv, question: str | None) -> str:
    if question and env.llm is None:
        return ("[No chat model is configured for the tools, so the question was not answered; the file's "
                "text follows.]\n\n")
    return ""


async def file_text(env: ToolEnv, loaded: Loaded) -> tuple[str, str]:
    """The text of a loaded file (transcribed when it is audio) and its title."""
    kind = kind_of(loaded.data, filename=loaded.name, mimetype=loaded.mimetype)
    if kind in {"image", "svg"}:
        raise ToolFailure(f"{loaded.name} is an image: use the image_inspector tool for it")
    if kind == "audio":
        return await transcribe(env, loaded.data, loaded.name), loaded.name
    doc = await asyncio.to_thread(convert_bytes, loaded.data, filename=loaded.name, mimetype=loaded.mimetype,
                                  charset=loaded.charset, url=loaded.source if is_url(loaded.source) else None)
    return doc.text, doc.title or loaded.name


async def inspect_source(env: ToolEnv, source: str, question: str | None = None) -> str:
    """What ``inspect_file_as_text`` returns for ``source`` (see the module docstring)."""
    question = (question or "").strip() or None
    if is_url(source) and youtube_video_id(source):
        text, title, origin = await youtube_transcript(env, source), f"YouTube video {source}", source
    else:
        loaded = await load(env, source)
        if kind_of(loaded.data, filename=loaded.name, mimetype=loaded.mimetype) == "archive":
            return await extract_and_inspect(env, loaded, question)
        text, title = await file_text(env, loaded)
        origin = loaded.source
    if question and env.llm is not None:
        return await answer_about_text(env, text, question, title=title, source=origin)
    body = truncate(text, max(1000, env.max_output_chars - 200))
    return f"{_no_model_note(env, question)}# {title}\n\n{body}"


# -- zip ------------------------------------------------------------------------------------------------
@dataclass
class _Read:
    rel: str
    text: str | None
    note: str | None


def _read_extracted(env: ToolEnv, roots: FileRoots, result: Extraction, path: Path) -> _Read:
    """One extracted file as text, or a note saying which tool reads it (blocking: run in a thread). It is read
    through the same access check as any other file (:mod:`kgagents.tools.files.access`)."""
    rel = result.relative(path)
    try:
        data, _ = read_allowed(env, str(path), MAX_CONVERT_BYTES, roots)
    except ToolFailure as exc:
        return _Read(rel, None, f"unreadable: {exc}")
    kind = kind_of(data[:4096], filename=path.name)
    if kind in {"image", "svg"}:
        return _Read(rel, None, f"image: ask image_inspector about {path}")
    if kind == "audio":
        return _Read(rel, None, f"audio: inspect_file_as_text on {path} transcribes it")
    if kind == "archive":
        return _Read(rel, None, f"nested archive: extract_zip on {path} extracts it")
    try:
        doc = convert_bytes(data, filename=path.name)
    except ConversionError as exc:
        return _Read(rel, None, f"unreadable: {exc}")
    return _Read(rel, doc.text, None)


async def extract_and_inspect(env: ToolEnv, loaded: Loaded, question: str | None = None) -> str:
    """Extract an archive into ``work_dir/extracted`` and read (or answer a question about) its files."""
    dest = Path(env.work_dir) / "extracted"
    result = await asyncio.to_thread(extract, loaded.data, dest, name=loaded.name, limits=zip_limits(env))

    def read_all() -> list[_Read]:
        roots = roots_of(env)
        return [_read_extracted(env, roots, result, p) for p in result.files[:MAX_INSPECTED_FILES]]

    reads = await asyncio.to_thread(read_all)
    lines = [f"Extracted {len(result.files)} file(s) from {loaded.name} into {result.target}:"]
    for r in reads:
        lines.append(f"- {r.rel}" + (f" ({r.note})" if r.note else ""))
    if len(result.files) > MAX_INSPECTED_FILES:
        lines.append(f"- ... and {len(result.files) - MAX_INSPECTED_FILES} more file(s), not read "
                     "(use inspect_file_as_text on them)")
    for name, why in result.skipped:
        lines.append(f"- skipped {name!r}: {why}")
    listing = "\n".join(lines)
    documents = [r for r in reads if r.text is not None]
    if not documents:
        return listing
    if question and env.llm is not None:
        combined = "\n\n".join(f"## File: {r.rel}\n\n{r.text}" for r in documents)
        answer = await answer_about_text(env, combined, question, title=f"files extracted from {loaded.name}",
                                         source=loaded.source)
        return f"{listing}\n\n{answer}"
    budget = max(500, env.max_output_chars - len(listing) - 200) // len(documents)
    contents = "\n\n".join(f"## File: {r.rel}\n\n{truncate(r.text or '', budget)}" for r in documents)
    return f"{listing}\n\n{_no_model_note(env, question)}{contents}"


# -- the tools ------------------------------------------------------------------------------------------
class InspectInput(BaseModel):
    file_path: str = Field(description="Path of the file (e.g. a task attachment) or its URL. Not for web "
                                       "pages (ask_search_agent) or images (image_inspector).")
    question: str | None = Field(default=None, description="Your question about the file, as a full sentence. "
                                                           "Omit it to get the file's text.")


class TextInspectorTool(BaseTool):
    """Read a file as Markdown text and answer questions about it."""

    name: str = "inspect_file_as_text"
    description: str = (
        "Read a file as Markdown text and, if you give a question, answer it from the file (only the answer "
        "comes back). Handles PDF, DOCX, XLSX, PPTX, HTML, CSV, JSON, XML, TXT and other text files, ZIP "
        "archives (extracted, then read), audio (.mp3, .wav, .m4a, .flac: transcribed) and YouTube URLs (their "
        "transcript). Takes a local path or a URL. It does not handle images: use image_inspector. "
        "Example: inspect_file_as_text(file_path=\"/data/report.pdf\", question=\"What was the revenue in "
        "2021?\")"
    )
    args_schema: type[BaseModel] = InspectInput
    env: ToolEnv
    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _run(self, file_path: str, question: str | None = None) -> str:  # pragma: no cover - async only
        raise NotImplementedError("inspect_file_as_text runs asynchronously")

    async def _arun(self, file_path: str, question: str | None = None) -> str:
        return await inspect_source(self.env, file_path, question)


class ExtractZipInput(BaseModel):
    zip_path: str = Field(description="Path or URL of the .zip archive.")
    question: str | None = Field(default=None, description="Optional question about the archive's files.")


class ExtractZipTool(BaseTool):
    """Extract a zip archive safely and read its files."""

    name: str = "extract_zip"
    description: str = (
        "Extract a .zip archive (a path or URL) into the run's work directory and read the extracted files in "
        "the same step: returns the list of files with their paths and their text (PDF, office files, CSV, "
        "text), or the answer to your question about them. Images and audio in the archive are listed with "
        "their paths for image_inspector / inspect_file_as_text. Unsafe entries (paths leaving the archive, "
        "links) are skipped and zip bombs are refused. Example: extract_zip(zip_path=\"/data/files.zip\", "
        "question=\"Which file lists the 2019 budget?\")"
    )
    args_schema: type[BaseModel] = ExtractZipInput
    env: ToolEnv
    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _run(self, zip_path: str, question: str | None = None) -> str:  # pragma: no cover - async only
        raise NotImplementedError("extract_zip runs asynchronously")

    async def _arun(self, zip_path: str, question: str | None = None) -> str:
        loaded = await load(self.env, zip_path)
        if kind_of(loaded.data, filename=loaded.name, mimetype=loaded.mimetype) != "archive":
            raise ToolFailure(f"{loaded.name} is not a zip archive: use inspect_file_as_text for it")
        return await extract_and_inspect(self.env, loaded, (question or "").strip() or None)


def make_text_inspector(env: ToolEnv) -> TextInspectorTool:
    """The ``inspect_file_as_text`` tool of one run."""
    return TextInspectorTool(env=env)


def make_extract_zip(env: ToolEnv) -> ExtractZipTool:
    """The ``extract_zip`` tool of one run."""
    return ExtractZipTool(env=env)
