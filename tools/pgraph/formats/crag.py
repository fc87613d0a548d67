"""CRAG's domain KGs as far as the saved calls of its mock KG API show them
(``{"calls": [{"call": "api.fn(args)", "output_repr...": ...}]}``, :mod:`kgagents.tools.crag.calls`): the
argument is the subject, the function the relation, the answer the object(s).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kgagents.tools.crag.calls import load_calls
from kgagents.tools.pgraph.build import GraphBuilder
from kgagents.tools.pgraph.formats.common import (
    GraphFormat,
    Progress,
    Source,
)
from kgagents.tools.pgraph.limits import (
    JSON_SEPARATORS,
    LITERAL_VALUE_BYTES,
    MB,
    GraphLimitError,
    ImportLimits,
    check_parse_size,
    loads,
    read_document,
)
from kgagents.tools.pgraph.model import GraphFormatError

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
    limits = builder.limits
    try:
        data = loads(read_document(path, limits, "a CRAG calls file"), str(path), limits)
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphFormatError(f"cannot read the CRAG calls file {path}: {exc}") from exc
    _check_outputs(data, path, limits)
    try:
        calls = load_calls(path, data)  # one reader of saved calls: the mock KG API serves the same file
    except ValueError as exc:
        raise GraphFormatError(str(exc)) from exc
    for call in calls:
        _add_call(builder, call.function, list(call.payload.values()), call.result)


def _check_outputs(data: Any, path: Path, limits: ImportLimits) -> None:
    """Refuse a call whose saved output (a Python literal, parsed through a syntax tree that takes about a
    kilobyte per value) is longer than ``max_record_mb`` or would take more than ``max_parse_mb`` to parse."""
    calls = data.get("calls") if isinstance(data, dict) else data
    most = limits.max_record_mb * MB
    for n, entry in enumerate(calls if isinstance(calls, list) else []):
        if not isinstance(entry, dict):
            continue
        texts = [v for k, v in entry.items() if k.startswith("output") and isinstance(v, str)]
        if any(len(v) > most for v in texts):
            raise GraphLimitError(f"{path}, call {n}: an output longer than {limits.max_record_mb:,} MB, the limit "
                                  f"of one record ({limits.hint('max_record_mb')})")
        for text in texts:
            check_parse_size(text, f"{path}, call {n}: its output", limits, JSON_SEPARATORS + "(",
                             LITERAL_VALUE_BYTES)


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


def detect(source: Source) -> bool:
    """A JSON object that starts with ``source`` or ``calls`` and holds ``calls``."""
    if source.is_dir or source.table:
        return False
    return re.match(r'\{\s*"(source|calls)"', source.head) is not None and '"calls"' in source.head


FORMAT = GraphFormat("crag", detect, load_crag)
