"""KGoT's context: the dual-LLM controller's graph and tool executors and the tools' own model, the task-KG
backend, the sandbox's limits, with the KGoT paper's defaults (appendix B.2).

The context workflows built on KGoT's tools and task KG (the baselines, the fusion variants, the surfer) derive
from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from kgagents.nodes.context import BaseContext, caller, caller_model, described, operator

SolveMode = Literal["query", "direct"]
AnswerFormatter = Literal["gaia", "default"]


@described
@dataclass(kw_only=True)
class KGoTContext(BaseContext):
    """KGoT's context: its model roles, backends and limits, with the KGoT paper's defaults (appendix B.2)."""

    # --- models per role (KGoT's dual-LLM controller plus the tools' own model) ---
    ROLES: ClassVar[tuple[str, ...]] = ("graph_executor", "tool_executor", "tools")
    graph_executor_model: Any = caller_model()
    """The model of KGoT's graph executor (next-step votes, KG writes and queries, solutions; ``None``:
    ``model``)."""
    tool_executor_model: Any = caller_model()
    """The model of KGoT's tool executor (which tools to call, with what arguments; ``None``: ``model``)."""
    tools_model: Any = caller_model()
    """The tools' own model (the LLM tool, the surfer agent, the text inspector; ``None``: ``model``)."""
    tools_temperature: float | None = caller(None)
    """The temperature of the tools' own model (``None``: ``temperature``); the KGoT authors ran the
    controller at 0.0 and the tools at 0.5 (``--preset paper``)."""

    # --- KGoT controller limits (paper defaults) ---
    max_iterations: int = caller(7)
    """The most iterations of KGoT's loop (then the forced solution with what the KG holds)."""
    num_next_steps_decision: int = caller(5)
    """Samples of the next-step vote (ENHANCE or SOLVE, majority)."""
    max_retrieve_query_retry: int = caller(3)
    """How often a failing or empty KG read query is rewritten."""
    max_cypher_fixing_retry: int = caller(3)
    """Also the limit for fixing LLM-written Python (KG writes, read code and math code)."""
    max_final_solution_parsing: int = caller(3)
    """Samples of the solution parse (weighted majority)."""
    max_tool_retries: int = operator(6)
    """How often a tool call is retried after a transient error."""
    tool_backoff_base_s: float = operator(1.0)
    """The first wait before a tool call is retried (doubling each time)."""
    tool_backoff_max_s: float = operator(60.0)
    """The longest wait between two tries of a tool call."""

    solve_mode: SolveMode = caller("query")
    """How KGoT answers from its KG: ``query`` (read queries) or ``direct`` (Direct Retrieval: the whole
    KG)."""
    answer_formatter: AnswerFormatter = caller("gaia")
    """The final answer's format rules: ``gaia`` (GAIA's) or ``default``."""
    backend: str = caller("networkx")
    """Which task-KG store KGoT uses: ``networkx`` (embedded), ``neo4j`` (any Bolt server), ``falkordb``, ``sparql``."""
    kg_url: str | None = operator(None)
    """The database of a database backend (``bolt://...``, ``redis://...``, ``http://.../query``,
    ``oxigraph:/dir``); ``None``: ``NEO4J_URI`` / ``FALKORDB_URL`` / ``SPARQL_ENDPOINT`` or the embedded server."""
    kg_scope: str = operator("")
    """Separates task KGs that share a thread (fusion variants): the KG belongs to ``thread_id/kg_scope``."""
    cleanup: bool = caller(False)
    """Before solving, let the LLM remove irrelevant and duplicate nodes and relationships (noise mitigation)."""

    tools: list[str] | None = caller(None)
    """Names of the tools the tool executor may use; ``None`` = every available tool."""
    work_dir: str | None = operator(None)
    """Directory for the run's files (sandbox work dir, extracted archives); default: a temp dir per run."""
    sandbox_timeout_s: float = operator(30.0)
    """Wall-clock limit of one sandboxed call (LLM-written Python, the KG's code)."""
    sandbox_memory_mb: int = operator(1024)
    """Memory limit of one sandboxed call."""
    sandbox_call_quota_mb: int = operator(256)
    """Disk quota of one sandboxed call: what it may write into its work dir (``kgagents.tools.sandbox.DiskQuota``)."""
    sandbox_call_quota_files: int = operator(2_000)
    """How many files one sandboxed call may write."""
    sandbox_run_quota_mb: int = operator(1024)
    """Disk quota of a run: what each of its sandbox work dirs (the KG's, the Python tool's) may hold."""
    sandbox_run_quota_files: int = operator(10_000)
    """How many files each of a run's sandbox work dirs may hold."""
    allow_weak_sandbox: bool | None = operator(None)
    """Run LLM code with resource limits only when bubblewrap is missing (``None``: from the environment)."""
    tool_output_chars: int = caller(12_000)
    """Tool outputs are cut to this many characters before they reach a prompt."""
