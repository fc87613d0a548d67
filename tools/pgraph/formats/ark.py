"""ARK-V1 graphs: ``[[head, tail, {"relation": r, qualifier: value}], ...]`` as a bare edge list, one
record ``{"question", "graph"}``, a list of records or JSON lines of records (one record by ``id``, or all of
them merged into one graph).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kgagents.tools.pgraph.build import GraphBuilder
from kgagents.tools.pgraph.formats.common import (
    GraphFormat,
    Progress,
    Source,
)
from kgagents.tools.pgraph.limits import (
    MB,
    GraphLimitError,
    ImportLimits,
    bounded_lines,
    loads,
    open_limited,
    parse_size,
    parse_too_large,
    read_document,
)
from kgagents.tools.pgraph.model import GraphFormatError


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


def _jsonl_records(path: Path, limits: ImportLimits, *, kept: bool = False
                   ) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """``(line number, line, record)`` of an ARK-V1 JSON-lines file, streamed: no line longer than
    ``max_record_mb``, none nested deeper than ``max_depth`` or taking more than ``max_parse_mb`` to parse; with
    ``kept`` (the caller keeps every record) not all of them together either."""
    total = 0
    try:
        with open_limited(path, limits) as f:
            n = 0
            for number, line in enumerate(bounded_lines(f, path, limits), 1):
                if not line.strip():
                    continue
                if kept:
                    total += parse_size(line)
                    if total > limits.max_parse_mb * MB:
                        raise parse_too_large(f"{path} (its records up to line {number}, all kept)", total, limits)
                record = loads(line, f"{path}, line {number}", limits)
                if not isinstance(record, dict) or "graph" not in record:
                    raise GraphFormatError(f"{path}: record {n} has no \"graph\"")
                n += 1
                yield number, line, record
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphFormatError(f"cannot read the graph file {path}: {exc}") from exc


def _document_records(path: Path, limits: ImportLimits) -> list[dict[str, Any]]:
    """The records of an ARK-V1 JSON file, parsed whole (at most ``max_document_mb``)."""
    try:
        data = loads(read_document(path, limits, "an ARK-V1 graph file"), str(path), limits)
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphFormatError(f"cannot read the graph file {path}: {exc}") from exc
    if isinstance(data, dict):
        records = [data]
    elif isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        records = data
    elif isinstance(data, list):
        records = [{"graph": data}]
    else:
        raise GraphFormatError(f"{path}: expected a record, a list of records or a list of edges")
    for n, record in enumerate(records):
        if "graph" not in record:
            raise GraphFormatError(f"{path}: record {n} has no \"graph\"")
    return records


def load_ark_records(path: str | Path, limits: ImportLimits | None = None) -> list[dict[str, Any]]:
    """The records of an ARK-V1 graph file, all in memory (so at most ``max_document_mb`` on disk).

    Accepted: one record ``{"question": ..., "graph": [...]}`` (``example_data.json``), a list of records, a bare
    graph (a list of edges), or JSON lines with one record per line (``customized_dataset.jsonl``).
    """
    path, limits = Path(path), limits or ImportLimits.from_env()
    if path.suffix == ".jsonl":
        size = path.stat().st_size if path.is_file() else 0
        if size > limits.max_document_mb * MB:
            raise GraphLimitError(f"{path}: {size / MB:,.1f} MB, over the {limits.max_document_mb:,} MB an ARK-V1 "
                                  f"file may have to be read whole ({limits.hint('max_document_mb')}); a record "
                                  "by its id, or every record merged, is read line by line at any size")
        return [record for _, _, record in _jsonl_records(path, limits, kept=True)]
    return _document_records(path, limits)


def load_ark_record(path: str | Path, record_id: str | None = None, *, question: str | None = None,
                    limits: ImportLimits | None = None) -> dict[str, Any]:
    """One record of a graph file: by ``id`` (``#n``: the n-th record), else by question text, else the only one."""
    path, limits = Path(path), limits or ImportLimits.from_env()
    if record_id is not None and path.suffix == ".jsonl" and not str(record_id).startswith("#"):
        # JSON lines: read line by line, parse only the lines that can hold the id (a file of many large graphs)
        needle = json.dumps(str(record_id))
        try:
            with open_limited(path, limits) as f:
                for number, line in enumerate(bounded_lines(f, path, limits), 1):
                    if needle not in line:
                        continue
                    record = loads(line, f"{path}, line {number}", limits)
                    if isinstance(record, dict) and str(record.get("id")) == str(record_id) and "graph" in record:
                        return record
        except (OSError, UnicodeDecodeError) as exc:
            raise GraphFormatError(f"cannot read the graph file {path}: {exc}") from exc
        raise GraphFormatError(f"{path}: no record with id {record_id!r}")
    records = load_ark_records(path, limits)
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
        matches = [i for i, r in enumerate(records) if str(r.get("question", "")).strip() == question.strip()]
        if len(matches) == 1:
            return {**records[matches[0]], "id": records[matches[0]].get("id", f"#{matches[0]}")}
    raise GraphFormatError(f"{path} holds {len(records)} graphs: say which one (its id)")


def add_ark_edges(builder: GraphBuilder, edges: Sequence[tuple[str, str, str, Mapping[str, Any]]]) -> None:
    for head, relation, tail, qualifiers in edges:
        builder.add_edge(head, relation, tail, qualifiers)


def load_ark(builder: GraphBuilder, path: Path, *, record: str | None = None, merge: bool = False,
             progress: Progress | None = None) -> None:
    """One record's graph (``record``), the only graph of the file, or every record merged (``merge``)."""
    limits = builder.limits
    if merge:
        records: Iterator[dict[str, Any]] | list[dict[str, Any]] = (
            (record for _, _, record in _jsonl_records(path, limits)) if path.suffix == ".jsonl"
            else _document_records(path, limits))
        for n, rec in enumerate(records):
            add_ark_edges(builder, parse_ark_edges(rec["graph"], f"{path} record {rec.get('id', n)}"))
        return
    rec = load_ark_record(path, record, limits=limits)
    name = f"{path}#{rec.get('id')}" if rec.get("id") is not None else str(path)
    add_ark_edges(builder, parse_ark_edges(rec["graph"], name))


def detect(source: Source) -> bool:
    """A JSON file that no other format claims (the detectors run in :data:`~kgagents.tools.pgraph.loaders.FORMATS`'
    order, this one last)."""
    return not source.is_dir and not source.table and source.head.startswith(("[", "{"))


FORMAT = GraphFormat("ark", detect, load_ark)
