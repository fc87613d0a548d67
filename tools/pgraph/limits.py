"""The limits of a graph import: what a graph source file may hold before the import refuses it.

A graph file is data someone else may hand over: a few megabytes of gzip can expand to gigabytes, one line can
have no end, a JSON value can nest a million levels deep. Every loader reads through these limits, so a hostile
file is refused with an error that names the file, the limit and how to raise it, and the import's memory stays
bounded whatever the file holds:

===================  ===================================  =======================================================
limit                variable (``graph import`` flag)      what it bounds
===================  ===================================  =======================================================
``max_mb``           ``KGAGENTS_GRAPH_MAX_MB``             text one source file may hold, after decompression
                     (``--max-mb``)                        (counted while it is read)
``max_ratio``        ``KGAGENTS_GRAPH_MAX_RATIO``          how many times its size on disk a compressed file may
                     (``--max-ratio``)                     expand (past the first :data:`RATIO_FLOOR_MB`)
``max_record_mb``    ``KGAGENTS_GRAPH_MAX_RECORD_MB``      one line, row or record (a GRBench node, a CRAG
                     (``--max-record-mb``)                 answer)
``max_document_mb``  ``KGAGENTS_GRAPH_MAX_DOCUMENT_MB``    a file that is parsed whole (ARK-V1 JSON and JSON
                     (``--max-document-mb``)               lines, CRAG calls)
``max_parse_mb``     ``KGAGENTS_GRAPH_MAX_PARSE_MB``       memory parsing one record, document or batch of table
                     (``--max-parse-mb``)                  rows may take, estimated from its text (or a Parquet
                                                           batch's values) before it is parsed
``max_depth``        ``KGAGENTS_GRAPH_MAX_DEPTH``          nesting of a JSON value (and of a Parquet column's
                     (``--max-depth``)                     type)
``max_nodes``        ``KGAGENTS_GRAPH_MAX_NODES``          distinct nodes of the graph
                     (``--max-nodes``)
``max_edges``        ``KGAGENTS_GRAPH_MAX_EDGES``          edges of the graph
                     (``--max-edges``)
===================  ===================================  =======================================================

The defaults take the largest graphs the project works with (GRBench's and STaRK's, CRAG's, ARK-V1's) with room
to spare, and keep a hostile file's import within about 1 GB of memory: a text parsed whole becomes many times
its size in objects (an empty JSON list is 3 characters and 64 bytes), so what a parse may take is bounded
apart from the text's size (:func:`parse_size`). The checks themselves are small pure functions
(:func:`json_depth`, :func:`size_limit_passed`, :func:`parse_size`) so that a mutation test can run over them.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TextIO

from kgagents.tools.pgraph.model import GraphFormatError

MB = 1 << 20
#: A compressed file may always expand to this many megabytes, whatever its ratio (small files compress well).
RATIO_FLOOR_MB = 64


class GraphLimitError(GraphFormatError):
    """A graph source goes past one of the import's limits (:class:`ImportLimits`)."""


@dataclass(frozen=True)
class ImportLimits:
    """The limits of one graph import (see the module documentation); :meth:`from_env` reads the variables."""

    max_mb: int = 65_536
    max_ratio: int = 100
    max_record_mb: int = 64
    max_document_mb: int = 64
    max_parse_mb: int = 256
    max_depth: int = 64
    max_nodes: int = 200_000_000
    max_edges: int = 2_000_000_000

    @classmethod
    def from_env(cls, **given: int | None) -> ImportLimits:
        """The limits from ``KGAGENTS_GRAPH_MAX_*`` (else the defaults), with the values ``given`` (flags of
        ``graph import``; ``None``: not given) over them. A value that is not a positive whole number is a clear
        error."""
        limits = cls()
        for f in fields(cls):
            variable = env_variable(f.name)
            raw = os.environ.get(variable, "").strip()
            if raw:
                limits = replace(limits, **{f.name: _positive(raw, variable)})
            value = given.get(f.name)
            if value is not None:
                limits = replace(limits, **{f.name: _positive(str(value), flag(f.name))})
        return limits

    def hint(self, name: str) -> str:
        """How to raise the limit ``name`` (a field), for an error message."""
        return f"raise it with {flag(name)} or {env_variable(name)}"


def env_variable(name: str) -> str:
    """The variable of the limit ``name``: ``max_record_mb`` -> ``KGAGENTS_GRAPH_MAX_RECORD_MB``."""
    return f"KGAGENTS_GRAPH_{name.upper()}"


def flag(name: str) -> str:
    """The ``graph import`` flag of the limit ``name``: ``max_record_mb`` -> ``--max-record-mb``."""
    return "--" + name.replace("_", "-")


def _positive(raw: str, where: str) -> int:
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise GraphFormatError(f"{where} must be a positive whole number, not {raw!r}")
    return value


# ----------------------------------------------------------------------------------------------------------
# Decompressed size
# ----------------------------------------------------------------------------------------------------------
def size_limit_passed(limits: ImportLimits, text_bytes: int, compressed_bytes: int | None) -> str | None:
    """The limit a source file has gone past once it has given ``text_bytes`` of text from
    ``compressed_bytes`` read off the disk (``None``: not compressed), or ``None``: ``max_mb``, or
    ``max_ratio`` for a compressed file that expands more than that many times (past the first
    :data:`RATIO_FLOOR_MB`, so a bomb is stopped there, whatever its size)."""
    if text_bytes > limits.max_mb * MB:
        return "max_mb"
    if compressed_bytes is not None and text_bytes > RATIO_FLOOR_MB * MB \
            and text_bytes > limits.max_ratio * max(1, compressed_bytes):
        return "max_ratio"
    return None


class _Counted(io.RawIOBase):
    """A binary stream that counts the bytes it gives and stops with a :class:`GraphLimitError` when
    :func:`size_limit_passed` says so (``disk``: the compressed file under a gzip stream, else ``None``)."""

    def __init__(self, raw: Any, disk: Any, path: Path, limits: ImportLimits) -> None:
        super().__init__()
        self._raw, self._disk, self._path, self._limits = raw, disk, path, limits
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer) or 0
        self.count += n
        passed = size_limit_passed(self._limits, self.count, None if self._disk is None else self._disk.tell())
        if passed is not None:
            raise GraphLimitError(self._message(passed))
        return n

    def _message(self, passed: str) -> str:
        limits, path = self._limits, self._path
        if passed == "max_ratio":
            return (f"{path}: expands more than {limits.max_ratio} times: {self.count / MB:,.0f} MB of text from "
                    f"{self._disk.tell() / MB:,.1f} MB on disk, refused as a decompression bomb "
                    f"({limits.hint('max_ratio')})")
        return (f"{path}: more than {limits.max_mb:,} MB of text{' once decompressed' if self._disk else ''}, the "
                f"limit of a graph source file ({limits.hint('max_mb')})")

    def close(self) -> None:
        try:
            self._raw.close()
            if self._disk is not None:
                self._disk.close()
        finally:
            super().close()


def open_limited(path: Path, limits: ImportLimits) -> TextIO:
    """A source file as UTF-8 text, gunzipped when its name ends in ``.gz``, that stops with a
    :class:`GraphLimitError` once it goes past ``max_mb`` or ``max_ratio`` (:func:`size_limit_passed`)."""
    disk = open(path, "rb")  # noqa: SIM115 - closed with the text stream
    try:
        if path.suffix == ".gz":
            counted = _Counted(gzip.GzipFile(fileobj=disk, mode="rb"), disk, path, limits)
        else:
            counted = _Counted(disk, None, path, limits)
    except BaseException:
        disk.close()
        raise
    return io.TextIOWrapper(io.BufferedReader(counted, buffer_size=1 << 20), encoding="utf-8")


def read_document(path: Path, limits: ImportLimits, what: str) -> str:
    """The whole text of a file that is parsed in one piece (``what``: the kind of file with its article, for
    errors): a plain
    file (parsing it takes many times its size in memory, so no compressed one), refused before it is read
    when it is larger than ``max_document_mb``."""
    if path.suffix == ".gz":
        raise GraphFormatError(f"{path}: {what} is read as plain JSON; decompress it first (gunzip)")
    size = path.stat().st_size
    if size > limits.max_document_mb * MB:
        raise GraphLimitError(f"{path}: {size / MB:,.1f} MB, over the {limits.max_document_mb:,} MB {what} may "
                              f"have: it is parsed whole ({limits.hint('max_document_mb')})")
    with open(path, encoding="utf-8") as f:
        text = f.read(limits.max_document_mb * MB + 1)  # a file that grew since: no more than the limit
    if len(text) > limits.max_document_mb * MB:
        raise GraphLimitError(f"{path}: over the {limits.max_document_mb:,} MB {what} may have: it is parsed "
                              f"whole ({limits.hint('max_document_mb')})")
    return text


# ----------------------------------------------------------------------------------------------------------
# Lines and records
# ----------------------------------------------------------------------------------------------------------
def bounded_lines(f: TextIO, path: Path, limits: ImportLimits) -> Iterator[str]:
    """The lines of ``f`` (with their line ends), each at most ``max_record_mb``: a longer one is a
    :class:`GraphLimitError` naming the line, raised before more of it is read."""
    most = limits.max_record_mb * MB
    number = 0
    while True:
        line = f.readline(most + 1)
        if not line:
            return
        number += 1
        if len(line) > most:
            raise GraphLimitError(f"{path}, line {number}: longer than {limits.max_record_mb:,} MB, the limit of "
                                  f"one line or record ({limits.hint('max_record_mb')})")
        yield line


#: A JSON string literal, to its closing quote or, when it has none, to the end of the text. The quantifiers are
#: possessive and the closing quote optional, so a match never fails once it started: each character is read
#: once (a string that never closes is one match to its end, not a scan to the end from each of its escaped
#: quotes). With the brackets, the tokens :func:`json_depth` reads.
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
_DEPTH_TOKENS = re.compile(_JSON_STRING.pattern + r"|[\[\]{}]", re.DOTALL)


def json_depth(text: str) -> int:
    """How deeply the JSON text ``text`` nests (``1`` for ``[]``, ``0`` for a scalar), from its brackets outside
    string literals: read before the text is parsed, so that a nesting bomb never reaches the parser; in one pass
    over the text (:data:`_JSON_STRING`) that keeps no copy of it. Brackets inside a string that never closes
    are not counted: the parser fails at that string before it could nest into them."""
    depth = deepest = 0
    for token in _DEPTH_TOKENS.finditer(text):
        char = text[token.start()]
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def check_depth(text: str, where: str, limits: ImportLimits) -> None:
    """Refuse JSON text nested deeper than ``max_depth`` (the count of its opening brackets bounds its depth:
    most texts are let through on that alone)."""
    if text.count("[") + text.count("{") <= limits.max_depth:
        return
    if json_depth(text) > limits.max_depth:
        raise GraphLimitError(f"{where}: JSON nested deeper than {limits.max_depth} levels "
                              f"({limits.hint('max_depth')})")


#: Memory parsing takes beyond the text, per value it may hold: a Python object and its place in a container.
#: JSON (``json.loads``) and table rows (``csv``): measured at most about 70 bytes (a dict member with a new key;
#: a string of two astral characters); a Python literal (``ast.literal_eval``, CRAG's saved outputs) goes
#: through a syntax tree: about 1,100 bytes.
VALUE_BYTES = 80
LITERAL_VALUE_BYTES = 1200
#: What a decoded Parquet value counts towards a table's text (``max_mb``, ``max_ratio``) beyond its bytes: about
#: what a separator, quotes or a key take around it in a text format.
TEXT_VALUE_BYTES = 8
#: The characters that may come before a value of JSON text (a Python literal adds ``(``).
JSON_SEPARATORS = ",:[{"


def parse_size(text: str, separators: str = JSON_SEPARATORS, per_value: int = VALUE_BYTES) -> int:
    """An upper bound of the memory that parsing ``text`` takes, counted before it is parsed: the text's own size
    and ``per_value`` bytes for each value it may hold, one more than the ``separators`` that may come before a
    value (``,``, ``:``, ``[`` and ``{`` in JSON; the delimiter of a table row), inside strings too."""
    return sys.getsizeof(text) + per_value * (1 + sum(text.count(char) for char in separators))


def check_parse_size(text: str, where: str, limits: ImportLimits, separators: str = JSON_SEPARATORS,
                     per_value: int = VALUE_BYTES) -> None:
    """Refuse a text whose parse may take more than ``max_parse_mb`` (:func:`parse_size`)."""
    size = parse_size(text, separators, per_value)
    if size > limits.max_parse_mb * MB:
        raise parse_too_large(where, size, limits)


def parse_too_large(where: str, size: int, limits: ImportLimits) -> GraphLimitError:
    """The error of a record, document or batch of rows whose parse would take ``size`` bytes."""
    return GraphLimitError(f"{where}: parsing it could take {size / MB:,.0f} MB of memory, over the "
                           f"{limits.max_parse_mb:,} MB one record, document or batch of rows may take "
                           f"({limits.hint('max_parse_mb')})")


def loads(text: str, where: str, limits: ImportLimits) -> Any:
    """``json.loads`` of one record or document after :func:`check_depth` and :func:`check_parse_size`; invalid
    JSON is a :class:`GraphFormatError` naming ``where``."""
    check_parse_size(text, where, limits)  # first: it only counts, and bounds what the nesting check reads
    check_depth(text, where, limits)
    try:
        return json.loads(text)
    except RecursionError as exc:  # deeper than Python's parser goes, under a raised max_depth
        raise GraphLimitError(f"{where}: JSON nested too deeply for the parser ({limits.hint('max_depth')})"
                              ) from exc
    except ValueError as exc:
        raise GraphFormatError(f"{where}: not valid JSON: {exc}") from exc


def record_too_large(where: str, limits: ImportLimits) -> GraphLimitError:
    """The error of a record (a JSON value read from a stream) larger than ``max_record_mb``."""
    return GraphLimitError(f"{where}: a record larger than {limits.max_record_mb:,} MB, the limit of one line or "
                           f"record ({limits.hint('max_record_mb')})")


def type_depth(arrow_type: Any) -> int:
    """How deeply a Parquet (Arrow) column type nests: ``0`` for a scalar, one more per list, struct or map."""
    children = [arrow_type.field(i).type for i in range(getattr(arrow_type, "num_fields", 0))]
    value_type = getattr(arrow_type, "value_type", None)
    if value_type is not None and not children:
        children = [value_type]
    if not children:
        return 0
    return 1 + max(type_depth(child) for child in children)
