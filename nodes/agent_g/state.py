"""Agent-G's state: the input, each iteration's action, references, answer and verdict."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from kgagents.core.usage import Usage, merge_usage
from kgagents.nodes.retriever_bank import (
    Retrieval,
    TopicEntity,
)
from kgagents.nodes.state import Failure, append
from kgagents.tools.pgraph import GraphRef


class Action(TypedDict, total=False):
    """``a_t = {d_t, E_t, R_t, s_t}`` (plus CRAG's question type and dynamism, and the page batch)."""

    domain: str
    question_type: str
    dynamism: str
    entities: list[TopicEntity]
    relations: list[str]
    module: Literal["graph", "text"]
    batch: int


class Iteration(TypedDict, total=False):
    t: int
    action: Action
    retrieval: Retrieval
    answer: str
    reasoning: str
    ranked_ids: list[str]
    accepted: bool
    validator_reply: str
    error_type: str
    feedback: str
    error: str


class Page(TypedDict, total=False):
    name: str
    url: str
    snippet: str
    html: str
    text: str


class AgentGInput(TypedDict, total=False):
    question: str
    question_id: str
    query_time: str
    graph: str
    """A static KG by name or path (STaRK's SKB; any graph); CRAG's graph module can use its API instead."""
    pages: list[Page]
    """CRAG: the question's pre-fetched web pages (HTML or text)."""
    oracle: dict[str, Any] | None
    """The gold, for the oracle ablations only (``kgagents eval`` hands it over; dropped at the start otherwise)."""


def merge_iterations(old: list[Iteration] | None, new: list[Iteration] | None) -> list[Iteration]:
    """Iterations by ``t``: a record for a known iteration updates it (the commentor adds its feedback)."""
    out = [dict(i) for i in old or []]
    for record in new or []:
        for existing in out:
            if existing.get("t") == record.get("t"):
                existing.update(record)
                break
        else:
            out.append(dict(record))
    return out  # type: ignore[return-value]


class AgentGState(AgentGInput, total=False):
    graph_ref: GraphRef
    page_order: list[list[float]]
    """The pages ranked by similarity to the question: ``[index, score]``, best first."""
    t: int
    action: Action
    retrieval: Retrieval
    iterations: Annotated[list[Iteration], merge_iterations]
    feedback: str
    answer: str
    reasoning: str
    ranked_ids: list[str]
    final_answer: str
    exit_reason: str
    budget_stop: str
    """Set when the routers ended the run at its budget (``kgagents.nodes.budget``): which budget, how much."""
    truncated_egos: list[dict[str, Any]]
    curve: list[Any]
    """With ``iteration_metrics``: the output the run would have returned with T = 1, 2, …"""
    """The iterations whose ego-graphs ``max_nodes`` cut, with the entities cut (empty: none was)."""
    usage: Annotated[Usage, merge_usage]
    failures: Annotated[list[Failure], append]
