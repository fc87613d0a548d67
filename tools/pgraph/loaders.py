"""Loaders: source files of static KGs streamed into a :class:`~kgagents.tools.pgraph.build.GraphBuilder`.

=========  ===================================================================================================
format     source
=========  ===================================================================================================
ark        ARK-V1 graphs: ``[[head, tail, {"relation": r, qualifier: value}], ...]``, as a bare edge list, one
           record ``{"question", "graph"}``, a list of records or JSON lines of records (one record by ``id``,
           or all of them merged into one graph)
grbench    GRBench ``graph.json`` (Graph-CoT): ``{"<type>_nodes": {id: {"features": {...}, "neighbors":
           {edge_type: [ids]}}}}``, read as a stream (a multi-GB file never sits in memory), ``.json.gz`` too
stark      a STaRK-style semi-structured KB: a folder with a node table (``nodes.jsonl|csv|parquet``: ``id``,
           ``type``, ``name``, ``text`` = the node's document, other columns become features) and an edge list
           (``edges.jsonl|csv|tsv|parquet``: ``src``, ``relation``, ``dst``), or STaRK's released processed
           folder of Amazon, MAG or PrimeKG (``skb/<name>``, its ``processed/`` or Amazon's
           ``processed/cache/brand-category-color``: see :mod:`kgagents.tools.pgraph.stark`; pickles can run code: load
           only files you trust)
triples    TSV (``head⇥relation⇥tail[⇥qualifiers as JSON]``) or JSON lines (``{"head", "relation", "tail",
           "qualifiers"}`` or ``[head, relation, tail]``)
crag       CRAG's mock KG API answers saved as ``{"calls": [{"call": "api.fn(args)", "output_repr...": ...}]}``,
           turned into a graph: the argument is the subject, the function the relation, the answer the object(s)
=========  ===================================================================================================

Every loader raises :class:`~kgagents.tools.pgraph.model.GraphFormatError` naming the file and the place that is wrong.
"""

from __future__ import annotations

import ast
import csv
import gzip
import io
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from kgagents.core.extras import MissingExtra, require
from kgagents.tools.pgraph.build import GraphBuilder
from kgagents.tools.pgraph.model import GraphFormatError
from kgagents.tools.pgraph.stark import find_processed, load_processed

FORMATS = ("ark", "grbench", "stark", "triples", "crag")

Progress = Callable[[int], None]
"""Called with the number of source bytes read so far (for a progress bar)."""


# ----------------------------------------------------------------------------------------------------------
# Detection
# ----------------------------------------------------------------------------------------------------------
def source_files(path: Path, fmt: str) -> list[Path]:
    """The files a source consists of (for fingerprints)."""
    if path.is_dir():
        if fmt == "grbench":
            return [_grbench_file(path)]
        processed = find_processed(path) if fmt == "stark" else None
        if processed is not None:
            return sorted(p for p in processed.iterdir() if p.is_file() and not p.name.startswith("."))
        return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    return [path]


def detect_format(path: str | Path) -> str:
    """The format of a source, from its layout and first bytes; a clear error when it is none of them."""
    path = Path(path)
    if not path.exists():
        raise GraphFormatError(f"no such graph source: {path}")
    if path.is_dir():
        names = {p.name for p in path.iterdir()}
        if "graph.json" in names or "graph.json.gz" in names:
            return "grbench"
        if find_processed(path) is not None or any(n.startswith("nodes.") for n in names):
            return "stark"
        raise GraphFormatError(f"{path}: a folder with neither graph.json (GRBench) nor nodes.* + edges.* / "
                               "node_info.pkl (STaRK-style); give --format")
    suffixes = "".join(path.suffixes[-2:]).lower()
    if suffixes.endswith((".tsv", ".tsv.gz", ".txt")):
        return "triples"
    head = _peek(path)
    if head.startswith("["):
        return "triples" if _triple_line(head.split("\n", 1)[0]) else "ark"
    if head.startswith("{"):
        if re.match(r'\{\s*"[^"]*_nodes"\s*:', head):
            return "grbench"
        if re.match(r'\{\s*"(source|calls)"', head) and '"calls"' in head:
            return "crag"
        if '"head"' in head.split("\n", 1)[0] and '"relation"' in head.split("\n", 1)[0]:
            return "triples"
        return "ark"
    raise GraphFormatError(f"{path}: cannot tell the graph format from its first bytes; give --format "
                           f"({', '.join(FORMATS)})")


def _triple_line(line: str) -> bool:
    """Whether a line is a JSON triple ``[head, relation, tail(, qualifiers)]`` (not an ARK-V1 edge list)."""
    try:
        item = json.loads(line)
    except ValueError:
        return False
    return (isinstance(item, list) and len(item) in (3, 4)
            and not any(isinstance(v, (list, dict)) for v in item[:3]))


def _open_text(path: Path) -> TextIO:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")  # the caller closes it


def _peek(path: Path, size: int = 4096) -> str:
    try:
        with _open_text(path) as f:
            return f.read(size).lstrip("\ufeff \t\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphFormatError(f"cannot read the graph source {path}: {exc}") from exc


# ----------------------------------------------------------------------------------------------------------
# ARK-V1
# ----------------------------------------------------------------------------------------------------------
def parse_ark_edges(data: Any, name: str) -> list[tuple[str, str, str, dict[str, Any]]]:
    """``[[head, tail, {"relation": r, ...}], ...]`` as ``(head, relation, tail, qualifiers)`` tuples."""
    if not isinstance(data, Sequence) or isinstance(data, (str, bytes)):
        raise GraphFormatError(f"{name}: expected a list of [head, tail, {{\"relation\": ...}}] edges, "
                               f"got {type(data).__name__}")
    edges = []
    for i, item in enumerate(data):
        where = f"{name}: edge {i}"
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise GraphFormatError(f"{where}: expected [head, tail, {{\"relation\": ...}}], got {str(item)[:200]}")
        head, tail, props = item
        if not isinstance(props, Mapping):
            raise GraphFormatError(f"{where}: the third element must be an object with a \"relation\", "
                                   f"got {str(props)[:200]}")
        relation = props.get("relation")
        for label, value in (("head", head), ("tail", tail), ("relation", relation)):
            if isinstance(value, bool) or not isinstance(value, (str, int, float)) or str(value).strip() == "":
                raise GraphFormatError(f"{where}: the {label} must be a non-empty string, got {value!r}")
        qualifiers = {str(k): v for k, v in props.items() if k != "relation"}
        edges.append((str(head), str(relation), str(tail), qualifiers))
    return edges


def load_ark_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of an ARK-V1 graph file.

    Accepted: one record ``{"question": ..., "graph": [...]}`` (``example_data.json``), a list of records, a bare
    graph (a list of edges), or JSON lines with one record per line (``customized_dataset.jsonl``).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphFormatError(f"cannot read the graph file {path}: {exc}") from exc
    if path.suffix == ".jsonl":
        records = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError as exc:
                raise GraphFormatError(f"{path}, line {n}: not valid JSON: {exc}") from exc
    else:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise GraphFormatError(f"{path}: not valid JSON: {exc}") from exc
        if isinstance(data, dict):
            records = [data]
        elif isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
            records = data
        elif isinstance(data, list):
            records = [{"graph": data}]
        else:
            raise GraphFormatError(f"{path}: expected a record, a list of records or a list of edges")
    for n, record in enumerate(records):
        if not isinstance(record, dict) or "graph" not in record:
            raise GraphFormatError(f"{path}: record {n} has no \"graph\"")
    return records


def load_ark_record(path: str | Path, record_id: str | None = None, *, question: str | None = None
                    ) -> dict[str, Any]:
    """One record of a graph file: by ``id`` (``#n``: the n-th record), else by question text, else the only one."""
    path = Path(path)
    if record_id is not None and path.suffix == ".jsonl" and not str(record_id).startswith("#"):
        # JSON lines: parse only the lines that can hold the id (a file of many large graphs)
        needle = json.dumps(str(record_id))
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise GraphFormatError(f"cannot read the graph file {path}: {exc}") from exc
        for n, line in enumerate(lines, 1):
            if needle not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise GraphFormatError(f"{path}, line {n}: not valid JSON: {exc}") from exc
            if isinstance(record, dict) and str(record.get("id")) == str(record_id) and "graph" in record:
                return record
        raise GraphFormatError(f"{path}: no record with id {record_id!r}")
    records = load_ark_records(path)
    if record_id is not None:
        if str(record_id).startswith("#") and str(record_id)[1:].isdigit():
            position = int(str(record_id)[1:])
            if position >= len(records):
                raise GraphFormatError(f"{path}: no record {record_id} (it holds {len(records)})")
            return records[position]
        found = [r for r in records if str(r.get("id")) == str(record_id)]
        if not found:
            raise GraphFormatError(f"{path}: no record with id {record_id!r}")
        return found[0]
    if len(records) == 1:
        return records[0]
    if question is not None:
        found = [i for i, r in enumerate(records) if str(r.get("question", "")).strip() == question.strip()]
        if len(found) == 1:
            return {**records[found[0]], "id": records[found[0]].get("id", f"#{found[0]}")}
    raise GraphFormatError(f"{path} holds {len(records)} graphs: say which one (its id)")


def add_ark_edges(builder: GraphBuilder, edges: Sequence[tuple[str, str, str, Mapping[str, Any]]]) -> None:
    for head, relation, tail, qualifiers in edges:
        builder.add_edge(head, relation, tail, qualifiers)


def load_ark(builder: GraphBuilder, path: Path, *, record: str | None = None, merge: bool = False,
             progress: Progress | None = None) -> None:
    """One record's graph (``record``), the only graph of the file, or every record merged (``merge``)."""
    if merge:
        for n, rec in enumerate(load_ark_records(path)):
            add_ark_edges(builder, parse_ark_edges(rec["graph"], f"{path} record {rec.get('id', n)}"))
        return
    rec = load_ark_record(path, record)
    name = f"{path}#{rec.get('id')}" if rec.get("id") is not None else str(path)
    add_ark_edges(builder, parse_ark_edges(rec["graph"], name))


# ----------------------------------------------------------------------------------------------------------
# GRBench graph.json, streamed
# ----------------------------------------------------------------------------------------------------------
#: Which feature names a node of GRBench (and most other sources): the first that holds a non-empty string.
NAME_FEATURES = ("name", "title", "full_name", "case_name", "original_title")


def name_from_features(features: Mapping[str, Any], fallback: str) -> str:
    for key in NAME_FEATURES:
        value = features.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return fallback


class _JsonStream:
    """Reads the members of JSON objects one at a time from a text file that may be larger than memory."""

    def __init__(self, f: TextIO, name: str, progress: Progress | None = None, chunk: int = 1 << 22) -> None:
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

    def value(self) -> Any:
        self.skip_ws()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # the value may go on in the next chunk: the error is at the end of the buffer, or a string runs
                # to it (its error points at the string's start, which may lie far back)
                near_end = exc.pos >= len(self.buf) - 64 or exc.msg.startswith("Unterminated string")
                offset = exc.pos - self.pos  # from the value's start, where a refill leaves the buffer's start
                if near_end and self._more(len(self.buf)):
                    continue
                raise self._fail(f"not valid JSON: {exc.msg}", self.pos + offset) from exc
            # a number at the very end of the buffer may continue in the next chunk
            if end >= len(self.buf) and not self.eof and isinstance(value, (int, float)) and self._more():
                continue
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
        with _open_text(path) as f:
            stream = _JsonStream(f, str(path), progress)
            types = 0
            for type_key in stream.members():
                node_type = type_key.removesuffix("_nodes")
                types += 1
                for node_id in stream.members():
                    node = stream.value()
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


# ----------------------------------------------------------------------------------------------------------
# Triples
# ----------------------------------------------------------------------------------------------------------
def load_triples(builder: GraphBuilder, path: Path, *, progress: Progress | None = None, **_: Any) -> None:
    """TSV or JSON lines of (head, relation, tail[, qualifiers])."""
    tabular = path.suffix in (".tsv", ".txt") or path.name.endswith(".tsv.gz")
    try:
        with _open_text(path) as f:
            read = 0
            for number, line in enumerate(f, 1):
                read += len(line)
                if progress is not None and number % 100_000 == 0:
                    progress(read)
                text = line.strip("\r\n")
                if not text.strip() or text.lstrip().startswith("#"):
                    continue
                where = f"{path}, line {number}"
                if tabular:
                    parts = text.split("\t")
                    if number == 1 and [p.strip().lower() for p in parts[:3]] == ["head", "relation", "tail"]:
                        continue
                    if len(parts) < 3 or not all(p.strip() for p in parts[:3]):
                        raise GraphFormatError(f"{where}: expected head<TAB>relation<TAB>tail, got {text[:200]!r}")
                    qualifiers = _qualifiers(parts[3], where) if len(parts) > 3 and parts[3].strip() else None
                    builder.add_edge(parts[0].strip(), parts[1].strip(), parts[2].strip(), qualifiers)
                    continue
                try:
                    item = json.loads(text)
                except ValueError as exc:
                    raise GraphFormatError(f"{where}: not valid JSON: {exc}") from exc
                if isinstance(item, list) and len(item) in (3, 4):
                    head, relation, tail = item[:3]
                    qualifiers = item[3] if len(item) == 4 else None
                elif isinstance(item, dict) and {"head", "relation", "tail"} <= set(item):
                    head, relation, tail = item["head"], item["relation"], item["tail"]
                    qualifiers = item.get("qualifiers")
                else:
                    raise GraphFormatError(f"{where}: expected {{\"head\", \"relation\", \"tail\"}} or "
                                           f"[head, relation, tail], got {text[:200]!r}")
                for label, value in (("head", head), ("relation", relation), ("tail", tail)):
                    if isinstance(value, (dict, list, bool)) or value is None or str(value).strip() == "":
                        raise GraphFormatError(f"{where}: the {label} must be a non-empty string, got {value!r}")
                if qualifiers is not None and not isinstance(qualifiers, dict):
                    raise GraphFormatError(f"{where}: qualifiers must be an object, got {qualifiers!r}")
                builder.add_edge(str(head), str(relation), str(tail), qualifiers)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise GraphFormatError(f"cannot read the triples file {path}: {exc}") from exc


def _qualifiers(text: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise GraphFormatError(f"{where}: the fourth column must be a JSON object of qualifiers: {exc}") from exc
    if not isinstance(value, dict):
        raise GraphFormatError(f"{where}: the fourth column must be a JSON object of qualifiers")
    return value


# ----------------------------------------------------------------------------------------------------------
# STaRK-style semi-structured KBs
# ----------------------------------------------------------------------------------------------------------
_ID_COLUMNS = ("id", "node_id", "nid")
_SRC_COLUMNS = ("src", "source", "head", "h")
_DST_COLUMNS = ("dst", "target", "tail", "t")
_REL_COLUMNS = ("relation", "rel", "type", "edge_type", "r")


def _table_file(folder: Path, stem: str) -> Path:
    for suffix in (".jsonl", ".csv", ".tsv", ".parquet", ".jsonl.gz", ".csv.gz"):
        if (folder / f"{stem}{suffix}").is_file():
            return folder / f"{stem}{suffix}"
    raise GraphFormatError(f"{folder}: no {stem}.jsonl / .csv / .tsv / .parquet (a STaRK-style KB has a node "
                           "table and an edge list)")


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows of a table file as dicts, numbered from 1."""
    try:
        if path.suffix == ".parquet":
            pq = require("pyarrow.parquet", "reading Parquet tables")

            number = 0
            for batch in pq.ParquetFile(path).iter_batches(batch_size=65_536):
                for row in batch.to_pylist():
                    number += 1
                    yield number, row
            return
        with _open_text(path) as f:
            if ".jsonl" in path.name:
                for number, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        row = json.loads(line)
                    except ValueError as exc:
                        raise GraphFormatError(f"{path}, line {number}: not valid JSON: {exc}") from exc
                    if not isinstance(row, dict):
                        raise GraphFormatError(f"{path}, line {number}: expected an object")
                    yield number, row
                return
            reader = csv.DictReader(f, delimiter="\t" if ".tsv" in path.name else ",")
            for number, row in enumerate(reader, 2):
                yield number, dict(row)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise GraphFormatError(f"cannot read {path}: {exc}") from exc
    except (GraphFormatError, MissingExtra):
        raise
    except Exception as exc:  # pyarrow / csv errors: the file is malformed
        raise GraphFormatError(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc


def _column(row: Mapping[str, Any], names: Sequence[str]) -> str | None:
    for name in names:
        if name in row and row[name] not in (None, ""):
            return name
    return None


def load_stark(builder: GraphBuilder, path: Path, *, progress: Progress | None = None, **_: Any) -> None:
    """A STaRK-style KB folder: the table layout, or STaRK's processed files."""
    if not path.is_dir():
        raise GraphFormatError(f"{path}: a STaRK-style KB is a folder (nodes.* and edges.*, or STaRK's processed "
                               "files)")
    if find_processed(path) is not None:
        load_processed(builder, path, progress=progress)
        return
    nodes, edges = _table_file(path, "nodes"), _table_file(path, "edges")
    for number, row in _rows(nodes):
        id_col = _column(row, _ID_COLUMNS)
        if id_col is None:
            raise GraphFormatError(f"{nodes}, row {number}: no node id (a column named id)")
        node_id = str(row[id_col])
        features = {str(k): v for k, v in row.items() if k not in (id_col, "type", "name") and v not in (None, "")}
        name = row.get("name") or row.get("title") or name_from_features(features, node_id)
        builder.add_node(node_id, type=str(row.get("type") or ""), name=str(name), features=features)
        if progress is not None and number % 100_000 == 0:
            progress(number)
    for number, row in _rows(edges):
        src, dst, rel = _column(row, _SRC_COLUMNS), _column(row, _DST_COLUMNS), _column(row, _REL_COLUMNS)
        if src is None or dst is None or rel is None:
            raise GraphFormatError(f"{edges}, row {number}: an edge needs src, relation and dst columns, got "
                                   f"{sorted(row)}")
        qualifiers = {str(k): v for k, v in row.items() if k not in (src, dst, rel) and v not in (None, "")}
        builder.add_edge(str(row[src]), str(row[rel]), str(row[dst]), qualifiers or None)


# ----------------------------------------------------------------------------------------------------------
# CRAG's mock KG API, from saved calls
# ----------------------------------------------------------------------------------------------------------
def parse_repr(text: str) -> Any:
    """A Python literal (``repr`` output), recovering what it can of one that was cut off: the longest prefix
    that parses once its open brackets are closed."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    quote = ""
    i = 0
    closers = {"[": "]", "{": "}", "(": ")"}
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in closers:
            stack.append(closers[ch])
            cuts.append((i + 1, "".join(reversed(stack))))  # an empty container: a value cut off at its start
        elif ch in "]})":
            if stack:
                stack.pop()
            if stack:
                cuts.append((i + 1, "".join(reversed(stack))))
        elif ch == "," and stack:
            cuts.append((i, "".join(reversed(stack))))
        i += 1
    for cut, closing in reversed(cuts):
        try:
            return ast.literal_eval(text[:cut] + closing)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    raise ValueError("not a Python literal, even cut short")


#: Strings longer than this become features of their node rather than nodes of their own.
LONG_TEXT = 120
MAX_ITEMS = 50


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _frame_rows(value: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A column-oriented table ``{column: {"0": v, "1": v}}`` as rows; ``None`` if it is not one."""
    if not value or not all(isinstance(v, dict) for v in value.values()):
        return None
    keys = [set(v) for v in value.values()]
    if any(k != keys[0] for k in keys) or not all(str(k).isdigit() for k in keys[0]):
        return None
    return [{column: cells[row] for column, cells in value.items()} for row in sorted(keys[0], key=int)]


def load_crag(builder: GraphBuilder, path: Path, *, progress: Progress | None = None, **_: Any) -> None:
    """CRAG's five domain KGs as far as the saved mock-API calls show them.

    ``movie_get_person_info("Jackson")`` → the records returned become ``movie`` nodes, linked from the
    subject ``Jackson`` by the relation ``person_info``; a record's short fields become edges to value
    nodes (``acted_movies`` → movie ids), its long texts features; a dict answer becomes edges from the
    subject (a dict of dicts: one edge per key with the inner values as qualifiers); a list of values one
    edge per value. Node ids are ``domain:name`` (records with an id: ``domain:id``).
    """
    from kgagents.tools.crag_api import load_calls

    try:
        calls = load_calls(path)  # one reader of saved calls: the mock KG API serves the same file
    except ValueError as exc:
        raise GraphFormatError(str(exc)) from exc
    for call in calls:
        _add_call(builder, call.function, list(call.payload.values()), call.result)


def _crag_node(builder: GraphBuilder, domain: str, value: Any, *, type_: str = "") -> str:
    name = str(value)
    node_id = f"{domain}:{name}"
    builder.add_node(node_id, type=type_ or domain, name=name)
    return node_id


def _add_call(builder: GraphBuilder, fn: str, args: list[Any], result: Any) -> None:
    domain, _, rest = fn.partition("_")
    relation = re.sub(r"^(get|search)_", "", rest) or fn
    subject_value = next((a for a in args if isinstance(a, str)), args[0] if args else domain)
    if isinstance(subject_value, list):
        subject_value = ", ".join(map(str, subject_value))
    subject = _crag_node(builder, domain, subject_value)
    extra = {f"arg{i}": a for i, a in enumerate(args) if a is not subject_value and _scalar(a)}
    if result is None:
        return
    if _scalar(result):
        builder.add_edge(subject, relation, _crag_node(builder, domain, result, type_="value"), extra or None)
        return
    if isinstance(result, list):
        for item in result[:MAX_ITEMS]:
            if isinstance(item, dict):
                builder.add_edge(subject, relation, _crag_record(builder, domain, relation, item), extra or None)
            elif isinstance(item, list):
                for value in item[:MAX_ITEMS]:
                    if _scalar(value) and value is not None:
                        builder.add_edge(subject, relation, _crag_node(builder, domain, value, type_="value"),
                                         extra or None)
            elif item is not None:
                builder.add_edge(subject, relation, _crag_node(builder, domain, item, type_="value"), extra or None)
        return
    if isinstance(result, dict):
        rows = _frame_rows(result)
        if rows is not None:
            for row in rows[:MAX_ITEMS]:
                builder.add_edge(subject, relation, _crag_record(builder, domain, relation, row), extra or None)
            return
        features: dict[str, Any] = {}
        for key, value in list(result.items())[:MAX_ITEMS * 4]:
            label = f"{relation}.{key}" if relation not in ("entity", "info") else str(key)
            if isinstance(value, dict):
                scalars = {str(k): v for k, v in value.items() if _scalar(v)}
                builder.add_edge(subject, relation, _crag_node(builder, domain, key, type_="value"),
                                 {**extra, **scalars} or None)
            elif isinstance(value, list):
                for item in value[:MAX_ITEMS]:
                    if _scalar(item) and item is not None:
                        builder.add_edge(subject, label, _crag_node(builder, domain, item, type_="value"))
            elif isinstance(value, str) and len(value) > LONG_TEXT:
                features[str(key)] = value
            elif value is not None:
                builder.add_edge(subject, label, _crag_node(builder, domain, value, type_="value"))
        if features:
            builder.add_node(subject, type=domain, name=str(subject_value), features=features)


def _crag_record(builder: GraphBuilder, domain: str, relation: str, record: Mapping[str, Any]) -> str:
    name = next((str(record[k]) for k in ("name", "title", "original_title") if record.get(k)), None)
    ident = record.get("id")
    node_id = f"{domain}:{ident}" if ident is not None else f"{domain}:{name or json.dumps(record)[:60]}"
    features = {str(k): v for k, v in record.items()
                if v is not None and not isinstance(v, (list, dict)) and k not in ("id",)}
    builder.add_node(node_id, type=domain, name=name or node_id, features=features)
    for key, value in record.items():
        if isinstance(value, list):
            for item in value[:MAX_ITEMS]:
                if isinstance(item, dict):
                    label = item.get("name") or item.get("title") or item.get("id")
                    if label is not None:
                        builder.add_edge(node_id, str(key), _crag_node(builder, domain, label, type_="value"))
                elif _scalar(item) and item is not None:
                    target = f"{domain}:{item}" if isinstance(item, int) else _crag_node(builder, domain, item,
                                                                                          type_="value")
                    builder.add_edge(node_id, str(key), target)
    return node_id


LOADERS: dict[str, Callable[..., None]] = {"ark": load_ark, "grbench": load_grbench, "stark": load_stark,
                                           "triples": load_triples, "crag": load_crag}
