"""Steps 1–2: load the question's graph and start the message context; open a new reasoning step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from kgagents.nodes.ark.answer import infer_question_type
from kgagents.nodes.ark.context import ArkContext, ark_context_of
from kgagents.nodes.ark.kg import _graph_file, _remember, locate_graph
from kgagents.nodes.ark.messages import _context_reset
from kgagents.nodes.ark.state import ArkState, CurrentStep
from kgagents.nodes.runtime import task_attachments
from kgagents.nodes.served import served_now, trusted_graph_ref
from kgagents.prompts import ark as P
from kgagents.tools.pgraph import open_graph
from kgagents.tools.pgraph.reads import graph_read


async def initialise_context(state: ArkState, runtime: Runtime[ArkContext],
                             config: RunnableConfig) -> dict[str, Any]:
    """Step 1: load the question's graph, then start the message context with the system prompt and
    question."""
    ctx = ark_context_of(runtime)
    if state.get("kg_fingerprint"):
        raise ValueError("this thread already holds an ARK-V1 run (question: "
                         f"{state.get('question', '')!r}); continue it without new input, or start a new "
                         "thread for a new question")
    if state.get("question_type") not in (None, "yes_no", "entity_list"):
        raise ValueError("question_type must be 'yes_no' or 'entity_list', got "
                         f"{state.get('question_type')!r}")
    if state.get("attachments"):
        state = {**state, "attachments": await task_attachments(state["attachments"], ctx, config)}
    located, record = await graph_read(locate_graph, state)
    ref = await graph_read(trusted_graph_ref, located, served=served_now())
    graph = await graph_read(open_graph, ref)
    question = (state.get("question") or str(record.get("question") or "")).strip()
    if not question:
        raise ValueError("the task has no question: give {'question': '...', 'kg': [...]} (or a graph file "
                         "whose record has a question)")
    stats = graph.stats()
    if stats.edges == 0:
        raise ValueError(f"the knowledge graph {ref.get('name')} has no edges: ARK-V1 has nothing to explore")
    _remember(ctx, graph)
    out: dict[str, Any] = {
        "question": question,
        "question_type": state.get("question_type") or infer_question_type(question),
        "graph_ref": ref,
        "kg_fingerprint": ref["fingerprint"],
        "kg_stats": {"edges": stats.edges, "entities": stats.nodes, "heads": stats.heads,
                     "relations": len(stats.relations)},
        "k": 0,
        "current": CurrentStep(),
        "summary": P.NO_STEPS,
        "stage": "initialise",
        "messages": _context_reset({"question": question}, None),
    }
    if state.get("attachments"):
        out["attachments"] = state["attachments"]  # those given as content: their files in the run's folder
    if state.get("kg") is not None:
        out["kg"] = None  # the graph is in the store now; the state keeps its reference only
    elif _graph_file(state) and not state.get("graph"):
        out["kg_file"] = str(Path(_graph_file(state) or "").resolve())
        if record.get("id") is not None:
            out["kg_id"] = str(record["id"])
        if not state.get("question_id") and record.get("id") is not None:
            out["question_id"] = str(record["id"])
    return out


async def new_reasoning_step(state: ArkState) -> dict[str, Any]:
    """Step 2: ``k ← k + 1`` and fresh attempt counters for the step's stages."""
    k = state.get("k", 0) + 1
    return {"k": k, "current": CurrentStep(k=k, c={"anchor": 0, "relation": 0, "reasoning": 0}),
            "stage": "new_step"}
