"""The start of a run: the question's graph (the process's shared instance), its definition and domain, the
embedder loaded before anything is spent, and the root ``s0 = [q]``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from kgagents.nodes.grounded.context import GroundedContext, grounded_context_of
from kgagents.nodes.grounded.state import ROOT, GroundedState, Thought
from kgagents.nodes.served import graph_source, served_now, trusted_graph_ref
from kgagents.prompts.grounded_domains import DOMAINS, domain_of_types
from kgagents.tools.pgraph import GraphRef, StaticKG, open_graph, resolve
from kgagents.tools.pgraph.embeddings import EmbedderUnavailable, canonical_model, load_embedder
from kgagents.tools.pgraph.reads import graph_read


async def graph_for(ref: GraphRef) -> StaticKG:
    """The process's shared instance of the run's graph (opened off the event loop the first time); a served
    run opens only a build of the server's catalog, as the catalog says
    (:func:`kgagents.nodes.served.trusted_graph_ref`)."""
    trusted = await graph_read(trusted_graph_ref, ref, served=served_now())
    return await graph_read(open_graph, trusted)  # on the graph-read pool (tools/pgraph/reads.py)


async def initialise(state: GroundedState, runtime: Runtime[GroundedContext]) -> dict[str, Any]:
    """Open the question's graph (by name or path), write its definition, and plant the root ``s0 = [q]``."""
    ctx = grounded_context_of(runtime)
    if state.get("graph_ref"):
        raise ValueError("this thread already holds a grounded run (question: "
                         f"{state.get('question', '')!r}); continue it without new input, or start a new "
                         "thread for a new question")
    question = (state.get("question") or "").strip()
    if not question:
        raise ValueError("the task has no question: give {'question': '...', 'graph': 'NAME or path'}")
    if not state.get("graph"):
        raise ValueError("grounded reasoning needs a knowledge graph: give 'graph' (an imported graph's "
                         "name, or a path to a built graph or a graph source; see `kgagents graph import`)")
    await ensure_embedder(ctx.embedding_model, ctx.embedding_device)
    ref = await graph_read(resolve, graph_source(state["graph"], served=served_now()))
    graph = await graph_for(ref)
    domain = ctx.domain if ctx.domain != "auto" else domain_of_types(await graph_read(graph.type_features))
    written = DOMAINS[domain].definition if ctx.definition_source == "domain" else ""
    definition = ctx.graph_definition or written or await graph_read(graph.definition)
    root = Thought(id=ROOT, depth=0, parents=[], kind="root", thought=question, kept=True)
    return {"question": question, "graph_ref": ref, "graph_definition": definition, "domain": domain,
            "depth": 0, "frontier": [ROOT], "thoughts": {ROOT: root}}


async def ensure_embedder(model: Any, device: str | None) -> None:
    """Load a named embedding model now (once per process), so that one that cannot be loaded is a clear error
    before the run spends anything."""
    if isinstance(model, (str, Path)) and canonical_model(model) is not None:
        try:
            await asyncio.to_thread(load_embedder, model, device=device)
        except EmbedderUnavailable as exc:
            raise ValueError(str(exc)) from exc
