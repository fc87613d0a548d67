"""Turning files into Markdown with ``markitdown``: HTML, PDF, DOCX, XLSX, PPTX, CSV, JSON, XML, text.

Text in an unknown or wrong encoding is decoded with a fallback (declared charset, UTF-8, detection, latin-1)
rather than failing. A file that cannot be converted raises :class:`ConversionError` with a short reason.
Archives are never opened here (see :mod:`kgagents.tools.files.zip` for safe extraction).
"""

from __future__ import annotations

import io
import mimetypes
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

import charset_normalizer

from kgagents.core.extras import install_hint
from kgagents.tools.base import ToolFailure
from kgagents.tools.files.zip import ZipBombError, ZipLimits, check_limits

#: Files larger than this are not converted (the converters hold the whole file in memory).
MAX_CONVERT_BYTES = 100 * 1024 * 1024

TEXT_EXTENSIONS = {
    ".txt", ".text", ".md", ".markdown", ".rst", ".log", ".csv", ".tsv", ".json", ".jsonl", ".jsonld", ".xml",
    ".yaml", ".yml", ".toml", ".ini", ".cfg", ".py", ".js", ".ts", ".java", ".c", ".h", ".cpp", ".rs", ".go",
    ".sh", ".sql", ".tex", ".bib", ".srt", ".vtt", ".pdb", ".html", ".htm", ".svg",
}
IMAGE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff", ".svg", ".ico", ".heic"}
AUDIO_EXTENSIONS = {".mp3", ".wav", ".m4a", ".flac", ".ogg", ".oga", ".opus", ".aac", ".webm", ".mp4", ".mpga",
                    ".mpeg"}
ARCHIVE_EXTENSIONS = {".zip"}
#: Office formats are zip files too; they are documents, not archives.
OFFICE_EXTENSIONS = {".docx", ".xlsx", ".pptx", ".xls", ".epub"}


#: Zip-bomb limits for office files and EPUBs (their XML parts compress well, so a higher ratio is normal).
PACKAGE_LIMITS = ZipLimits(max_files=10_000, max_total_bytes=2 * MAX_CONVERT_BYTES, max_ratio=500.0)


class ConversionError(ToolFailure):
    """A file could not be turned into text."""


@dataclass
class Document:
    """A file as Markdown."""

    text: str
    title: str | None = None
    kind: str = ""
    """What the file was (an extension such as ``.pdf`` or a content type)."""


_converter: Any = None
_converter_lock = threading.Lock()


def _markitdown() -> Any:
    """The process's ``MarkItDown`` converter (stateless: it only maps bytes to text, so it is shared)."""
    global _converter
    with _converter_lock:
        if _converter is None:
            # markitdown: about a second to import, loaded when a file is converted
            from markitdown import MarkItDown

            _converter = MarkItDown(enable_plugins=False)
        return _converter


def extension_of(name: str | None) -> str:
    """The lower-case extension of a file name, path or URL (``""`` when none)."""
    if not name:
        return ""
    if "://" in name:
        name = unquote(urlparse(name).path)
    return PurePosixPath(name.replace("\\", "/")).suffix.lower()


def kind_of(data: bytes, *, filename: str | None = None, mimetype: str | None = None) -> str:
    """A coarse class of a file: ``archive``, ``image``, ``audio``, ``svg`` or ``document``."""
    ext = extension_of(filename)
    mime = (mimetype or "").lower()
    head = data[:512].lstrip()
    if ext == ".svg" or mime == "image/svg+xml" or (head.startswith((b"<svg", b"<?xml")) and b"<svg" in data[:2048]):
        return "svg"
    if ext in OFFICE_EXTENSIONS:
        return "document"
    if ext in ARCHIVE_EXTENSIONS or mime in {"application/zip", "application/x-zip-compressed"}:
        return "archive"
    if data.startswith(b"PK\x03\x04") and ext not in OFFICE_EXTENSIONS and not mime.startswith(
            "application/vnd.openxmlformats"):
        return "archive"
    if ext in IMAGE_EXTENSIONS or mime.startswith("image/"):
        return "image"
    if ext in AUDIO_EXTENSIONS or mime.startswith(("audio/", "video/")):
        return "audio"
    return "document"


def decode_text(data: bytes, charset: str | None = None) -> str:
    """Bytes as text: the declared charset, UTF-8, a byte-order mark, detection (on enough text), then
    Windows-1252 and latin-1 (which never fails)."""
    for candidate in (charset, "utf-8"):
        if not candidate:
            continue
        try:
            return data.decode(candidate)
        except (UnicodeDecodeError, LookupError):
            continue
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    if len(data) >= 256:
        encoding = _detect(data[:1_000_000])
        if encoding:
            try:
                return data.decode(encoding)
            except (UnicodeDecodeError, LookupError):
                pass
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return data.decode("latin-1")


#: Among equally likely detected encodings, the most widespread wins (cp1250 and cp1252 often tie).
_PREFERRED = ("cp1252", "iso8859_15", "latin_1", "cp1251", "koi8_r", "gb18030", "big5", "shift_jis", "euc_kr")


def _detect(data: bytes) -> str | None:
    matches = list(charset_normalizer.from_bytes(data))
    if not matches or matches[0].chaos >= 0.3:
        return None
    best = matches[0]
    tied = [m.encoding for m in matches if m.chaos <= best.chaos + 0.01 and m.coherence >= best.coherence - 0.01]
    for name in _PREFERRED:
        if name in tied:
            return name
    return best.encoding


def _is_text(ext: str, mimetype: str) -> bool:
    return (ext in TEXT_EXTENSIONS and ext not in {".html", ".htm", ".csv", ".svg"}) or (
        mimetype.startswith("text/") and mimetype not in {"text/html", "text/csv"}) or mimetype in {
        "application/json", "application/xml", "application/x-yaml", "application/ld+json"}


def convert_bytes(data: bytes, *, filename: str | None = None, mimetype: str | None = None,
                  charset: str | None = None, url: str | None = None) -> Document:
    """Convert a file's bytes to Markdown (see the module docstring). Raises :class:`ConversionError`."""
    from markitdown import (  # markitdown: about a second to import, loaded when a file is converted
        FileConversionException,
        MissingDependencyException,
        StreamInfo,
        UnsupportedFormatException,
    )

    if len(data) > MAX_CONVERT_BYTES:
        raise ConversionError(f"the file is {len(data) / 2**20:.1f} MB; files over "
                              f"{MAX_CONVERT_BYTES / 2**20:.0f} MB are not converted")
    name = filename or (unquote(urlparse(url).path.rsplit("/", 1)[-1]) if url else None)
    ext = extension_of(name)
    mime = (mimetype or "").lower()
    if not mime and ext:
        mime = (mimetypes.guess_type("x" + ext, strict=False)[0] or "").lower()
    kind = kind_of(data, filename=name, mimetype=mime)
    if kind == "archive":
        raise ConversionError("this is a zip archive; extract it with the extract_zip tool")
    if not data.strip():
        return Document(text="", title=name, kind=ext or mime)
    if _is_text(ext, mime):
        # Plain text needs no converter, only a robust decoding (a JSON or XML file stays as it is).
        return Document(text=decode_text(data, charset), title=name, kind=ext or mime)
    if data.startswith(b"PK\x03\x04"):
        _check_packaged(data)
    info = StreamInfo(mimetype=mime or None, extension=ext or None, charset=charset, filename=name, url=url)
    if ext == ".pdf" or mime == "application/pdf":
        return _convert_pdf(data, info, name)
    try:
        result = _markitdown().convert_stream(io.BytesIO(data), stream_info=info)
    except MissingDependencyException as exc:
        raise _needs_files_extra(ext or mime) from exc
    except UnsupportedFormatException as exc:
        if _looks_textual(data):
            return Document(text=decode_text(data, charset), title=name, kind=ext or mime)
        raise ConversionError(f"unsupported file format ({ext or mime or 'unknown type'})") from exc
    except FileConversionException as exc:
        if _missing_dependency(exc):
            raise _needs_files_extra(ext or mime) from exc
        raise ConversionError(f"could not convert the {ext or mime or 'file'}: {_first_cause(exc)}") from exc
    except Exception as exc:
        raise ConversionError(f"could not convert the {ext or mime or 'file'}: {type(exc).__name__}: {exc}") from exc
    text = result.markdown if hasattr(result, "markdown") else result.text_content
    return Document(text=text, title=result.title or name, kind=ext or mime)


def _check_packaged(data: bytes) -> None:
    """Office files and EPUBs are zip archives that their converters expand in memory: refuse zip bombs first
    (declared sizes are what ``zipfile`` lets a reader expand, so checking them suffices)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ConversionError(f"the file is a damaged zip package: {exc}") from exc
    try:
        check_limits(infos, PACKAGE_LIMITS)
    except ZipBombError as exc:
        raise ConversionError(f"refused: {exc}") from exc


def _convert_pdf(data: bytes, info: Any, name: str | None) -> Document:
    """PDFs go to the PDF converter only, so that a broken one gives an error instead of its raw bytes."""
    # markitdown: about a second to import, loaded when a file is converted
    from markitdown import MissingDependencyException
    from markitdown.converters import PdfConverter

    if not data.lstrip()[:1024].find(b"%PDF") >= 0:
        raise ConversionError("not a valid PDF file (no %PDF header)")
    try:
        result = PdfConverter().convert(io.BytesIO(data), info)
    except MissingDependencyException as exc:
        raise _needs_files_extra(".pdf") from exc
    except Exception as exc:
        message = str(exc).strip().splitlines()
        raise ConversionError(f"could not read the PDF (corrupt or encrypted?): {type(exc).__name__}"
                              f"{': ' + message[0][:200] if message else ''}") from exc
    text = result.markdown if hasattr(result, "markdown") else result.text_content
    if not text.strip():
        text = "[The PDF contains no extractable text (it may be scanned images).]"
    return Document(text=text, title=result.title or name, kind=".pdf")


def _needs_files_extra(kind: str) -> ConversionError:
    """The error for a format whose converter comes with the ``files`` extra."""
    return ConversionError(f"converting {kind or 'this file'} needs the `files` extra, which is not "
                           f"installed: {install_hint('files')}")


def _missing_dependency(exc: Exception) -> bool:
    """Whether a converter gave up for want of an optional package (markitdown names it in its error)."""
    # markitdown: about a second to import, loaded when a file is converted
    from markitdown import MissingDependencyException

    return any(isinstance(getattr(attempt, "exc_info", (None, None))[1], MissingDependencyException)
               for attempt in getattr(exc, "attempts", None) or [])


def _looks_textual(data: bytes) -> bool:
    sample = data[:4096]
    return b"\x00" not in sample


def _first_cause(exc: Exception) -> str:
    attempts = getattr(exc, "attempts", None) or []
    for attempt in attempts:
        info = getattr(attempt, "exc_info", None)
        if info and info[1] is not None:
            message = str(info[1]).strip().splitlines()
            return f"{type(info[1]).__name__}: {message[0] if message else ''}"[:300]
    return str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__


def convert_path(path: str | Path) -> Document:
    """Convert a local file to Markdown (see :func:`convert_bytes`). It opens ``path`` as it is: tools that
    read a path the model chose go through :mod:`kgagents.tools.files.access` instead."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_CONVERT_BYTES:
        raise ConversionError(f"{path.name} is {size / 2**20:.1f} MB; files over "
                              f"{MAX_CONVERT_BYTES / 2**20:.0f} MB are not converted")
    return convert_bytes(path.read_bytes(), filename=path.name)
