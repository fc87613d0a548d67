"""The nodes of grounded reasoning (paper 001, §4): Graph CoT / ToT / GoT over a static KG, every step
grounded by an interaction method — the agent with Graph-CoT's graph functions, or automatic graph exploration
(Algorithm 1).

The run is a *thought graph*: the root ``t0`` is the question (``s0 = [q]``); every step adds thoughts whose
parents are the states they extend; GoT's merges have two parents. A state is identified by its last thought,
and its chain is that thought with all its ancestors. Every thought records its grounding: the agent's actions
and observations, or exploration's entities, pruning decisions, triples and attributes.

- :func:`~.initialise.initialise` — the question's graph, its definition and the root;
- :func:`~.generate.generate_step` — one candidate next step of one state (a ``Send`` branch per (state,
  candidate)), grounded by :mod:`.agent` or :mod:`.explore`;
- :func:`~.merge.merge_thoughts` — GoT's aggregation ``A(z_a, z_b)`` of two candidates (a branch per pair);
- :func:`~.evaluate.score_state` — the Score evaluator's votes for one candidate (a branch per candidate);
- :func:`~.evaluate.select_states` — the evaluator's decision: the ``t`` states kept at this depth (BFS, eq.
  2);
- :func:`~.answer.answer` — the answer from the state that ended the search (:func:`~.answer.best_state`).

The run's context is :mod:`.context`, its state :mod:`.state`, the model's structured replies :mod:`.replies`,
chains and a branch's task :mod:`.chains`, and the thought graph as a snapshot :mod:`.view`.

Ids are deterministic (``t0.2.1`` is the first candidate grown from the second candidate of the root), so a
run resumed from a checkpoint grows the same thought graph as an uninterrupted one.

A model call that fails for good (after its API retries and parse re-asks) fails its candidate step or merge
(the other branches and the evaluator go on), skips an exploration decision, scores a state 0, keeps the
candidates in BFS order (the better parent's children first) when the selection vote fails, and leaves the
answer at "No solution found" when the final answer fails. When every candidate of a depth fails, the search
ends and the answer comes from the states kept at the depth before (their thoughts and observations). Each
failure is logged in ``failures``. """

from kgagents.nodes.grounded.answer import answer, best_state
from kgagents.nodes.grounded.chains import chain_of, ordered, render_chain, task_of
from kgagents.nodes.grounded.context import (
    ROLE,
    ActionFormat,
    DefinitionSource,
    Evaluator,
    GroundedContext,
    Interaction,
    ReverseRelations,
    SelectionStyle,
    Strategy,
    VectorIndexKind,
    grounded_context_of,
)
from kgagents.nodes.grounded.evaluate import (
    candidates_of,
    rank_by_scores,
    route_after_select,
    score_state,
    score_tasks,
    select_states,
)
from kgagents.nodes.grounded.generate import candidate_seed, generate_step, ground, step_tasks
from kgagents.nodes.grounded.initialise import ensure_embedder, graph_for, initialise
from kgagents.nodes.grounded.merge import merge_tasks, merge_thoughts
from kgagents.nodes.grounded.replies import (
    AttributeChoice,
    BestChoice,
    EndDecision,
    EntityChoice,
    EntityList,
    FinalAnswer,
    RelationChoice,
    ScoreVote,
    SelectionVote,
)
from kgagents.nodes.grounded.state import (
    ROOT,
    GroundedInput,
    GroundedState,
    Selection,
    StepTask,
    Thought,
    merge_scores,
    merge_thoughts_reducer,
)
from kgagents.nodes.grounded.view import thought_graph

__all__ = [
    "ROLE", "ROOT", "ActionFormat", "AttributeChoice", "BestChoice", "DefinitionSource", "EndDecision",
    "EntityChoice", "EntityList", "Evaluator", "FinalAnswer", "GroundedContext", "GroundedInput",
    "GroundedState", "Interaction", "RelationChoice", "ReverseRelations", "ScoreVote", "Selection",
    "SelectionStyle", "SelectionVote", "StepTask", "Strategy", "Thought", "VectorIndexKind", "answer",
    "best_state", "candidate_seed", "candidates_of", "chain_of", "ensure_embedder", "generate_step",
    "graph_for", "ground", "grounded_context_of", "initialise", "merge_scores", "merge_tasks",
    "merge_thoughts",
    "merge_thoughts_reducer", "ordered", "rank_by_scores", "render_chain", "route_after_select",
    "score_state", "score_tasks", "select_states", "step_tasks", "task_of", "thought_graph",
]
