"""The LangGraph server's auth handler for kgagents (``langgraph.json``'s ``auth``): who may call, and what.

- **Authentication** (:func:`authenticate`): a caller's token from the server's environment, or, with none
  configured, the one user of this machine (:mod:`kgagents.serve.callers`); a browser request of an origin the
  server's CORS configuration does not allow is refused either way. ``langgraph.json`` sets
  ``disable_studio_auth``, so that no request skips this handler by claiming to be Studio
  (``x-auth-scheme: langsmith``).
- **Ownership**: threads, their runs, crons and store items belong to the caller who created them (the
  ``owner`` metadata, and a filter on every read, update, delete and search): one caller cannot list, read,
  resume, cancel, copy or delete another's. Assistants are readable by every caller (the served graphs' own
  ones are the server's); a caller creates, updates and deletes only its own.
- **What a caller may choose**: a run's, cron's or assistant's context only with what a caller may set
  (:mod:`kgagents.nodes.served`: models of the server's list, never an address, a path or the sandbox's
  settings; the keys LangGraph's server adds itself pass), inputs without server paths (graphs by catalog name,
  attachments as content), no webhooks. A refusal (403) names the refused fields and the allowed ones. The graph
  checks the same again when it runs.
- **A thread's state is written by its runs only**: a caller's own writes (``update_state``, ``supersteps``, a
  run's ``Command`` with an ``update`` or a ``goto``) are refused; a run (new input, or a resume) and a thread's
  metadata are the caller's. No workflow waits for a person's input, so no run needs more.
- Whatever the handlers below do not name is refused (:func:`refuse`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from functools import cache
from typing import Any

from langgraph_sdk import Auth

from kgagents.graphs import registry
from kgagents.nodes.served import (
    OWNER,
    ServedRequestError,
    caller_fields,
    check_command,
    check_context_values,
    check_input,
    decisions_of,
    is_state_write,
)
from kgagents.serve.callers import Refusal, allowed_origins, callers_from, check_request

__all__ = ["auth"]

logger = logging.getLogger("kgagents.serve")

auth = Auth()

#: The callers and origins, read once when the server loads this module (a bad configuration stops it).
CALLERS = callers_from(os.environ)
ORIGINS = allowed_origins(os.environ)
if CALLERS.one_user:
    logger.warning("kgagents: no caller tokens (KGAGENTS_SERVE_TOKEN): one-user mode, requests from this machine "
                   "only; origins allowed: %s", ", ".join(ORIGINS[0]) or "none")
else:
    logger.warning("kgagents: %d caller(s) with tokens; origins allowed: %s", len(CALLERS.tokens),
                   ", ".join(ORIGINS[0]) or "none")


def _forbidden(message: str, status: int = 403) -> Auth.exceptions.HTTPException:
    return Auth.exceptions.HTTPException(status_code=status, detail=message)


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes], scope: dict[str, Any]) -> Auth.types.MinimalUserDict:
    """The caller of a request, by its token (or, on a one-user server, by coming from this machine)."""
    text = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers.items()}
    client = scope.get("client")
    try:
        identity = check_request(CALLERS, text, client[0] if client else None, ORIGINS)
    except Refusal as refusal:
        raise _forbidden(str(refusal), refusal.status) from None
    return {"identity": identity, "display_name": identity, "is_authenticated": True, "permissions": []}


# --------------------------------------------------------------------------------------------------------------
# What a caller may choose
# --------------------------------------------------------------------------------------------------------------
@cache
def _all_decisions() -> dict[str, tuple[str | None, Any]]:
    """The context fields of every served workflow, with who chooses each."""
    return decisions_of([w.context for w in registry.workflows()])


def _decisions(graph_id: str | None) -> dict[str, tuple[str | None, Any]]:
    """The context fields of the workflow ``graph_id`` (every served workflow's, when unknown)."""
    if graph_id in registry.names():
        return decisions_of([registry.get(str(graph_id)).context])
    return _all_decisions()


def check_run_request(kwargs: Mapping[str, Any], graph_id: str | None = None) -> None:
    """Refuse a run (or a cron's run) whose context or input a caller may not give, whose ``Command`` writes the
    thread's state, or that asks for a webhook."""
    try:
        if kwargs.get("webhook"):
            raise ServedRequestError("a served run takes no webhook: read its result from the server")
        decisions = _decisions(graph_id)
        check_context_values(caller_fields(kwargs.get("context") or {}), decisions)
        configurable = (kwargs.get("config") or {}).get("configurable") or {}
        check_context_values({k: v for k, v in configurable.items() if k in decisions}, decisions)
        if isinstance(kwargs.get("input"), Mapping):
            check_input(kwargs["input"])
        check_command(kwargs.get("command"))
    except ServedRequestError as exc:
        raise _forbidden(str(exc)) from None


def _own(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """Mark what the request creates as the caller's (its metadata), and the filter of the caller's own."""
    metadata = value.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
        value["metadata"] = metadata
    metadata[OWNER] = ctx.user.identity
    return {OWNER: ctx.user.identity}


# --------------------------------------------------------------------------------------------------------------
# Threads and their runs
# --------------------------------------------------------------------------------------------------------------
@auth.on.threads.create
async def create_thread(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    return _own(ctx, value)


@auth.on.threads.create_run
async def create_run(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    check_run_request(value.get("kwargs") or {})
    return _own(ctx, value)


@auth.on.threads.update
async def update_thread(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """A thread's metadata (it stays its creator's) and its runs' cancellation; never a write of its state."""
    if is_state_write(value):
        raise _forbidden("a served thread's state is written by its runs only: update_state and supersteps are not "
                         "taken (start a run with new input on a new thread, or resume this one with no input)")
    if isinstance(value.get("metadata"), dict):  # a thread stays its creator's
        value["metadata"][OWNER] = ctx.user.identity
    return {OWNER: ctx.user.identity}


async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    return {OWNER: ctx.user.identity}


auth.on.threads.read(own_threads)
auth.on.threads.delete(own_threads)
auth.on.threads.search(own_threads)


# --------------------------------------------------------------------------------------------------------------
# Crons: a caller's own, with runs a caller may ask for
# --------------------------------------------------------------------------------------------------------------
@auth.on.crons.create
async def create_cron(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    check_run_request(value.get("payload") or {})
    return _own(ctx, value)


@auth.on.crons.update
async def update_cron(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    check_run_request(value.get("payload") or {})
    if isinstance(value.get("metadata"), dict):  # a cron stays its creator's
        value["metadata"][OWNER] = ctx.user.identity
    return {OWNER: ctx.user.identity}


async def own_crons(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    return {OWNER: ctx.user.identity}


auth.on.crons.read(own_crons)
auth.on.crons.delete(own_crons)
auth.on.crons.search(own_crons)


# --------------------------------------------------------------------------------------------------------------
# Assistants: readable by all; a caller's own with a context a caller may set
# --------------------------------------------------------------------------------------------------------------
async def read_assistants(ctx: Auth.types.AuthContext, value: Any) -> None:
    return None


auth.on.assistants.read(read_assistants)
auth.on.assistants.search(read_assistants)


@auth.on.assistants.create
async def create_assistant(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    graph_id = value.get("graph_id")
    if graph_id not in registry.names():
        raise _forbidden(f"no served workflow {graph_id!r}: {', '.join(registry.names())}")
    check_run_request({"context": value.get("context"), "config": value.get("config")}, str(graph_id))
    return _own(ctx, value)


@auth.on.assistants.update
async def update_assistant(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    graph_id = value.get("graph_id")
    if graph_id is not None and graph_id not in registry.names():
        raise _forbidden(f"no served workflow {graph_id!r}: {', '.join(registry.names())}")
    check_run_request({"context": value.get("context"), "config": value.get("config")}, graph_id)
    if isinstance(value.get("metadata"), dict):
        value["metadata"][OWNER] = ctx.user.identity
    return {OWNER: ctx.user.identity}


@auth.on.assistants.delete
async def delete_assistant(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    return {OWNER: ctx.user.identity}


# --------------------------------------------------------------------------------------------------------------
# The store: each caller's items under a namespace of its own
# --------------------------------------------------------------------------------------------------------------
@auth.on.store
async def own_store(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Every store request addresses the caller's own namespace: ``(identity, *namespace)``."""
    namespace = tuple(value.get("namespace") or ())
    value["namespace"] = (ctx.user.identity, *namespace)


# --------------------------------------------------------------------------------------------------------------
# Everything else
# --------------------------------------------------------------------------------------------------------------
@auth.on
async def refuse(ctx: Auth.types.AuthContext, value: Any) -> bool:
    """Refuse whatever the handlers above do not name (a resource or action LangGraph adds later)."""
    return False
