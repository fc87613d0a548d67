"""Answering a question about a long text with the tools' LLM, so the raw text never reaches the controller.

A text that fits one prompt is answered in one call; a longer one is read in parts (each part's relevant
notes, concurrently), then the notes are combined into one answer.
"""

from __future__ import annotations

import asyncio

from langchain_core.messages import HumanMessage, SystemMessage

from kgagents.prompts import files as P
from kgagents.tools.base import ToolFailure
from kgagents.tools.manager import ToolEnv

#: Characters of document per LLM call (about 15k tokens).
CHUNK_CHARS = 60_000
#: At most this many parts are read; the rest of a longer text is left out (and the answer says so).
MAX_CHUNKS = 8
NOTHING = "NOTHING RELEVANT"


def _text(reply: object) -> str:
    text = getattr(reply, "text", None)
    if isinstance(text, str):
        return text.strip()
    return str(getattr(reply, "content", reply)).strip()


def chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """``text`` in parts of about ``size`` characters, cut at line ends where possible."""
    parts, start = [], 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            cut = text.rfind("\n", start + size // 2, end)
            end = cut + 1 if cut > start else end
        parts.append(text[start:end])
        start = end
    return parts or [""]


async def answer_about_text(env: ToolEnv, text: str, question: str, *, title: str | None = None,
                            source: str | None = None) -> str:
    """The tools' LLM answers ``question`` from ``text`` (see the module docstring)."""
    if env.llm is None:
        raise ToolFailure("no chat model is configured for the tools, so questions about documents cannot "
                          "be answered (set KGAGENTS_MODEL or KGAGENTS_TOOLS_MODEL)")
    title = title or "document"
    source = source or title
    parts = chunks(text)
    system = SystemMessage(P.DOCUMENT_QA_SYSTEM)
    if len(parts) == 1:
        reply = await env.ask_llm([system, HumanMessage(P.DOCUMENT_QA.format(
            title=title, source=source, text=text, question=question))])
        return _text(reply)
    left_out = len(parts) - MAX_CHUNKS
    parts = parts[:MAX_CHUNKS]

    async def notes(i: int, part: str) -> str:
        reply = await env.ask_llm([system, HumanMessage(P.CHUNK_NOTES.format(
            title=title, source=source, part=i + 1, parts=len(parts), text=part, question=question))])
        return _text(reply)

    found = await asyncio.gather(*(notes(i, p) for i, p in enumerate(parts)))
    relevant = [f"[part {i + 1}] {n}" for i, n in enumerate(found) if n and NOTHING not in n.upper()]
    if not relevant:
        relevant = ["(no part of the document was relevant to the question)"]
    if left_out > 0:
        relevant.append(f"(the last {left_out} part(s) of the document, about {left_out * CHUNK_CHARS:,} "
                        "characters, were not read: the document is too long)")
    reply = await env.ask_llm([system, HumanMessage(P.COMBINE_NOTES.format(
        title=title, source=source, notes="\n\n".join(relevant), question=question))])
    return _text(reply)
