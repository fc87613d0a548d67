"""The message context the model reads: triples with their keys, the summary of the finished steps, and the
reset to system prompt + question (+ summary) after each step."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, RemoveMessage, SystemMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from kgagents.nodes.ark.state import ArkState, KeyedTriple, ReasoningStep
from kgagents.prompts import ark as P
from kgagents.tools.pgraph import Triple


def keyed(edge: Triple) -> KeyedTriple:
    return KeyedTriple(key=edge.key, head=edge.head, relation=edge.relation, tail=edge.tail,
                       qualifiers=dict(edge.qualifiers))


def render_triple(t: KeyedTriple, *, with_key: bool = True) -> str:
    text = f"({t['head']}, {t['relation']}, {t['tail']})"
    if t.get("qualifiers"):
        text += " " + ", ".join(f"{k}: {v}" for k, v in t["qualifiers"].items()).join("{}")
    return f"[{t['key']}] {text}" if with_key else text


def summarise(steps: list[ReasoningStep]) -> str:
    """The summary of all finished reasoning steps (step 10)."""
    if not steps:
        return P.NO_STEPS
    parts = []
    for s in steps:
        used = "; ".join(render_triple(t, with_key=False) for t in s["selected"]) or "none"
        parts.append(P.render(P.STEP_SUMMARY, k=s["k"], anchor=s["anchor"], relation=s["relation"],
                              triples=used, implication=s["implication"]))
    return "\n".join(parts)


def _context_reset(state: ArkState, summary: str | None) -> list[Any]:
    messages: list[Any] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), SystemMessage(P.SYSTEM),
                           HumanMessage(P.render(P.QUESTION, question=state["question"]))]
    if summary is not None:
        messages.append(HumanMessage(summary))
    return messages
