"""GRBench's ``graph.json`` (Graph-CoT): ``{"<type>_nodes": {id: {"features": {...}, "neighbors": {edge_type:
[ids]}}}}``, read as a stream (a multi-GB file never sits in memory), ``.json.gz`` too.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from kgagents.tools.pgraph.build import GraphBuilder
from kgagents.tools.pgraph.formats.common import (
    GraphFormat,
    Progress,
    Source,
    name_from_features,
    open_text,
)
from kgagents.tools.pgraph.limits import (
    MB,
    GraphLimitError,
    ImportLimits,
    check_depth,
    check_parse_size,
    record_too_large,
)
from kgagents.tools.pgraph.model import GraphFormatError


class _JsonStream:
    """Reads the members of JSON objects one at a time from a text file that may be larger than memory."""

    def __init__(self, f: TextIO, name: str, progress: Progress | None = None, chunk: int = 1 << 22,
                 limits: ImportLimits | None = None) -> None:
        self.limits = limits or ImportLimits.from_env()
        self.f = f
        self.name = name
        self.buf = ""
        self.pos = 0
        self.consumed = 0  # characters dropped from the front of the buffer
        self.eof = False
        self.chunk = chunk
        self.progress = progress
        self.decoder = json.JSONDecoder()

    def _more(self, at_least: int = 0) -> bool:
        if self.eof:
            return False
        self.consumed += self.pos
        self.buf = self.buf[self.pos:]
        self.pos = 0
        data = self.f.read(max(self.chunk, at_least))
        if not data:
            self.eof = True
            return False
        self.buf += data
        if self.progress is not None:
            self.progress(self.consumed + len(self.buf))
        return True

    def _fail(self, message: str, at: int | None = None) -> GraphFormatError:
        where = self.consumed + (self.pos if at is None else at)
        return GraphFormatError(f"{self.name}: {message} (at character {where})")

    def skip_ws(self) -> str:
        """The next non-space character (not consumed); ``""`` at the end of the file."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def expect(self, char: str) -> None:
        if self.skip_ws() != char:
            found = self.buf[self.pos:self.pos + 20] or "the end of the file"
            raise self._fail(f"expected {char!r}, found {found!r}")
        self.pos += 1

    def value(self, where: str = "") -> Any:
        """The next JSON value, parsed once the buffer holds all of it: at most ``max_record_mb`` of text,
        nested at most ``max_depth`` deep (``where``: the value's place, for errors)."""
        self.skip_ws()
        limits = self.limits
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # the value may go on in the next chunk: the error is at the end of the buffer, or a string runs
                # to it (its error points at the string's start, which may lie far back)
                near_end = exc.pos >= len(self.buf) - 64 or exc.msg.startswith("Unterminated string")
                offset = exc.pos - self.pos  # from the value's start, where a refill leaves the buffer's start
                if near_end and len(self.buf) - self.pos > limits.max_record_mb * MB:
                    raise record_too_large(f"{self.name}{where}", limits) from None
                if near_end and self._more(len(self.buf)):
                    # a value longer than a chunk: what the next try parses, and what may follow it, is bounded
                    # (each refill doubles the buffer: counting it each time reads the text a few times at most)
                    check_parse_size(self.buf[self.pos:], f"{self.name}{where}", limits)
                    continue
                raise self._fail(f"not valid JSON: {exc.msg}", self.pos + offset) from exc
            except RecursionError as exc:
                raise GraphLimitError(f"{self.name}{where}: JSON nested too deeply for the parser "
                                      f"({limits.hint('max_depth')})") from exc
            # a number at the very end of the buffer may continue in the next chunk
            if end >= len(self.buf) and not self.eof and isinstance(value, (int, float)) and self._more():
                continue
            if self.buf.count("[", self.pos, end) + self.buf.count("{", self.pos, end) > limits.max_depth:
                check_depth(self.buf[self.pos:end], f"{self.name}{where}", limits)
            self.pos = end
            return value

    def members(self) -> Iterator[str]:
        """Enter an object and yield each member's key; the caller reads the value before asking for the next."""
        self.expect("{")
        if self.skip_ws() == "}":
            self.pos += 1
            return
        while True:
            key = self.value()
            if not isinstance(key, str):
                raise self._fail("expected an object key")
            self.expect(":")
            yield key
            char = self.skip_ws()
            if char == ",":
                self.pos += 1
                continue
            if char == "}":
                self.pos += 1
                return
            raise self._fail(f"expected ',' or '}}' after a member, found {char or 'the end of the file'!r}")


def _grbench_file(path: Path) -> Path:
    if path.is_dir():
        for candidate in ("graph.json", "graph.json.gz"):
            if (path / candidate).is_file():
                return path / candidate
        raise GraphFormatError(f"{path}: no graph.json in this folder (GRBench keeps one per domain)")
    return path


def load_grbench(builder: GraphBuilder, path: Path, *, progress: Progress | None = None, **_: Any) -> None:
    """A GRBench ``graph.json``: every ``<type>_nodes`` member is a node type; neighbours become edges whose
    relation is the neighbour type (GRBench lists both directions, e.g. paper→author and author→paper)."""
    path = _grbench_file(path)
    try:
        with open_text(path, builder.limits) as f:
            stream = _JsonStream(f, str(path), progress, limits=builder.limits)
            types = 0
            for type_key in stream.members():
                node_type = type_key.removesuffix("_nodes")
                types += 1
                for node_id in stream.members():
                    node = stream.value(f": {type_key}[{node_id!r}]")
                    if not isinstance(node, dict):
                        raise GraphFormatError(f"{path}: {type_key}[{node_id!r}] must be an object with "
                                               f"\"features\" and \"neighbors\", got {type(node).__name__}")
                    features = node.get("features") or {}
                    neighbours = node.get("neighbors") or {}
                    if not isinstance(features, dict) or not isinstance(neighbours, dict):
                        raise GraphFormatError(f"{path}: {type_key}[{node_id!r}]: \"features\" and \"neighbors\" "
                                               "must be objects")
                    builder.add_node(node_id, type=node_type, name=name_from_features(features, node_id),
                                     features=features)
                    for edge_type, ids in neighbours.items():
                        if isinstance(ids, dict):
                            for other, weight in ids.items():
                                builder.add_edge(node_id, edge_type, str(other),
                                                 None if weight is None else {"weight": weight})
                        elif isinstance(ids, list):
                            builder.add_edges(node_id, edge_type, (str(i) for i in ids))
                        else:
                            raise GraphFormatError(f"{path}: {type_key}[{node_id!r}].neighbors[{edge_type!r}] "
                                                   f"must be a list of ids, got {type(ids).__name__}")
            if stream.skip_ws():
                raise stream._fail("unexpected content after the graph object")
            if types == 0:
                raise GraphFormatError(f"{path}: the graph has no \"<type>_nodes\" members")
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise GraphFormatError(f"cannot read the GRBench graph {path}: {exc}") from exc


def detect(source: Source) -> bool:
    """A folder holding ``graph.json`` (a GRBench domain), or a JSON object whose first key names node type."""
    if source.is_dir:
        return "graph.json" in source.names or "graph.json.gz" in source.names
    return not source.table and re.match(r'\{\s*"[^"]*_nodes"\s*:', source.head) is not None


def files(path: Path) -> list[Path]:
    return [_grbench_file(path)] if path.is_dir() else [path]


FORMAT = GraphFormat("grbench", detect, load_grbench, files)
