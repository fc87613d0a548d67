"""What a recording keeps of the command that made it, and what a replay takes from a recording: plain values.

A recording (``--record``) travels: in a results folder, in a bundle, from another machine. It is data, so it
never chooses what runs on the machine that replays it: no command line, no path, no URL, no model server, no
graph. What it keeps is the workflow's own settings, each of a known kind and checked as such
(:data:`ASK_OPTIONS`, :data:`EVAL_OPTIONS`, :func:`plain_context`):

- the workflow (a registered name), the dataset, split, preset, protocol and scorer (names), the question;
- counts, numbers and switches (``--limit``, ``--runs``, ``--temperature``, ``--seed``, ...);
- the context fields whose values are numbers, booleans or one of the field's choices (``Literal``), and the
  few text fields that only name things of the code (:data:`NAME_FIELDS`: a domain, tool names, the in-process
  NetworkX backend; a database backend reaches a server, which the replaying user chooses);
- chat models by plain name (``openai:gpt-4o``, a bare name for the user's own server), never a
  ``scripted:/path`` (it reads a file) nor anything with a server in it.

Everything else is the user's on the machine that replays, given as flags of ``kgagents replay``
(:data:`USER_FLAGS`: ``--data``, ``--graph``, ``--attach``, ``--model``, ``--base-url``, ``--set``, ...): a path, a
URL (``kg_url``, ``base_url``, a ``--checkpointer``), an embedding model, the work folder, the limits that protect
the machine (``allow_weak_sandbox`` and the sandbox's limits), ``--processes``, ``--cache``, ``--out``. A
recording keeps only their names and, for the user's information, their values without credentials
(:func:`kgagents.core.redact.scrub`); a replay never uses them and says which it left out.

The functions here are pure: the same checks run when a recording is written and when one is read (a recording
from someone else may hold anything).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kgagents.core.redact import scrub

__all__ = [
    "ASK_OPTIONS",
    "EVAL_OPTIONS",
    "HOST_LIMITS",
    "NAME_FIELDS",
    "USER_FLAGS",
    "Settings",
    "chat_model_fields",
    "check_option",
    "is_plain_model",
    "plain_context",
    "settings_from",
]

Check = Callable[[Any], bool]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,119}")
_MODEL = re.compile(r"(?:(?:openai|anthropic|ollama):[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}"
                    r"|[A-Za-z0-9][A-Za-z0-9._/@+-]{0,199})")
_VARIANTS = re.compile(r"[a-z0-9_:, -]{1,200}")
_LARGEST = 10**9
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def is_flag(value: Any) -> bool:
    return isinstance(value, bool)


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= _LARGEST


def is_count(value: Any) -> bool:
    return is_integer(value) and value >= 0


def is_number(value: Any) -> bool:
    return (is_integer(value) or isinstance(value, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and abs(value) <= _LARGEST


def is_name(value: Any) -> bool:
    """A name of the code's own (a dataset, split, preset, scorer, backend): no path, no URL."""
    return isinstance(value, str) and bool(_NAME.fullmatch(value)) and ".." not in value


def is_text(value: Any) -> bool:
    """Text a run reads as text (a question): a string without control characters."""
    return isinstance(value, str) and len(value) <= 100_000 and not _CONTROL.search(value)


def is_label(value: Any) -> bool:
    """A short label the code only compares or shows (an item id, a type or relation name, a tool's name)."""
    return is_text(value) and 0 < len(value) <= 200


def is_labels(value: Any) -> bool:
    return isinstance(value, list) and len(value) <= 100_000 and all(is_label(v) for v in value)


def is_plain_model(value: Any) -> bool:
    """A chat model by plain name: ``openai:``, ``anthropic:`` or ``ollama:`` and a model name, or a bare name (for
    the server the user configures); never ``scripted:/path`` (it reads a file) or another provider."""
    return isinstance(value, str) and bool(_MODEL.fullmatch(value)) and ".." not in value and "//" not in value


def is_in_process_backend(value: Any) -> bool:
    """The task-KG backend that reaches no server: NetworkX (any other is a database the replaying user chooses)."""
    return value == "networkx"


def is_variants(value: Any) -> bool:
    """KGoT fusion's ``backend:mode`` variants, every one on the in-process backend."""
    return isinstance(value, str) and bool(_VARIANTS.fullmatch(value)) and all(
        is_in_process_backend(part.strip().partition(":")[0]) for part in value.split(",") if part.strip())


#: ``kgagents ask`` options a recording keeps (the workflow is kept apart), with the check of each.
ASK_OPTIONS: dict[str, Check] = {"question": is_text, "preset": is_name, "fusion": is_variants,
                                 "query_time": is_label, "quiet": is_flag}
#: ``kgagents eval`` options a recording keeps.
EVAL_OPTIONS: dict[str, Check] = {
    "dataset": is_name, "split": is_name, "preset": is_name, "limit": is_count, "ids": is_labels,
    "sample": is_number, "sample_seed": is_integer, "runs": is_count, "temperature": is_number, "seed": is_integer,
    "protocol": is_name, "scorer": is_name, "grader_model": is_plain_model, "retry_failed": is_flag,
    "eval_budget_usd": is_number, "eval_budget_tokens": is_count, "no_progress": is_flag, "no_report": is_flag}
#: The options a replay takes from its user only, with the flag of ``kgagents replay`` that gives each (the
#: others, such as ``--cache``, ``--processes`` or ``--dask``, a replay does not use at all).
USER_FLAGS: dict[str, str] = {"attach": "--attach", "graph": "--graph", "page": "--page",
                              "kgot_thread": "--kgot-thread", "data": "--data", "checkpointer": "--checkpointer",
                              "thread": "--into", "out": "--into", "concurrency": "--concurrency"}
#: Context fields that guard this machine, whatever their type: a replay uses the replaying user's.
HOST_LIMITS = frozenset({"allow_weak_sandbox", "sandbox_timeout_s", "sandbox_memory_mb", "sandbox_call_quota_mb",
                         "sandbox_call_quota_files", "sandbox_run_quota_mb", "sandbox_run_quota_files"})
#: Text context fields that only name things of the code (never a path, a URL or a server), with their check.
NAME_FIELDS: dict[str, Check] = {"backend": is_in_process_backend, "domain": is_name, "variants": is_variants,
                                 "embedding_cache": lambda v: v in ("memory", "disk", "off"), "tools": is_labels,
                                 "domains": is_labels, "entity_types": is_labels, "relation_types": is_labels,
                                 "candidate_types": is_labels}


def check_option(command: str, name: str, value: Any) -> bool:
    """Whether a recording may give ``command``'s option ``name`` the value ``value``."""
    checks = ASK_OPTIONS if command == "ask" else EVAL_OPTIONS
    check = checks.get(name)
    return check is not None and check(value)


def chat_model_fields(context: type) -> set[str]:
    """The context's fields that hold a chat model: ``model`` and ``<role>_model`` of its roles."""
    roles = [*getattr(context, "ROLES", ()), *getattr(context, "LEGACY_ROLES", {})]
    return {"model", *(f"{role}_model" for role in roles)}


def _typed_check(hint: Any) -> Check | None:
    """The check of a field whose type is a number, a boolean or a choice (optionally ``None``); ``None`` for any
    other type."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        inner = [a for a in args if a is not type(None)]
        check = _typed_check(inner[0]) if len(inner) == 1 else None
        return None if check is None else (lambda v: v is None or check(v))
    if hint is bool:
        return is_flag
    if hint is int:
        return is_integer
    if hint is float:
        return is_number
    if typing.get_origin(hint) is typing.Literal:
        return lambda v: isinstance(v, str | int | bool) and v in args
    return None


def plain_context(context: type, values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The context ``values`` a recording may carry for a workflow whose context is the dataclass ``context``, and
    the others with the reason each is left out (see the module docstring)."""
    try:
        hints = typing.get_type_hints(context)
    except (NameError, TypeError):  # a type only a type checker sees: no field is taken by its type
        hints = {}
    names = {spec.name for spec in dataclasses.fields(context)}
    models = chat_model_fields(context)
    kept: dict[str, Any] = {}
    left: dict[str, str] = {}
    for name, value in values.items():
        if not isinstance(name, str) or (name not in names and name not in models):
            left[str(name)] = "not a setting of this workflow"
        elif name in HOST_LIMITS:
            left[name] = "a limit that protects this machine: the replay keeps yours"
        elif name in models:
            if is_plain_model(value):
                kept[name] = value
            else:
                left[name] = "a model that reads a file or names a server: give it with --model or --set"
        else:
            check = NAME_FIELDS.get(name) or _typed_check(hints.get(name))
            if check is not None and check(value):
                kept[name] = value
            else:
                left[name] = "a path, URL, server or object, which the replay's user chooses: give it with --set " \
                             "if the replay needs it"
    return kept, left


@dataclass
class Settings:
    """What a recording says about the command that made it, checked (see the module docstring)."""

    command: str
    """``ask`` or ``eval``."""
    workflow: str
    options: dict[str, Any] = field(default_factory=dict)
    """The command's options, by their ``argparse`` names (:data:`ASK_OPTIONS`, :data:`EVAL_OPTIONS`)."""
    context: dict[str, Any] = field(default_factory=dict)
    """The workflow's context values (:func:`plain_context`)."""
    left_out: dict[str, dict[str, str]] = field(default_factory=dict)
    """What the command also had that a replay does not take from the recording: name -> ``{"recorded": its value
    without credentials, for the user's information, "why": why it is left out}``."""

    def leave_out(self, name: str, value: Any, why: str) -> None:
        self.left_out[name] = {"recorded": shown(value), "why": why}

    def as_json(self) -> dict[str, Any]:
        """What a recording's ``meta`` keeps (``settings``)."""
        return {"command": self.command, "workflow": self.workflow, "options": self.options, "context": self.context,
                "left_out": self.left_out}


def shown(value: Any) -> str:
    """A recorded value for a message: without credentials, control characters escaped, cut short."""
    text = json.dumps(scrub(value), ensure_ascii=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def settings_from(command: str, workflow: Any, options: Mapping[str, Any], context_values: Mapping[str, Any],
                  contexts: Mapping[str, type], *, users: Mapping[str, Any] | None = None) -> Settings:
    """Check what a recording gives (or what a command being recorded had): ``workflow`` must be one of
    ``contexts`` (workflow name -> its context class), each option one of the command's with a value of its kind,
    each context value one :func:`plain_context` keeps; ``users``: the options that are the user's only (recorded as
    left out). Raises ``ValueError`` for a command or workflow that is not one of kgagents'."""
    if command not in ("ask", "eval"):
        raise ValueError(f"the recording was made by {command!r}, not by `kgagents ask` or `kgagents eval`")
    if not isinstance(workflow, str) or workflow not in contexts:
        raise ValueError(f"{shown(workflow)} is not one of kgagents' workflows ({', '.join(sorted(contexts))})")
    settings = Settings(command, workflow)
    for name, value in options.items():
        if value is None or value is False or value == []:
            continue
        if check_option(command, name, value):
            settings.options[name] = value
        else:
            settings.leave_out(str(name), value, "not taken from a recording")
    fused = command == "ask" and "fusion" in settings.options and "fusion" in contexts
    kept, left = plain_context(contexts["fusion" if fused else workflow], context_values)
    settings.context = kept
    for name, why in left.items():
        settings.leave_out(name, context_values.get(name), why)
    for name, value in (users or {}).items():
        if value not in (None, False, []):
            settings.leave_out(name, value, f"yours to give ({USER_FLAGS.get(name, 'a flag of kgagents replay')})")
    return settings
