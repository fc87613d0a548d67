"""The run's start: the input checked, the graph resolved, the web pages converted and ranked."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from langgraph.runtime import Runtime

from kgagents.nodes.agent_g.context import AgentGContext, agent_g_context_of
from kgagents.nodes.agent_g.state import AgentGState, Page
from kgagents.nodes.llm import metered
from kgagents.nodes.retriever_bank import (
    rank_pages,
)
from kgagents.nodes.served import graph_source, served_now
from kgagents.tools.files.convert import convert_bytes
from kgagents.tools.pgraph import resolve
from kgagents.tools.pgraph.embedding_cache import EmbeddingCache, embedding_cache

#: Characters of a page's text that its passages are chosen from (the rest of a very long page is not read).
PAGE_TEXT_LIMIT = 60_000
#: A Markdown link or image (``[text](target)``), read as its text alone.
_MARKDOWN_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")


#: The name of the HTML-to-text conversion in an :class:`EmbeddingCache` (a change of it gets a new name).
PAGE_TEXT_KIND = "page-html-markdown-v1"


def html_text(html: str, max_chars: int = PAGE_TEXT_LIMIT, cache: EmbeddingCache | None = None) -> str:
    """A page's HTML as text (the project's HTML converter; links read as their text), kept in ``cache`` when
    given; empty when it has none."""
    if not html.strip():
        return ""
    if cache is not None:
        return cache.text(f"{PAGE_TEXT_KIND}:{max_chars}", html, lambda: html_text(html, max_chars))
    try:
        text = convert_bytes(html.encode("utf-8"), filename="page.html").text
    except Exception:  # noqa: BLE001 - an unconvertible page falls back to its snippet
        text = ""
    if not text.strip():
        return ""
    for _ in range(2):  # a linked image is a link around an image
        text = _MARKDOWN_LINK.sub(r"\1", text)
    return text[:max_chars]


def page_text(page: Page, max_chars: int = PAGE_TEXT_LIMIT, cache: EmbeddingCache | None = None) -> str:
    """A page as text: its converted HTML (:func:`html_text`), else its snippet."""
    if page.get("text"):
        return str(page["text"])[:max_chars]
    return html_text(str(page.get("html") or ""), max_chars, cache) or str(page.get("snippet") or "")


def page_texts(pages: list[Page], cache: EmbeddingCache | None = None) -> list[str]:
    """:func:`page_text` of each page, the same HTML (a page the results list twice) converted once."""
    converted: dict[str, str] = {}
    out = []
    for page in pages:
        html = "" if page.get("text") else str(page.get("html") or "")
        if html and html not in converted:
            converted[html] = html_text(html, cache=cache)
        out.append((converted[html] or str(page.get("snippet") or "")) if html else page_text(page))
    return out


@metered  # the pages' embeddings
async def initialise(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """Check the input, resolve the graph, convert the pages to text, keep each page's passages that speak to
    the question and rank the pages by similarity (once)."""
    ctx = agent_g_context_of(runtime)
    if state.get("t"):
        raise ValueError("this thread already holds an Agent-G run; continue it without new input, or start a new "
                         "thread for a new question")
    question = (state.get("question") or "").strip()
    if not question:
        raise ValueError("the task has no question: give {'question': '...', 'graph': ..., 'pages': [...]}")
    if ctx.task == "retrieval" and not state.get("graph"):
        raise ValueError("the retrieval task needs a knowledge base: give 'graph' (a name or path)")
    out: dict[str, Any] = {"question": question, "t": 0, "feedback": ""}
    oracles = ctx.oracle_validator or ctx.oracle_commentor
    if oracles and not state.get("oracle"):
        raise ValueError("the oracle ablations need the gold answer: run them with kgagents eval, which hands it "
                         "over (the input's oracle field)")
    out["oracle"] = state.get("oracle") if oracles else None  # no later node, prompt or checkpoint holds it
    if state.get("graph"):
        out["graph_ref"] = await asyncio.to_thread(resolve, graph_source(state["graph"], served=served_now()))
    pages = list(state.get("pages") or [])
    if pages:
        cache = embedding_cache(ctx.embedding_cache)
        texts = await asyncio.to_thread(page_texts, pages, cache)
        kept, order = await asyncio.to_thread(rank_pages, question,
                                              [(str(p.get("name", "")), t) for p, t in zip(pages, texts, strict=True)],
                                              ctx.embedder(), max_chars=ctx.page_chars, cache=cache)
        pages = [Page(name=str(p.get("name", "")), url=str(p.get("url", "")), snippet=str(p.get("snippet", "")),
                      text=t) for p, t in zip(pages, kept, strict=True)]
        out.update(pages=pages, page_order=[[i, s] for i, s in order])
    return out
