"""Agent-G's context (its model role, task mode and limits) and the run's view of it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from langgraph.runtime import Runtime

from kgagents.nodes.context import BaseContext, caller, caller_model, described, operator
from kgagents.nodes.runtime import context_as
from kgagents.prompts import agent_g as P
from kgagents.tools.pgraph.embedding_cache import check_cache_setting
from kgagents.tools.pgraph.embeddings import embedder_spec
from kgagents.tools.pgraph.stark import stark_embeddings
from kgagents.tools.pgraph.vectors import index_kind

#: Agent-G's one model role (``agent_g_model``, ``KGAGENTS_AGENT_G_MODEL``): the agent, the generator, the
#: validator and the commentor, and its baselines; it was called ``graph_executor`` before, which is still
#: read (a context's ``graph_executor_model``, the environment's ``KGAGENTS_GRAPH_EXECUTOR_MODEL``).
ROLE = "agent_g"
Task = Literal["generation", "retrieval"]
CRAG_DOMAINS = ("music", "movie", "finance", "sports", "encyclopedia")
IDK = "I don't know"


@described
@dataclass(kw_only=True)
class AgentGContext(BaseContext):
    """Agent-G's task mode and limits, with the paper's defaults (appendix A.2: T = 1 + 4 reflections,
    ego-graph radius ≤ 2, batches of 5 pages)."""

    ROLES: ClassVar[tuple[str, ...]] = (ROLE,)
    LEGACY_ROLES: ClassVar[dict[str, str]] = {"graph_executor": ROLE}

    agent_g_model: Any = caller_model()
    """The model of Agent-G's agent, generator, validator and commentor (``None``: ``model``)."""

    task: Task = caller("generation")
    """``generation`` (CRAG-style questions: an answer) or ``retrieval`` (STaRK-style: a ranked id list)."""
    max_iterations: int = caller(5)
    """T: iterations of Algorithm 1. Five: the first action and the "four self-reflection iterations" of
    appendix A.2.2 (§4.3: iteration 1 has no self-reflection)."""
    radius: int = caller(2)
    """The radius of the graph module's ego-graphs around the linked entities."""
    batch_size: int = caller(5)
    """Web pages per batch of the text module (CRAG)."""
    top_k: int = caller(20)
    """References the generator reads (paths, documents); the retrieval task ranks up to ``ranked_k`` ids."""
    ranked_k: int = caller(100)
    """Retrieval task: how many ids the ranking returns."""
    page_chars: int = caller(3000)
    """Characters of each web page the generator reads: the page's passages most similar to the question."""
    generator_idk: bool = caller(False)
    """Tell the generator to answer "I don't know" when it does not know (not in the paper's prompt)."""
    validator_context: bool = caller(True)
    """The validator's validation context (§2.3): the references (CRAG), the reasoning paths (STaRK); off:
    Tables 6 and 7's "w/o Context" ablation."""
    oracle_validator: bool = caller(False)
    """Ablation: the validator judges from the gold answer (Tables 6 and 7's "Oracle"; see
    :mod:`kgagents.nodes.agent_g_oracle`); needs the gold, which ``kgagents eval`` hands over."""
    oracle_commentor: bool = caller(False)
    """Ablation: the commentor names the error type from the gold (Tables 6 and 7's "Oracle")."""
    commentor_shots: int | None = caller(None)
    """How many of the commentor's in-context examples it reads (blank-line separated; ``None``: all, 0:
    none): Table 6's 5-shot and Table 7's 0-shot rows."""
    iteration_metrics: bool = caller(False)
    """Record the output the run would have returned with T = 1, 2, …, T (``curve``): the scorers then report
    the metrics per iteration (Figure 5) from one run."""
    react_steps: int = caller(4)
    """ReAct's thought–action–observation steps ("for four iterations", appendix A.2.3), then an answer."""
    react_examples: str | None = operator(None)
    """A text file of ReAct's in-context examples, instead of the built-in ones."""
    max_nodes: int | None = caller(None)
    """An optional bound on an ego-graph's nodes around hubs; ``None`` (the paper): none. A cut ego-graph is
    recorded in its iteration (``retrieval.truncated``) and in the run (``truncated_egos``), and a missing
    intersection of cut ego-graphs is reported as possibly hidden by the cut, not as no intersection."""
    domains: list[str] = caller(factory=lambda: list(CRAG_DOMAINS))
    """The domains the agent chooses from (CRAG's five by default)."""
    entity_types: list[str] | None = caller(None)
    """The entity types the agent chooses from; default: the graph's node types."""
    relation_types: list[str] | None = caller(None)
    """The relations the agent chooses from; default: the graph's relations (CRAG API: its functions)."""
    candidate_types: list[str] | None = caller(None)
    """Retrieval task: the node types that can be answers (e.g. STaRK-MAG's papers); default: every type."""
    agent_examples: str | None = operator(None)
    """A text file of the agent's in-context examples (question → action), instead of the built-in ones."""
    commentor_examples: str | None = operator(None)
    """A text file of the commentor's in-context examples (action, retrieval → feedback), instead of the
    built-in ones (the paper collects them from a training split, verified by its ground truth)."""
    crag_api_url: str | None = operator(None)
    """CRAG's mock KG API (the graph module of the generation task without a static KG); default: CRAG_SERVER."""
    embedding_model: Any = operator(None)
    """The embedder of the text module and the VSS rankers, by name: a sentence-transformers model (name or
    path; default the packaged all-MiniLM-L6-v2) or ``openai:<model>`` (the paper's STaRK runs:
    ``openai:text-embedding-ada-002``; CRAG: BAAI/bge-m3); default with ``stark_embeddings``: their model."""
    embedding_device: str | None = operator(None)
    """The embedder's device (``cpu``, ``cuda``; ``None``: sentence-transformers chooses)."""
    embedding_base_url: str | None = operator(None)
    """An OpenAI-compatible server for ``openai:<model>`` embeddings (default ``OPENAI_BASE_URL``, else OpenAI)."""
    linking_model: Any = operator(None)
    """The embedder that links a topic entity to the nearest node name when no name matches exactly (default:
    ``embedding_model`` when it is a local model, else the packaged MiniLM — a large graph's names are many to
    embed with a paid API)."""
    stark_embeddings: str | None = operator(None)
    """STaRK's released embeddings of the dataset (``emb/<dataset>/<model>``: ``doc/candidate_emb_dict.pt``
    and ``query/query_emb_dict.pt``), used instead of embedding every document again; questions they lack are
    embedded by the model."""
    vector_index: Literal["exact", "ivf"] = caller("exact")
    """``exact`` (the paper's VSS: every candidate scored) or ``ivf`` (an approximate inverted-file index)."""
    embedding_cache: str = operator("memory")
    """Where the text module keeps the embeddings of the pages' passages and the pages' converted text, by
    content, so that a page met again (a rerun, a resumed or retried item, another ablation over the same
    questions) is not converted and embedded again: ``memory`` (the process), ``disk`` (also a SQLite file in
    the data home's ``cache/``, shared by processes and later runs), a file path, or ``off``. What it returns is
    what the model returned for the text (:mod:`kgagents.tools.pgraph.embedding_cache`)."""
    recursion_limit: int = 100

    def __post_init__(self) -> None:
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()
        if self.task not in ("generation", "retrieval"):
            raise ValueError(f"task must be generation or retrieval, not {self.task!r}")
        if self.max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        if self.react_steps < 1:
            raise ValueError("react_steps must be at least 1")
        if self.commentor_shots is not None and self.commentor_shots < 0:
            raise ValueError("commentor_shots must be at least 0, or null for every example")
        if not 0 < self.radius <= 3:
            raise ValueError("radius must be 1, 2 or 3 (the paper uses at most 2)")
        if self.max_nodes is not None and self.max_nodes < 1:
            raise ValueError("max_nodes must be at least 1, or null for no bound")
        if self.vector_index not in ("exact", "ivf"):
            raise ValueError(f"vector_index must be exact or ivf, not {self.vector_index!r}")
        check_cache_setting(self.embedding_cache)
        for name in ("domains", "entity_types", "relation_types", "candidate_types"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, (list, tuple))
                                      or not all(isinstance(v, str) for v in value)):
                raise ValueError(f"{name} must be a list of names, e.g. --set '{name}=[\"{value}\"]' (a JSON list), "
                                 f"not {value!r}")
        self.recursion_limit = max(self.recursion_limit, 6 * self.max_iterations + 10)

    def embedder(self) -> Any:
        """The VSS embedder (see ``embedding_model``)."""
        model = self.embedding_model
        if model is None and self.stark_embeddings:
            model = stark_embeddings(self.stark_embeddings).model_name
        return embedder_spec(model, self.embedding_device, self.embedding_base_url)

    def linker(self) -> Any:
        """The embedder that links entity names (see ``linking_model``): that model, else the VSS model when
        it runs here (a sentence-transformers model), else the packaged one."""
        model = self.linking_model
        if model is None and not (isinstance(self.embedding_model, str) and self.embedding_model.startswith("openai:")):
            model = self.embedding_model
        return embedder_spec(model, self.embedding_device, self.embedding_base_url)

    @property
    def index_kind(self) -> str:
        """The vector index searches ask for: ``flat`` (exact) or ``ivf``."""
        return index_kind(self.vector_index) or "flat"

    def examples(self, which: Literal["agent", "commentor", "react"]) -> str:
        """The in-context examples of the agent, the commentor (the first ``commentor_shots``) or ReAct for
        this task: the user's file, else the built-in ones; an unreadable file is a clear error."""
        path = {"agent": self.agent_examples, "commentor": self.commentor_examples,
                "react": self.react_examples}[which]
        generation = self.task == "generation"
        if path:
            try:
                text = Path(path).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"cannot read the {which}'s examples file {path}: {exc}") from exc
        elif which == "agent":
            text = P.AGENT_EXAMPLES_GENERATION if generation else P.AGENT_EXAMPLES_RETRIEVAL
        elif which == "react":
            text = P.REACT_EXAMPLES
        else:
            text = P.COMMENTOR_EXAMPLES_GENERATION if generation else P.COMMENTOR_EXAMPLES_RETRIEVAL
        if which == "commentor" and self.commentor_shots is not None:
            shots = [b.strip() for b in re.split(r"\n\s*\n", text) if b.strip()][: self.commentor_shots]
            text = "\n\n".join(shots) or "(none)"
        return text


def agent_g_context_of(runtime: Runtime[AgentGContext] | None) -> AgentGContext:
    return context_as(runtime, AgentGContext)
