"""The nodes of the ARK-V1 workflow (Klein & Ohnemus, §III, Figure 1): one function per numbered step.

The state holds only JSON values and messages: the question, a reference to its knowledge graph (name,
location and fingerprint, never the graph), the message context, the reasoning step in progress, the finished
steps and every attempt. The graph is the static-KG store of :mod:`kgagents.tools.pgraph`: built once per
graph into the graphs directory, opened read-only and shared by every run of the process
(:func:`~.kg.graph_of`), reopened from the reference when a thread resumes. Edges given inline in the input
are imported into that store by the first step and dropped from the state.

The steps by what they do: :mod:`.initialise` (1–2: the graph and the message context, a new reasoning step),
:mod:`.select` (3–4, 6–7: the anchor and the relation), :mod:`.retrieve` (5, 8: the relations and the
triples), :mod:`.reason` (9–10: the reasoning step and the clean-up), :mod:`.answer` (11: the final answer).
Beside them: the run's context (:mod:`.context`), its state (:mod:`.state`), the model's structured replies
(:mod:`.replies`), the question's graph (:mod:`.kg`), the message context (:mod:`.messages`) and the stages'
attempts (:mod:`.attempts`).

Counters: ``k`` is the reasoning step (step 2 increments it); within step ``k`` each stage counts its attempts
``c`` (``current.c.anchor``, ``.relation``, ``.reasoning``), also across a return to anchor selection, so
every loop is bounded by ``C_max`` and the run by ``K_max`` steps.

A model call that fails for good (after its API retries and parse re-asks) is a failed attempt of its stage,
like an invalid reply, so ``C_max`` bounds it too; a failed final answer is a failed run, not an abstention.
Each is logged in ``failures``.
"""

from kgagents.nodes.ark.answer import exit_reason, final_answer, format_answer, infer_question_type
from kgagents.nodes.ark.context import ROLE, ArkContext, ark_context_of
from kgagents.nodes.ark.initialise import initialise_context, new_reasoning_step
from kgagents.nodes.ark.kg import graph_of, has_graph, locate_graph
from kgagents.nodes.ark.messages import keyed, render_triple, summarise
from kgagents.nodes.ark.reason import clean_up, reasoning_step
from kgagents.nodes.ark.replies import (
    AnchorChoice,
    EntityListAnswer,
    ReasoningReply,
    RelationChoice,
    YesNoAnswer,
)
from kgagents.nodes.ark.retrieve import retrieve_relations, retrieve_triples
from kgagents.nodes.ark.select import (
    prompt_select_anchor,
    prompt_select_relation,
    select_anchor,
    select_relation,
)
from kgagents.nodes.ark.state import (
    ArkInput,
    ArkState,
    Attempt,
    CurrentStep,
    KeyedTriple,
    QuestionType,
    ReasoningStep,
    Stage,
)

__all__ = [
    "ROLE", "AnchorChoice", "ArkContext", "ArkInput", "ArkState", "Attempt", "CurrentStep",
    "EntityListAnswer", "KeyedTriple", "QuestionType", "ReasoningReply", "ReasoningStep", "RelationChoice",
    "Stage", "YesNoAnswer",
    "ark_context_of", "clean_up", "exit_reason", "final_answer", "format_answer", "graph_of", "has_graph",
    "infer_question_type", "initialise_context", "keyed", "locate_graph", "new_reasoning_step",
    "prompt_select_anchor", "prompt_select_relation", "reasoning_step", "render_triple", "retrieve_relations",
    "retrieve_triples", "select_anchor", "select_relation", "summarise",
]
