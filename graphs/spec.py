"""What the application knows of one workflow: the :class:`Workflow` spec, declared beside its graph.

Each ``graphs/<name>.py`` declares the spec of the workflows it builds (``WORKFLOW``, or one constant per
workflow when a module builds several), and :mod:`kgagents.graphs.registry` lists them. Everything that serves
a workflow reads it from there: the CLI (``ask``, ``demo``, ``eval``, ``show``), the evaluation runner, the
report and ``langgraph.json``.

The layers run prompts → core → tools → nodes → graphs → evals → CLI, so a spec names what lives above it (the
evaluation adapter, the report formatter, the demo) by import string, ``"package.module:attribute"``, which the
registry resolves when it is asked for it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgagents.nodes.context import BaseContext

if TYPE_CHECKING:  # a spec is read without LangGraph (the CLI's parser): only its graph factory builds one
    from langgraph.graph import StateGraph

#: ``build() -> StateGraph``: the uncompiled graph of a workflow.
Builder = Callable[[], "StateGraph"]


def resolve(reference: str) -> Any:
    """The object an import string names: ``"package.module:attribute"`` (a clear error when it does not)."""
    module, sep, attribute = reference.partition(":")
    if not sep or not module or not attribute:
        raise ValueError(f"an import string is 'package.module:attribute', got {reference!r}")
    loaded = importlib.import_module(module)
    try:
        return getattr(loaded, attribute)
    except AttributeError:
        raise ValueError(f"{module} has no {attribute!r} (named by {reference!r})") from None


@dataclass(frozen=True)
class Workflow:
    """One workflow the application serves."""

    name: str
    """What the CLI, ``langgraph.json``, the run registry and the results directories call it."""
    description: str
    """One line for ``--help``, ``kgagents workflows`` and an MCP host."""
    build: Builder
    """The graph factory: returns the uncompiled graph (:meth:`compile_graph` compiles it)."""
    context: type[BaseContext]
    """The runtime context (LangGraph ``context_schema``): its fields are the run's settings and CLI flags."""
    served: str
    """The import string of the compiled graph ``langgraph.json`` serves (no checkpointer), e.g.
    ``"kgagents.graphs.kgot:graph"``."""
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Named contexts (``--preset``): the papers' settings."""
    demo: str | None = None
    """The import string of the offline, scripted demo (a function of the parsed ``kgagents demo`` options that
    returns an exit status)."""
    no_demo: str | None = None
    """Why the workflow has no demo of its own (exactly one of ``demo`` and ``no_demo`` is given)."""
    adapter: str | None = None
    """The import string of how the evaluation runner talks to the workflow: a function returning its
    :class:`kgagents.evals.runner.Adapter`; None: the runner's default adapter."""
    formatter: str | None = None
    """The import string of the report's section for a run (``state -> lines`` for ``kgagents show``); None:
    question, answer, failures and usage only."""
    compile_options: Mapping[str, Any] = field(default_factory=dict)
    """Config the compiled graph carries (``with_config``), e.g. a recursion limit."""
    preload: tuple[str, ...] = ()
    """Modules the runs import that take seconds to import (the embedding model's stack): the fork server of an
    evaluation's worker processes imports them once for all its workers (:mod:`kgagents.evals.processes`)."""

    def __post_init__(self) -> None:
        if (self.demo is None) == (self.no_demo is None):
            raise ValueError(f"workflow {self.name!r}: give a demo or say why there is none (no_demo), not both")
        if not self.description or "\n" in self.description:
            raise ValueError(f"workflow {self.name!r}: the description is one line")

    def compile_graph(self, checkpointer: Any = None, **kwargs: Any) -> Any:
        """The compiled graph, with a checkpointer for Python callers, tests and the CLI."""
        graph = self.build().compile(checkpointer=checkpointer, name=self.name, **kwargs)
        return graph.with_config(**self.compile_options) if self.compile_options else graph

    @property
    def graph(self) -> Any:
        """The compiled graph without a checkpointer (what ``langgraph dev`` serves)."""
        return self.compile_graph()

    @property
    def PRESETS(self) -> dict[str, dict[str, Any]]:  # noqa: N802 - the name the workflow modules use
        """:attr:`presets` as plain dicts."""
        return {name: dict(values) for name, values in self.presets.items()}

    def preset(self, name: str) -> dict[str, Any]:
        """The context values of the named preset; a clear error naming the presets when it is unknown."""
        if name not in self.presets:
            known = ", ".join(self.presets) or "none"
            raise ValueError(f"the {self.name} workflow has no preset {name!r}; its presets: {known}")
        return dict(self.presets[name])

    def make_context(self, values: Mapping[str, Any] | None = None) -> Any:
        """The workflow's context from plain values; an unknown key is a clear error naming the fields."""
        return self.context.from_mapping(dict(values or {}))

    @property
    def input_schema(self) -> type:
        """What a caller gives a run: the graph's input schema (``kgagents.graphs.io``)."""
        return self.build().input_schema

    @property
    def output_schema(self) -> type:
        """What a run returns to a caller: the graph's output schema (``kgagents.graphs.io``)."""
        return self.build().output_schema

    def input_keys(self) -> frozenset[str]:
        """The keys a run's input may hold (the graph's input schema)."""
        schema = self.input_schema
        return frozenset(getattr(schema, "__annotations__", None) or {})  # a TypedDict's: its bases' too
