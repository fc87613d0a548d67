"""Run-scoped dependencies of the workflows (LangGraph ``context_schema``).

The context is *not* checkpointed: callers pass it again when they resume a thread. Model fields take a
``provider:model`` string (what the LangGraph server and the CLI pass) or, from Python, a chat-model instance.
``None`` means "use the configured default" (see :mod:`kgagents.core.config`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

SolveMode = Literal["query", "direct"]
AnswerFormatter = Literal["gaia", "default"]
StructuredMethod = Literal["function_calling", "json_schema", "json_mode"]


@dataclass(kw_only=True)
class Context:
    """Model choices, backends and limits, with the KGoT paper's defaults (appendix B.2)."""

    # --- models per role (KGoT's dual-LLM controller plus the tools' own model) ---
    model: Any = None
    """Default chat model for every role: ``provider:model`` string or a ``BaseChatModel``."""
    graph_executor_model: Any = None
    tool_executor_model: Any = None
    tools_model: Any = None
    base_url: str | None = None
    """OpenAI-compatible server (vLLM, Ollama, llama.cpp) used for string models without a provider."""
    temperature: float | None = None
    tools_temperature: float | None = None
    """The temperature of the tools' own model (``None``: ``temperature``); the KGoT authors ran the controller at
    0.0 and the tools at 0.5 (``--preset paper``)."""
    seed: int | None = None
    """Sampling seed, passed to the providers that take one (OpenAI and OpenAI-compatible servers, Ollama; see
    ``kgagents.nodes.models.SEED_PARAMETERS``); a model given as an instance is used as it is.
    ``kgagents eval --seed S`` gives run r of every item the seed S + r."""
    structured_output_method: StructuredMethod = "function_calling"
    samples_in_one_request: bool = True
    """Ask for the samples of one decision (KGoT's votes, forced queries and solution parses) as the choices of one
    request where the model takes ``n`` (OpenAI-compatible chat completions): the prompt is sent and paid for once.
    Off: one request per sample, as the KGoT authors' code sends them. Other models always get one per sample."""
    llm_timeout_s: float = 120.0
    """Wall-clock limit of one LLM call; a call that takes longer is retried like an API error."""

    # --- KGoT controller limits (paper defaults) ---
    max_iterations: int = 7
    num_next_steps_decision: int = 5
    max_retrieve_query_retry: int = 3
    max_cypher_fixing_retry: int = 3
    """Also the limit for fixing LLM-written Python (KG writes, read code and math code)."""
    max_final_solution_parsing: int = 3
    max_tool_retries: int = 6
    max_parse_retries: int = 3
    """How often one structured LLM call is re-asked after an unparseable reply."""
    max_api_retries: int = 6
    """How often one LLM call is retried after a transient API error (exponential backoff)."""
    api_backoff_base_s: float = 1.0
    api_backoff_max_s: float = 60.0
    tool_backoff_base_s: float = 1.0
    tool_backoff_max_s: float = 60.0

    solve_mode: SolveMode = "query"
    answer_formatter: AnswerFormatter = "gaia"
    backend: str = "networkx"
    """Which task-KG store KGoT uses: ``networkx`` (embedded), ``neo4j`` (any Bolt server), ``falkordb``, ``sparql``."""
    kg_url: str | None = None
    """The database of a database backend (``bolt://...``, ``redis://...``, ``http://.../query``,
    ``oxigraph:/dir``); ``None``: ``NEO4J_URI`` / ``FALKORDB_URL`` / ``SPARQL_ENDPOINT`` or the embedded server."""
    kg_scope: str = ""
    """Separates task KGs that share a thread (fusion variants): the KG belongs to ``thread_id/kg_scope``."""
    cleanup: bool = False
    """Before solving, let the LLM remove irrelevant and duplicate nodes and relationships (noise mitigation)."""

    tools: list[str] | None = None
    """Names of the tools the tool executor may use; ``None`` = every available tool."""
    work_dir: str | None = None
    """Directory for the run's files (sandbox work dir, extracted archives); default: a temp dir per run."""
    sandbox_timeout_s: float = 30.0
    sandbox_memory_mb: int = 1024
    sandbox_call_quota_mb: int = 256
    """Disk quota of one sandboxed call: what it may write into its work dir (``kgagents.tools.sandbox.DiskQuota``)."""
    sandbox_call_quota_files: int = 2_000
    sandbox_run_quota_mb: int = 1024
    """Disk quota of a run: what each of its sandbox work dirs (the KG's, the Python tool's) may hold."""
    sandbox_run_quota_files: int = 10_000
    allow_weak_sandbox: bool | None = None
    """Run LLM code with resource limits only when bubblewrap is missing (``None``: from the environment)."""
    tool_output_chars: int = 12_000
    """Tool outputs are cut to this many characters before they reach a prompt."""
    recursion_limit: int = 200

    @classmethod
    def from_mapping(cls, data: dict[str, Any] | None) -> Context:
        """Build a context from a plain mapping, rejecting unknown keys with a clear error."""
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown context field(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data)

    def model_for(self, role: str) -> Any:
        """The model given for ``role`` (instance or string), falling back to ``model``."""
        return getattr(self, f"{role}_model", None) or self.model


def context_fields() -> list[str]:
    """Names of every context field (for CLI and docs)."""
    return [f.name for f in fields(Context)]

