"""The question's knowledge graph: where the input names it (a graph, inline edges, a file, an attachment),
and the process's shared instance of it, reopened from the state's reference (e.g. on resume)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from kgagents.nodes.ark.context import ArkContext
from kgagents.nodes.ark.state import ArkInput, ArkState
from kgagents.nodes.served import check_input, graph_source, served_now, trusted_graph_ref
from kgagents.tools.pgraph import (
    Embedder,
    GraphRef,
    StaticKG,
    cached,
    import_edges,
    load_ark_record,
    open_graph,
    resolve,
)
from kgagents.tools.pgraph.embeddings import embedder_spec
from kgagents.tools.pgraph.reads import graph_read

_GRAPH_CACHE_SIZE = 4


def _embedder_for(ctx: ArkContext) -> Embedder | None:
    """The context's embedder (see :func:`kgagents.tools.pgraph.embeddings.embedder_spec`)."""
    return embedder_spec(ctx.embedding_model, ctx.embedding_device)


def _graph_file(state: ArkInput) -> str | None:
    if state.get("kg_file"):
        return str(state["kg_file"])
    for path in state.get("attachments") or []:
        if str(path).lower().endswith((".json", ".jsonl")):
            return str(path)
    return None


def has_graph(state: ArkInput) -> bool:
    """Whether an input names the question's knowledge graph, as :func:`locate_graph` needs it."""
    return state.get("kg") is not None or bool(state.get("graph")) or _graph_file(state) is not None


def locate_graph(state: ArkInput) -> tuple[GraphRef, dict[str, Any]]:
    """The reference of the question's graph (built into the graph store when needed), and the record it came
    from (for a graph file of ARK-V1 records: its question and id). A served run names its graph, gives it
    inline or attaches its file as content, never a path of the server (:mod:`kgagents.nodes.served`)."""
    served = served_now()
    if state.get("kg") is not None:
        return import_edges(state["kg"], name="inline edges"), {}
    if state.get("graph"):
        return resolve(graph_source(state["graph"], served=served), record=state.get("kg_id")), {}
    if served and state.get("kg_file"):
        check_input({"kg_file": state["kg_file"]})  # raises: a path of the server
    path = _graph_file(state)
    if path is None:
        raise ValueError("ARK-V1 needs the question's knowledge graph: give 'graph' (a graph name or "
                         "path), 'kg' (edges in ARK-V1 format [[head, tail, {\"relation\": r}], ...]) "
                         "or 'kg_file' (a .json / .jsonl graph file, with 'kg_id' for a file of many "
                         "graphs), or attach such a file")
    record = load_ark_record(path, state.get("kg_id"), question=state.get("question"))
    record_id = None if record.get("id") is None else str(record["id"])
    return cached(path, format="ark", record=record_id), record


def _graph_cache(ctx: ArkContext) -> OrderedDict[str, StaticKG]:
    cache = ctx.__dict__.get("_ark_graphs")
    if cache is None:
        cache = OrderedDict()
        ctx.__dict__["_ark_graphs"] = cache
    return cache


def _remember(ctx: ArkContext, graph: StaticKG) -> None:
    cache = _graph_cache(ctx)
    cache[graph.ref["fingerprint"]] = graph
    while len(cache) > _GRAPH_CACHE_SIZE:
        cache.popitem(last=False)


async def graph_of(state: ArkState, ctx: ArkContext) -> StaticKG:
    """The run's graph: the process's shared instance, reopened from the state's reference (e.g. on
    resume)."""
    stored = state.get("graph_ref")
    # a thread started before graph references existed: locate its graph from its input
    located: GraphRef = stored if stored else (await graph_read(locate_graph, state))[0]
    ref = await graph_read(trusted_graph_ref, located, served=served_now())
    cache = _graph_cache(ctx)
    cached = cache.get(ref["fingerprint"])
    if cached is not None:
        cache.move_to_end(ref["fingerprint"])
        return cached
    graph = await graph_read(open_graph, ref)  # file reads stay off the event loop (tools/pgraph/reads.py)
    _remember(ctx, graph)
    return graph
