"""Audio transcription (through the tools' model provider, when it offers one) and YouTube transcripts.

A transcription is a paid model call like any other: its usage (tokens, or seconds of audio for ``whisper-1``) goes
into the run's usage through the tool environment, priced by :mod:`kgagents.core.usage`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlparse

from kgagents.core.extras import require
from kgagents.core.retry import is_transient
from kgagents.core.usage import Usage, usage_entry
from kgagents.tools.base import ToolFailure
from kgagents.tools.manager import ToolEnv

#: OpenAI's upload limit for one transcription.
MAX_AUDIO_BYTES = 25 * 1024 * 1024

TRANSCRIPTION_UNAVAILABLE = (
    "Audio transcription is unavailable: the tools' model provider ({provider}) offers no transcription API "
    "here. Configure an OpenAI or OpenAI-compatible tools model (KGAGENTS_TOOLS_MODEL=openai:..., or "
    "KGAGENTS_BASE_URL for a server that serves /v1/audio/transcriptions).")


def transcription_client(env: ToolEnv) -> Any | None:
    """The async OpenAI client behind the tools' model, when it has one (OpenAI or a compatible server)."""
    given = env.extra.get("transcription_client")
    if given is not None:
        return given
    client = getattr(env.llm, "root_async_client", None)
    audio = getattr(client, "audio", None)
    return client if audio is not None and hasattr(audio, "transcriptions") else None


async def transcribe(env: ToolEnv, data: bytes, filename: str) -> str:
    """The text of an audio file, by the provider's transcription model (``KGAGENTS_TRANSCRIPTION_MODEL``)."""
    client = transcription_client(env)
    if client is None:
        provider = type(env.llm).__name__ if env.llm is not None else "none configured"
        raise ToolFailure(TRANSCRIPTION_UNAVAILABLE.format(provider=provider))
    if len(data) > MAX_AUDIO_BYTES:
        raise ToolFailure(f"{filename} is {len(data) / 2**20:.1f} MB; transcription takes files up to "
                          f"{MAX_AUDIO_BYTES / 2**20:.0f} MB")
    model = getattr(env.settings, "transcription_model", None) or "whisper-1"
    if env.budget_guard is not None:
        env.budget_guard.admit()  # the run's budget: a paid call, refused (not retried) once it is reached
    try:
        result = await client.audio.transcriptions.create(model=model, file=(filename, data))
    except Exception as exc:
        if is_transient(exc):
            raise
        raise ToolFailure(f"transcription of {filename} failed: {type(exc).__name__}: {exc}") from exc
    env.add_usage(transcription_usage(model, result))  # counted for the run's budget too
    text = getattr(result, "text", None)
    if text is None and isinstance(result, str):
        text = result
    if not text or not str(text).strip():
        return "[The transcription is empty: the audio may contain no speech.]"
    return str(text).strip()


def transcription_usage(model: str, result: Any) -> Usage:
    """The usage of one transcription as the provider reports it: tokens (``gpt-4o-transcribe``) or seconds of
    audio (``whisper-1``); a reply without usage (an older server) still counts the call, at an unknown cost."""
    usage: Any = getattr(result, "usage", None)
    kind = getattr(usage, "type", None)
    if kind == "tokens":
        return usage_entry(model, int(usage.input_tokens or 0), int(usage.output_tokens or 0))
    if kind == "duration":
        return usage_entry(model, 0, 0, audio_seconds=float(usage.seconds or 0.0))
    return usage_entry(model, 0, 0, measured=False)


_YOUTUBE_HOSTS = {"youtube.com", "www.youtube.com", "m.youtube.com", "music.youtube.com", "youtu.be",
                  "www.youtube-nocookie.com", "youtube-nocookie.com"}
_VIDEO_ID = re.compile(r"^[A-Za-z0-9_-]{11}$")


def youtube_video_id(url: str) -> str | None:
    """The video id of a YouTube address (watch, youtu.be, shorts, embed, live); ``None`` for other URLs."""
    try:
        parsed = urlparse(url.strip())
    except ValueError:
        return None
    host = (parsed.hostname or "").lower()
    if host not in _YOUTUBE_HOSTS:
        return None
    candidate: str | None = None
    if host == "youtu.be":
        candidate = parsed.path.strip("/").split("/")[0]
    elif parsed.path == "/watch":
        values = parse_qs(parsed.query).get("v")
        candidate = values[0] if values else None
    else:
        parts = [p for p in parsed.path.split("/") if p]
        if len(parts) >= 2 and parts[0] in {"shorts", "embed", "live", "v"}:
            candidate = parts[1]
    return candidate if candidate and _VIDEO_ID.match(candidate) else None


Fetcher = Callable[[str], list[dict[str, Any]]]


def _default_fetcher(video_id: str) -> list[dict[str, Any]]:
    YouTubeTranscriptApi = require("youtube_transcript_api", "YouTube transcripts").YouTubeTranscriptApi

    transcript = YouTubeTranscriptApi().fetch(video_id, languages=("en", "en-US", "en-GB"))
    return transcript.to_raw_data()


async def youtube_transcript(env: ToolEnv, url: str) -> str:
    """The transcript of a YouTube video (``youtube-transcript-api``; ``env.extra["youtube_fetcher"]``, a
    function ``video_id -> [{"text", "start", "duration"}]``, replaces it)."""
    video_id = youtube_video_id(url)
    if video_id is None:
        raise ToolFailure(f"not a YouTube video address: {url}")
    fetcher: Fetcher = env.extra.get("youtube_fetcher") or _default_fetcher
    try:
        snippets = await asyncio.to_thread(fetcher, video_id)
    except Exception as exc:
        text = str(exc)
        cause = re.search(r"caused by:\s*\n\s*(.+)", text)
        reason = cause.group(1).strip() if cause else next(
            (line.strip() for line in text.splitlines() if line.strip()), "no details")
        raise ToolFailure(f"no transcript is available for YouTube video {video_id}: "
                          f"{type(exc).__name__}: {reason[:300]}") from exc
    lines = []
    for s in snippets:
        start = float(s.get("start", 0.0))
        lines.append(f"[{int(start // 60):02d}:{int(start % 60):02d}] {str(s.get('text', '')).strip()}")
    if not lines:
        return "[The transcript is empty.]"
    return "\n".join(lines)
