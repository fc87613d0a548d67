"""What each served workflow takes and what it gives back: the input and output schemas of its graph.

The state of a run stays as rich as Studio and ``kgagents show`` need (every vote, triple, retrieval, usage
entry); callers — the LangGraph SDK, an MCP host through ``langgraph dev``'s ``/mcp`` endpoint, ``invoke`` in
Python — see only the input schema's fields and get the output schema back::

    {"final_answer": "65", "thread_id": "…", "cost_usd": 0.0021,
     "tokens": {"calls": 14, "input_tokens": 9120, "output_tokens": 610},
     "failure_summary": {"count": 0, "kinds": {}}, "evidence": {"triples": [["array", "SORTED_TO", "…"]]}}

Every served graph has this one output schema, :class:`RunOutput` (the surfer's too): ``exit_reason`` is
there where the workflow records why its run ended (ARK-V1, grounded reasoning, Agent-G and its baselines, the
surfer); a run that a budget ended has ``budget_stop`` (:mod:`kgagents.nodes.budget`). ``final_answer`` is the
state's own answer channel (written by each workflow's final step); the other output fields are computed once,
from the final state, by the ``output`` node that :func:`workflow_graph` adds: every way to ``END`` leads through
it (:class:`WorkflowGraph`), whichever node ended the run. Workflows of one shape share an input schema:

=====================  ======================================================================================
schemas                workflows
=====================  ======================================================================================
:class:`TaskInput`      ``kgot``, ``zeroshot``, ``kgot-nokg`` (a task and its attached files)
:class:`FusionInput`    ``fusion`` (a task, and the KGoT variants to fuse)
:class:`CorpusInput`    ``rag``, ``kgot-graphrag`` (a task, and KGoT's tool calls as the corpus)
:class:`ArkInput`       ``ark`` (a question and its knowledge graph: by name, inline or as a file)
:class:`GraphInput`     ``grounded``, ``base``, ``text-rag``, ``graph-rag`` (a question over a stored graph)
:class:`AgentGInput`    ``agent-g`` and its baselines (a question, its graph, CRAG's pages)
``SurferInput``         ``surfer`` (a research request; :mod:`kgagents.nodes.surfer`)
=====================  ======================================================================================

A Python caller that wants the whole final state reads it from the checkpointer (``graph.aget_state(config)``)
or runs the graph through :func:`final_state`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, Self, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, StateGraph
from langgraph.runtime import Runtime
from pydantic import Field

from kgagents.core.usage import total_cost, total_tokens
from kgagents.nodes import budget
from kgagents.nodes.grounded import chain_of
from kgagents.nodes.state import failure_summary
from kgagents.nodes.state import final_state as final_state  # re-exported: Python callers run graphs with it
from kgagents.nodes.state import state_keys as state_keys

#: The node that computes the output fields (it runs last, once).
OUTPUT_NODE = "output"
#: How much of one retrieved text the evidence keeps (the state keeps it whole).
EVIDENCE_CHARS = 300
#: How many items of one kind the evidence keeps (triples, ids, references).
EVIDENCE_ITEMS = 50


# --------------------------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------------------------
#: What a caller's fields mean (the descriptions an MCP host and Studio show).
DESCRIPTIONS: dict[str, str] = {
    "question": "The question or task, in plain language.",
    "attachments": "Files the task refers to (documents, tables, images, code), each given by its content: "
                   "`{\"name\": \"table.csv\", \"content_base64\": \"...\"}` (a served run takes only these); "
                   "from Python or the CLI also a file's path.",
    "variants": "The KGoT variants to run and fuse by majority, as `backend:mode` (default: the context's).",
    "tool_calls": "KGoT's tool calls of the same task (each with its `output`): the corpus to retrieve from.",
    "kgot_thread": "Instead of `tool_calls`: a finished KGoT thread whose tool calls are the corpus (on a server, "
                   "one of the caller's own threads there).",
    "question_id": "An id for the question (kept in the run's records).",
    "graph": "The knowledge graph to answer from: the name of an imported graph (`kgagents graph import`); "
             "from Python or the CLI also the path of a built graph or of a source file or folder.",
    "question_type": "The kind of answer expected: `yes_no` or `entity_list` (default: from the question).",
    "kg": 'The graph inline, as `[[head, tail, {"relation": r}], ...]` (instead of `graph`).',
    "kg_file": "A graph file's path (`.json` or `.jsonl`), instead of `graph`; from Python or the CLI only (a "
               "served run attaches the file's content instead).",
    "kg_id": "With `kg_file` holding many graphs: which one.",
    "ark_attachments": "Files, as `attachments` takes them; the first `.json` / `.jsonl` one is the graph file.",
    "query_time": "CRAG: when the question was asked (time-sensitive answers).",
    "pages": "CRAG: the question's pre-fetched web pages, each `{name, url, snippet, html | text}`.",
    "oracle": "The gold answer, for the oracle ablations only (ignored otherwise).",
}
_D = DESCRIPTIONS


class AttachmentContent(TypedDict):
    """A file given by its content: what a served run takes (it is written into the run's own folder)."""

    name: Annotated[str, Field(description="The file's name (no folders).")]
    content_base64: Annotated[str, Field(description="The file's bytes, base64-encoded.")]


#: An attachment: its content, or (from Python or the CLI) a file's path.
Attachment = str | AttachmentContent


class TaskInput(TypedDict, total=False):
    """A task for KGoT and its one-model baselines."""

    question: Annotated[str, Field(description=_D["question"])]
    attachments: Annotated[list[Attachment], Field(description=_D["attachments"])]


class FusionInput(TaskInput, total=False):
    """A task for KGoT's fusion of variants."""

    variants: Annotated[list[str], Field(description=_D["variants"])]


class CorpusInput(TaskInput, total=False):
    """A task for the RAG baselines of the KGoT paper, whose corpus is what KGoT's tools brought."""

    tool_calls: Annotated[list[dict[str, Any]], Field(description=_D["tool_calls"])]
    kgot_thread: Annotated[str, Field(description=_D["kgot_thread"])]


class GraphInput(TypedDict, total=False):
    """A question over a stored knowledge graph (grounded reasoning and its KG-RAG baselines)."""

    question: Annotated[str, Field(description=_D["question"])]
    question_id: Annotated[str, Field(description=_D["question_id"])]
    graph: Annotated[str, Field(description=_D["graph"])]


class ArkInput(GraphInput, total=False):
    """A question for ARK-V1, and its knowledge graph by name, inline, or as a file."""

    question_type: Annotated[Literal["yes_no", "entity_list"], Field(description=_D["question_type"])]
    kg: Annotated[list[Any] | None, Field(description=_D["kg"])]
    kg_file: Annotated[str, Field(description=_D["kg_file"])]
    kg_id: Annotated[str, Field(description=_D["kg_id"])]
    attachments: Annotated[list[Attachment], Field(description=_D["ark_attachments"])]


class AgentGInput(GraphInput, total=False):
    """A question for Agent-G (or one of its baselines): its graph and, for CRAG, its pages and query time."""

    query_time: Annotated[str, Field(description=_D["query_time"])]
    pages: Annotated[list[dict[str, Any]], Field(description=_D["pages"])]
    oracle: Annotated[dict[str, Any] | None, Field(description=_D["oracle"])]


# --------------------------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------------------------
class Tokens(TypedDict, total=False):
    calls: int
    input_tokens: int
    output_tokens: int
    unmeasured_calls: int


class FailureSummary(TypedDict):
    count: int
    kinds: dict[str, int]


class RunOutput(TypedDict, total=False):
    """What a run of every served graph gives back (its state keeps everything else: ``kgagents show`` or the
    thread's state). One shape for all of them, so that an SDK or MCP caller reads every workflow's answer the
    same way; ``evidence`` is the one field whose content differs by workflow."""

    final_answer: Annotated[
        str, Field(description='The answer ("No solution found" when the run found none).')
    ]
    thread_id: Annotated[
        str | None,
        Field(description="The thread whose checkpoints hold the whole run (None without a checkpointer)."),
    ]
    cost_usd: Annotated[
        float | None,
        Field(description="What the model calls cost, in USD (None when a model's price is unknown)."),
    ]
    tokens: Annotated[Tokens, Field(description="Model calls and tokens over every model.")]
    failure_summary: Annotated[
        FailureSummary, Field(description="Model calls that failed for good, by kind.")
    ]
    budget_stop: Annotated[
        str, Field(description="Present when the run ended at its budget: which budget, how much was spent.")
    ]
    evidence: Annotated[
        dict[str, Any],
        Field(
            description="What the answer rests on: KG triples, the reasoning "
            "path, the retrieved ids, the web pages read (by workflow)."
        ),
    ]
    exit_reason: Annotated[
        str,
        Field(description="Why the run ended (an accepted answer, a limit, a failed search, ...), where the "
                          "workflow records it (ARK-V1, grounded reasoning, Agent-G, the surfer)."),
    ]




# --------------------------------------------------------------------------------------------------------------
# Evidence, per workflow
# --------------------------------------------------------------------------------------------------------------
def _short(text: Any) -> str:
    text = str(text or "")
    return text if len(text) <= EVIDENCE_CHARS else text[:EVIDENCE_CHARS] + "…"


def kg_evidence(state: dict[str, Any]) -> dict[str, Any]:
    """KGoT: the task KG's triples ``[source, relation, target]`` and the partial solution the answer came
    from."""
    rels = (state.get("kg") or {}).get("relationships") or []
    out: dict[str, Any] = {
        "triples": [[r.get("source"), r.get("type"), r.get("target")] for r in rels[:EVIDENCE_ITEMS]]
    }
    if state.get("partial_solution"):
        out["partial_solution"] = _short(state["partial_solution"])
    return out


def fusion_evidence(state: dict[str, Any]) -> dict[str, Any]:
    """Fusion: each variant's answer, and the tally of the vote."""
    return {
        "variants": [
            {"variant": r.get("variant"), "final_answer": r.get("final_answer"), "error": r.get("error")}
            for r in state.get("results") or []
        ],
        "tally": dict(state.get("tally") or {}),
    }


def tool_evidence(state: dict[str, Any]) -> dict[str, Any]:
    """KGoT without a KG, and the zero-shot baseline: the tools called, and the partial solution."""
    out: dict[str, Any] = {"tools": [c.get("tool") for c in state.get("tool_calls") or []][:EVIDENCE_ITEMS]}
    if state.get("partial_solution"):
        out["partial_solution"] = _short(state["partial_solution"])
    return out


def retrieval_evidence(state: dict[str, Any]) -> dict[str, Any]:
    """The RAG baselines (KGoT's and the KG-RAG ones): what was retrieved (ids or the texts' beginnings), and
    GraphRAG's matched entities."""
    out: dict[str, Any] = {"retrieved": [_short(r) for r in (state.get("retrieved") or [])[:EVIDENCE_ITEMS]]}
    if state.get("matched_entities"):
        out["matched_entities"] = list(state["matched_entities"])[:EVIDENCE_ITEMS]
    return out


def surfer_evidence(state: dict[str, Any]) -> dict[str, Any]:
    """The surfer: the web pages its answer rests on (those it named, then those it read)."""
    return {"sources": list(state.get("sources") or [])[:EVIDENCE_ITEMS]}


def ark_evidence(state: dict[str, Any]) -> dict[str, Any]:
    """ARK-V1: the reasoning path — per reasoning step its anchor, relation, the triples it selected and
    what it inferred from them."""
    return {
        "reasoning_path": [
            {
                "anchor": s.get("anchor"),
                "relation": s.get("relation"),
                "triples": [
                    [t.get("head"), t.get("relation"), t.get("tail")] for t in s.get("selected") or []
                ],
                "implication": _short(s.get("implication")),
            }
            for s in state.get("steps") or []
        ]
    }


def grounded_evidence(state: dict[str, Any]) -> dict[str, Any]:
    """Grounded reasoning: the chain of thoughts that leads to the best state, each with the graph functions
    it called or the triples it found."""
    path: list[dict[str, Any]] = []
    for thought in chain_of(state.get("thoughts") or {}, state.get("best") or ""):
        step: dict[str, Any] = {"thought": _short(thought.get("thought"))}
        if thought.get("actions"):
            step["actions"] = [{"name": a.get("name"), "args": a.get("args")} for a in thought["actions"]]
        if thought.get("triples"):
            step["triples"] = list(thought["triples"])[:EVIDENCE_ITEMS]
        path.append(step)
    return {"reasoning_path": path}


def agent_g_evidence(state: dict[str, Any]) -> dict[str, Any]:
    """Agent-G and its baselines: the ranked ids (retrieval task), the references of the last retrieval and
    the generator's reasoning."""
    iterations = state.get("iterations") or []
    retrieval = state.get("retrieval") or (iterations[-1].get("retrieval") if iterations else None) or {}
    out: dict[str, Any] = {
        "references": [
            {"id": r.get("id"), "kind": r.get("kind"), "text": _short(r.get("text"))}
            for r in (retrieval.get("references") or [])[:EVIDENCE_ITEMS]
        ]
    }
    if state.get("ranked_ids"):
        out["ranked_ids"] = list(state["ranked_ids"])[:EVIDENCE_ITEMS]
    if retrieval.get("paths"):
        out["paths"] = [_short(p) for p in retrieval["paths"][:EVIDENCE_ITEMS]]
    if state.get("reasoning"):
        out["reasoning"] = _short(state["reasoning"])
    return out


# --------------------------------------------------------------------------------------------------------------
# The output node, and the graph builder that adds it
# --------------------------------------------------------------------------------------------------------------
def run_output(state: dict[str, Any], config: RunnableConfig | None, evidence: Any,
               context: Any = None) -> dict[str, Any]:
    """The output fields of a finished run (all but ``final_answer``, which the workflow's own step wrote);
    ``budget_stop`` too when the run reached its budget (``context``'s) on a path no router stopped."""
    thread = ((config or {}).get("configurable") or {}).get("thread_id")
    out = {
        "thread_id": str(thread) if thread else None,
        "cost_usd": total_cost(state.get("usage")),
        "tokens": total_tokens(state.get("usage")),
        "failure_summary": failure_summary(state.get("failures")),
        "evidence": evidence(state),
    }
    if not state.get("budget_stop") and (reason := budget_reached_quietly(state.get("usage"), context)):
        out["budget_stop"] = reason
    return out


def budget_reached_quietly(usage: Any, context: Any) -> str | None:
    """:func:`kgagents.nodes.budget.budget_reached`, None where it cannot be told (an error the run's own checks
    have reported already)."""
    if not budget.has_budget(context):
        return None
    try:
        return budget.budget_reached(usage, context)
    except budget.BudgetError:
        return None


class WorkflowGraph(StateGraph):
    """A ``StateGraph`` whose every way to ``END`` goes through the ``output`` node: an edge to ``END`` (and a
    destination ``END`` of a node's routes) leads to it, and it to ``END``."""

    #: Where :func:`kgagents.graphs.routing.add_routed_node` sends a router's ``END``.
    end_node = OUTPUT_NODE

    def add_edge(self, start_key: Any, end_key: str) -> Self:
        """``add_edge``, with ``END`` read as the output node."""
        return super().add_edge(start_key, self.end_node if end_key == END else end_key)

    def add_node(self, node: Any, action: Any = None, **kwargs: Any) -> Self:
        """``add_node``, with ``END`` among a node's ``destinations`` read as the output node."""
        destinations = kwargs.get("destinations")
        if isinstance(destinations, dict):
            kwargs["destinations"] = {self.end_node if k == END else k: v for k, v in destinations.items()}
        elif destinations:
            kwargs["destinations"] = tuple(self.end_node if d == END else d for d in destinations)
        return super().add_node(node, action, **kwargs)


def workflow_graph(
    state: type,
    *,
    context_schema: type,
    input_schema: type,
    evidence: Callable[[dict[str, Any]], dict[str, Any]],
) -> WorkflowGraph:
    """``StateGraph(state, context_schema=..., input_schema=..., output_schema=RunOutput)`` ending in the
    ``output`` node, which fills the output fields from the final state with :func:`run_output` and
    ``evidence(state)`` (deferred: it runs once nothing else is left to run)."""
    builder = WorkflowGraph(
        state, context_schema=context_schema, input_schema=input_schema, output_schema=RunOutput
    )

    async def output(state: dict[str, Any], config: RunnableConfig, runtime: Runtime[Any]) -> dict[str, Any]:
        return run_output(state, config, evidence, getattr(runtime, "context", None))

    output.__doc__ = f"The run's output: thread, cost and tokens, failures, evidence ({evidence.__name__})."
    builder.add_node(OUTPUT_NODE, output, defer=True)
    StateGraph.add_edge(builder, OUTPUT_NODE, END)
    return builder
