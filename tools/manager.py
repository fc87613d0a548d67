"""The tool manager: which tools exist, which are usable here, and a per-run set of tool instances.

Tools are registered as *factories* (a function of :class:`ToolEnv`, the run's environment) together with an
availability check, so that every run builds its own instances (no browser, cache or work dir is shared
between runs) and so that a tool that needs a key or a service reports itself unavailable at start-up.

Adding a tool takes one line::

    register_tool(my_langchain_tool)                       # an instance, shared as it is
    register_tool(lambda env: MyTool(workdir=env.work_dir), name="my_tool", check=my_check)

Workflows build their tools on the event loop (see ``kgagents.nodes.runtime.run_work_dir``): a factory should only
construct objects and leave file, network and subprocess work to the tool's call; checks run there too and
should be cheap (a probe that is slow the first time caches its answer, as the sandbox's does).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.tools import BaseTool

from kgagents.core.config import Settings, get_settings
from kgagents.core.endpoints import describe_model, model_key
from kgagents.core.extras import MissingExtra, installed
from kgagents.core.retry import Watch, retry_model_call
from kgagents.core.usage import Usage, merge_usage, reply_usage
from kgagents.tools.sandbox import DiskQuota

MAX_DESCRIPTION_CHARS = 1024


@dataclass(frozen=True)
class ToolStatus:
    """Whether a tool can be used here, and if not, why (``missing key X`` / ``missing service Y``)."""

    name: str
    available: bool
    reason: str = "available"

    @classmethod
    def missing_extra(cls, name: str, *modules: str) -> ToolStatus | None:
        """Unavailable, naming the extra to install, when one of ``modules`` (of :mod:`kgagents.core.extras`) is
        missing; None when all are installed."""
        for module in modules:
            if not installed(module):
                return cls(name, False, str(MissingExtra(module, f"the {name} tool")))
        return None


@dataclass
class ToolEnv:
    """What a tool factory gets: the run's work dir and attachments, the tools' own chat model, settings and
    limits."""

    work_dir: Path
    llm: BaseChatModel | None = None
    settings: Settings = field(default_factory=get_settings)
    max_output_chars: int = 12_000
    sandbox_timeout_s: float = 30.0
    sandbox_memory_mb: int = 1024
    sandbox_quota: DiskQuota = field(default_factory=DiskQuota)
    """What sandboxed code may write into its work dir, per call and per run."""
    allow_weak_sandbox: bool = False
    max_retries: int = 6
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    usage: Usage = field(default_factory=dict)
    """Token usage of the tools' own LLM calls; the node that ran the tools adds it to the state."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Workflow-specific objects (e.g. ``"context"``: the run's ``Context`` for tools that run subgraphs)."""
    budget_guard: Any = None
    """The run's budget for the tools' model calls (``kgagents.nodes.budget.ToolBudgetGuard``: ``admit()``
    raises once the budget is reached, ``record(usage)`` counts a reply), or None for a run without one."""
    attachments: tuple[str, ...] = ()
    """The task's attached files: with the work dir (and ``KGAGENTS_FILE_ROOTS``), the only local files the
    file tools may read (``kgagents.tools.files.access``)."""

    def add_usage(self, delta: Usage) -> None:
        """Add the usage of a model call made by a tool (a chat reply, a transcription, embeddings) to
        :attr:`usage`, and count it for the run's budget (the checks of the calls that follow in its step)."""
        self.usage = merge_usage(self.usage, delta)
        if self.budget_guard is not None:
            self.budget_guard.record(delta)

    def record_usage(self, message: Any, model: str | None = None, sent: Any = (), definitions: Any = ()) -> None:
        """Add the token usage of one chat-model reply (an ``AIMessage``) to :attr:`usage` (unknown, never 0,
        when the reply reports none: then counted locally from it, the messages ``sent`` and the tool
        ``definitions`` sent with them) and count it for the run's budget."""
        self.add_usage(reply_usage(message, model or "unknown", sent if isinstance(sent, list) else (),
                                   definitions))

    async def ask_llm(self, messages: Any, *, tools: list[Any] | None = None) -> Any:
        """Call the tools' model with retries on transient errors; records usage; returns the ``AIMessage``."""
        if self.llm is None:
            raise RuntimeError("no chat model is configured for the tools")
        if self.budget_guard is not None:
            self.budget_guard.admit()  # the run's budget: no call starts once it is reached
        model: Any = self.llm.bind_tools(tools) if tools else self.llm
        who = f"the tools' model ({describe_model(self.llm)})"
        # a model that cannot be used raises ModelUnavailableError, which the tools let through: the run stops
        reply = await retry_model_call(lambda: model.ainvoke(messages), model=model_key(self.llm), who=who,
                                       max_retries=self.max_retries, base_s=self.backoff_base_s,
                                       cap_s=self.backoff_max_s, watch=Watch(who))
        self.record_usage(reply, getattr(self.llm, "model_name", None), messages,
                          (getattr(model, "kwargs", None) or {}).get("tools") or () if tools else ())
        return reply


Factory = Callable[[ToolEnv], BaseTool]
Check = Callable[[Settings], ToolStatus]


@dataclass
class _Registration:
    name: str
    factory: Factory
    check: Check | None


_registry: dict[str, _Registration] = {}

#: Modules whose import registers the built-in tools (each calls :func:`register_tool`).
BUILTIN_TOOL_MODULES = ["kgagents.tools.python_tool", "kgagents.tools.llm_tool", "kgagents.tools.files"]
_loaded = False


def register_tool(tool: BaseTool | Factory, *, name: str | None = None, check: Check | None = None) -> None:
    """Register a tool (an instance or a factory ``ToolEnv -> BaseTool``) for every later run."""
    if isinstance(tool, BaseTool):
        instance = tool
        _check_description(instance)
        _registry[name or instance.name] = _Registration(name or instance.name, lambda env: instance, check)
        return
    if not name:
        raise ValueError("register_tool needs a name= when given a factory")
    _registry[name] = _Registration(name, tool, check)


def unregister_tool(name: str) -> None:
    """Remove a registered tool (mainly for tests)."""
    _registry.pop(name, None)


def _check_description(tool: BaseTool) -> None:
    if len(tool.description or "") > MAX_DESCRIPTION_CHARS:
        raise ValueError(f"tool {tool.name!r}: description is {len(tool.description)} characters; "
                         f"the limit is {MAX_DESCRIPTION_CHARS}")


def load_builtin_tools() -> None:
    """Import the modules of the built-in tools (idempotent)."""
    global _loaded
    if _loaded:
        return
    for module in BUILTIN_TOOL_MODULES:
        importlib.import_module(module)
    _loaded = True


def registered_names() -> list[str]:
    load_builtin_tools()
    return list(_registry)


def tool_statuses(settings: Settings | None = None, names: list[str] | None = None) -> list[ToolStatus]:
    """Status of every registered tool, or of those in ``names`` (available / missing key / missing service)."""
    load_builtin_tools()
    settings = settings or get_settings()
    out = []
    for reg in _registry.values() if names is None else [_registry[n] for n in names if n in _registry]:
        if reg.check is None:
            out.append(ToolStatus(reg.name, True))
            continue
        try:
            out.append(reg.check(settings))
        except Exception as exc:  # noqa: BLE001 - a broken check means the tool is unusable, not a crash
            out.append(ToolStatus(reg.name, False, f"check failed: {exc}"))
    return out


class ToolManager:
    """The tools of one run: built from the registry for ``env``, filtered to the available ones."""

    def __init__(self, env: ToolEnv, names: list[str] | None = None) -> None:
        load_builtin_tools()
        self.env = env
        wanted = names if names is not None else list(_registry)
        unknown = [n for n in wanted if n not in _registry]
        if unknown:
            raise ValueError(f"unknown tool(s): {', '.join(unknown)}; registered: {', '.join(_registry)}")
        self.statuses: dict[str, ToolStatus] = {s.name: s for s in tool_statuses(env.settings, wanted)}
        self._tools: dict[str, BaseTool] = {}
        for name in wanted:
            if not self.statuses[name].available:
                continue
            tool = _registry[name].factory(env)
            _check_description(tool)
            self._tools[tool.name] = tool

    def add(self, tool: BaseTool) -> None:
        """Add a tool to this run only."""
        _check_description(tool)
        self._tools[tool.name] = tool

    def get_tools(self) -> list[BaseTool]:
        return list(self._tools.values())

    def get(self, name: str) -> BaseTool | None:
        return self._tools.get(name)

    def unavailable(self) -> list[ToolStatus]:
        return [s for s in self.statuses.values() if not s.available]
