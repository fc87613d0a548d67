"""GoT's aggregation (eq. 3): disjoint pairs of a depth's candidates, divergent branches first, each merged
into one thought ``A(z_a, z_b)`` that is grounded like any step."""

from __future__ import annotations

from itertools import zip_longest
from typing import Any

from langgraph.runtime import Runtime

from kgagents.nodes.grounded.chains import _id_key, chain_of, ordered, render_chain, task_of
from kgagents.nodes.grounded.context import ROLE, GroundedContext, grounded_context_of
from kgagents.nodes.grounded.generate import ground
from kgagents.nodes.grounded.initialise import graph_for
from kgagents.nodes.grounded.state import GroundedState, StepTask, Thought
from kgagents.nodes.llm import LLMCaller, LLMError, accounting
from kgagents.prompts import grounded as P
from kgagents.tools.graph_functions import one_thought


def merge_tasks(state: GroundedState) -> list[StepTask]:
    """⌊N/2⌋ disjoint pairs of this depth's N candidate steps (appendix E's count), each to be merged into one
    thought. Divergent branches are paired first: the candidates are taken round-robin over their parents (in
    id order), so two candidates of one parent are paired only when no other parent's candidate is left."""
    thoughts = state.get("thoughts") or {}
    depth = state.get("depth", 0) + 1
    candidates = sorted((t["id"] for t in thoughts.values()
                         if t.get("depth") == depth and t.get("kind") == "step" and not t.get("error")),
                        key=_id_key)
    by_parent: dict[str, list[str]] = {}
    for c in candidates:
        by_parent.setdefault((thoughts[c].get("parents") or [""])[0], []).append(c)
    order = [c for turn in zip_longest(*by_parent.values()) for c in turn if c is not None]
    tasks = []
    for i in range(0, len(order) - 1, 2):
        a, b = order[i], order[i + 1]
        tasks.append(task_of(state, f"m{depth}.{i // 2 + 1}", depth, [a, b], chain_of(thoughts, a),
                             chain_of(thoughts, b)))
    return tasks


async def merge_thoughts(task: StepTask, runtime: Runtime[GroundedContext]) -> dict[str, Any]:
    """``A(z_a, z_b)``: the next thought of the chain that merges two candidates (edges from both parents),
    then grounded like any step: the agent's action(s) on it, or graph exploration from it. Merges are made
    and grounded at the context's temperature."""
    ctx = grounded_context_of(runtime)
    llm = LLMCaller(ctx, ROLE)
    merged_chain = ordered({t["id"]: t for t in [*task["chain"], *task["chain_2"]]}.values())
    record = Thought(id=task["id"], depth=task["depth"], parents=list(task["parents"]), kind="merge",
                     finished=False, answer=None, error=None)
    try:
        text = await llm.text(P.render(P.MERGE, depth=task["depth"], question=task["question"],
                                       chain_1=render_chain(task["chain"]),
                                       chain_2=render_chain(task["chain_2"]),
                                       merged_chain=render_chain(merged_chain)))
        record["thought"] = one_thought(text)
        graph = await graph_for(task["graph_ref"])
        await ground({**task, "chain": merged_chain}, ctx, llm, llm, graph, record)
    except LLMError as exc:
        llm.failed(exc, f"merge {record['id']} fails; the candidates go on unmerged")
        record.update({"error": str(exc)[:500]})
        record.setdefault("thought", "")
    return {"thoughts": {record["id"]: record}, **accounting(llm)}
