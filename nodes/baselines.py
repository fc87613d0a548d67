"""Nodes of the KGoT paper's baselines (§5 "Comparison Baselines", Figure 5).

- **Zero-shot**: the model alone.
- **Simple RAG**: the corpus is the tool outputs of KGoT's own run of the same task, one chunk per tool-call
  output (the paper's "tool-call granularity"; a long output is embedded from its beginning but stays one
  chunk); the chunks are embedded with the packaged sentence-transformers model, searched with FAISS, and the
  model answers from the closest ones. It makes no tool call of its own ("neither RAG baseline can invoke new
  tools").
- **GraphRAG**: the same chunks; an LLM extracts entities and relations from each (structured output, one
  checkpointed task per chunk) into a static knowledge graph (NetworkX, kept in the state as node-link data);
  the entities that match the question, their neighbourhood and the chunks they came from are the context.
- **No KG**: KGoT's loop (majority vote ENHANCE/SOLVE, tool calls) with the tool outputs themselves as the task
  state instead of a knowledge graph; the solution comes straight from them. The tool executor, the tool calls,
  the math step and the solution parser are KGoT's own nodes (:mod:`kgagents.nodes.kgot`).

Where the RAG baselines' tool outputs come from (:func:`load_tool_outputs`): the task's ``tool_calls`` (KGoT's
:class:`~kgagents.nodes.kgot.ToolCallRecord` list), or a finished KGoT thread: ``kgot_thread`` in the task, read from
the context's ``kgot_checkpointer`` (default: the runs directory's checkpoints, as ``kgagents run`` keeps them), or,
in a batch evaluation, the KGoT evaluation's results directory ``kgot_results``: each item reads the KGoT item of
the same dataset, item and run (the runner's thread ids, :func:`kgagents.evals.runner.thread_id_for`). A task with none
of these is refused with a clear error.

As in KGoT, a model call that fails for good never ends the run: a failed extraction adds nothing to the graph,
a failed answer is "No solution found"; each failure is logged in ``failures``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

import networkx as nx
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from kgagents.core.config import get_settings
from kgagents.core.runs import (
    RunRegistry,
    configured_checkpointer,
    is_finished,
    is_postgres_url,
    open_checkpointer,
    without_password,
)
from kgagents.core.usage import Usage, merge_usage
from kgagents.nodes.context import caller, described, operator
from kgagents.nodes.kgot import (
    DirectSolution,
    KGoTContext,
    ToolCallRecord,
    Vote,
    context_of,
    describe_attachments,
    describe_tool_calls,
    problem_text,
    sample_votes,
    tally,
)
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.nodes.runtime import (
    EPHEMERAL,
    context_as,
    for_run,
    new_run_key,
    task_attachments,
    thread_id_of,
)
from kgagents.nodes.served import OWNER, caller_identity, served_now
from kgagents.nodes.state import NO_SOLUTION, Failure, append
from kgagents.prompts import baselines as P
from kgagents.tools.pgraph.embeddings import EmbeddingIndex, load_embedder

#: The checkpoint file of an evaluation's results directory (kgagents.evals.runner.CHECKPOINTS_FILE).
EVAL_CHECKPOINTS_FILE = "checkpoints.sqlite"


@described
@dataclass(kw_only=True)
class BaselineContext(KGoTContext):
    """KGoT's context plus where the RAG baselines find KGoT's tool outputs and how they retrieve."""

    rag_top_k: int = caller(5)
    """How many chunks simple RAG shows the model."""
    embed_chars: int = caller(2000)
    """How much of a tool output is embedded (its beginning): the embedding model reads only its first few hundred
    tokens anyway. The chunk shown to the model is the whole output."""
    embedding_model: str | None = operator(None)
    """A sentence-transformers model path or name; default: the packaged all-MiniLM-L6-v2."""
    kgot_results: str | None = operator(None)
    """A KGoT evaluation's results directory: each task reads the KGoT run of the same thread id (dataset, item,
    run) from its checkpoints."""
    kgot_checkpointer: str | None = operator(None)
    """Where the KGoT threads' checkpoints are: a SQLite file or a ``postgresql://`` URL. Default: the
    ``checkpoints.sqlite`` of ``kgot_results``, else the runs directory's (``KGAGENTS_RUNS_DIR``)."""
    graph_top_entities: int = caller(5)
    """GraphRAG: how many entities the embedding search matches to the question (beside those the question
    names)."""
    graph_hops: int = caller(1)
    """GraphRAG: how far the traversal goes from the matched entities."""
    graph_top_chunks: int = caller(3)
    """GraphRAG: how many of the chunks the retrieved entities and relations came from the model sees."""
    graph_context_chars: int = caller(12_000)
    """GraphRAG: at most this much of the retrieved graph goes into the prompt."""

    def __post_init__(self) -> None:
        for name in ("rag_top_k", "embed_chars", "graph_top_entities", "graph_top_chunks", "graph_context_chars"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1")
        if int(self.graph_hops) < 0:
            raise ValueError("graph_hops must be at least 0")


class Chunk(TypedDict):
    id: int
    iteration: int
    source: str
    """The tool call, as ``name({args})``."""
    text: str
    """The tool call's whole output."""


class Entity(BaseModel):
    name: str = Field(description="The entity's name as the text writes it")
    type: str = Field(default="", description="A short type: Person, City, Album, Number, ...")
    description: str = Field(default="", description="One sentence with the facts the text gives about it")


class Relation(BaseModel):
    source: str = Field(description="The name of the entity the relation starts from")
    relation: str = Field(description="A short verb phrase in upper snake case, e.g. LOCATED_IN")
    target: str = Field(description="The name of the entity the relation points to")
    description: str = Field(default="", description="One sentence on the relation")


class Extraction(BaseModel):
    """The entities and relations one tool output states."""

    entities: list[Entity] = Field(default_factory=list)
    relations: list[Relation] = Field(default_factory=list)


class ChunkExtraction(TypedDict):
    chunk: int
    entities: list[dict[str, str]]
    relations: list[dict[str, str]]


class TaskInput(TypedDict, total=False):
    question: str
    attachments: list[str]


class BaselineInput(TaskInput, total=False):
    tool_calls: list[ToolCallRecord]
    """The RAG baselines' corpus: KGoT's tool calls of the same task (instead of ``kgot_thread``)."""
    kgot_thread: str
    """The RAG baselines' corpus: the tool calls of this finished KGoT thread."""


class BaselineState(BaselineInput, total=False):
    corpus_source: str
    chunks: list[Chunk]
    extractions: Annotated[list[ChunkExtraction], append]
    graph: dict[str, Any]
    """GraphRAG's knowledge graph as NetworkX node-link data (``networkx.node_link_graph`` rebuilds it)."""
    matched_entities: list[str]
    retrieved: list[str]
    context: str
    reply: str
    final_answer: str
    usage: Annotated[Usage, merge_usage]
    failures: Annotated[list[Failure], append]
    run_key: str  # a run without a checkpointer only (kgagents.nodes.runtime.new_run_key)


class ChunkTask(TypedDict):
    chunk: Chunk


def final_answer_of(reply: str) -> str:
    """The text after the last ``FINAL ANSWER:`` (case-insensitive); the whole reply when there is none."""
    matches = list(re.finditer(re.escape(P.FINAL_ANSWER_MARK), reply, re.IGNORECASE))
    text = reply[matches[-1].end():] if matches else reply
    text = text.strip().strip("`*").strip()
    return text.splitlines()[0].strip() if text else ""


def _ctx(runtime: Runtime[Any] | None) -> BaselineContext:
    return context_as(runtime, BaselineContext)


def _question(state: Mapping[str, Any]) -> dict[str, Any]:
    question = (state.get("question") or "").strip()
    if not question:
        raise ValueError("the task has no question: give {'question': '...'}")
    return {"question": question}


async def _task(state: Mapping[str, Any], runtime: Runtime[Any], config: RunnableConfig) -> dict[str, Any]:
    """The task's question and attachments (given as content: written into the run's folder), and a run
    without a checkpointer's own key."""
    out = _question(state)
    if "run_key" not in state:
        out.update(new_run_key(config))
    out["attachments"] = await task_attachments(state.get("attachments"), context_of(runtime),
                                                for_run(config, {**state, **out}))
    return out


async def _answer(llm: LLMCaller, prompt: str) -> dict[str, Any]:
    """The model's reply and the final answer in it (``NO_SOLUTION`` when the call fails for good)."""
    try:
        reply = await llm.text(prompt)
    except LLMError as exc:
        llm.failed(exc, f"the answer is {NO_SOLUTION!r}")
        return {"reply": "", "final_answer": NO_SOLUTION, **accounting(llm)}
    return {"reply": reply, "final_answer": final_answer_of(reply) or NO_SOLUTION, **accounting(llm)}


# ----------------------------------------------------------------------------------------------------------------
# Zero-shot
# ----------------------------------------------------------------------------------------------------------------
async def receive_task(state: BaselineState, runtime: Runtime[Any], config: RunnableConfig) -> dict[str, Any]:
    """Validate the task; a run without a checkpointer gets its own key."""
    return await _task(state, runtime, config)


async def answer_zero_shot(state: BaselineState, runtime: Runtime[KGoTContext]) -> dict[str, Any]:
    """The model alone answers (no tools, no retrieval)."""
    ctx = context_of(runtime)
    llm = LLMCaller(ctx, "graph_executor")
    prompt = P.render(P.ZERO_SHOT, format_rules=P.FORMATTERS[ctx.answer_formatter], problem=state["question"],
                      attachments=describe_attachments(state.get("attachments")))
    return await _answer(llm, prompt)


# ----------------------------------------------------------------------------------------------------------------
# KGoT's tool outputs as the RAG baselines' corpus
# ----------------------------------------------------------------------------------------------------------------
_RECORD_KEYS = ("name", "args", "output")


def _check_records(records: Any, where: str) -> list[ToolCallRecord]:
    if not isinstance(records, list):
        raise ValueError(  # noqa: TRY004 - a malformed task, like every error here
            f"{where}: tool_calls must be a list of KGoT tool-call records, not {type(records).__name__}")
    for i, record in enumerate(records):
        if not isinstance(record, dict) or any(key not in record for key in _RECORD_KEYS):
            raise ValueError(f"{where}: tool call {i} is not a KGoT tool-call record (it needs "
                             f"{', '.join(_RECORD_KEYS)})")
    return records


def chunks_of(records: list[ToolCallRecord]) -> list[Chunk]:
    """One chunk per tool-call output: the calls that succeeded, once each (a call KGoT served again from its
    run's cache repeats an output already there); an empty output is no chunk."""
    chunks: list[Chunk] = []
    for record in records:
        if record.get("cached") or not record.get("ok", True):
            continue
        text = str(record.get("output") or "").strip()
        if not text:
            continue
        source = f"{record['name']}({json.dumps(record.get('args') or {}, ensure_ascii=False, sort_keys=True)})"
        chunks.append(Chunk(id=len(chunks), iteration=int(record.get("iteration") or 0), source=source, text=text))
    return chunks


def kgot_checkpointer_for(ctx: BaselineContext, thread_id: str) -> str:
    """Where the KGoT thread ``thread_id`` is checkpointed (see :attr:`BaselineContext.kgot_checkpointer`)."""
    if ctx.kgot_checkpointer:
        return str(ctx.kgot_checkpointer)
    if ctx.kgot_results:
        return str(Path(ctx.kgot_results) / EVAL_CHECKPOINTS_FILE)
    return RunRegistry(get_settings().runs_dir).checkpointer_for(thread_id, configured_checkpointer())


def _holds_checkpoints(path: Path) -> bool:
    """Whether the SQLite file ``path`` has LangGraph's checkpoints table (read-only: a file that is not a
    checkpoint database is left as it is, not given the tables)."""
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'checkpoints'"
                              ).fetchone() is not None
    except sqlite3.DatabaseError:
        return False


#: KGoT's graph compiler (``kgagents.graphs.kgot.compile_graph``), through which the baselines read a KGoT
#: thread's state. Nodes sit below graphs (docs/architecture.md, "The floors"): the baselines' graph module
#: hands it over when it is imported (:func:`use_kgot_graph`).
_compile_kgot: Callable[..., Any] | None = None


def use_kgot_graph(compile_graph: Callable[..., Any]) -> None:
    """Give the baselines KGoT's graph compiler, which reads a finished KGoT thread's state (its tool calls)."""
    global _compile_kgot
    _compile_kgot = compile_graph


async def read_kgot_tool_calls(thread_id: str, location: str) -> list[ToolCallRecord]:
    """The tool calls of the finished KGoT thread ``thread_id`` in the checkpointer at ``location``."""
    if _compile_kgot is None:
        raise RuntimeError("the KGoT graph is not known to the baselines: build them through "
                           "kgagents.graphs.baselines, which hands it over")
    where = without_password(location) if is_postgres_url(location) else location
    if not is_postgres_url(location):
        path = Path(location.removeprefix("sqlite:///"))
        if not path.is_file():
            raise ValueError(f"no KGoT checkpoints at {where}: run KGoT on the task first (or give its tool_calls)")
        if not await asyncio.to_thread(_holds_checkpoints, path):
            raise ValueError(f"{where} is not a checkpoint database (it has no checkpoints table)")
    async with open_checkpointer(location) as saver:
        snapshot = await _compile_kgot(saver).aget_state({"configurable": {"thread_id": thread_id}})
    if not snapshot.values:
        raise ValueError(f"no KGoT thread {thread_id!r} in {where}: run KGoT on the task first")
    if not is_finished(snapshot):
        raise ValueError(f"the KGoT thread {thread_id!r} in {where} has not finished: resume it first, so that the "
                         "baseline sees all of its tool outputs")
    return _check_records(list(snapshot.values.get("tool_calls") or []), f"KGoT thread {thread_id!r}")


async def served_kgot_tool_calls(thread_id: str, identity: str | None) -> list[ToolCallRecord]:
    """The tool calls of the finished KGoT thread ``thread_id`` of this server, for a served run: only a thread
    that the run's own caller created (its ``owner``), read through the server's API in this process; another
    caller's thread is refused as if it did not exist, and so is every thread when the caller is unknown."""
    # The LangGraph SDK (the studio extra) is there whenever a run is served; its client without a URL calls the
    # server it runs in.
    from langgraph_sdk import get_client
    from langgraph_sdk.errors import APIStatusError

    missing = ValueError(f"no finished KGoT thread {thread_id!r} of yours on this server: run KGoT on the task "
                         "first (or give its tool_calls)")
    client = get_client()
    try:
        thread = await client.threads.get(thread_id)
    except (APIStatusError, ValueError):
        raise missing from None
    metadata = thread.get("metadata") or {}
    if identity is None or metadata.get(OWNER) != identity or metadata.get("graph_id") != "kgot":
        raise missing
    snapshot = await client.threads.get_state(thread_id)
    values = snapshot.get("values") if isinstance(snapshot, dict) else None
    if not isinstance(values, dict) or not values or snapshot.get("next"):
        raise ValueError(f"the KGoT thread {thread_id!r} has not finished: resume it first, so that the baseline "
                         "sees all of its tool outputs")
    return _check_records(list(values.get("tool_calls") or []), f"KGoT thread {thread_id!r}")


async def load_tool_outputs(state: BaselineState, runtime: Runtime[Any], config: RunnableConfig) -> dict[str, Any]:
    """The task, and its corpus: KGoT's tool outputs of the same task, one chunk per tool call (a resumed thread
    keeps the corpus it read)."""
    out = _question(state)
    if "chunks" in state:
        return out
    ctx = _ctx(runtime)
    out["attachments"] = await task_attachments(state.get("attachments"), ctx, for_run(config, state))
    if state.get("tool_calls") is not None:
        records, source = _check_records(state["tool_calls"], "the task"), "the task's tool_calls"
    else:
        thread = state.get("kgot_thread")
        if not thread and ctx.kgot_results:
            thread = thread_id_of(config)
            if thread == EPHEMERAL:
                raise ValueError("a run without a checkpointer has no thread id to find its KGoT run by in "
                                 "kgot_results: name the KGoT thread ({'kgot_thread': ...})")
        if not thread:
            raise ValueError("this baseline answers from KGoT's tool outputs of the same task, and the task has "
                             "none: give {'tool_calls': [...]} (KGoT's tool-call records) or "
                             "{'kgot_thread': 'THREAD'}, or the context value kgot_results=DIR (a KGoT evaluation's "
                             "results directory)")
        if served_now():
            records = await served_kgot_tool_calls(str(thread), caller_identity(config))
        else:
            records = await read_kgot_tool_calls(str(thread), kgot_checkpointer_for(ctx, str(thread)))
        source = f"KGoT thread {thread}"
    return {**out, "corpus_source": source, "chunks": chunks_of(records)}


# ----------------------------------------------------------------------------------------------------------------
# Simple RAG
# ----------------------------------------------------------------------------------------------------------------
def _embedded(chunk: Chunk, ctx: BaselineContext) -> str:
    return f"[chunk {chunk['id']}] {chunk['source']}\n{chunk['text'][:ctx.embed_chars]}"


def nearest(texts: list[str], query: str, k: int, ctx: BaselineContext) -> list[int]:
    """The positions of the ``k`` texts closest to ``query`` (FAISS over sentence embeddings; CPU-bound: nodes run
    it in a worker thread). The texts must be distinct."""
    if not texts:
        return []

    position = {text: i for i, text in enumerate(texts)}
    index = EmbeddingIndex(texts, load_embedder(ctx.embedding_model))
    return [position[text] for text, _ in index.search(query, k)]


def describe_chunks(chunks: list[Chunk]) -> str:
    return "\n\n".join(f"<chunk_{i + 1} tool_call=\"{c['source']}\">\n{c['text']}\n</chunk_{i + 1}>"
                       for i, c in enumerate(chunks)) or "(none: KGoT made no tool call that returned anything)"


async def retrieve_and_answer(state: BaselineState, runtime: Runtime[Any]) -> dict[str, Any]:
    """The ``rag_top_k`` chunks closest to the question, then the answer from them."""
    ctx = _ctx(runtime)
    chunks = state.get("chunks") or []
    positions = await asyncio.to_thread(nearest, [_embedded(c, ctx) for c in chunks], state["question"],
                                        ctx.rag_top_k, ctx)
    retrieved = [chunks[i] for i in positions]
    llm = LLMCaller(ctx, "graph_executor")
    prompt = P.render(P.RAG_ANSWER, format_rules=P.FORMATTERS[ctx.answer_formatter], problem=problem_text(state),
                      retrieved=describe_chunks(retrieved))
    return {"retrieved": [c["source"] for c in retrieved], **await _answer(llm, prompt)}


# ----------------------------------------------------------------------------------------------------------------
# GraphRAG
# ----------------------------------------------------------------------------------------------------------------
def chunk_tasks(state: BaselineState) -> list[ChunkTask]:
    """One extraction task per chunk that has none yet (a resumed run keeps the extractions it has)."""
    done = {e["chunk"] for e in state.get("extractions") or []}
    return [ChunkTask(chunk=c) for c in state.get("chunks") or [] if c["id"] not in done]


async def extract_chunk(task: ChunkTask, runtime: Runtime[Any]) -> dict[str, Any]:
    """The entities and relations of one chunk (structured output); a call that fails for good adds nothing."""
    ctx = _ctx(runtime)
    chunk = task["chunk"]
    llm = LLMCaller(ctx, "graph_executor")
    prompt = P.render(P.GRAPHRAG_EXTRACT, source=chunk["source"], text=chunk["text"])
    try:
        extraction = await llm.structured(prompt, Extraction)
    except LLMError as exc:
        llm.failed(exc, f"chunk {chunk['id']} adds nothing to the graph")
        extraction = Extraction()
    record = ChunkExtraction(chunk=chunk["id"], entities=[e.model_dump() for e in extraction.entities],
                             relations=[r.model_dump() for r in extraction.relations])
    return {"extractions": [record], **accounting(llm)}


def entity_key(name: str) -> str:
    """The node id of an entity name: case and spacing do not make two entities."""
    return re.sub(r"\s+", " ", str(name)).strip().casefold()


def build_knowledge_graph(extractions: list[ChunkExtraction]) -> Any:
    """The static KG of the extractions: a ``networkx.MultiDiGraph`` whose nodes are entities (``name``,
    ``type``, ``descriptions``, ``chunks``) and whose edges are relations (``relation``, ``description``,
    ``chunk``); an entity a relation names but no extraction lists becomes a node too."""
    graph = nx.MultiDiGraph()

    def add_entity(name: str, chunk: int, type_: str = "", description: str = "") -> str | None:
        key = entity_key(name)
        if not key:
            return None
        if key not in graph:
            graph.add_node(key, name=str(name).strip(), type=type_ or "", descriptions=[], chunks=[])
        node = graph.nodes[key]
        if type_ and not node["type"]:
            node["type"] = type_
        if description and description not in node["descriptions"]:
            node["descriptions"].append(description)
        if chunk not in node["chunks"]:
            node["chunks"].append(chunk)
        return key

    for extraction in sorted(extractions, key=lambda e: e["chunk"]):
        chunk = extraction["chunk"]
        for entity in extraction["entities"]:
            add_entity(entity.get("name", ""), chunk, entity.get("type", ""), entity.get("description", ""))
        for relation in extraction["relations"]:
            source = add_entity(relation.get("source", ""), chunk)
            target = add_entity(relation.get("target", ""), chunk)
            if source and target:
                graph.add_edge(source, target, relation=str(relation.get("relation") or "RELATED_TO"),
                               description=str(relation.get("description") or ""), chunk=chunk)
    return graph


async def build_graph(state: BaselineState) -> dict[str, Any]:
    """The chunks' extractions as one static KG, kept in the state as node-link data."""
    graph = build_knowledge_graph(state.get("extractions") or [])
    return {"graph": nx.node_link_data(graph, edges="edges")}


def _mentioned(question: str, graph: Any) -> list[str]:
    """The entities whose name the question contains (as whole words), longest names first."""
    text = entity_key(question)
    found = [key for key in graph.nodes if len(key) >= 3 and re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text)]
    return sorted(found, key=len, reverse=True)


def traverse(graph: Any, seeds: list[str], hops: int) -> tuple[list[str], list[tuple[str, str, dict[str, Any]]]]:
    """The entities within ``hops`` of ``seeds`` (either direction; seeds first, then by distance) and the
    relations among them."""
    distance = {seed: 0 for seed in seeds}
    frontier = list(seeds)
    for depth in range(1, hops + 1):
        reached = []
        for node in frontier:
            for other in [*graph.successors(node), *graph.predecessors(node)]:
                if other not in distance:
                    distance[other] = depth
                    reached.append(other)
        frontier = reached
    nodes = sorted(distance, key=lambda n: distance[n])
    inside = set(nodes)
    edges = [(u, v, data) for u, v, data in graph.edges(data=True) if u in inside and v in inside]
    return nodes, edges


def describe_subgraph(graph: Any, nodes: list[str], edges: list[tuple[str, str, dict[str, Any]]],
                      max_chars: int) -> str:
    lines = ["Entities:"]
    for key in nodes:
        data = graph.nodes[key]
        kind = f" ({data['type']})" if data.get("type") else ""
        about = f": {' '.join(data['descriptions'])}" if data.get("descriptions") else ""
        lines.append(f"- {data['name']}{kind}{about}")
    lines.append("Relations:")
    for u, v, data in edges:
        about = f": {data['description']}" if data.get("description") else ""
        lines.append(f"- {graph.nodes[u]['name']} -[{data['relation']}]-> {graph.nodes[v]['name']}{about}")
    if not edges:
        lines.append("(none)")
    text = "\n".join(lines)
    return text if len(text) <= max_chars else text[:max_chars] + "\n… (cut)"


def retrieve_from_graph(graph_data: dict[str, Any], chunks: list[Chunk], question: str,
                        ctx: BaselineContext) -> tuple[list[str], str, list[Chunk]]:
    """GraphRAG's retrieval by traversal: the entities the question names and those whose descriptions embed
    closest to it, their neighbourhood within ``graph_hops``, and the chunks the retrieved entities and relations
    came from (the most often cited first). Returns ``(matched entity names, the subgraph as text, chunks)``."""
    graph = nx.node_link_graph(graph_data, directed=True, multigraph=True, edges="edges")
    if graph.number_of_nodes() == 0:
        return [], "(the knowledge graph is empty: no entity was extracted)", []
    keys = list(graph.nodes)
    texts = [f"{graph.nodes[k]['name']} ({graph.nodes[k].get('type') or 'entity'}): "
             f"{' '.join(graph.nodes[k].get('descriptions') or [])}" for k in keys]
    seeds = _mentioned(question, graph)
    for i in nearest(texts, question, ctx.graph_top_entities, ctx):  # distinct: names differ beyond case
        if keys[i] not in seeds:
            seeds.append(keys[i])
    nodes, edges = traverse(graph, seeds, ctx.graph_hops)
    cited: Counter[int] = Counter()
    for key in seeds:
        cited.update(graph.nodes[key].get("chunks") or [])
    for _, _, data in edges:
        cited[data["chunk"]] += 1
    by_id = {c["id"]: c for c in chunks}
    ranked = [by_id[c] for c, _ in sorted(cited.items(), key=lambda kv: (-kv[1], kv[0])) if c in by_id]
    subgraph = describe_subgraph(graph, nodes, edges, ctx.graph_context_chars)
    return [graph.nodes[k]["name"] for k in seeds], subgraph, ranked[: ctx.graph_top_chunks]


async def answer_from_graph(state: BaselineState, runtime: Runtime[Any]) -> dict[str, Any]:
    """Retrieve by graph traversal, then answer from the subgraph and its source chunks."""
    ctx = _ctx(runtime)
    matched, subgraph, chunks = await asyncio.to_thread(
        retrieve_from_graph, state.get("graph") or {"directed": True, "multigraph": True, "graph": {}, "nodes": [],
                                                    "edges": []},
        state.get("chunks") or [], state["question"], ctx)
    llm = LLMCaller(ctx, "graph_executor")
    prompt = P.render(P.GRAPHRAG_ANSWER, format_rules=P.FORMATTERS[ctx.answer_formatter],
                      problem=problem_text(state), graph=subgraph, chunks=describe_chunks(chunks))
    return {"matched_entities": matched, "context": subgraph, "retrieved": [c["source"] for c in chunks],
            **await _answer(llm, prompt)}


# ----------------------------------------------------------------------------------------------------------------
# No KG: KGoT's loop with the tool outputs as the task state
# ----------------------------------------------------------------------------------------------------------------
class NoKGState(TypedDict, total=False):
    question: str
    attachments: list[str]
    iteration: int
    decision: Literal["ENHANCE", "SOLVE", "FORCED_SOLVE"]
    votes: Annotated[list[Vote], append]
    missing_information: str
    pending_tool_calls: list[dict[str, Any]]
    tool_calls: Annotated[list[ToolCallRecord], append]
    partial_solution: str | None
    partial_solutions: list[dict[str, Any]]  # written by KGoT's math step and parser when they take several
    need_math: bool
    math_output: str | None
    parsed_solutions: Annotated[list[dict[str, Any]], append]
    candidates: list[str]
    final_answer: str
    usage: Annotated[Usage, merge_usage]
    failures: Annotated[list[Failure], append]
    run_key: str


#: The tool outputs go into the prompts whole up to this many characters (KGoT's KG listing has the same cap).
TOOL_OUTPUTS_CHARS = 60_000


def describe_tool_outputs(calls: list[ToolCallRecord], max_chars: int = TOOL_OUTPUTS_CHARS) -> str:
    """The task state of the "no KG" baseline: every tool call's whole output (a call served from the run's
    cache only once), newest last; past ``max_chars`` the oldest outputs are cut."""
    parts = []
    for call in calls:
        if call.get("cached"):
            continue
        status = "" if call["ok"] else " (FAILED)"
        args = json.dumps(call["args"], ensure_ascii=False)
        parts.append(f"<output iteration=\"{call['iteration']}\" tool_call=\"{call['name']}({args})\"{status}>\n"
                     f"{call['output']}\n</output>")
    if not parts:
        return "No tool has been called yet: there are no tool outputs."
    text = "\n\n".join(parts)
    return text if len(text) <= max_chars else "… (older outputs cut)\n" + text[-max_chars:]


async def receive_nokg_task(state: NoKGState, runtime: Runtime[Any], config: RunnableConfig) -> dict[str, Any]:
    """Validate the task; a resumed thread keeps its counters, a run without a checkpointer gets its own key."""
    out = await _task(state, runtime, config)
    if "iteration" not in state:
        out["iteration"] = 0
    return out


async def decide_from_tool_outputs(state: NoKGState, runtime: Runtime[KGoTContext],
                                   config: RunnableConfig) -> dict[str, Any]:
    """KGoT's majority vote (``num_next_steps_decision`` samples, concurrently) over the tool outputs."""
    ctx = context_of(runtime)
    llm = LLMCaller(ctx, "graph_executor")
    iteration = state.get("iteration", 0)
    prompt = P.render(P.NOKG_NEXT_STEP, problem=problem_text(state),
                      tool_outputs=describe_tool_outputs(state.get("tool_calls") or []),
                      tool_calls_made=describe_tool_calls(state.get("tool_calls") or []))
    votes = await sample_votes(llm, prompt, iteration, ctx.num_next_steps_decision, config)
    return {"votes": votes, "decision": tally(votes), **accounting(llm)}


async def collect_tool_outputs(state: NoKGState) -> dict[str, Any]:
    """The iteration's tool outputs are in the state (the tool calls' own writes): the iteration ends."""
    return {"iteration": state.get("iteration", 0) + 1, "pending_tool_calls": []}


async def _solve_from_outputs(state: NoKGState, runtime: Runtime[KGoTContext], template: str) -> dict[str, Any]:
    llm = LLMCaller(context_of(runtime), "graph_executor")
    prompt = P.render(template, problem=problem_text(state),
                      tool_outputs=describe_tool_outputs(state.get("tool_calls") or []))
    try:
        solution = (await llm.structured(prompt, DirectSolution)).solution.strip() or None
    except LLMError as exc:
        llm.failed(exc, f"no partial solution: the answer is {NO_SOLUTION!r}")
        solution = None
    return {"partial_solution": solution, **accounting(llm)}


async def solve_from_tool_outputs(state: NoKGState, runtime: Runtime[KGoTContext]) -> dict[str, Any]:
    """The vote said SOLVE: the solution straight from the tool outputs."""
    return await _solve_from_outputs(state, runtime, P.NOKG_SOLUTION)


async def solve_forced_from_tool_outputs(state: NoKGState, runtime: Runtime[KGoTContext]) -> dict[str, Any]:
    """At the iteration limit: the best solution the tool outputs support."""
    return {**await _solve_from_outputs(state, runtime, P.NOKG_FORCED_SOLUTION), "decision": "FORCED_SOLVE"}
