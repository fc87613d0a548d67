"""Run-scoped dependencies of the workflows (LangGraph ``context_schema``), by composition.

:class:`BaseContext` holds what every workflow reads: the models per role, the temperature and seed, the LLM
layer's retries and timeouts, the recursion limit. Each workflow's context adds its own fields and names its
own model roles (``ROLES``), beside its nodes: KGoT's :class:`~kgagents.nodes.kgot.context.KGoTContext` (the
dual-LLM controller's graph and tool executors and the tools' model, the task-KG backend, the sandbox), ARK-V1's,
grounded reasoning's and Agent-G's.

The context is *not* checkpointed: callers pass it again when they resume a thread. Model fields take a
``provider:model`` string (what the LangGraph server and the CLI pass) or, from Python, a chat-model instance.
``None`` means "use the configured default" (see :mod:`kgagents.core.config`).

Every field's description is its dataclass metadata (``metadata={"description": ...}``), written as the
attribute docstring below the field and filled in by :func:`described`: LangGraph Studio's context form (the
graph's context JSON schema) and the CLI's ``--help`` read it.

Every field also says who may choose it when the graph is served (``langgraph dev``, docs/security.md): its
default is :func:`caller` (a plain value a caller may set), :func:`caller_model` (a chat model, which a caller
may choose only from the server's list) or :func:`operator` (only the server's own configuration chooses it: a
caller's value is refused). :mod:`kgagents.nodes.served` enforces it."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
import types
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Literal

__all__ = ["CALLER", "CALLER_MODEL", "OPERATOR", "SERVED", "BaseContext", "StructuredMethod", "caller",
           "caller_model", "context_fields", "described", "description_of", "field_default", "operator",
           "served_decision"]

StructuredMethod = Literal["function_calling", "json_schema", "json_mode"]


#: The metadata key of a field's served decision, and its values: a caller may set it (a plain value), may
#: choose it from the server's list of models, or may not set it at all (the server's operator chooses it).
SERVED = "served"
CALLER = "caller"
CALLER_MODEL = "caller-model"
OPERATOR = "operator"


def _decided(decision: str, default: Any, factory: Callable[[], Any] | None) -> Any:
    if factory is not None:
        return field(default_factory=factory, metadata={SERVED: decision})
    return field(default=default, metadata={SERVED: decision})


def caller(default: Any = None, *, factory: Callable[[], Any] | None = None) -> Any:
    """A field's default, for a setting a caller of a served graph may choose (a question-level knob: a limit,
    a temperature, a strategy)."""
    return _decided(CALLER, default, factory)


def caller_model(default: Any = None) -> Any:
    """A chat model's field: a caller of a served graph may choose only a model of the server's list
    (``KGAGENTS_SERVE_MODELS``); ``None`` is the server's configured model."""
    return _decided(CALLER_MODEL, default, None)


def operator(default: Any = None, *, factory: Callable[[], Any] | None = None) -> Any:
    """A field's default, for a setting only the server's operator chooses (its environment, the CLI, Python):
    an address, a path, a credential's destination, the sandbox's limits. A served caller's value is refused."""
    return _decided(OPERATOR, default, factory)


def served_decision(spec: dataclasses.Field[Any]) -> str | None:
    """A field's served decision (:data:`CALLER`, :data:`CALLER_MODEL`, :data:`OPERATOR`), ``None`` if it has
    none (a served caller's value for such a field is refused, as an operator's)."""
    value = spec.metadata.get(SERVED)
    return value if value in (CALLER, CALLER_MODEL, OPERATOR) else None


def field_default(spec: dataclasses.Field[Any]) -> Any:
    """A field's default value (a fresh one for a default factory); ``MISSING`` when it has none."""
    if spec.default is not MISSING:
        return spec.default
    if spec.default_factory is not MISSING:
        return spec.default_factory()
    return MISSING


def _attribute_docstrings(cls: type) -> dict[str, str]:
    """``name -> docstring`` of the class body's annotated attributes followed by a string literal."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):  # no source (a frozen build): no descriptions, nothing lost
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, after in itertools.pairwise(body):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def described[C: type](cls: C) -> C:
    """Give each field of the dataclass ``cls`` declared in its body the metadata ``{"description": <the
    attribute docstring below it>}`` (unless its metadata has one); a field declared again without a docstring
    (a new default) keeps its base class's description, and without a served decision its base class's."""
    own = inspect.get_annotations(cls)
    docs = _attribute_docstrings(cls)
    for name in own:
        spec = cls.__dataclass_fields__.get(name)  # type: ignore[attr-defined]
        if spec is None:
            continue
        bases = [base.__dataclass_fields__[name] for base in cls.__mro__[1:]  # type: ignore[attr-defined]
                 if name in getattr(base, "__dataclass_fields__", {})]
        metadata = dict(spec.metadata)
        if "description" not in metadata:
            doc = docs.get(name) or next((description_of(b) for b in bases if description_of(b)), "")
            if doc:
                metadata["description"] = doc
        if SERVED not in metadata:
            decision = next((served_decision(b) for b in bases if served_decision(b)), None)
            if decision:
                metadata[SERVED] = decision
        if metadata != dict(spec.metadata):
            spec.metadata = types.MappingProxyType(metadata)
    return cls


def description_of(spec: dataclasses.Field[Any]) -> str:
    """A field's description (its metadata), or ``""``."""
    return str(spec.metadata.get("description", ""))


@described
@dataclass(kw_only=True)
class BaseContext:
    """What every workflow reads: the models per role, sampling, the LLM layer's retries and timeouts."""

    #: The model roles of the workflow: each reads ``<role>_model``, else ``model``, else the environment's
    #: ``KGAGENTS_<ROLE>_MODEL``, else ``KGAGENTS_MODEL``.
    ROLES: ClassVar[tuple[str, ...]] = ()
    #: Role names the workflow accepted before it had its own (``old -> role``): a context mapping's
    #: ``<old>_model`` is taken as ``<role>_model``, and ``KGAGENTS_<OLD>_MODEL`` is read after the role's own
    #: variable (:data:`kgagents.core.config.ROLE_FALLBACKS`).
    LEGACY_ROLES: ClassVar[dict[str, str]] = {}

    model: Any = caller_model()
    """Default chat model for every role: ``provider:model`` string or a ``BaseChatModel``."""
    base_url: str | None = operator(None)
    """OpenAI-compatible server (vLLM, Ollama, llama.cpp) used for string models without a provider."""
    temperature: float | None = caller(None)
    """Sampling temperature of the models (``None``: the provider's default)."""
    seed: int | None = caller(None)
    """Sampling seed, passed to the providers that take one (OpenAI and OpenAI-compatible servers, Ollama; see
    ``kgagents.nodes.models.SEED_PARAMETERS``); a model given as an instance is used as it is.
    ``kgagents eval --seed S`` gives run r of every item the seed S + r."""
    structured_output_method: StructuredMethod = caller("function_calling")
    """How structured replies are asked for: function calling, a JSON schema or JSON mode."""
    samples_in_one_request: bool = caller(True)
    """Ask for the samples of one decision (e.g. KGoT's votes, forced queries and solution parses) as the
    choices of one request where the model takes ``n`` (OpenAI-compatible chat completions): the prompt is
    sent and paid for once. Off: one request per sample, as the KGoT authors' code sends them. Other models
    always get one per sample."""
    llm_timeout_s: float = operator(120.0)
    """Wall-clock limit of one LLM call attempt (every role without its own in ``llm_role_timeouts``); an attempt
    that takes longer is retried like an API error."""
    llm_role_timeouts: dict[str, float] = operator(factory=dict)
    """Per-role limits instead of ``llm_timeout_s``, e.g. ``{"reasoner": 600}`` for a role whose replies are
    long generations."""
    llm_connect_timeout_s: float = operator(10.0)
    """How long a model's server may take to accept a connection."""
    llm_wait_notice_s: float = operator(30.0)
    """Say on stderr that an LLM call is still waiting (role, model, URL, how long), every so many seconds
    (0: never)."""
    llm_probe_after_s: float = operator(15.0)
    """When a call to a model that has not answered yet has waited this long (and after any call attempt that
    timed out), its server is probed with a GET of its model list, sent without the key: a server that answers
    neither (it accepts connections but never answers) stops the run; one that answers the probe is slow and
    keeps the call's full limit."""
    llm_probe_timeout_s: float = operator(10.0)
    """How long that probe may take."""
    llm_rate_limit_wait_s: float = operator(300.0)
    """The longest a model that has not answered a call yet may keep the run waiting on its rate limits (its
    backoff waits, all calls together): then the run stops (an account's limit or quota, not a busy minute)."""
    max_parse_retries: int = caller(3)
    """How often one structured LLM call is re-asked after an unparseable reply."""
    max_api_retries: int = operator(6)
    """How often one LLM call is retried after a transient API error (exponential backoff)."""
    api_backoff_base_s: float = operator(1.0)
    """The first wait before an LLM call is retried (doubling each time)."""
    api_backoff_max_s: float = operator(60.0)
    """The longest wait between two tries of an LLM call."""
    budget_usd: float | None = caller(None)
    """End the run once its model calls have cost this much (USD), the way its paper ends a run at its limits
    (``kgagents.nodes.budget``); ``None``: no budget."""
    budget_tokens: int | None = caller(None)
    """End the run once its model calls have used this many tokens (input plus output), as ``budget_usd``."""
    recursion_limit: int = caller(200)
    """The most supersteps LangGraph runs in one run (a workflow raises it to what its own limits need)."""

    @classmethod
    def from_mapping(cls, data: dict[str, Any] | None) -> Any:
        """Build a context from a plain mapping, rejecting unknown keys with a clear error that names the
        workflow's fields. A legacy role's ``<old>_model`` (:attr:`LEGACY_ROLES`) is taken as the role's
        own."""
        data = dict(data or {})
        for old, role in cls.LEGACY_ROLES.items():
            if f"{old}_model" in data and f"{old}_model" not in cls.__dataclass_fields__:
                value = data.pop(f"{old}_model")
                if data.get(f"{role}_model") is None:
                    data[f"{role}_model"] = value
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown context field(s): {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
        return cls(**data)

    def model_for(self, role: str) -> Any:
        """The model given for ``role`` (instance or string), falling back to ``model``."""
        return getattr(self, f"{role}_model", None) or self.model

    def timeout_for(self, role: str) -> float:
        """The time limit of one LLM call attempt of ``role``: its own in ``llm_role_timeouts``, else
        ``llm_timeout_s``."""
        own = (self.llm_role_timeouts or {}).get(role)
        return float(own) if isinstance(own, (int, float)) and not isinstance(own, bool) and own > 0 \
            else self.llm_timeout_s


def context_fields(cls: type[BaseContext]) -> list[str]:
    """Names of every field of a context class (for CLI and docs)."""
    return [f.name for f in fields(cls)]

