"""The nodes of Agent-G (paper 004, Algorithm 1): agent → retriever bank → generator → validator, and on a
rejection the commentor's corrective feedback for the next action; at most T iterations.

Two task modes (the paper's two benchmark designs):

- ``generation`` (CRAG): the output is an answer ("I don't know" allowed); the agent also decides the
  question's domain, type and dynamism; the text module reads the question's web pages in batches; the graph
  module returns reasoning paths; the validator judges the answer against the retrieved references.
- ``retrieval`` (STaRK): the output is a ranked list of node ids; the text module ranks the nodes' documents;
  the graph module ranks the documents of the entities its ego-graphs reach; the validator judges the top
  document with its reasoning paths.

Every iteration's action, references, answer, verdict and feedback are in the state (``iterations``).

A model call that fails for good (after its API retries and parse re-asks) never ends the run: a failed agent
call falls back to the text module, a failed generator answers "I don't know", a failed validator call
rejects, a failed commentor gives the feedback the retrieval notes suggest. Each is logged in ``failures``.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, TypedDict

import numpy as np
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, field_validator

from kgagents.core.usage import Usage, merge_usage
from kgagents.nodes import agent_g_oracle as O
from kgagents.nodes.context import BaseContext, caller, caller_model, described, operator
from kgagents.nodes.crag_paths import crag_graph_retrieval
from kgagents.nodes.critic import Verdict, verdict
from kgagents.nodes.grounded import graph_for
from kgagents.nodes.llm import BudgetSpent, LLMCaller, LLMError, accounting, metered
from kgagents.nodes.retriever_bank import (
    Retrieval,
    TopicEntity,
    describe_retrieval,
    document_retrieval,
    graph_retrieval,
    page_batch,
    rank_pages,
    render_references,
)
from kgagents.nodes.runtime import context_as
from kgagents.nodes.served import graph_source, served_now
from kgagents.nodes.state import Failure, append
from kgagents.prompts import agent_g as P
from kgagents.tools.crag_api import relation_types as crag_relations
from kgagents.tools.files.convert import convert_bytes
from kgagents.tools.pgraph import GraphRef, StaticKG, resolve
from kgagents.tools.pgraph.embedding_cache import EmbeddingCache, check_cache_setting, embedding_cache
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


# --------------------------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------------------------------
# Structured replies
# --------------------------------------------------------------------------------------------------------------
class EntityChoice(BaseModel):
    name: str = Field(description="The entity as written in the question")
    type: str = Field("", description="Its type, one of the entity types")


def parse_entities(value: Any) -> Any:
    """Entities written as text (``"maroon 5 (band); adele (artist)"``) as ``{name, type}`` objects."""
    if isinstance(value, str):
        value = [v for v in re.split(r"[;\n]", value) if v.strip()]
    out = []
    for item in value or []:
        if isinstance(item, str):
            match = re.match(r"\s*(.+?)\s*\(([^()]*)\)\s*$", item)
            out.append({"name": match.group(1), "type": match.group(2)} if match else {"name": item.strip()})
        else:
            out.append(item)
    return out


class AgentDecision(BaseModel):
    """The agent's action."""

    domain: str = Field("", description="The question's domain (generation task)")
    question_type: str = Field("", description="The question's type (generation task)")
    dynamism: str = Field("", description="The question's dynamism (generation task)")
    entities: list[EntityChoice] = Field(default_factory=list, description="Topic entities with their types")
    relations: list[str] = Field(default_factory=list, description="Useful relations, from the relation types")
    source: Literal["knowledge graph", "text documents"] = Field(description="The reference source")
    next_batch: bool = Field(False, description="Text documents: read the next batch instead of the same one")

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, value: Any) -> Any:
        text = str(value).strip().lower()
        if "graph" in text or text in ("kg", "graph"):
            return "knowledge graph"
        if "text" in text or "document" in text or "web" in text:
            return "text documents"
        return value

    @field_validator("entities", mode="before")
    @classmethod
    def _entities(cls, value: Any) -> Any:
        return parse_entities(value)

    @field_validator("relations", mode="before")
    @classmethod
    def _relations(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [v.strip() for v in re.split(r"[;,\n]", value) if v.strip()]
        return value


class CommentorReply(BaseModel):
    """The error in the action, as one of the error types."""

    error_type: str = Field(description="Exactly one of the error types")
    reason: str = Field("", description="What was wrong, in one sentence")


# --------------------------------------------------------------------------------------------------------------
# Initialise
# --------------------------------------------------------------------------------------------------------------
#: Characters of a page's text that its passages are chosen from (the rest of a very long page is not read).
PAGE_TEXT_LIMIT = 60_000
#: A Markdown link or image (``[text](target)``), read as its text alone.
_MARKDOWN_LINK = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")


#: The name of the HTML-to-text conversion in an :class:`EmbeddingCache` (a change of it gets a new name).
PAGE_TEXT_KIND = "page-html-markdown-v1"


def html_text(html: str, max_chars: int = PAGE_TEXT_LIMIT, cache: EmbeddingCache | None = None) -> str:
    """A page's HTML as text (the project's HTML converter; links read as their text), kept in ``cache`` when
    given; empty when it has none."""
    if not html.strip():
        return ""
    if cache is not None:
        return cache.text(f"{PAGE_TEXT_KIND}:{max_chars}", html, lambda: html_text(html, max_chars))
    try:
        text = convert_bytes(html.encode("utf-8"), filename="page.html").text
    except Exception:  # noqa: BLE001 - an unconvertible page falls back to its snippet
        text = ""
    if not text.strip():
        return ""
    for _ in range(2):  # a linked image is a link around an image
        text = _MARKDOWN_LINK.sub(r"\1", text)
    return text[:max_chars]


def page_text(page: Page, max_chars: int = PAGE_TEXT_LIMIT, cache: EmbeddingCache | None = None) -> str:
    """A page as text: its converted HTML (:func:`html_text`), else its snippet."""
    if page.get("text"):
        return str(page["text"])[:max_chars]
    return html_text(str(page.get("html") or ""), max_chars, cache) or str(page.get("snippet") or "")


def page_texts(pages: list[Page], cache: EmbeddingCache | None = None) -> list[str]:
    """:func:`page_text` of each page, the same HTML (a page the results list twice) converted once."""
    converted: dict[str, str] = {}
    out = []
    for page in pages:
        html = "" if page.get("text") else str(page.get("html") or "")
        if html and html not in converted:
            converted[html] = html_text(html, cache=cache)
        out.append((converted[html] or str(page.get("snippet") or "")) if html else page_text(page))
    return out


@metered  # the pages' embeddings
async def initialise(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """Check the input, resolve the graph, convert the pages to text, keep each page's passages that speak to
    the question and rank the pages by similarity (once)."""
    ctx = agent_g_context_of(runtime)
    if state.get("t"):
        raise ValueError("this thread already holds an Agent-G run; continue it without new input, or start a new "
                         "thread for a new question")
    question = (state.get("question") or "").strip()
    if not question:
        raise ValueError("the task has no question: give {'question': '...', 'graph': ..., 'pages': [...]}")
    if ctx.task == "retrieval" and not state.get("graph"):
        raise ValueError("the retrieval task needs a knowledge base: give 'graph' (a name or path)")
    out: dict[str, Any] = {"question": question, "t": 0, "feedback": ""}
    oracles = ctx.oracle_validator or ctx.oracle_commentor
    if oracles and not state.get("oracle"):
        raise ValueError("the oracle ablations need the gold answer: run them with kgagents eval, which hands it "
                         "over (the input's oracle field)")
    out["oracle"] = state.get("oracle") if oracles else None  # no later node, prompt or checkpoint holds it
    if state.get("graph"):
        out["graph_ref"] = await asyncio.to_thread(resolve, graph_source(state["graph"], served=served_now()))
    pages = list(state.get("pages") or [])
    if pages:
        cache = embedding_cache(ctx.embedding_cache)
        texts = await asyncio.to_thread(page_texts, pages, cache)
        kept, order = await asyncio.to_thread(rank_pages, question,
                                              [(str(p.get("name", "")), t) for p, t in zip(pages, texts, strict=True)],
                                              ctx.embedder(), max_chars=ctx.page_chars, cache=cache)
        pages = [Page(name=str(p.get("name", "")), url=str(p.get("url", "")), snippet=str(p.get("snippet", "")),
                      text=t) for p, t in zip(pages, kept, strict=True)]
        out.update(pages=pages, page_order=[[i, s] for i, s in order])
    return out


# --------------------------------------------------------------------------------------------------------------
# Agent
# --------------------------------------------------------------------------------------------------------------
async def _vocabulary(state: AgentGState, ctx: AgentGContext) -> tuple[list[str], list[str]]:
    """The entity and relation types the agent chooses from."""
    entity_types, relation_types = ctx.entity_types, ctx.relation_types
    if (entity_types is None or relation_types is None) and state.get("graph_ref"):
        stats = (await graph_for(state["graph_ref"])).stats()
        entity_types = entity_types if entity_types is not None else [t for t in stats.types if t]
        relation_types = relation_types if relation_types is not None else list(stats.relations)
    if relation_types is None and ctx.task == "generation":
        relation_types = crag_relations()
    return list(entity_types or []), list(relation_types or [])


def describe_action(action: Action) -> str:
    entities = ", ".join(f"{e['name']} ({e.get('type') or '?'})" for e in action.get("entities") or []) or "(none)"
    parts = [f"source: {'knowledge graph' if action.get('module') == 'graph' else 'text documents'}"]
    if action.get("module") == "text":
        parts[-1] += f", batch {action.get('batch', 0) + 1}"
    for key in ("domain", "question_type", "dynamism"):
        if action.get(key):
            parts.append(f"{key.replace('_', ' ')}: {action[key]}")
    parts += [f"entities: {entities}", f"relations: {', '.join(action.get('relations') or []) or '(none)'}"]
    return "; ".join(parts)


async def agent(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """``a_t = Agent(q, f_{t-1})``: extract the domain, topic entities and useful relations, select the module."""
    ctx = agent_g_context_of(runtime)
    t = state.get("t", 0) + 1
    entity_types, relation_types = await _vocabulary(state, ctx)
    previous = "\n".join(f"iteration {i['t']}: {describe_action(i['action'])} → {i.get('error_type') or 'rejected'}"
                         for i in state.get("iterations") or []) or "(none)"
    generation = ctx.task == "generation"
    prompt = P.render(P.AGENT, iteration=t, question=state["question"],
                      query_time=state.get("query_time") or "(not given)",
                      decisions=(P.DECISIONS_GENERATION.format(domains=", ".join(ctx.domains)) if generation
                                 else P.DECISIONS_RETRIEVAL),
                      examples=await asyncio.to_thread(ctx.examples, "agent"),
                      entity_types=", ".join(entity_types) or "(any)",
                      relation_types=", ".join(relation_types[:400]) or "(any)", previous=previous,
                      feedback=state.get("feedback") or "(none: this is the first attempt)")
    llm = LLMCaller(ctx, ROLE)
    last = last_text_batch(state)
    try:
        decision = await llm.structured(prompt, AgentDecision)
    except LLMError as exc:  # no usable action: the text module (no entity needed)
        llm.failed(exc, "the text module retrieves")
        action = Action(entities=[], relations=[], module="text", batch=_next_batch(last, True))
        return {"t": t, "action": action, **accounting(llm),
                "feedback": f"(the agent's reply could not be used: {exc.reason[:200]})"}
    module: Literal["graph", "text"] = "graph" if decision.source == "knowledge graph" else "text"
    action = Action(domain=decision.domain.strip().lower(), question_type=decision.question_type.strip().lower(),
                    dynamism=decision.dynamism.strip().lower(),
                    entities=[TopicEntity(name=e.name.strip(), type=e.type.strip()) for e in decision.entities
                              if e.name.strip()],
                    relations=list(dict.fromkeys(r.strip() for r in decision.relations if r.strip())), module=module)
    if module == "text":
        action["batch"] = _next_batch(last, decision.next_batch)
    return {"t": t, "action": action, "usage": llm.usage}


def last_text_batch(state: AgentGState) -> int | None:
    """The page batch the text module read last in this run (``None``: it has read none), whatever the graph
    module did since."""
    for iteration in reversed(state.get("iterations") or []):
        action = iteration.get("action") or {}
        if action.get("module") == "text":
            return int(action.get("batch", 0))
    return None


def _next_batch(last: int | None, wanted: bool) -> int:
    """The page batch: the next one when asked for, else the one the text module was on (the first at the
    start). A detour to the graph module does not send the text module back to the first batch."""
    if last is None:
        return 0
    return last + 1 if wanted else last


# --------------------------------------------------------------------------------------------------------------
# Retriever bank
# --------------------------------------------------------------------------------------------------------------
def candidate_types(ctx: AgentGContext, graph: StaticKG) -> list[str] | None:
    """The node types a ranking may hold: the context's, else those the knowledge base records (STaRK's SKBs:
    MAG's papers, Amazon's products; PrimeKG's every node), else every type (``None``)."""
    if ctx.candidate_types is not None:
        return list(ctx.candidate_types) or None
    recorded = (graph.meta.get("stark") or {}).get("candidate_types")
    return list(recorded) if recorded else None


async def vss_query(ctx: AgentGContext, graph: StaticKG, state: AgentGState) -> np.ndarray | None:
    """The question's precomputed embedding when STaRK's embeddings are given (their document embeddings are
    put into the graph's index the first time); ``None``: the question's text is embedded."""
    if not ctx.stark_embeddings:
        return None

    embeddings = await asyncio.to_thread(stark_embeddings, ctx.stark_embeddings)
    await asyncio.to_thread(embeddings.install, graph, ctx.embedder(), kind=ctx.index_kind)
    return await asyncio.to_thread(embeddings.query_vector, state.get("question_id"))


@metered  # the question's and the documents' embeddings
async def retriever_bank(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """``X_t = RetrieverBank(q, a_t, D)``: run the selected module (nothing once the run's budget refuses its
    embeddings calls: the validator's router then ends the run at its budget)."""
    try:
        return await _retriever_bank(state, runtime)
    except BudgetSpent as exc:
        module = (state.get("action") or {}).get("module") or "text"
        return {"retrieval": Retrieval(module=module, references=[], ranked_ids=[], paths=[], linked={}, batch=0,
                                        notes=[str(exc)])}


async def _retriever_bank(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    ctx = agent_g_context_of(runtime)
    action = state.get("action") or Action(module="text")
    question = state["question"]
    embedder = ctx.embedder()
    retrieval: Retrieval
    if action.get("module") == "text":
        if state.get("pages"):
            order = [(int(i), float(s)) for i, s in state.get("page_order") or []]
            retrieval = page_batch(state["pages"], order, int(action.get("batch", 0)), ctx.batch_size,
                                   ctx.page_chars)
        elif state.get("graph_ref"):
            graph = await graph_for(state["graph_ref"])
            vector = await vss_query(ctx, graph, state)
            retrieval = await asyncio.to_thread(document_retrieval, graph, question, ctx.ranked_k,
                                                types=candidate_types(ctx, graph), embedder=embedder,
                                                kind=ctx.index_kind, vector=vector)
        else:
            retrieval = Retrieval(module="text", references=[], ranked_ids=[], paths=[], linked={}, batch=0,
                                  notes=["there are no text documents for this question"])
    elif state.get("graph_ref"):
        graph = await graph_for(state["graph_ref"])
        retrieving = ctx.task == "retrieval"
        vector = await vss_query(ctx, graph, state) if retrieving else None
        retrieval = await asyncio.to_thread(
            graph_retrieval, graph, question, action.get("entities") or [], action.get("relations") or [],
            output="documents" if retrieving else "paths", k=ctx.ranked_k if retrieving else ctx.top_k,
            radius=ctx.radius, max_nodes=ctx.max_nodes, embedder=embedder,
            types=candidate_types(ctx, graph) if retrieving else None, kind=ctx.index_kind, vector=vector,
            linker=ctx.linker())
    else:
        retrieval = await crag_graph_retrieval(question, action, ctx)
    return {"retrieval": retrieval}


# --------------------------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------------------------
#: Characters a page's name and a reference's number add to the page text the generator reads.
PAGE_NAME_CHARS = 400
#: Characters of a document or a reasoning path the generator reads (documents are cut to this by the
#: retriever).
DOCUMENT_CHARS = 2000


def select_references(retrieval: Retrieval, ctx: AgentGContext) -> Retrieval:
    """The references the generator and the validator read: the top ``top_k`` paths or documents and the whole
    batch of pages (``batch_size``), each part kept whole — the Text + Graph RAG baseline hands over both,
    graph paths first, and many paths must not push the pages out."""
    refs = list(retrieval.get("references") or [])
    pages = [n for n, r in enumerate(refs) if r.get("kind") == "page"][: ctx.batch_size]
    others = [n for n, r in enumerate(refs) if r.get("kind") != "page"][: ctx.top_k]
    return {**retrieval, "references": [refs[n] for n in sorted(pages + others)]}


def references_budget(ctx: AgentGContext) -> int:
    """The characters of references the generator and the validator read, derived from what a retrieval can
    hand over: a whole batch of pages (``batch_size`` × ``page_chars`` and their names) and ``top_k`` paths or
    documents."""
    return ctx.batch_size * (ctx.page_chars + PAGE_NAME_CHARS) + ctx.top_k * DOCUMENT_CHARS


def references_text(retrieval: Retrieval, ctx: AgentGContext) -> str:
    """The selected references as the generator and the validator read them."""
    return render_references(select_references(retrieval, ctx), max_chars=references_budget(ctx))


_FINAL = re.compile(r"final answer\s*[:\uff1a]\s*(.+)", re.IGNORECASE)


def final_answer_of(reply: str) -> str:
    """The text after the last ``Final answer:``; the reply's last line when there is none."""
    matches = list(_FINAL.finditer(reply))
    text = matches[-1].group(1) if matches else (reply.strip().splitlines() or [""])[-1]
    return text.strip().strip("*`").strip() or IDK


async def generator(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """``ŷ_t = Generator(q, X_t)``: an answer from the top-K references with chain-of-thought (generation
    task); the retrieval task's output is the ranked list itself."""
    ctx = agent_g_context_of(runtime)
    retrieval = state.get("retrieval") or Retrieval()
    if ctx.task == "retrieval":
        ranked = list(retrieval.get("ranked_ids") or [])[: ctx.ranked_k]
        return {"answer": ranked[0] if ranked else "", "ranked_ids": ranked}
    action = state.get("action") or Action()
    prompt = P.render(P.GENERATOR, iteration=state.get("t", 1), example=P.GENERATOR_EXAMPLE,
                      idk_instruction=P.GENERATOR_IDK if ctx.generator_idk else "",
                      source="knowledge graph" if retrieval.get("module") == "graph" else "text documents",
                      references=references_text(retrieval, ctx), question=state["question"],
                      query_time=state.get("query_time") or "(not given)",
                      question_type=action.get("question_type") or "(unknown)",
                      dynamism=action.get("dynamism") or "(unknown)", domain=action.get("domain") or "(unknown)")
    llm = LLMCaller(ctx, ROLE)
    try:
        reply = await llm.text(prompt)
    except LLMError as exc:
        llm.failed(exc, f"the answer is {IDK!r}")
        return {"answer": IDK, **accounting(llm), "ranked_ids": [],
                "feedback": f"(the generator failed: {str(exc)[:200]})"}
    return {"answer": final_answer_of(reply), "usage": llm.usage, "ranked_ids": [], "reasoning": reply}


# --------------------------------------------------------------------------------------------------------------
# Critic: validator and commentor
# --------------------------------------------------------------------------------------------------------------
def _yes(reply: str) -> bool:
    words = re.findall(r"[a-z]+", reply.lower())
    return bool(words) and words[0] == "yes"


async def validator(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """``C_val(q, ŷ_t, X_t)``: yes or no, with the task's validation context (§2.3): the retrieved references
    for an answer, the top document with its reasoning paths for a ranking (without them:
    ``validator_context`` off); or the oracle's judgement from the gold (``oracle_validator``)."""
    ctx = agent_g_context_of(runtime)
    retrieval = state.get("retrieval") or Retrieval()
    t = state.get("t", 1)
    answer = state.get("answer") or ""
    llm = LLMCaller(ctx, ROLE)
    if ctx.oracle_validator:
        accepted, reply = await _oracle_verdict(state, ctx, llm, answer)
    elif ctx.task == "retrieval":
        refs = retrieval.get("references") or []
        if not refs:
            accepted, reply = False, "(no document retrieved)"
        elif ctx.validator_context:
            context = refs[0]["text"] + "\nReasoning paths:\n" + ("\n".join(retrieval.get("paths") or [])
                                                                  or "(none: the text module)")
            reply = await _ask(llm, P.render(P.VALIDATOR_RETRIEVAL, iteration=t, question=state["question"],
                                             context=context))
            accepted = _yes(reply)
        else:
            reply = await _ask(llm, P.render(P.VALIDATOR_RETRIEVAL_BARE, iteration=t, question=state["question"],
                                             context=refs[0]["text"]))
            accepted = _yes(reply)
    elif ctx.validator_context:
        reply = await _ask(llm, P.render(P.VALIDATOR_GENERATION, iteration=t, context=references_text(retrieval, ctx),
                                         answer=answer, question=state["question"],
                                         query_time=state.get("query_time") or "(not given)"))
        accepted = _yes(reply)
    else:
        reply = await _ask(llm, P.render(P.VALIDATOR_GENERATION_BARE, iteration=t, answer=answer,
                                         question=state["question"],
                                         query_time=state.get("query_time") or "(not given)"))
        accepted = _yes(reply)
    record = Iteration(t=t, action=state.get("action") or Action(), retrieval=retrieval, answer=answer,
                       ranked_ids=list(state.get("ranked_ids") or []), accepted=accepted, validator_reply=reply[:500])
    return {**accounting(llm), "iterations": [record]}


async def _oracle_verdict(state: AgentGState, ctx: AgentGContext, llm: LLMCaller, answer: str) -> tuple[bool, str]:
    """The oracle validator (:mod:`kgagents.nodes.agent_g_oracle`): Hit@1 for a ranking; CRAG's rules, then the paper's
    evaluator with the run's model, for an answer."""
    oracle = state.get("oracle") or {}
    if ctx.task == "retrieval":
        correct = O.ranking_is_correct(list(state.get("ranked_ids") or []), oracle)
        return correct, f"(oracle: the first document {'is' if correct else 'is not'} an answer)"
    decided = O.answer_by_rules(answer, oracle)
    if decided is not None:
        return decided, f"(oracle: {'correct' if decided else 'not correct'} by CRAG's rules)"
    reply = await _ask(llm, O.evaluator_prompt(state["question"], answer, oracle))
    return O.judged_accurate(reply), f"(oracle, the evaluator: {reply[:200]})"


async def _ask(llm: LLMCaller, prompt: str) -> str:
    """A text reply; a call that fails for good counts as a rejection (the loop goes on)."""
    try:
        return await llm.text(prompt)
    except LLMError as exc:
        llm.failed(exc, "the validator rejects")
        return f"(no reply: {str(exc)[:200]})"


def route_verdict(state: AgentGState, ctx: AgentGContext) -> Verdict:
    """Algorithm 1, lines 7–12: accept a validated answer; after a rejection reflect while iterations are left."""
    last = (state.get("iterations") or [{}])[-1]
    return verdict(bool(last.get("accepted")), int(state.get("t", 0)), ctx.max_iterations, limit_first=False)


async def commentor(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """``f_t = C_com(q, a_t)``: the error in the action, from the task's error taxonomy (Table 3), as
    corrective feedback; in-context examples of (action, feedback) pairs; no ground truth is used (except by
    the oracle commentor of the ablations, ``oracle_commentor``)."""
    ctx = agent_g_context_of(runtime)
    taxonomy = P.ERROR_TYPES_GENERATION if ctx.task == "generation" else P.ERROR_TYPES_RETRIEVAL
    retrieval = state.get("retrieval") or Retrieval()
    action = state.get("action") or Action()
    if ctx.oracle_commentor:
        oracle = state.get("oracle") or {}
        error = O.retrieval_error(action, retrieval, oracle) if ctx.task == "retrieval" else \
            O.generation_error(action, oracle)
        feedback = taxonomy[error]
        return {"feedback": feedback, "iterations": [Iteration(t=state.get("t", 1), error_type=error,
                                                                feedback=feedback)]}
    examples = await asyncio.to_thread(ctx.examples, "commentor")
    llm = LLMCaller(ctx, ROLE)
    prompt = P.render(P.COMMENTOR, iteration=state.get("t", 1), error_types="\n".join(f"- {k}" for k in taxonomy),
                      examples=examples, question=state["question"],
                      query_time=state.get("query_time") or "(not given)", action=describe_action(action),
                      retrieval=describe_retrieval(retrieval) + (f"\nanswer: {state.get('answer')}"
                                                                 if ctx.task == "generation" else ""))
    try:
        reply = await llm.structured(prompt, CommentorReply)
        error = _match_error(reply.error_type, taxonomy) or default_error(action, retrieval, ctx.task)
        reason = reply.reason
    except LLMError as exc:
        llm.failed(exc, "the feedback is the error the retrieval notes suggest")
        error, reason = default_error(action, retrieval, ctx.task), f"(commentor unavailable: {str(exc)[:160]})"
    feedback = taxonomy[error] + (f" ({reason})" if reason else "")
    return {"feedback": feedback, **accounting(llm),
            "iterations": [Iteration(t=state.get("t", 1), error_type=error, feedback=feedback)]}


def _match_error(text: str, taxonomy: dict[str, str]) -> str | None:
    """The error type a commentor's reply names: the type itself (case, punctuation and quotes aside), else
    the one type whose full name the reply contains; ``None`` for a reply that names none, or more than one —
    a short reply such as "no" or "incorrect" is no error type, however many type names it occurs in."""
    key = " ".join(re.sub(r"[^a-z/ ]+", " ", text.lower()).split())
    if key in taxonomy:
        return key
    named = [name for name in taxonomy if re.search(rf"(?<![a-z]){re.escape(name)}(?![a-z])", key)]
    named = [n for n in named if not any(n != other and n in other for other in named)]  # the longest names
    return named[0] if len(named) == 1 else None


def default_error(action: Action, retrieval: Retrieval, task: Task) -> str:
    """The error a rejection most likely came from when the commentor gives none: what the retrieval notes say."""
    notes = " ".join(retrieval.get("notes") or [])
    if task == "retrieval":
        if "no intersection between" in notes and not retrieval.get("truncated"):
            return "no intersection"
        if action.get("module") == "text":
            return "incorrect document"
        if len(action.get("entities") or []) == 1:
            return "missing entity"
        return "incorrect entity/relation"
    if action.get("module") == "text":
        return "incorrect retrieval module"
    return "incorrect entity and relation"


async def finish(state: AgentGState, runtime: Runtime[AgentGContext]) -> dict[str, Any]:
    """The answer: the accepted one, or the last one after T iterations (line 12)."""
    ctx = agent_g_context_of(runtime)
    iterations = state.get("iterations") or []
    last = iterations[-1] if iterations else Iteration()
    accepted = bool(last.get("accepted"))
    reason = f"accepted at iteration {last.get('t')}" if accepted else \
        f"{ctx.max_iterations} iteration(s) without an accepted answer: the last answer"
    if state.get("budget_stop") and not accepted:  # kgagents.nodes.budget: the run stopped at its budget
        reason = f"{state['budget_stop']}: the answer of iteration {last.get('t')}"
    cut = [{"t": i.get("t"), "entities": list((i.get("retrieval") or {}).get("truncated") or [])}
           for i in iterations if (i.get("retrieval") or {}).get("truncated")]
    extra: dict[str, Any] = {"truncated_egos": cut}
    if ctx.iteration_metrics:
        extra["curve"] = output_curve(iterations, ctx)
    if ctx.task == "retrieval":
        ranked = list(last.get("ranked_ids") or [])
        return {"ranked_ids": ranked, "final_answer": json.dumps(ranked), "exit_reason": reason, **extra}
    answer = str(last.get("answer") or IDK)
    return {"final_answer": answer, "exit_reason": reason, **extra}


def output_curve(iterations: list[Iteration], ctx: AgentGContext) -> list[Any]:
    """The output the run would have returned with T = 1 … ``max_iterations``: the first accepted one up to T,
    else iteration T's (the last one when the run stopped earlier): Figure 5's points from one run."""
    out: list[Any] = []
    kept: Iteration | None = None
    for t in range(1, ctx.max_iterations + 1):
        chosen = kept or next((i for i in iterations if i.get("t") == t), None) or \
            (iterations[-1] if iterations else Iteration())
        if chosen.get("accepted"):
            kept = chosen
        out.append(list(chosen.get("ranked_ids") or []) if ctx.task == "retrieval"
                   else str(chosen.get("answer") or IDK))
    return out
