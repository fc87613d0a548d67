"""A node and the router of its outgoing edge as one task: the node returns ``Command(update=..., goto=...)``.

``add_conditional_edges(name, router)`` runs the router after the node, on the state as the node's writes leave
it; LangGraph builds that view by copying every channel of the graph and applying the node's writes to the
copies, once per routed step (for KGoT's ~40 channels that was the largest single cost of a superstep,
``kgagents.evals.bench_batch --profile``). :func:`add_routed_node` keeps the router a plain function of the state, and
runs it inside the node's task on the state with the node's update applied to the written keys only — by the
graph's own channels, so reducers, defaults and ``Overwrite`` behave as LangGraph's own read would — then sends
the update and the router's choice (a node, ``END`` or ``Send`` packets) as one ``Command``. The checkpoints,
the ``tasks`` stream and the drawn graph (``destinations``) are what the conditional edge gave.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.channels.base import BaseChannel
from langgraph.errors import EmptyChannelError
from langgraph.graph import END, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command, Send

from kgagents.nodes.budget import Stop

#: The channel where a run that reached its budget says so (the output schemas' ``budget_stop``).
BUDGET_CHANNEL = "budget_stop"


def destinations_of(router: Callable[..., Any]) -> tuple[str, ...]:
    """The node names in the router's ``Literal[...]`` return annotation (what LangGraph draws for it)."""
    hint = typing.get_type_hints(router).get("return")
    names: list[str] = []

    def walk(tp: Any) -> None:
        origin = typing.get_origin(tp)
        if origin is Literal:
            names.extend(str(arg) for arg in typing.get_args(tp))
        elif origin in (typing.Union, types.UnionType):
            for arg in typing.get_args(tp):
                walk(arg)

    walk(hint)
    if not names:
        raise TypeError(f"router {router.__name__} names no destinations: annotate its return as Literal[...]")
    return tuple(dict.fromkeys(names))


def state_after(channels: Mapping[str, BaseChannel], state: Mapping[str, Any],
                update: Mapping[str, Any] | None) -> dict[str, Any]:
    """``state`` with ``update`` applied as the graph's channels apply it (reducers, defaults, ``Overwrite``),
    touching only the written keys."""
    view = dict(state)
    for key, value in (update or {}).items():
        spec = channels.get(key)
        if spec is None:
            view[key] = value
            continue
        channel = spec.from_checkpoint(state[key]) if key in state else spec.copy()
        channel.update([value])
        try:
            view[key] = channel.get()
        except EmptyChannelError:
            view.pop(key, None)
    return view


def _injected(func: Callable[..., Any]) -> tuple[bool, bool]:
    """Whether ``func`` takes LangGraph's ``runtime`` and ``config`` arguments."""
    parameters = inspect.signature(func).parameters
    return "runtime" in parameters, "config" in parameters


def _state_hint(func: Callable[..., Any]) -> Any:
    """The annotation of ``func``'s first parameter (the state it reads), or None."""
    try:
        first = next(iter(inspect.signature(func).parameters))
        return typing.get_type_hints(func).get(first)
    except (StopIteration, NameError, TypeError, ValueError):
        return None


async def _call(func: Callable[..., Any], takes: tuple[bool, bool], state: Any, runtime: Any, config: Any) -> Any:
    kwargs: dict[str, Any] = {}
    if takes[0]:
        kwargs["runtime"] = runtime
    if takes[1]:
        kwargs["config"] = config
    result = func(state, **kwargs)
    return await result if inspect.isawaitable(result) else result


def add_routed_node(builder: StateGraph[Any, Any, Any, Any], name: str, node: Callable[..., Any],
                    router: Callable[..., Any], *, destinations: Sequence[str] | None = None, **kwargs: Any) -> None:
    """``builder.add_node(name, node)`` plus ``add_conditional_edges(name, router)``, as one task (see the module
    docstring). ``node`` and ``router`` take the state and, by name, ``runtime`` and ``config``, as LangGraph
    nodes do; ``destinations``: where the router may go (default: its ``Literal`` return annotation)."""
    channels = builder.channels
    node_takes, router_takes = _injected(node), _injected(router)
    end = getattr(builder, "end_node", END)  # a workflow's graph ends through its output node (graphs/io.py)

    async def routed(state: dict[str, Any], runtime: Runtime[Any], config: RunnableConfig) -> Command[Any]:
        update = await _call(node, node_takes, state, runtime, config)
        if isinstance(update, Command):
            raise TypeError(f"node {name!r} returned a Command: its route is its router's ({router.__name__})")
        goto = await _call(router, router_takes, state_after(channels, state, update), runtime, config)
        if isinstance(goto, Stop):  # the run reached its budget (kgagents.nodes.budget): the state says so
            update = {**(update or {}), BUDGET_CHANNEL: goto.reason}
            goto = str(goto)
        if goto == END:
            goto = end
        if isinstance(goto, Send):
            goto = [goto]
        return Command(update=update, goto=goto)

    routed.__name__ = routed.__qualname__ = getattr(node, "__name__", name)
    routed.__doc__ = node.__doc__
    state_hint = _state_hint(node)
    if state_hint is not None:  # LangGraph reads a node's input schema from its first parameter's annotation
        routed.__annotations__ = {**typing.get_type_hints(routed), "state": state_hint}
    # LangGraph's node types have no (state, runtime, config) signature: see docs/development.md
    builder.add_node(name, routed,  # type: ignore[call-overload]
                     destinations=tuple(destinations or destinations_of(router)), **kwargs)
