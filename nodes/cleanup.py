"""Noise mitigation before solving (KGoT paper §2.4, appendix B.7).

The LLM proposes which nodes (irrelevant ones, duplicates) and relationships to remove; the proposal is
checked against the KG (unknown ids are dropped), turned into removal code in the backend's own language
(Python for NetworkX, Cypher, SPARQL) and executed through the store like any other KG write, so it is one more
checkpointed write with its snapshot. The proposal and what was done are recorded in ``noise_removals``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from kgagents.nodes.kgot import KGoTContext, KGoTState, KGWrite, context_of, open_task_kg, problem_text
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.nodes.runtime import for_run
from kgagents.prompts import kgot as P
from kgagents.prompts.kgot_cleanup import NOISE_MITIGATION
from kgagents.tools.kg.base import KGSnapshot, empty_snapshot, render_snapshot
from kgagents.tools.kg.cypher import quote_name
from kgagents.tools.kg.sparql_store import expand as sparql_iri

#: The ``tool_call_id`` of the KG write a clean-up makes (``kg_writes`` holds it with its snapshot).
CLEANUP_WRITE_ID = "noise-mitigation"


class RelationshipRef(BaseModel):
    source: str = Field(description="id of the source node")
    type: str = Field(description="relationship type")
    target: str = Field(description="id of the target node")


class NoiseRemoval(BaseModel):
    """What to remove from the knowledge graph before solving (empty lists: keep everything)."""

    remove_nodes: list[str] = Field(default_factory=list, description="ids of irrelevant or duplicate nodes")
    remove_relationships: list[RelationshipRef] = Field(default_factory=list,
                                                        description="relationships to remove on their own")
    reason: str = Field(default="", description="why these are noise")


class NoiseRemovalRecord(TypedDict):
    iteration: int
    proposed_nodes: list[str]
    proposed_relationships: list[dict[str, str]]
    removed_nodes: list[str]
    removed_relationships: list[dict[str, str]]
    reason: str
    status: str  # "applied", "nothing to remove", "failed", "invalid reply"
    error: str | None


# --------------------------------------------------------------------------------------------------------------
# Removal code per query language
# --------------------------------------------------------------------------------------------------------------
def _python_removal(nodes: list[str], rels: list[dict[str, str]]) -> str:
    return (f"for _id in {nodes!r}:\n"
            "    if _id in G:\n"
            "        G.remove_node(_id)\n"
            f"for _s, _type, _t in {[(r['source'], r['type'], r['target']) for r in rels]!r}:\n"
            "    for _key, _attrs in list((G.get_edge_data(_s, _t) or {}).items()):\n"
            "        if _attrs.get('relationship') == _type:\n"
            "            G.remove_edge(_s, _t, _key)\n")


def _cypher_removal(nodes: list[str], rels: list[dict[str, str]]) -> str:
    statements = [f"MATCH (a {{id: {json.dumps(r['source'])}}})-[r:{quote_name(r['type'])}]->"
                  f"(b {{id: {json.dumps(r['target'])}}}) DELETE r" for r in rels]
    if nodes:
        statements.append(f"MATCH (n) WHERE n.id IN {json.dumps(nodes)} DETACH DELETE n")
    return ";\n".join(statements)


def _sparql_removal(nodes: list[str], rels: list[dict[str, str]]) -> str:
    ops = [f"DELETE DATA {{ <{sparql_iri(r['source'])}> <{sparql_iri(r['type'])}> <{sparql_iri(r['target'])}> }}"
           for r in rels]
    for node in nodes:
        iri = sparql_iri(node)
        ops.append(f"DELETE WHERE {{ <{iri}> ?p ?o }}")
        ops.append(f"DELETE WHERE {{ ?s ?p <{iri}> }}")
    return " ;\n".join(ops)


REMOVAL_CODE: dict[str, Callable[[list[str], list[dict[str, str]]], str]] = {
    "python": _python_removal,
    "cypher": _cypher_removal,
    "sparql": _sparql_removal,
}


def checked_proposal(proposal: NoiseRemoval, kg: KGSnapshot) -> tuple[list[str], list[dict[str, str]]]:
    """The proposed removals that exist in the KG (and never the whole KG)."""
    ids = {n["id"] for n in kg["nodes"]}
    nodes = sorted({n for n in proposal.remove_nodes if n in ids})
    if nodes and len(nodes) == len(ids):
        return [], []  # removing everything is never noise mitigation
    existing = {(r["source"], r["type"], r["target"]) for r in kg["relationships"]}
    rels = sorted({(r.source, r.type, r.target) for r in proposal.remove_relationships} & existing)
    rels = [(s, t, o) for s, t, o in rels if s not in nodes and o not in nodes]
    return nodes, [{"source": s, "type": t, "target": o} for s, t, o in rels]


async def mitigate_noise(state: KGoTState, runtime: Runtime[KGoTContext], config: RunnableConfig) -> dict[str, Any]:
    """Before solving: the LLM proposes irrelevant and duplicate nodes/relationships; they are removed."""
    ctx = context_of(runtime)
    kg = state.get("kg") or empty_snapshot()
    iteration = state.get("iteration", 0)
    if not kg["nodes"]:
        return {}
    llm = LLMCaller(ctx, "graph_executor")
    record = NoiseRemovalRecord(iteration=iteration, proposed_nodes=[], proposed_relationships=[], removed_nodes=[],
                                removed_relationships=[], reason="", status="nothing to remove", error=None)
    try:
        proposal = await llm.structured(P.render(NOISE_MITIGATION, problem=problem_text(state),
                                                 existing_data=render_snapshot(kg)), NoiseRemoval)
    except LLMError as exc:
        llm.failed(exc, "nothing is removed from the KG")
        record.update({"status": "invalid reply", "error": str(exc)})
        return {"noise_removals": [record], **accounting(llm)}
    record.update({"proposed_nodes": list(proposal.remove_nodes),
                   "proposed_relationships": [r.model_dump() for r in proposal.remove_relationships],
                   "reason": proposal.reason})
    nodes, rels = checked_proposal(proposal, kg)
    if not nodes and not rels:
        return {"noise_removals": [record], "usage": llm.usage}
    store = await open_task_kg(ctx, for_run(config, state), kg)
    code = REMOVAL_CODE[store.query_language](nodes, rels)
    result = await store.write(code)
    out: dict[str, Any] = {"usage": llm.usage}
    if result.ok:
        snapshot = await store.snapshot()
        record.update({"removed_nodes": nodes, "removed_relationships": rels, "status": "applied"})
        out["kg"] = snapshot
    else:
        snapshot = None
        record.update({"status": "failed", "error": result.error})
    out["kg_writes"] = [KGWrite(iteration=iteration, tool_call_id=CLEANUP_WRITE_ID,
                                status="applied" if result.ok else "discarded", code=code, attempts=1,
                                errors=[] if result.ok else [result.error or "unknown error"], snapshot=snapshot)]
    out["noise_removals"] = [record]
    return out
