"""How the evaluation runner talks to Agent-G and its baselines (paper 004): the iterations a run took, and the
gold an oracle ablation reads (Tables 6 and 7's "Oracle" rows).

Every item's input carries its gold in ``oracle`` (STaRK: the answer ids; CRAG: the answer, the alternative
answers and the question's labels). Agent-G reads it only when ``oracle_validator`` or ``oracle_commentor`` is on;
otherwise its first node drops it, so no later node, prompt or checkpoint holds it.
"""

from __future__ import annotations

from typing import Any

WORKFLOWS = ("agent-g", "agent-g-cot", "agent-g-text-rag", "agent-g-graph-rag", "agent-g-hybrid-rag",
             "agent-g-corrective-rag", "agent-g-react")
#: The labels of a CRAG record an oracle commentor compares the agent's decisions with.
CRAG_LABELS = ("question_type", "static_or_dynamic", "domain", "popularity")


def oracle_of(item: Any) -> dict[str, Any]:
    """The gold of an item as the oracle ablations read it."""
    meta = getattr(item, "meta", None) or {}
    if "answer_ids" in meta:
        return {"answer_ids": [str(a) for a in meta["answer_ids"]]}
    oracle: dict[str, Any] = {"answer": str(item.gold), "alternative_answers": list(meta.get("alternative_answers")
                                                                                     or [])}
    oracle.update({k: meta[k] for k in CRAG_LABELS if k in meta})
    if item.group and "domain" not in oracle:
        oracle["domain"] = item.group
    return oracle


def agent_g_input(item: Any) -> dict[str, Any]:
    """The runner's default input (question and the item's inputs) plus the item's gold for the oracles."""
    from evals.runner import default_input

    return {**default_input(item), "oracle": oracle_of(item)}


def agent_g_stats(state: dict[str, Any]) -> dict[str, Any]:
    """Iterations of Algorithm 1 a run took (no tool calls: the retriever bank is not a tool)."""
    return {"iterations": int(state.get("t") or 0), "tool_calls": 0}


def register_adapters() -> None:
    """Teach the runner Agent-G and its baselines."""
    from evals.runner import Adapter, register_adapter

    for workflow in WORKFLOWS:
        register_adapter(workflow, Adapter(to_input=agent_g_input, stats=agent_g_stats))
