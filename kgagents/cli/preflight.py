"""What a run will use, and what it cannot do, said before it starts (``ask``, ``eval``), not found in a
trace later:

- the chat model of every role and the URL it sends to (one line);
- the backend's extra, if it is missing (an error: the run could not open its KG);
- what is off for this run: web search without its key, the Python tool without a sandbox, CRAG's graph module
  without its API, an evaluation's LLM grader (its answers are then "not graded", never 0 %).

``kgagents doctor`` checks the same pieces, and the configured endpoints themselves, without running anything.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import fields, is_dataclass
from typing import Any

from kgagents.core.config import ConfigurationError, get_settings
from kgagents.core.endpoints import describe_model
from kgagents.graphs.registry import get
from kgagents.tools.crag.client import api_url
from kgagents.tools.crag.contents import HOW_TO_GET, probe_contents

#: Workflows whose tool executor may search the web (KGoT's tools; their baselines that run KGoT's loop).
TOOL_WORKFLOWS = ("kgot", "fusion", "kgot-nokg")


def role_models(values: dict[str, Any], workflow: str = "kgot") -> dict[str, Any]:
    """The chat model of every role of ``workflow`` (its context's ``ROLES``) for a run with the context
    ``values``, resolved once: the run finds the same clients (a clear error when none is configured, or when
    a provider's extra or key is missing)."""
    from kgagents.nodes.models import resolve_model

    ctx = get(workflow).make_context(values)
    tools_temperature = getattr(ctx, "tools_temperature", None)
    return {role: resolve_model(ctx, role, temperature=tools_temperature if role == "tools" else None)
            for role in ctx.ROLES}


def models_line(models: dict[str, Any], grader: Any = None) -> str:
    """``models: gpt-4o-mini at http://... (every role)``, or one entry per role where they differ; the
    grader's model (``grader``: a model, a model string, or ``"none"``) last."""
    described = {role: describe_model(model) for role, model in models.items()}
    if len(set(described.values())) == 1:
        text = f"models: {next(iter(described.values()))} (every role)"
    else:
        text = "models: " + "; ".join(f"{role} {what}" for role, what in described.items())
    if grader is not None:
        text += f"; grader {grader if isinstance(grader, str) else describe_model(grader)}"
    return text


def run_limits(workflow: str, values: dict[str, Any], *, dataset: str | None = None, graph: bool = False,
               grader: Any = None, scorer: str | None = None) -> list[str]:
    """What is off for this run, one line each (empty when nothing is). ``graph``: the task brings a static
    KG; ``grader``/``scorer``: an evaluation's LLM grader (None or ``"none"``: no grader) and scorer."""
    notes: list[str] = []
    settings = get_settings()
    tools = values.get("tools")
    if workflow in TOOL_WORKFLOWS and (tools is None or "ask_search_agent" in tools) and not (
            settings.serpapi_api_key or settings.search_api_base):
        notes.append("web search is off: no SERPAPI_API_KEY (or KGAGENTS_SEARCH_API_BASE); the tool executor "
                     "works without the search agent")
    if workflow.startswith("agent-g") and not graph and "crag_api_url" in _context_fields(workflow) and not (
            values.get("crag_api_url") or os.environ.get("CRAG_SERVER")) and dataset in (None, "crag"):
        notes.append("CRAG's graph module is off: no CRAG_SERVER (or --set crag_api_url=...); start the "
                     "mock KG API with `python -m kgagents.tools.crag_api serve` and export CRAG_SERVER")
    no_grader = grader is None or (isinstance(grader, str) and grader.lower() == "none")
    if scorer in OPTIONAL_GRADER and no_grader:
        notes.append(f"no grader model: {OPTIONAL_GRADER[scorer]}; --grader-model provider:model grades them")
    return notes


#: Scorers that run without their LLM grader, and what is reported then.
OPTIONAL_GRADER = {"grbench": "the answers get Rouge-L only; GPT4Score and accuracy are reported as "
                              "not graded"}


def _context_fields(workflow: str) -> set[str]:
    schema = get(workflow).context
    return {f.name for f in fields(schema)} if is_dataclass(schema) else set()


def check_backends(values: dict[str, Any], variants: list[str] | None = None) -> None:
    """Refuse, before anything starts, a task-KG backend whose extra is missing (the run's, or each fusion
    variant's)."""
    from kgagents.tools.kg.stores import check_backend

    backends = [v.split(":", 1)[0] for v in variants or []] or [values.get("backend") or "networkx"]
    for backend in dict.fromkeys(backends):
        check_backend(backend, values.get("kg_url"))


#: Workflows whose generation task reads CRAG's knowledge graphs through its API (Agent-G and the baselines with
#: a graph module; the CoT and Text-RAG baselines read none).
CRAG_KG_WORKFLOWS = ("agent-g", "agent-g-graph-rag", "agent-g-hybrid-rag", "agent-g-corrective-rag", "agent-g-react")


def crag_api_needed(workflow: str, values: dict[str, Any], dataset: str | None) -> bool:
    """Whether a run of ``workflow`` on ``dataset`` retrieves from CRAG's knowledge graphs through its API: a
    workflow with a graph module, on CRAG, in the generation task, without a static KG of its own."""
    return (workflow in CRAG_KG_WORKFLOWS and dataset == "crag" and values.get("task", "generation") == "generation"
            and not values.get("graph"))


def check_crag_api(workflow: str, values: dict[str, Any], *, dataset: str | None, own_data: bool) -> list[str]:
    """Before an evaluation on CRAG whose graph module reads CRAG's API: ask the API a few searches that CRAG's
    own mock API always answers (:mod:`kgagents.tools.crag.contents`). On CRAG's own question files
    (``own_data``), an API that is missing, unreachable or without data is refused (a :class:`ConfigurationError`
    that says how to get CRAG's); on the sample that ships with kgagents it is a warning, returned as a line to
    print, as is an API some of whose domains answer nothing."""
    if not crag_api_needed(workflow, values, dataset):
        return []
    url = api_url(values.get("crag_api_url"))
    if url is None:
        if own_data:
            raise ConfigurationError(f"{workflow} on CRAG's data retrieves from CRAG's knowledge graphs through its "
                                     f"mock API, and none is given (CRAG_SERVER or --set crag_api_url=URL). "
                                     f"{HOW_TO_GET}")
        return []  # run_limits says the graph module is off
    contents = asyncio.run(probe_contents(url))
    if contents.state in ("empty", "unreachable") and own_data:
        raise ConfigurationError(f"refusing to evaluate {workflow}: {contents.message}")
    if contents.state == "data":
        return []
    return [f"warning: {contents.message}"]


def local_embedders(workflow: str, values: dict[str, Any]) -> list[tuple[str, Any, str | None]]:
    """The sentence-transformers models an Agent-G run loads by name or path (``embedding_model`` and
    ``linking_model``, e.g. the paper-crag preset's BAAI/bge-m3), as (setting, model, device); the packaged
    model, OpenAI's and instances are left out."""
    from kgagents.tools.pgraph.embeddings import OPENAI_PREFIX, canonical_model

    if not workflow.startswith("agent-g"):
        return []
    ctx = get(workflow).make_context(values)
    out: list[tuple[str, Any, str | None]] = []
    for setting in ("embedding_model", "linking_model"):
        model = getattr(ctx, setting, None)
        if isinstance(model, str) and not model.startswith(OPENAI_PREFIX) and canonical_model(model) is not None:
            out.append((setting, model, getattr(ctx, "embedding_device", None)))
    return out


def check_embedders(workflow: str, values: dict[str, Any]) -> None:
    """Refuse, before any item runs, an Agent-G run whose embedding model cannot be loaded here (not downloaded
    and no network, a wrong name or path): every item would otherwise fail and be scored "missing". The model is
    loaded once per process (:func:`~kgagents.tools.pgraph.embeddings.load_embedder`), so the run finds it
    loaded."""
    from kgagents.tools.pgraph.embeddings import EmbedderUnavailable, load_embedder

    for setting, model, device in local_embedders(workflow, values):
        try:
            load_embedder(model, device=device)
        except EmbedderUnavailable as exc:
            raise ConfigurationError(f"{workflow}'s {setting} cannot be used, so no item could run: {exc}. Download "
                                     f"{model} where the network is reachable first (sentence-transformers keeps it "
                                     f"in the Hugging Face cache), or give a local path or another model with --set "
                                     f"{setting}=...") from exc
