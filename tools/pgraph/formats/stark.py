"""STaRK-style semi-structured KBs: a folder with a node table and an edge list, or STaRK's released processed
folder of Amazon, MAG or PrimeKG (:mod:`kgagents.tools.pgraph.stark`).
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kgagents.core.extras import MissingExtra, require
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
    bounded_lines,
    loads,
    size_limit_passed,
    type_depth,
)
from kgagents.tools.pgraph.model import GraphFormatError
from kgagents.tools.pgraph.stark import find_processed, load_processed

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


def _rows(path: Path, limits: ImportLimits) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows of a table file as dicts, numbered from 1, read within ``limits``."""
    try:
        if path.suffix == ".parquet":
            pq = require("pyarrow.parquet", "reading Parquet tables")

            table = pq.ParquetFile(path)
            _check_parquet(table, path, limits)
            number = 0
            for batch in table.iter_batches(batch_size=65_536):
                for row in batch.to_pylist():
                    number += 1
                    yield number, row
            return
        with open_text(path, limits) as f:
            lines = bounded_lines(f, path, limits)
            if ".jsonl" in path.name:
                for number, line in enumerate(lines, 1):
                    if not line.strip():
                        continue
                    row = loads(line, f"{path}, line {number}", limits)
                    if not isinstance(row, dict):
                        raise GraphFormatError(f"{path}, line {number}: a row must be a JSON object")
                    yield number, row
                return
            reader = csv.DictReader(lines, delimiter="\t" if ".tsv" in path.name else ",")
            for number, row in enumerate(reader, 2):
                yield number, dict(row)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise GraphFormatError(f"cannot read {path}: {exc}") from exc
    except (GraphFormatError, MissingExtra):
        raise
    except Exception as exc:
        raise GraphFormatError(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc


def _check_parquet(table: Any, path: Path, limits: ImportLimits) -> None:
    """Refuse a Parquet file, from its metadata and before any row is read, whose columns nest deeper than
    ``max_depth``, whose data expand past ``max_mb`` or more than ``max_ratio`` times their size on disk (what
    each row group says of itself: a row group is decompressed whole), or one of whose row groups holds more
    than ``max_record_mb`` times 64 rows' worth (a batch of rows is what the loader holds at a time)."""
    schema = table.schema_arrow
    for name in schema.names:
        if type_depth(schema.field(name).type) > limits.max_depth:
            raise GraphLimitError(f"{path}: the column {name!r} nests deeper than {limits.max_depth} levels "
                                  f"({limits.hint('max_depth')})")
    meta = table.metadata
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    expanded = sum(group.total_byte_size for group in groups)
    passed = size_limit_passed(limits, expanded, max(1, path.stat().st_size))
    if passed == "max_mb":
        raise GraphLimitError(f"{path}: its data come to {expanded / MB:,.0f} MB, over the {limits.max_mb:,} MB of "
                              f"a graph source file ({limits.hint('max_mb')})")
    if passed == "max_ratio":
        raise GraphLimitError(f"{path}: its data expand more than {limits.max_ratio} times, to "
                              f"{expanded / MB:,.0f} MB: refused as a decompression bomb ({limits.hint('max_ratio')})")
    for i, group in enumerate(groups):
        if group.total_byte_size > 64 * limits.max_record_mb * MB:
            raise GraphLimitError(f"{path}: row group {i} holds {group.total_byte_size / MB:,.0f} MB, over "
                                  f"{64 * limits.max_record_mb:,} MB (64 times the limit of one record; "
                                  f"{limits.hint('max_record_mb')})")


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
    for number, row in _rows(nodes, builder.limits):
        id_col = _column(row, _ID_COLUMNS)
        if id_col is None:
            raise GraphFormatError(f"{nodes}, row {number}: no node id (a column named id)")
        node_id = str(row[id_col])
        features = {str(k): v for k, v in row.items() if k not in (id_col, "type", "name") and v not in (None, "")}
        name = row.get("name") or row.get("title") or name_from_features(features, node_id)
        builder.add_node(node_id, type=str(row.get("type") or ""), name=str(name), features=features)
        if progress is not None and number % 100_000 == 0:
            progress(number)
    for number, row in _rows(edges, builder.limits):
        src, dst, rel = _column(row, _SRC_COLUMNS), _column(row, _DST_COLUMNS), _column(row, _REL_COLUMNS)
        if src is None or dst is None or rel is None:
            raise GraphFormatError(f"{edges}, row {number}: an edge needs src, relation and dst columns, got "
                                   f"{sorted(row)}")
        qualifiers = {str(k): v for k, v in row.items() if k not in (src, dst, rel) and v not in (None, "")}
        builder.add_edge(str(row[src]), str(row[rel]), str(row[dst]), qualifiers or None)


def detect(source: Source) -> bool:
    """A folder with STaRK's processed files or a node table (``nodes.*``)."""
    return source.is_dir and (find_processed(source.path) is not None
                              or any(n.startswith("nodes.") for n in source.names))


def files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    folder = find_processed(path) or path
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


FORMAT = GraphFormat("stark", detect, load_stark, files)
