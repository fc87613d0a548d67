"""STaRK-style semi-structured KBs: a folder with a node table and an edge list, or STaRK's released processed
folder of Amazon, MAG or PrimeKG (:mod:`kgagents.tools.pgraph.stark`).
"""

from __future__ import annotations

import csv
import gzip
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

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
    TEXT_VALUE_BYTES,
    VALUE_BYTES,
    GraphLimitError,
    ImportLimits,
    bounded_lines,
    loads,
    parse_size,
    parse_too_large,
    size_limit_passed,
    type_depth,
)
from kgagents.tools.pgraph.model import GraphFormatError
from kgagents.tools.pgraph.stark import find_processed, load_processed, zipped_processed

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
            yield from _parquet_rows(path, limits)
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
            delimiter = "\t" if ".tsv" in path.name else ","
            row_size = 0  # what the row being read may take once split into cells (a quoted field spans lines)

            def sized(lines: Iterator[str]) -> Iterator[str]:
                nonlocal row_size
                for number, line in enumerate(lines, 1):
                    row_size += parse_size(line, delimiter)
                    if row_size > limits.max_parse_mb * MB:
                        raise parse_too_large(f"{path}, line {number}", row_size, limits)
                    yield line

            for number, row in enumerate(csv.DictReader(sized(lines), delimiter=delimiter), 2):
                row_size = 0
                yield number, dict(row)
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile) as exc:
        raise GraphFormatError(f"cannot read {path}: {exc}") from exc
    except (GraphFormatError, MissingExtra):
        raise
    except Exception as exc:
        raise GraphFormatError(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc


#: Rows of a Parquet table read at a time (fewer go to Python at once where they are large: :func:`_parquet_rows`).
PARQUET_BATCH_ROWS = 8192


def _parquet_rows(path: Path, limits: ImportLimits) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows of a Parquet table, numbered from 1, read within ``limits`` by what they hold once decoded, not
    by what the file's metadata says (its encodings can make millions of distinct values out of no bytes: delta
    encoding, a dictionary value that a run of a million rows points to). Every text column is read as a
    dictionary, so Arrow never copies a value per row; the decoded size of each batch is then counted per row
    (:func:`arrow_sizes`) before any of it becomes Python values: a value longer than ``max_record_mb``, a row
    that would take more than ``max_parse_mb`` once in Python, or a table whose decoded text (a value's bytes
    and :data:`~kgagents.tools.pgraph.limits.TEXT_VALUE_BYTES` more, as a text format would write it) passes
    ``max_mb`` or ``max_ratio`` times the file's size is refused; rows go to Python a few at a time, within
    ``max_parse_mb``."""
    if "pyarrow" not in sys.modules:
        # Arrow's own allocator (mimalloc) reserves a gigabyte of address space at its first use: under an
        # address-space limit (ulimit -v, as on some clusters) that leaves nothing for the import itself
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    pq = require("pyarrow.parquet", "reading Parquet tables")
    table = pq.ParquetFile(path)
    _check_parquet(table, path, limits)
    texts = [column.path for column in table.schema if column.physical_type in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY")]
    table = pq.ParquetFile(path, read_dictionary=texts)
    disk = max(1, path.stat().st_size)
    decoded = number = 0
    budget = limits.max_parse_mb * MB
    for batch in table.iter_batches(batch_size=PARQUET_BATCH_ROWS):
        row_bytes = np.zeros(batch.num_rows, dtype=np.int64)
        row_values = np.zeros(batch.num_rows, dtype=np.int64)
        for column in batch.columns:
            content, values, longest = arrow_sizes(column)
            if longest > limits.max_record_mb * MB:
                raise GraphLimitError(f"{path}, rows {number + 1}-{number + batch.num_rows}: a value of "
                                      f"{longest / MB:,.0f} MB, over the {limits.max_record_mb:,} MB of one "
                                      f"record ({limits.hint('max_record_mb')})")
            row_bytes += content
            row_values += values
        in_python = row_bytes + VALUE_BYTES * row_values
        as_text = np.cumsum(row_bytes + TEXT_VALUE_BYTES * row_values)
        start = 0
        while start < batch.num_rows:
            if in_python[start] > budget:
                raise parse_too_large(f"{path}, row {number + start + 1}", int(in_python[start]), limits)
            taken = np.cumsum(in_python[start:])
            end = start + int(np.searchsorted(taken, budget, side="right"))
            passed = size_limit_passed(limits, decoded + int(as_text[end - 1]), disk)
            if passed is not None:
                raise _parquet_expands(path, passed, decoded + int(as_text[end - 1]), disk, limits)
            for row in batch.slice(start, end - start).to_pylist():
                number += 1
                yield number, row
            start = end
        decoded += int(as_text[-1]) if batch.num_rows else 0


def _parquet_expands(path: Path, passed: str, decoded: int, disk: int, limits: ImportLimits) -> GraphLimitError:
    if passed == "max_mb":
        return GraphLimitError(f"{path}: its rows come to more than {limits.max_mb:,} MB of text once decoded, "
                               f"the limit of a graph source file ({limits.hint('max_mb')})")
    return GraphLimitError(f"{path}: expands more than {limits.max_ratio} times: {decoded / MB:,.0f} MB of values "
                           f"decoded from {disk / MB:,.1f} MB on disk, refused as a decompression bomb "
                           f"({limits.hint('max_ratio')})")


def arrow_sizes(array: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """What each row of an Arrow array (a column of a Parquet batch) holds once decoded: its bytes (a text's,
    a number's width), its values (a list, a struct or a map counts one and its items theirs), and the longest
    single value's bytes. Computed from lengths, offsets and dictionary indices, so nothing is decoded: a
    dictionary value that many rows point to counts once per row."""
    pa = require("pyarrow", "reading Parquet tables")
    pc = require("pyarrow.compute", "reading Parquet tables")
    rows = len(array)
    kind = array.type
    ones = np.ones(rows, dtype=np.int64)
    if rows == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0
    if pa.types.is_dictionary(kind):
        entry_bytes, entry_values, longest = arrow_sizes(array.dictionary)
        if len(array.dictionary) == 0:
            return np.zeros(rows, dtype=np.int64), ones, 0
        valid = np.asarray(array.is_valid())
        index = array.indices.fill_null(0).to_numpy()
        return entry_bytes[index] * valid, np.where(valid, entry_values[index], 1), longest
    if pa.types.is_binary(kind) or pa.types.is_string(kind) or pa.types.is_large_binary(kind) \
            or pa.types.is_large_string(kind) or pa.types.is_fixed_size_binary(kind):
        lengths = pc.binary_length(array).fill_null(0).to_numpy().astype(np.int64)
        return lengths, ones, int(lengths.max())
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        item_bytes, item_values, longest = arrow_sizes(array.values)
        offsets = array.offsets.to_numpy().astype(np.int64)
        bytes_before = np.concatenate(([0], np.cumsum(item_bytes)))
        values_before = np.concatenate(([0], np.cumsum(item_values)))
        return (bytes_before[offsets[1:]] - bytes_before[offsets[:-1]],
                1 + values_before[offsets[1:]] - values_before[offsets[:-1]], longest)
    if pa.types.is_fixed_size_list(kind):
        item_bytes, item_values, longest = arrow_sizes(array.flatten())
        size = kind.list_size
        return (item_bytes.reshape(rows, size).sum(axis=1), 1 + item_values.reshape(rows, size).sum(axis=1),
                longest)
    if pa.types.is_struct(kind):
        content, values, longest = np.zeros(rows, dtype=np.int64), ones.copy(), 0
        for field in array.flatten():
            field_bytes, field_values, field_longest = arrow_sizes(field)
            content += field_bytes
            values += field_values
            longest = max(longest, field_longest)
        return content, values, longest
    width = max(1, getattr(kind, "bit_width", 8) // 8) if kind != pa.null() else 0
    return np.full(rows, width, dtype=np.int64), ones, width


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
    if find_processed(path) is not None or zipped_processed(path) is not None:
        load_processed(builder, path, progress=progress)  # a zipped one: an error that says to unzip it
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
    return source.is_dir and (find_processed(source.path) is not None or zipped_processed(source.path) is not None
                              or any(n.startswith("nodes.") for n in source.names))


def files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    folder = find_processed(path) or path
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


FORMAT = GraphFormat("stark", detect, load_stark, files)
