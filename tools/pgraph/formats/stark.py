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
from kgagents.core.jsonl import json_lines
from kgagents.tools.pgraph.build import GraphBuilder
from kgagents.tools.pgraph.formats.common import (
    GraphFormat,
    Progress,
    Source,
    name_from_features,
    open_text,
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
        with open_text(path) as f:
            if ".jsonl" in path.name:
                yield from json_lines(f, str(path), GraphFormatError, objects=True, what="a row")
                return
            reader = csv.DictReader(f, delimiter="\t" if ".tsv" in path.name else ",")
            for number, row in enumerate(reader, 2):
                yield number, dict(row)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise GraphFormatError(f"cannot read {path}: {exc}") from exc
    except (GraphFormatError, MissingExtra):
        raise
    except Exception as exc:
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
