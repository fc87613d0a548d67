"""Checkpoints read back as data: langgraph's serializer restricted to the types kgagents' states hold.

langgraph-checkpoint's ``JsonPlusSerializer`` rebuilds an object from a checkpoint by importing the module and
calling the name the checkpoint gives (``("os", "system", "...")`` is a valid msgpack extension), and its
default is to allow any of them. A checkpoint file someone hands you (a results folder, a ``./.kgagents/runs``
folder in a cloned repository) would run code on ``kgagents show``, ``resume`` or ``eval``.

:func:`strict_serializer` is the serializer of every checkpointer kgagents builds:

- the msgpack types it rebuilds are langgraph's own safe list (dates, UUIDs, sets, LangChain's messages and
  documents, ``Send`` / ``Command`` / ``Interrupt``) and :data:`STATE_TYPES`, kgagents' state types: the
  dataclasses, pydantic models and enums the workflows' states hold;
- pickled values are never read (``pickle_fallback`` off), and old JSON checkpoints revive only LangChain's core
  classes;
- any other type in a checkpoint is **refused**: :class:`CheckpointRefused` names the types and where they
  were found, and nothing of the checkpoint is used (langgraph's strict mode would hand the raw arguments to
  the state instead, silently).

A new state type (a dataclass or model put into a workflow's state) must be added to :data:`STATE_TYPES`;
``tests/test_checkpoint_serde.py`` runs every workflow through a checkpoint and back and fails on a type
missing here.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from kgagents.core.errors import KGAgentsError

__all__ = ["READABLE_KINDS", "STATE_TYPES", "CheckpointRefused", "StrictSerializer", "refusal",
           "strict_serializer"]

#: ``(module, class)`` of every type of kgagents' own that a workflow's state holds, beside langgraph's safe
#: types (see the module docstring). None today: the states are typed dictionaries of plain values (strings,
#: numbers, lists, dictionaries) and LangChain messages. Every type the test suite's runs wrote into a checkpoint
#: as an object (the whole suite, slow tests included, with the encoder logging each) was one of langgraph's safe
#: types: ``AIMessage``, ``HumanMessage``, ``SystemMessage``, ``RemoveMessage`` and ``Send``; an exception kept in
#: a state is written as its text.
STATE_TYPES: frozenset[tuple[str, str]] = frozenset()

#: The serialisation kinds a checkpoint value may have (``pickle`` is not among them).
READABLE_KINDS = ("null", "bytes", "bytearray", "json", "msgpack")


class CheckpointRefused(KGAgentsError, ValueError):
    """A checkpoint holds a value kgagents does not read: a type outside its states' types, or a pickle."""


#: The refused types of the value being read on this thread (``None`` outside :meth:`StrictSerializer.loads_typed`).
_REFUSED: ContextVar[list[str] | None] = ContextVar("kgagents_refused_checkpoint_types", default=None)


def _note_refusal(event: SerdeEvent) -> None:
    """langgraph's serde event listener: note a type its allow-list blocked, for the value being read."""
    refused = _REFUSED.get()
    if refused is not None and event.get("kind") in ("msgpack_blocked", "msgpack_method_blocked"):
        name = f"{event.get('module')}.{event.get('name')}"
        if event.get("method"):
            name += f".{event['method']}"
        refused.append(name)


register_serde_event_listener(_note_refusal)


class _QuietRefusals(logging.Filter):
    """Drop langgraph's own warning about a type it blocked while :class:`StrictSerializer` reads: the refusal is
    raised with a message of its own, and the warning's advice (add the type to the allow-list) is wrong here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _REFUSED.get() is None or not str(record.msg).startswith("Blocked deserialization")


logging.getLogger("langgraph.checkpoint.serde.jsonplus").addFilter(_QuietRefusals())


def refusal(source: str, refused: list[str]) -> str:
    """The message of a refused checkpoint value: where, which types, and why nothing of it is used."""
    names = ", ".join(sorted(set(refused))[:5])
    return (f"{source} holds a value of type {names}, which is not one of the types kgagents writes into a "
            "checkpoint: refused (rebuilding it could run code). Checkpoints written by kgagents never hold "
            "one; do not open checkpoints from someone you do not trust")


class StrictSerializer(JsonPlusSerializer):
    """``JsonPlusSerializer`` that rebuilds only langgraph's safe types and :data:`STATE_TYPES`, reads no
    pickle, and raises :class:`CheckpointRefused` for anything else (see the module docstring). ``source`` (a
    file, or a database URL without its password) names the checkpoints in messages."""

    def __init__(self, source: str = "a checkpoint") -> None:
        super().__init__(pickle_fallback=False, allowed_json_modules=None, allowed_msgpack_modules=STATE_TYPES)
        self.source = source

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind = data[0]
        if kind not in READABLE_KINDS:
            raise CheckpointRefused(f"{self.source} holds a value serialised as {kind!r}, which kgagents does not "
                                    "read (a pickle could run code): refused")
        refused: list[str] = []
        token = _REFUSED.set(refused)
        try:
            value = super().loads_typed(data)
        except CheckpointRefused:
            raise
        except Exception as exc:  # a damaged or foreign value: no part of it is used
            raise CheckpointRefused(f"{self.source} holds a value kgagents cannot read ({type(exc).__name__}: "
                                    f"{str(exc)[:200]})") from exc
        finally:
            _REFUSED.reset(token)
        if refused:
            raise CheckpointRefused(refusal(self.source, refused))
        return value


def strict_serializer(source: str = "a checkpoint") -> StrictSerializer:
    """The serializer of every checkpointer kgagents builds (see the module docstring)."""
    return StrictSerializer(source)
