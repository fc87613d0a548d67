"""A served run: what a caller of the LangGraph server (``langgraph dev``: the SDK, Studio, MCP) may choose.

A run the server started (:func:`is_served`: LangGraph gives its nodes ``runtime.server_info``) trusts its caller
only with what a caller may choose, whatever the auth handler (:mod:`kgagents.serve.auth`) let through — this is
the wall in the process that runs the graph:

- **the context**: each field says who chooses it (:func:`kgagents.nodes.context.served_decision`). A caller may
  set the plain values (limits, temperatures, strategies), and a chat model only from the server's list
  (``KGAGENTS_SERVE_MODELS``; none listed: the server's own configured model). Every other field (addresses,
  paths, the sandbox and its limits, the retries) keeps its default: the server's operator sets those in the
  server's environment. :func:`check_context` refuses a context that does otherwise, naming the fields.
- **the inputs** name a graph by its catalog name only (:func:`graph_source`; ``kgagents graph import``), attach
  files as content (``{"name": ..., "content_base64": ...}``: :func:`attachment_content`, written into the run's
  own folder by :func:`kgagents.nodes.runtime.task_attachments`), never a path of the server: ``kg_file`` and
  path attachments are refused.
- **the state** is written by the runs only: the auth handler refuses a caller's own writes (``update_state``,
  ``supersteps``: :func:`is_state_write`; a ``Command``'s update or goto: :func:`check_command`), and the graph
  trusts what the state holds no further than a caller could steer it: a path attachment only inside the run's
  own folder, a stored graph reference only as a pointer to a build of the catalog, opened as the catalog's own
  manifest says and never rebuilt from a source it names (:func:`trusted_graph_ref`).

A Python caller and the CLI are not served: they keep every field and every path form.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from kgagents.core.errors import KGAgentsError
from kgagents.nodes.context import CALLER, CALLER_MODEL, BaseContext, field_default, served_decision
from kgagents.tools.pgraph.catalog import NAME, graphs_dir
from kgagents.tools.pgraph.model import GraphFormatError, GraphRef
from kgagents.tools.pgraph.registry import catalog_ref, known_graphs

__all__ = ["LANGGRAPH_CONFIGURABLE", "MAX_ATTACHMENTS", "MAX_ATTACHMENTS_BYTES", "MAX_ATTACHMENT_BYTES", "OWNER",
           "SERVE_MODELS_ENV", "ServedRequestError", "admit", "attachment_content", "caller_fields", "caller_identity",
           "check_attachments", "check_command", "check_context", "check_context_values", "check_input",
           "decisions_of", "graph_source", "inside", "is_served", "is_state_write", "served_config", "served_models",
           "served_now", "trusted_graph_ref"]

#: The server's list of chat models a caller may choose (comma-separated ``provider:model`` strings).
SERVE_MODELS_ENV = "KGAGENTS_SERVE_MODELS"
#: The metadata key that names the caller who created a thread, run, cron or assistant (the auth handler's).
OWNER = "owner"
#: Attachments of one served run: how many, how large each, how large together (decoded bytes).
MAX_ATTACHMENTS = 20
MAX_ATTACHMENT_BYTES = 20 << 20
MAX_ATTACHMENTS_BYTES = 50 << 20
#: The keys of an attachment given as content.
ATTACHMENT_KEYS = frozenset({"name", "content_base64"})
#: Input fields that name a file or a thread of the server, which a served caller may not give (what to give
#: instead).
PATH_INPUTS = {
    "kg_file": "give the graph by its catalog name ('graph'), inline ('kg') or as an attached file's content",
}
#: The keys LangGraph's server itself puts into a run's ``configurable`` before the auth handler sees it (the
#: server then hands the same mapping over as the run's context when the request gives none), which are no
#: context field of any workflow: the v2 event streaming's marker, the thread (which the server sets again, to the
#: run's own) and the checkpoint a v2 ``run.start`` forks from (a checkpoint of the same thread). An exact list:
#: any other key is checked as a context field, so none can carry a field past the check.
LANGGRAPH_CONFIGURABLE = frozenset({"__event_streaming_v2", "thread_id", "checkpoint_id"})
#: What a served run's ``Command`` may carry: a resume value (none of the workflows interrupts for one, so it
#: is read by nothing); an ``update`` or a ``goto`` would write the thread's state or skip its checks.
COMMAND_KEYS = frozenset({"resume"})
#: An attribute of a context the workflow derived from an admitted one (a fusion variant's): admitted as well.
_ADMITTED = "_kgagents_served_admitted"


class ServedRequestError(KGAgentsError, ValueError):
    """A served caller asked for what a caller may not choose; the message names it and what is allowed."""


# --------------------------------------------------------------------------------------------------------------
# Is this run served, and by whom
# --------------------------------------------------------------------------------------------------------------
def served_config(config: RunnableConfig | Mapping[str, Any] | None) -> bool:
    """Whether ``config`` is a LangGraph server's run configuration: the server puts the run's assistant and
    graph (and its authenticated user) into ``configurable``, which is what LangGraph builds
    ``runtime.server_info`` from."""
    configurable = (config or {}).get("configurable") or {}
    return any(configurable.get(key) is not None
               for key in ("assistant_id", "graph_id", "langgraph_auth_user"))


def is_served(runtime: Any) -> bool:
    """Whether the run of ``runtime`` (a node's LangGraph runtime) was started by a LangGraph server."""
    return getattr(runtime, "server_info", None) is not None


def served_now() -> bool:
    """Whether the run whose node (or tool, or worker thread of a node) calls this was started by a LangGraph
    server; ``False`` outside a run."""
    try:
        config = get_config()
    except RuntimeError:
        return False
    return served_config(config)


def caller_identity(config: RunnableConfig | Mapping[str, Any] | None) -> str | None:
    """The identity the server authenticated the run's caller as (``None``: none, e.g. an MCP call, whose inner
    run the server starts without one)."""
    configurable = (config or {}).get("configurable") or {}
    identity = configurable.get("langgraph_auth_user_id")
    return str(identity) if identity else None


# --------------------------------------------------------------------------------------------------------------
# The context
# --------------------------------------------------------------------------------------------------------------
def served_models(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The chat models a served caller may choose: ``KGAGENTS_SERVE_MODELS`` (comma-separated)."""
    value = (os.environ if environ is None else environ).get(SERVE_MODELS_ENV, "")
    return tuple(m.strip() for m in value.split(",") if m.strip())


#: ``field -> (decision, default)`` of each context class checked so far (every node of a served run checks).
_DECISIONS: dict[type, dict[str, tuple[str | None, Any]]] = {}


def _class_decisions(cls: type[BaseContext]) -> dict[str, tuple[str | None, Any]]:
    """``field -> (decision, default)`` of one context class, read once."""
    decisions = _DECISIONS.get(cls)
    if decisions is None:
        decisions = {spec.name: (served_decision(spec), field_default(spec)) for spec in dataclasses.fields(cls)}
        _DECISIONS[cls] = decisions
    return decisions


def decisions_of(classes: Iterable[type[BaseContext]]) -> dict[str, tuple[str | None, Any]]:
    """``field -> (decision, default)`` over the context classes ``classes`` (one workflow's, or every served
    workflow's). A field that two classes decide differently is an error: a caller's request is checked against
    all of them at once where the server does not know the workflow yet."""
    out: dict[str, tuple[str | None, Any]] = {}
    for cls in classes:
        for name, decision in _class_decisions(cls).items():
            if name in out and out[name][0] != decision[0]:
                raise TypeError(f"the context field {name!r} is decided {out[name][0]} in one workflow "
                                f"and {decision[0]} in {cls.__name__}")
            out.setdefault(name, decision)
    return out


def _refusal(name: str, value: Any, decision: str | None, default: Any, models: tuple[str, ...]) -> str | None:
    """Why a served caller may not give ``value`` for the field ``name`` (``None``: it may)."""
    if decision == CALLER:
        return None
    if decision == CALLER_MODEL:
        if value is None or (isinstance(value, str) and value in models):
            return None
        listed = f"one of {', '.join(models)}" if models else f"none (the server lists none in {SERVE_MODELS_ENV})"
        return f"{name}: {value!r} is not a model of this server's list; a caller may choose {listed}"
    if value == default:
        return None
    return f"{name}: set by the server's operator only (its environment), not by a caller"


def check_context_values(values: Mapping[str, Any], decisions: Mapping[str, tuple[str | None, Any]], *,
                         models: tuple[str, ...] | None = None) -> None:
    """Refuse a served caller's context ``values`` (a mapping, as a request carries it) that sets a field a caller
    may not choose, a model off the server's list, or a field no served workflow has; the error names each
    refused field and the fields a caller may set."""
    models = served_models() if models is None else models
    refused = []
    for name, value in values.items():
        if name not in decisions:
            refused.append(f"{name}: no served workflow has this field")
            continue
        decision, default = decisions[name]
        reason = _refusal(name, value, decision, default, models)
        if reason:
            refused.append(reason)
    if refused:
        allowed = sorted(n for n, (d, _) in decisions.items() if d in (CALLER, CALLER_MODEL))
        raise ServedRequestError("this served run's context sets what a caller may not choose: "
                                 + "; ".join(refused) + f". A caller may set: {', '.join(allowed)}")


def caller_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """A request's context (or ``configurable``) without the keys LangGraph's server adds itself
    (:data:`LANGGRAPH_CONFIGURABLE`): what the caller chose, for :func:`check_context_values`."""
    return {name: value for name, value in values.items() if name not in LANGGRAPH_CONFIGURABLE}


def check_context(ctx: BaseContext, *, models: tuple[str, ...] | None = None) -> None:
    """Refuse a served run's context (the workflow's dataclass, as LangGraph gives it to the nodes) whose fields
    are not what a caller may choose (:func:`check_context_values` over its fields that differ from their
    defaults); a context the workflow derived from an admitted one (:func:`admit`) passes."""
    if getattr(ctx, _ADMITTED, False):
        return
    decisions = _class_decisions(type(ctx))
    changed = {spec.name: getattr(ctx, spec.name) for spec in dataclasses.fields(ctx)
               if getattr(ctx, spec.name) != decisions[spec.name][1]}
    check_context_values(changed, decisions, models=models)


def admit[C: BaseContext](ctx: C) -> C:
    """Mark a context the workflow derived itself from its run's checked one (a fusion variant's: its own KG
    scope and share of the budget): the served check passes it. A caller's context is a mapping LangGraph
    turns into a new instance, never one of these."""
    object.__setattr__(ctx, _ADMITTED, True)
    return ctx


# --------------------------------------------------------------------------------------------------------------
# The inputs
# --------------------------------------------------------------------------------------------------------------
def attachment_content(item: Mapping[str, Any]) -> tuple[str, bytes]:
    """The file name and bytes of an attachment given as content, ``{"name": "table.csv", "content_base64":
    "..."}``; a clear error for another shape, a name that is a path, bad base64 or a file over the limit."""
    keys = set(item)
    if keys != ATTACHMENT_KEYS:
        raise ServedRequestError(f"an attachment given as content has the keys name and content_base64, not "
                                 f"{', '.join(sorted(map(str, keys))) or 'none'}")
    name, content = item["name"], item["content_base64"]
    if (not isinstance(name, str) or not name or name in (".", "..") or len(name) > 255
            or any(c in name for c in "/\\\0")):
        raise ServedRequestError(f"an attachment's name is a file name (no folders, at most 255 characters), "
                                 f"not {name!r}")
    if not isinstance(content, str):
        raise ServedRequestError(f"the attachment {name}: content_base64 is a base64 string")
    if len(content) > (MAX_ATTACHMENT_BYTES + 2) // 3 * 4 + 4:
        raise ServedRequestError(f"the attachment {name} is over {MAX_ATTACHMENT_BYTES >> 20} MB, the limit of one "
                                 "attachment")
    try:
        data = base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ServedRequestError(f"the attachment {name}: content_base64 is not base64 ({exc})") from None
    if len(data) > MAX_ATTACHMENT_BYTES:
        raise ServedRequestError(f"the attachment {name} is {len(data) / 2**20:.1f} MB; the limit of one attachment "
                                 f"is {MAX_ATTACHMENT_BYTES >> 20} MB")
    return name, data


def check_attachments(items: Any, *, served: bool, own: Path | None = None) -> list[tuple[str, bytes] | str]:
    """The task's attachments, each decoded content ``(name, bytes)`` or a path as given. In a served run a path
    is refused unless it lies in ``own`` (the run's folder of attachments written from content), as are more than
    :data:`MAX_ATTACHMENTS` files or more than :data:`MAX_ATTACHMENTS_BYTES` together."""
    if items is None:
        return []
    if not isinstance(items, list | tuple):
        raise ServedRequestError(f"attachments is a list, not {type(items).__name__}")
    if served and len(items) > MAX_ATTACHMENTS:
        raise ServedRequestError(f"{len(items)} attachments; a served run takes at most {MAX_ATTACHMENTS}")
    out: list[tuple[str, bytes] | str] = []
    total = 0
    for item in items:
        if isinstance(item, Mapping):
            name, data = attachment_content(item)
            total += len(data)
            if served and total > MAX_ATTACHMENTS_BYTES:
                raise ServedRequestError(f"the attachments are over {MAX_ATTACHMENTS_BYTES >> 20} MB together, the "
                                         "limit of a served run")
            out.append((name, data))
        elif served and not (own is not None and isinstance(item, str) and inside(item, own)):
            raise ServedRequestError("a served run takes attachments as content ({'name': ..., 'content_base64': "
                                     f"...}}), never a path of the server: {str(item)[:200]!r}")
        else:
            out.append(str(item))
    names = [o[0] for o in out if isinstance(o, tuple)]
    if len(names) != len(set(names)):
        raise ServedRequestError(f"two attachments have the same name: {', '.join(sorted(names))}")
    return out


def inside(path: str | Path, folder: Path) -> bool:
    """Whether ``path``, every link followed, is in ``folder`` (resolved too)."""
    try:
        return Path(path).resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError, ValueError):
        return False


def graph_source(value: Any, *, served: bool) -> str:
    """The graph an input's ``graph`` names, for :func:`kgagents.tools.pgraph.resolve`: as given (a name or a
    path) when not served; in a served run only an imported graph's name, as its folder in the catalog."""
    if not served:
        return str(value)
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise ServedRequestError("a served run names its graph by the name it was imported under "
                                 f"(`kgagents graph import`), never by a path: {str(value)[:200]!r}")
    folder = graphs_dir() / value
    if not (folder / "manifest.json").is_file():
        known = known_graphs()
        raise ServedRequestError(f"no graph named {value!r} is imported on this server"
                                 + (f"; imported: {', '.join(known)}" if known else ""))
    return str(folder)


def trusted_graph_ref(ref: GraphRef, *, served: bool) -> GraphRef:
    """The graph reference a run may open, from one its state holds. Not served: as it is (the run's own user
    wrote it). Served: the state is a caller's to steer, so the reference counts only as a pointer to a build of
    the server's catalog (an imported graph, or the cache's build of the run's inline graph or attached file) and
    the catalog's own reference is returned (:func:`kgagents.tools.pgraph.registry.catalog_ref`): never a folder
    elsewhere, never a rebuild from a ``source`` or ``format`` the state names. The refusal quotes no path."""
    if not served:
        return ref
    try:
        return catalog_ref(ref)
    except GraphFormatError as exc:
        raise ServedRequestError(str(exc)) from None


def is_state_write(value: Mapping[str, Any]) -> bool:
    """Whether a ``threads.update`` event the auth handler gets is a write of the thread's state: LangGraph's
    server sends ``update_state`` and a thread's ``supersteps`` (on create, or on their own) as the thread's id
    alone, a thread's metadata patch with ``metadata``, a run's cancellation with ``action``. Anything but the two
    known shapes counts as a state write, so that a new kind of update is refused until someone decides."""
    return "metadata" not in value and "action" not in value


def check_command(command: Any) -> None:
    """Refuse a served run's ``Command`` that writes the thread's state (``update``) or jumps to a node
    (``goto``): a served thread's state is written by its runs only. A plain resume passes."""
    if command is None:
        return
    if not isinstance(command, Mapping):
        raise ServedRequestError(f"a run's command is an object, not {type(command).__name__}")
    extra = sorted(str(k) for k, v in command.items() if k not in COMMAND_KEYS and v is not None)
    if extra:
        raise ServedRequestError(f"a served run takes no {' or '.join(extra)} in its command: a thread's state is "
                                 "written by its runs only (give new input on a new thread, or resume with "
                                 "{'resume': ...} or no input)")


def check_input(values: Mapping[str, Any]) -> None:
    """Refuse what a served caller's input (or a ``Command``'s update) gives that a caller may not: a server path
    (``kg_file``, a path attachment, a ``graph`` that is no catalog name); the content forms pass. What the graph
    checks again when it runs (:func:`graph_source`, :func:`check_attachments`)."""
    for name, instead in PATH_INPUTS.items():
        if values.get(name) not in (None, ""):
            raise ServedRequestError(f"a served run takes no {name} (a path of the server): {instead}")
    check_attachments(values.get("attachments"), served=True)
    graph = values.get("graph")
    if graph not in (None, "") and (not isinstance(graph, str) or not NAME.fullmatch(graph)):
        raise ServedRequestError("a served run names its graph by the name it was imported under "
                                 f"(`kgagents graph import`), never by a path: {str(graph)[:200]!r}")
