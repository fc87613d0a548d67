"""Triples: TSV (``head⇥relation⇥tail[⇥qualifiers as JSON]``), CSV (``head,relation,tail[,qualifiers as
JSON]``, quoted as CSV quotes) or JSON lines (``{"head", "relation", "tail", "qualifiers"}`` or
``[head, relation, tail]``); a first line ``head, relation, tail`` is a header.
"""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from kgagents.tools.pgraph.build import GraphBuilder
from kgagents.tools.pgraph.formats.common import (
    GraphFormat,
    Progress,
    Source,
    open_text,
)
from kgagents.tools.pgraph.limits import (
    MB,
    ImportLimits,
    bounded_lines,
    check_depth,
    check_parse_size,
    loads,
    parse_size,
    parse_too_large,
)
from kgagents.tools.pgraph.model import GraphFormatError


def load_triples(builder: GraphBuilder, path: Path, *, progress: Progress | None = None, **_: Any) -> None:
    """TSV, CSV or JSON lines of (head, relation, tail[, qualifiers])."""
    if path.name.lower().endswith((".csv", ".csv.gz")):
        return _load_csv_triples(builder, path, progress)
    tabular = path.suffix in (".tsv", ".txt") or path.name.endswith(".tsv.gz")
    limits = builder.limits
    try:
        with open_text(path, limits) as f:
            read = 0
            for number, line in enumerate(bounded_lines(f, path, limits), 1):
                read += len(line)
                if progress is not None and number % 100_000 == 0:
                    progress(read)
                text = line.strip("\r\n")
                if not text.strip() or text.lstrip().startswith("#"):
                    continue
                where = f"{path}, line {number}"
                if tabular:
                    parts = text.split("\t", 4)  # the columns read: a line of a million tabs stays 5 strings
                    if number == 1 and [p.strip().lower() for p in parts[:3]] == ["head", "relation", "tail"]:
                        continue
                    if len(parts) < 3 or not all(p.strip() for p in parts[:3]):
                        raise GraphFormatError(f"{where}: expected head<TAB>relation<TAB>tail, got {text[:200]!r}")
                    qualifiers = (_qualifiers(parts[3], where, limits) if len(parts) > 3 and parts[3].strip()
                                  else None)
                    builder.add_edge(parts[0].strip(), parts[1].strip(), parts[2].strip(), qualifiers)
                    continue
                item = loads(text, where, limits)
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


def _load_csv_triples(builder: GraphBuilder, path: Path, progress: Progress | None) -> None:
    """CSV rows ``head,relation,tail[,qualifiers as JSON]`` (quoted fields as CSV quotes them); a first row
    ``head,relation,tail`` is a header; blank rows and rows whose first field starts with ``#`` are
    skipped."""
    read = 0
    limits = builder.limits
    row_size = 0  # what the row being read may take once split into cells (a quoted field spans lines)

    def counted(lines: TextIO) -> Iterator[str]:
        nonlocal read, row_size
        for number, line in enumerate(bounded_lines(lines, path, limits), 1):
            read += len(line)
            row_size += parse_size(line, ",")
            if row_size > limits.max_parse_mb * MB:
                raise parse_too_large(f"{path}, line {number}", row_size, limits)
            yield line

    try:
        with open_text(path, limits) as f:
            for number, row in enumerate(csv.reader(counted(f)), 1):
                row_size = 0
                if progress is not None and number % 100_000 == 0:
                    progress(read)
                if not row or not any(cell.strip() for cell in row) or row[0].lstrip().startswith("#"):
                    continue
                where = f"{path}, line {number}"
                if number == 1 and [cell.strip().lower() for cell in row[:3]] == ["head", "relation", "tail"]:
                    continue
                if len(row) < 3 or not all(cell.strip() for cell in row[:3]):
                    got = ",".join(row)[:200]
                    raise GraphFormatError(f"{where}: expected head,relation,tail, got {got!r}")
                qualifiers = _qualifiers(row[3], where, limits) if len(row) > 3 and row[3].strip() else None
                builder.add_edge(row[0].strip(), row[1].strip(), row[2].strip(), qualifiers)
    except csv.Error as exc:
        raise GraphFormatError(f"{path}: not valid CSV: {exc}") from exc
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise GraphFormatError(f"cannot read the triples file {path}: {exc}") from exc


def _qualifiers(text: str, where: str, limits: ImportLimits) -> dict[str, Any]:
    check_parse_size(text, where, limits)
    check_depth(text, where, limits)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise GraphFormatError(f"{where}: the fourth column must be a JSON object of qualifiers: {exc}") from exc
    if not isinstance(value, dict):
        raise GraphFormatError(f"{where}: the fourth column must be a JSON object of qualifiers")
    return value


def _triple_line(line: str) -> bool:
    """Whether a line is a JSON triple ``[head, relation, tail(, qualifiers)]`` (not an ARK-V1 edge list)."""
    try:
        item = json.loads(line)
    except ValueError:
        return False
    return (isinstance(item, list) and len(item) in (3, 4)
            and not any(isinstance(v, (list, dict)) for v in item[:3]))


def detect(source: Source) -> bool:
    """A table of triples by its name, or JSON lines whose first line is a triple."""
    if source.is_dir:
        return False
    if source.table:
        return True
    if source.head.startswith("["):
        return _triple_line(source.first_line)
    return source.head.startswith("{") and '"head"' in source.first_line and '"relation"' in source.first_line


FORMAT = GraphFormat("triples", detect, load_triples)
