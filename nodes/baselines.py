"""Nodes of the KGoT paper's baselines: zero-shot (the model alone) and simple RAG over tool outputs.

Simple RAG keeps KGoT's tool loop but replaces the knowledge graph by a vector store: every tool-call output is
cut into chunks, the chunks are embedded with the packaged sentence-transformers model and searched with FAISS,
and the model answers from the chunks closest to the question. The chunks live in the state (so checkpoints
hold them); the FAISS index is rebuilt from them when needed.

As in KGoT, a model call that fails for good never ends the run: a failed tool-call step makes no calls, a failed
answer is "No solution found"; each failure is logged in ``failures``.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from kgagents.usage import Usage, merge_usage
from nodes.context import Context
from nodes.kgot import (
    ToolCallRecord,
    call_key,
    describe_attachments,
    describe_tool_calls,
    problem_text,
    tool_manager,
)
from nodes.llm import LLMCaller, LLMError, accounting
from nodes.runtime import context_of, for_run, new_run_key
from nodes.state import NO_SOLUTION, Failure, append, jsonable
from prompts import baselines as P


@dataclass(kw_only=True)
class BaselineContext(Context):
    """KGoT's context plus the retrieval settings of simple RAG."""

    rag_top_k: int = 5
    """How many chunks the model sees."""
    rag_chunk_chars: int = 1000
    """Tool outputs are cut into chunks of about this many characters."""
    embedding_model: str | None = None
    """A sentence-transformers model path or name; default: the packaged all-MiniLM-L6-v2."""


class Chunk(TypedDict):
    iteration: int
    source: str
    text: str


class BaselineState(TypedDict, total=False):
    question: str
    attachments: list[str]
    iteration: int
    pending_tool_calls: list[dict[str, Any]]
    tool_calls: Annotated[list[ToolCallRecord], append]
    chunks: Annotated[list[Chunk], append]
    indexed: int
    retrieved: list[str]
    reply: str
    final_answer: str
    usage: Annotated[Usage, merge_usage]
    failures: Annotated[list[Failure], append]
    run_key: str  # a run without a checkpointer only (nodes.runtime.new_run_key)


def final_answer_of(reply: str) -> str:
    """The text after the last ``FINAL ANSWER:`` (case-insensitive); the whole reply when there is none."""
    matches = list(re.finditer(re.escape(P.FINAL_ANSWER_MARK), reply, re.IGNORECASE))
    text = reply[matches[-1].end():] if matches else reply
    text = text.strip().strip("`*").strip()
    return text.splitlines()[0].strip() if text else ""


def _ctx(runtime: Runtime[Context] | None) -> Context:
    return context_of(runtime)


def _setting(ctx: Context, name: str, default: Any) -> Any:
    return getattr(ctx, name, default)


# ----------------------------------------------------------------------------------------------------------------
# Zero-shot
# ----------------------------------------------------------------------------------------------------------------
async def receive_task(state: BaselineState, config: RunnableConfig) -> dict[str, Any]:
    """Validate the task; a resumed thread keeps its counters, a run without a checkpointer gets its own key."""
    question = (state.get("question") or "").strip()
    if not question:
        raise ValueError("the task has no question: give {'question': '...'}")
    out: dict[str, Any] = {"question": question, "attachments": [str(p) for p in state.get("attachments") or []]}
    if "iteration" not in state:
        out.update(iteration=0, indexed=0)
    if "run_key" not in state:
        out.update(new_run_key(config))
    return out


async def answer_zero_shot(state: BaselineState, runtime: Runtime[Context]) -> dict[str, Any]:
    """The model alone answers (no tools, no retrieval)."""
    ctx = _ctx(runtime)
    llm = LLMCaller(ctx, "graph_executor")
    prompt = P.render(P.ZERO_SHOT, format_rules=P.FORMATTERS[ctx.answer_formatter], problem=state["question"],
                      attachments=describe_attachments(state.get("attachments")))
    return await _answer(llm, prompt)


async def _answer(llm: LLMCaller, prompt: str) -> dict[str, Any]:
    """The model's reply and the final answer in it (``NO_SOLUTION`` when the call fails for good)."""
    try:
        reply = await llm.text(prompt)
    except LLMError as exc:
        llm.failed(exc, f"the answer is {NO_SOLUTION!r}")
        return {"reply": "", "final_answer": NO_SOLUTION, **accounting(llm)}
    return {"reply": reply, "final_answer": final_answer_of(reply), **accounting(llm)}


# ----------------------------------------------------------------------------------------------------------------
# Simple RAG
# ----------------------------------------------------------------------------------------------------------------
def chunk_text(text: str, size: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``size`` characters, at line or word boundaries where possible."""
    text = text.strip()
    if len(text) <= size:
        return [text] if text else []
    pieces, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = max(text.rfind("\n", start, end), text.rfind(" ", start, end))
            if cut > start + size // 2:
                end = cut
        pieces.append(text[start:end].strip())
        start = end
    return [p for p in pieces if p]


def retrieve(chunks: list[Chunk], query: str, ctx: Context) -> list[str]:
    """The ``rag_top_k`` chunk texts closest to ``query`` (FAISS over sentence embeddings; CPU-bound: nodes run it
    in a worker thread)."""
    if not chunks:
        return []
    from tools.pgraph.embeddings import EmbeddingIndex, load_embedder

    texts = list(dict.fromkeys(f"[{c['source']}] {c['text']}" for c in chunks))
    index = EmbeddingIndex(texts, load_embedder(_setting(ctx, "embedding_model", None)))
    return [text for text, _ in index.search(query, _setting(ctx, "rag_top_k", 5))]


def describe_chunks(texts: list[str]) -> str:
    return "\n\n".join(f"<chunk_{i + 1}>\n{t}\n</chunk_{i + 1}>" for i, t in enumerate(texts)) or "(none yet)"


async def check_iteration(state: BaselineState) -> dict[str, Any]:
    """Nothing to compute: the router compares the iteration with ``max_iterations``."""
    return {}


async def define_tool_calls(state: BaselineState, runtime: Runtime[Context], config: RunnableConfig) -> dict[str, Any]:
    """The tool executor sees the retrieved chunks and calls tools for what is missing (none: answer now)."""
    ctx = _ctx(runtime)
    manager = await tool_manager(ctx, for_run(config, state), attachments=state.get("attachments") or ())
    retrieved = await asyncio.to_thread(retrieve, state.get("chunks") or [], state["question"], ctx)
    llm = LLMCaller(ctx, "tool_executor")
    prompt = P.render(P.RAG_TOOL_CALLS, problem=state["question"],
                      attachments=describe_attachments(state.get("attachments")), retrieved=describe_chunks(retrieved),
                      tool_calls_made=describe_tool_calls(state.get("tool_calls") or []))
    try:
        reply = await llm.message(prompt, tools=manager.get_tools())
    except LLMError as exc:
        llm.failed(exc, "no tool calls: the answer comes from the chunks so far")
        return {"pending_tool_calls": [], "retrieved": retrieved, **accounting(llm)}
    pending, seen = [], set()
    for call in reply.tool_calls:
        key = call_key(call["name"], call.get("args") or {})
        if key not in seen:
            seen.add(key)
            pending.append({"id": call.get("id") or f"call_{len(pending)}", "name": call["name"],
                            "args": jsonable(call.get("args") or {})})
    return {"pending_tool_calls": pending, "retrieved": retrieved, "usage": llm.usage}


async def index_tool_outputs(state: BaselineState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Cut this iteration's new tool outputs into chunks; the iteration ends here."""
    ctx = _ctx(runtime)
    calls = list(state.get("tool_calls") or [])
    new = calls[state.get("indexed", 0):]
    chunks: list[Chunk] = []
    for call in new:
        if call.get("cached"):
            continue
        source = f"{call['name']}({json.dumps(call['args'], ensure_ascii=False)[:200]})"
        for piece in chunk_text(call["output"], _setting(ctx, "rag_chunk_chars", 1000)):
            chunks.append(Chunk(iteration=state.get("iteration", 0), source=source, text=piece))
    return {"chunks": chunks, "indexed": len(calls), "iteration": state.get("iteration", 0) + 1,
            "pending_tool_calls": []}


async def retrieve_and_answer(state: BaselineState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Answer from the chunks closest to the question."""
    ctx = _ctx(runtime)
    retrieved = await asyncio.to_thread(retrieve, state.get("chunks") or [], state["question"], ctx)
    llm = LLMCaller(ctx, "graph_executor")
    prompt = P.render(P.RAG_ANSWER, format_rules=P.FORMATTERS[ctx.answer_formatter], problem=problem_text(state),
                      retrieved=describe_chunks(retrieved))
    return {"retrieved": retrieved, **await _answer(llm, prompt)}
