"""ARK-V1's state: JSON values and messages only — the question, a reference to its graph, the message
context, the reasoning step in progress (what the routers read), the finished steps and every attempt."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages

from kgagents.core.usage import Usage, merge_usage
from kgagents.nodes.state import Failure, append
from kgagents.tools.pgraph import GraphRef

Stage = Literal["anchor", "relation", "reasoning"]
QuestionType = Literal["yes_no", "entity_list"]


class KeyedTriple(TypedDict):
    key: str
    head: str
    relation: str
    tail: str
    qualifiers: dict[str, Any]


class Attempt(TypedDict):
    """One proposal of the model at one stage, and what became of it."""

    k: int
    stage: Stage
    c: int
    candidate: str | None
    keys: list[str]
    valid: bool
    outcome: str
    alternatives: list[str]
    justification: str


class ReasoningStep(TypedDict):
    """A finished reasoning step ``R^(k) = (T^(k), i^(k), f^(k))`` with where it came from."""

    k: int
    anchor: str
    relation: str
    relations: list[str]
    retrieved: list[KeyedTriple]
    selected: list[KeyedTriple]
    implication: str
    continue_exploration: bool
    attempts: dict[str, int]


class CurrentStep(TypedDict, total=False):
    """The reasoning step in progress (what the routers read)."""

    k: int
    c: dict[str, int]
    anchor: str | None
    anchor_valid: bool
    relations: list[str]
    relation: str | None
    relation_valid: bool
    gave_up: bool
    retrieved: list[KeyedTriple]
    reasoning_valid: bool
    reply: dict[str, Any]
    feedback: str


class ArkInput(TypedDict, total=False):
    """What a caller submits: the question and its knowledge graph (a graph by name or path, inline edges, a
    file, or an attachment)."""

    question: str
    question_id: str
    question_type: QuestionType
    graph: str
    """A graph by name (``kgagents graph import``) or path (a built graph, or a source file or folder)."""
    kg: list[Any] | None
    """The graph in ARK-V1 format ``[[head, tail, {"relation": r, ...}], ...]``; imported into the graph store
    by the first step and removed from the state (only the checkpoints of the input itself, before the first
    step, hold it: pass ``graph`` or ``kg_file`` to keep it out of every checkpoint)."""
    kg_file: str
    """A graph file (``.json`` record(s) or ``.jsonl``); with ``kg_id`` for a file of many graphs."""
    kg_id: str
    attachments: list[str]
    """``kgagents ask --attach graph.json``: the first ``.json`` / ``.jsonl`` attachment is the graph file."""


class ArkState(ArkInput, total=False):
    graph_ref: GraphRef
    """Where the run's graph is (reopened from this on resume)."""
    kg_fingerprint: str
    kg_stats: dict[str, int]
    messages: Annotated[list[AnyMessage], add_messages]
    k: int
    current: CurrentStep
    stage: str
    """The last step that ran (``anchor``, ``relations``, ``relation``, ``triples``, ``reasoning``,
    ``cleanup``)."""
    steps: Annotated[list[ReasoningStep], append]
    attempts: Annotated[list[Attempt], append]
    summary: str
    exit_reason: str
    budget_stop: str
    """Set when the routers ended the run at its budget (``kgagents.nodes.budget``): which budget, how
    much."""
    answer: bool | list[str] | None
    final_answer: str
    justification: str
    usage: Annotated[Usage, merge_usage]
    failures: Annotated[list[Failure], append]
