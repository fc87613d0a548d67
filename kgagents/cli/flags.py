"""The flags a workflow's context adds to ``ask`` and ``eval``, known without importing the workflow.

A workflow's settings are its context's fields (:class:`kgagents.nodes.context.BaseContext`), and the CLI shows
each as a flag (``--c-max``, ``--backend``, ...). The context classes live beside their nodes, which import
LangGraph, LangChain and the graph stores: seconds before a parser could list them. So the flags of every
registered workflow are also kept as plain data in ``workflow_flags.json`` beside this module, with a fingerprint
of the source files that declare each context (its class and its bases). The parser reads the file; a workflow
the file lacks, or whose fingerprint no longer matches its sources (a context edited in a checkout), has its flags
derived from its context as before, so the flags are always the context's own and only the speed differs.

``python -m kgagents.cli.flags`` writes the file again from the registered workflows (``make flags``); a test
fails while the committed file is not what it writes.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.machinery
import importlib.util
import json
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgagents.graphs import registry as workflow_registry
from kgagents.nodes.context import description_of

#: The committed flags of every registered workflow (written by :func:`write`).
CATALOGUE = Path(__file__).with_name("workflow_flags.json")
#: The kinds of value a flag converts its text to.
KINDS = ("bool", "int", "float", "str", "json")


@dataclass(frozen=True)
class Flag:
    """One context field as a command-line flag."""

    name: str
    """The field (the flag is ``--`` and the name with dashes)."""
    kind: str
    """What the text becomes (:data:`KINDS`): ``json`` is a JSON value, else the text itself."""
    nullable: bool
    """``null`` / ``none`` give None (an optional field)."""
    choices: tuple[str, ...] | None
    """The values a ``Literal`` field takes, else None."""
    help: str
    """The field's description, with its default."""


@dataclass(frozen=True)
class ContextFlags:
    """The flags of one workflow's context, and the fingerprint of the sources they were read from."""

    context: str
    """The context class's name (the title of the flags' group in ``--help``)."""
    flags: tuple[Flag, ...]
    sources: dict[str, str]
    """module -> sha256 of its source file, for the context class and each of its bases."""

    def as_json(self) -> dict[str, Any]:
        return {"context": self.context, "sources": self.sources,
                "flags": [{k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(f).items()}
                          for f in self.flags]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ContextFlags:
        flags = tuple(Flag(name=f["name"], kind=f["kind"], nullable=f["nullable"],
                           choices=None if f["choices"] is None else tuple(f["choices"]), help=f["help"])
                      for f in data["flags"])
        return cls(context=data["context"], flags=flags, sources=dict(data["sources"]))


def _kind(hint: Any) -> tuple[str, bool, tuple[str, ...] | None]:
    """``(kind, nullable, choices)`` of a field's type (anything the flags cannot type: a JSON value or text)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        if len(args) == 1:
            kind, _, choices = _kind(args[0])
            return kind, True, choices
        return "json", False, None
    if hint is bool:
        return "bool", False, None
    if hint in (int, float, str):
        return hint.__name__, False, None
    if typing.get_origin(hint) is typing.Literal:
        return "str", False, tuple(str(a) for a in args)
    return "json", False, None


def _source_hash(module: str) -> str | None:
    """sha256 of ``module``'s source file, without importing it or its packages (None: no such file).

    ``importlib.util.find_spec`` of a submodule imports its parent package, and a workflow package's
    ``__init__`` imports every step: the file is looked up along the parents' search paths instead."""
    spec = _find_without_importing(module)
    if spec is None or not spec.origin:
        return None
    try:
        return hashlib.sha256(Path(spec.origin).read_bytes()).hexdigest()
    except OSError:
        return None


def _find_without_importing(module: str) -> importlib.machinery.ModuleSpec | None:
    """Where ``module`` is, found through the search paths of its parent packages (those imported already
    give theirs; the others are looked up, not run)."""
    parts = module.split(".")
    spec: importlib.machinery.ModuleSpec | None = None
    for i in range(len(parts)):
        name = ".".join(parts[: i + 1])
        loaded = sys.modules.get(name)
        if loaded is not None and getattr(loaded, "__spec__", None) is not None:
            spec = loaded.__spec__
            continue
        try:
            if spec is None:
                spec = importlib.util.find_spec(name)  # a top-level name: nothing is imported
            else:
                locations = spec.submodule_search_locations
                if not locations:
                    return None
                spec = importlib.machinery.PathFinder.find_spec(name, list(locations))
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
    return spec


def flags_of(context: type) -> ContextFlags:
    """The flags of ``context``'s fields, read from the class itself."""
    try:
        hints = typing.get_type_hints(context)
    except (NameError, TypeError):  # a type only a type checker sees: the fields take JSON values or text
        hints = {}
    flags = []
    for spec in dataclasses.fields(context):
        kind, nullable, choices = _kind(hints.get(spec.name, Any))
        default = spec.default if spec.default is not dataclasses.MISSING else None
        help_text = description_of(spec).replace("%", "%%")
        if default is not None and not callable(default):
            help_text += f" (default: {default})"
        flags.append(Flag(name=spec.name, kind=kind, nullable=nullable, choices=choices, help=help_text))
    modules = dict.fromkeys(cls.__module__ for cls in context.__mro__ if cls is not object)
    sources = {module: _source_hash(module) or "" for module in modules}
    return ContextFlags(context=context.__name__, flags=tuple(flags), sources=sources)


def catalogue() -> dict[str, ContextFlags]:
    """The committed flags, by workflow (empty when the file is missing or unreadable: every workflow is then
    read from its context)."""
    try:
        data = json.loads(CATALOGUE.read_text(encoding="utf-8"))
        return {name: ContextFlags.from_json(entry) for name, entry in data.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def current(entry: ContextFlags) -> bool:
    """Whether the sources ``entry`` was read from are unchanged."""
    return all(_source_hash(module) == digest for module, digest in entry.sources.items())


def workflow_flags(name: str) -> ContextFlags:
    """The flags of the workflow ``name``: the committed ones while its context's sources are unchanged, else
    read from its context (importing the workflow)."""
    entry = catalogue().get(name)
    if entry is not None and current(entry):
        return entry
    return flags_of(workflow_registry.get(name).context)


def parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


_CONVERTERS: dict[str, Callable[[str], Any]] = {"bool": _parse_bool, "int": int, "float": float, "str": str,
                                                "json": parse_value}


def converter(flag: Flag) -> Callable[[str], Any]:
    """What turns the flag's text into the field's value."""
    convert = _CONVERTERS[flag.kind]
    if not flag.nullable:
        return convert

    def nullable(text: str) -> Any:
        return None if text.strip().lower() in ("null", "none") else convert(text)

    return nullable


def write(path: Path = CATALOGUE) -> Path:
    """Write the flags of every registered workflow to ``path`` (imports every workflow)."""
    data = {spec.name: flags_of(spec.context).as_json() for spec in workflow_registry.workflows()}
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    print(write(Path(sys.argv[1]) if len(sys.argv) > 1 else CATALOGUE))
