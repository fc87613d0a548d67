"""Grounded reasoning's state: the thought graph (thoughts by id, with how each was grounded), the evaluators'
scores and selections, and what one branch (a candidate step, a merge, a score vote) is handed."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from kgagents.core.usage import Usage, merge_usage
from kgagents.nodes.state import Failure, append
from kgagents.tools.pgraph import GraphRef

ROOT = "t0"


class Thought(TypedDict, total=False):
    """A node of the thought graph and how it was grounded."""

    id: str
    depth: int
    parents: list[str]
    kind: Literal["root", "step", "merge"]
    thought: str
    actions: list[dict[str, Any]]
    """Agent: the graph functions called, each ``{name, args, observation, ok}``."""
    action_text: str
    """Agent with text actions: the action line as the model wrote it."""
    observation: str
    entities: list[str]
    """Exploration: the entities extracted from the thought."""
    linked: dict[str, str]
    """Exploration: extracted entity → the node id it was linked to."""
    visited: list[str]
    """Exploration: the node ids explored in this step."""
    triples: list[list[str]]
    """Exploration: the triples found (head name, relation, tail name)."""
    attributes: list[str]
    decisions: list[dict[str, Any]]
    """Exploration: every pruning and End? decision."""
    finished: bool
    answer: str | None
    error: str | None
    score: float | None
    votes: int
    kept: bool


def merge_thoughts_reducer(old: dict[str, Thought] | None,
                           new: dict[str, Thought] | None) -> dict[str, Thought]:
    """Thoughts by id; an update to a known thought merges its fields."""
    out = dict(old or {})
    for key, value in (new or {}).items():
        out[key] = {**out.get(key, {}), **value}
    return out


def merge_scores(old: dict[str, list[float]] | None,
                 new: dict[str, list[float]] | None) -> dict[str, list[float]]:
    out = dict(old or {})
    for key, values in (new or {}).items():
        out[key] = list(values)
    return out


class Selection(TypedDict):
    depth: int
    evaluator: str
    candidates: list[str]
    kept: list[str]
    reason: str


class GroundedInput(TypedDict, total=False):
    """The question and its graph (an imported graph's name, a built graph's path, or a source path)."""

    question: str
    question_id: str
    graph: str


class GroundedState(GroundedInput, total=False):
    graph_ref: GraphRef
    graph_definition: str
    domain: str
    depth: int
    frontier: list[str]
    """The states kept at the current depth, best first."""
    finals: Annotated[list[str], append]
    """Kept states that finished (Finish, or exploration's End? said yes)."""
    thoughts: Annotated[dict[str, Thought], merge_thoughts_reducer]
    scores: Annotated[dict[str, list[float]], merge_scores]
    selections: Annotated[list[Selection], append]
    failed_depth: int
    """The depth whose every candidate failed for good (the search ends; the answer comes from the depth
    before)."""
    best: str
    answer: str
    final_answer: str
    exit_reason: str
    budget_stop: str
    """Set when the routers ended the run at its budget (``kgagents.nodes.budget``): which budget, how
    much."""
    usage: Annotated[Usage, merge_usage]
    failures: Annotated[list[Failure], append]


class StepTask(TypedDict):
    """What one branch (a candidate step, a merge, a score vote) needs: branches see only this."""

    question: str
    graph_ref: GraphRef
    graph_definition: str
    domain: str
    """The domain whose examples the prompts show (:data:`kgagents.prompts.grounded_domains.DOMAINS`)."""
    id: str
    depth: int
    parents: list[str]
    chain: list[Thought]
    chain_2: list[Thought]
