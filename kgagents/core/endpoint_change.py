"""What a resumed run or evaluation may change of the settings it started with: where its model is served, not
which model it is.

A run that stopped because its model could not be reached (a wrong ``--base-url`` or ``KGAGENTS_BASE_URL``, a
server that moved) continues at the corrected address: the same model answering from another place gives the
run the same meaning. Another model does not: the steps already taken were answered by the first one, and the
answer would be neither model's. So ``kgagents resume THREAD --base-url URL`` (and ``eval ... --retry-failed``
with a new ``--base-url``) are accepted, and a ``--model`` that names another model is refused with what to do
instead (:func:`model_change_refusal`).

Which key goes to the new address is not decided here: :mod:`kgagents.core.keys` sends a key only to the server
its variable names, whatever address a run is given.

This module is a leaf: it imports none of ours. Its decisions are pure functions of their arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ADDRESS_FIELDS", "address_change", "canonical_model", "model_change_refusal", "model_changes",
           "run_models", "same_but_address", "same_model"]

#: The settings that say where a model is served, and nothing of which model it is.
ADDRESS_FIELDS = ("base_url",)


def canonical_model(spec: Any) -> Any:
    """A model string as the model it names: ``openai:NAME`` is the bare ``NAME`` (a bare name is an
    OpenAI-compatible server's model, which the OpenAI client asks for by that name); anything else as it is."""
    if isinstance(spec, str):
        text = spec.strip()
        return text[len("openai:"):] if text.startswith("openai:") else text
    return spec


def same_model(first: Any, second: Any) -> bool:
    """Whether two model settings name the same model (:func:`canonical_model`); ``None`` only equals ``None``."""
    return canonical_model(first) == canonical_model(second)


def _is_model_field(name: str) -> bool:
    return name == "model" or name.endswith("_model")


def run_models(context: Mapping[str, Any], roles: Iterable[str], configured: Mapping[str, Any]) -> dict[str, Any]:
    """The model of each of ``roles`` in a run whose context values are ``context``: the role's own
    ``<role>_model``, else ``model``, else what the configuration gave the role (``configured``)."""
    return {role: context.get(f"{role}_model") or context.get("model") or configured.get(role) for role in roles}


def model_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The roles whose model ``after`` is another one than ``before`` (``role -> (before, after)``); a role whose
    model is not known on either side (``None``: none recorded, or none configured, which the run then reports
    itself) is no change."""
    return {role: (before.get(role), model) for role, model in after.items()
            if before.get(role) is not None and model is not None and not same_model(before.get(role), model)}


def model_change_refusal(thread_id: str, workflow: str, changes: Mapping[str, tuple[Any, Any]], *,
                         given: bool) -> str:
    """Why a resume of ``thread_id`` whose models would be other ones than the run's (``changes``: ``role ->
    (the run's, the resume's)``) is refused, and what to do instead; ``given``: the other model is the resume's
    ``--model`` (else the configuration now names it)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for role, (old, new) in changes.items():
        groups.setdefault((str(old), str(new)), []).append(role)
    roles = "; ".join(f"{', '.join(names)}: {old} -> {new}" for (old, new), names in groups.items())
    olds = ", ".join(sorted({str(old) for old, _ in changes.values()}))
    news = ", ".join(sorted({str(new) for _, new in changes.values()}))
    why = (f"resuming it with another model would change what the run means (its steps so far were answered by "
           f"{olds}, the rest would be {news}'s)")
    if given:
        return (f"thread {thread_id} was started with {olds} ({roles}): {why}. Start a new run with that model "
                f"(kgagents ask QUESTION --workflow {workflow} --model {news}); resume takes --model only to name "
                "the same model, and --base-url to reach it at another address")
    again = (f"kgagents resume {thread_id} --model {olds}, with --base-url URL where it is served now"
             if len({old for old, _ in changes.values()}) == 1 else "the configuration it started with")
    return (f"thread {thread_id} was started with {olds}, and your configuration now names {news} ({roles}): "
            f"{why}. Resume it with the model it started with ({again}), or start a new run")


def address_change(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The address settings (:data:`ADDRESS_FIELDS`) that differ between two settings (``name -> (before,
    after)``; ``None`` where one has none)."""
    return {name: (before.get(name), after.get(name)) for name in ADDRESS_FIELDS
            if before.get(name) != after.get(name)}


def same_but_address(before: Any, after: Any, *, models: bool = False) -> bool:
    """Whether two settings (a results folder's ``context``, or its ``models`` with ``models``: a mapping of roles
    to models) are the same once their addresses (:data:`ADDRESS_FIELDS`) are left out, models compared as the
    models they name (:func:`same_model`). Anything but two mappings: equal or not."""
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return bool(before == after)
    for key in (set(before) | set(after)) - set(ADDRESS_FIELDS):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if (models or _is_model_field(str(key))) and isinstance(old, str) and isinstance(new, str) \
                and same_model(old, new):
            continue
        return False
    return True
