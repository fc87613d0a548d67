"""What the graph formats share: the progress callback, opening a (gzipped) text file, the source a detector
looks at, and the description each format module gives of itself (:class:`GraphFormat`)."""

from __future__ import annotations

import gzip
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

from kgagents.tools.pgraph.limits import ImportLimits, open_limited
from kgagents.tools.pgraph.model import GraphFormatError

Progress = Callable[[int], None]
"""Called with the number of source bytes read so far (for a progress bar)."""

#: File suffixes that only the ``triples`` format reads (whatever the file's first bytes).
TABLE_SUFFIXES = (".tsv", ".tsv.gz", ".txt", ".csv", ".csv.gz")


def open_text(path: Path, limits: ImportLimits | None = None) -> TextIO:
    """A source file as text (UTF-8), gunzipped when its name ends in ``.gz``; read within ``limits`` when they
    are given (:func:`~kgagents.tools.pgraph.limits.open_limited`: what a loader reads whole)."""
    if limits is not None:
        return open_limited(path, limits)
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def peek(path: Path, size: int = 4096) -> str:
    """The first ``size`` characters of a source file, without a byte-order mark or leading white space."""
    try:
        with open_text(path) as f:
            return f.read(size).lstrip("\ufeff \t\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphFormatError(f"cannot read the graph source {path}: {exc}") from exc


NAME_FEATURES = ("name", "title", "full_name", "case_name", "original_title")


def name_from_features(features: Mapping[str, Any], fallback: str) -> str:
    for key in NAME_FEATURES:
        value = features.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return fallback


@dataclass(frozen=True)
class Source:
    """A graph source as the detectors see it: a folder (its entries' names) or a file (its first bytes)."""

    path: Path

    @cached_property
    def is_dir(self) -> bool:
        return self.path.is_dir()

    @cached_property
    def names(self) -> frozenset[str]:
        """The names in a folder (empty for a file)."""
        return frozenset(p.name for p in self.path.iterdir()) if self.is_dir else frozenset()

    @cached_property
    def table(self) -> bool:
        """A file whose name says it is a table of triples (``.tsv``, ``.tsv.gz``, ``.txt``)."""
        return not self.is_dir and "".join(self.path.suffixes[-2:]).lower().endswith(TABLE_SUFFIXES)

    @cached_property
    def head(self) -> str:
        """A file's first bytes as text (empty for a folder)."""
        return "" if self.is_dir else peek(self.path)

    @property
    def first_line(self) -> str:
        return self.head.split("\n", 1)[0]


@dataclass(frozen=True)
class GraphFormat:
    """One graph format: its name (``--format``), whether a source is in it, how to load it, and the files a
    source of it consists of (for fingerprints; ``None``: the file itself, or every file of the folder)."""

    name: str
    detect: Callable[[Source], bool]
    load: Callable[..., None]
    files: Callable[[Path], list[Path]] | None = None
