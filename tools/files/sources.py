"""Where the file tools read from: a local path (a task attachment, a file in the run's work dir; see
:mod:`kgagents.tools.files.access`) or a URL."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from kgagents.tools.base import ToolFailure
from kgagents.tools.files.access import read_allowed
from kgagents.tools.files.convert import MAX_CONVERT_BYTES
from kgagents.tools.http import download, limits_of
from kgagents.tools.manager import ToolEnv


@dataclass
class Loaded:
    """A file's bytes and what is known about it."""

    data: bytes
    name: str
    """File name (for the type guess and for messages)."""
    source: str
    """The path or final URL it came from."""
    mimetype: str | None = None
    charset: str | None = None
    path: Path | None = None


def is_url(source: str) -> bool:
    """Whether ``source`` is an http(s) address."""
    return urlparse(source.strip()).scheme.lower() in {"http", "https"}


async def load(env: ToolEnv, source: str, *, max_bytes: int = MAX_CONVERT_BYTES) -> Loaded:
    """Read a local file the run may read (``kgagents.tools.files.access``; in a worker thread: file I/O never blocks
    the event loop) or download a URL (within the run's fetch limits)."""
    if not source or not source.strip():
        raise ToolFailure("no file path or URL was given")
    if is_url(source):
        got = await download(source.strip(), limits_of(env.extra))
        name = got.filename or Path(urlparse(got.url).path).name or "download"
        return Loaded(data=got.content, name=name, source=got.url, mimetype=got.mimetype or None,
                      charset=got.charset)
    return await asyncio.to_thread(_read_local, env, source, max_bytes)


def _read_local(env: ToolEnv, source: str, max_bytes: int) -> Loaded:
    data, path = read_allowed(env, source, max_bytes)
    return Loaded(data=data, name=path.name, source=str(path), path=path)
