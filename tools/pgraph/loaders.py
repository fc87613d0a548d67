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
           ``processed/cache/brand-category-color``: see :mod:`kgagents.tools.pgraph.stark`; its pickles are read as
           plain data only, anything else in them is refused)
triples    TSV (``head⇥relation⇥tail[⇥qualifiers as JSON]``), CSV (``head,relation,tail[,qualifiers as
           JSON]``, quoted as CSV quotes) or JSON lines (``{"head", "relation", "tail", "qualifiers"}`` or
           ``[head, relation, tail]``); a first line ``head, relation, tail`` is a header
crag       CRAG's mock KG API answers saved as ``{"calls": [{"call": "api.fn(args)", "output_repr...": ...}]}``,
           turned into a graph: the argument is the subject, the function the relation, the answer the object(s)
=========  ===================================================================================================

Each format is a module of :mod:`kgagents.tools.pgraph.formats` with a detector, a loader and the files a
source of it consists of; :data:`FORMATS` is the order the detectors run in (the first that claims a source
names its format). Every loader raises :class:`~kgagents.tools.pgraph.model.GraphFormatError` naming the file
and the place that is wrong, and reads within the builder's :class:`~kgagents.tools.pgraph.limits.ImportLimits`
(decompressed size and ratio, line and record size, nesting, nodes and edges: a hostile file is refused with a
:class:`~kgagents.tools.pgraph.limits.GraphLimitError` that names the limit and how to raise it).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kgagents.tools.pgraph.formats import ark, crag, grbench, stark, triples
from kgagents.tools.pgraph.formats.ark import (
    add_ark_edges,
    load_ark,
    load_ark_record,
    load_ark_records,
    parse_ark_edges,
)
from kgagents.tools.pgraph.formats.common import GraphFormat, Progress, Source, name_from_features
from kgagents.tools.pgraph.formats.crag import load_crag
from kgagents.tools.pgraph.formats.grbench import load_grbench
from kgagents.tools.pgraph.formats.stark import load_stark
from kgagents.tools.pgraph.formats.triples import load_triples
from kgagents.tools.pgraph.model import GraphFormatError

__all__ = ["FORMATS", "GRAPH_FORMATS", "LOADERS", "GraphFormat", "Progress", "add_ark_edges", "detect_format",
           "load_ark", "load_ark_record", "load_ark_records", "load_crag", "load_grbench", "load_stark",
           "load_triples", "name_from_features", "parse_ark_edges", "source_files"]

#: The formats in the order their detectors run: folders (GRBench, STaRK), then files by their first bytes
#: (ARK-V1 last: any JSON no other format claims).
GRAPH_FORMATS: dict[str, GraphFormat] = {f.name: f for f in (grbench.FORMAT, stark.FORMAT, crag.FORMAT,
                                                              triples.FORMAT, ark.FORMAT)}
FORMATS = ("ark", "grbench", "stark", "triples", "crag")
#: What each format is, for the errors that cannot tell a source's format.
FORMATS_HELP = ("ark (ARK-V1 JSON: [[head, tail, {\"relation\": r}], ...] or records with a \"graph\"), "
                "grbench (GRBench's graph.json, or its folder), stark (a folder of nodes.* and edges.*, or "
                "STaRK's processed files), triples (.tsv, .csv or JSON lines of head, relation, tail), crag "
                "(CRAG's saved mock-API calls)")
LOADERS: dict[str, Callable[..., None]] = {name: f.load for name, f in GRAPH_FORMATS.items()}


def source_files(path: Path, fmt: str) -> list[Path]:
    """The files a source consists of (for fingerprints)."""
    files = GRAPH_FORMATS[fmt].files if fmt in GRAPH_FORMATS else None
    if files is not None:
        return files(path)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    return [path]


def detect_format(path: str | Path) -> str:
    """The format of a source, from its layout and first bytes; a clear error when it is none of them."""
    path = Path(path)
    if not path.exists():
        raise GraphFormatError(f"no such graph source: {path}")
    source = Source(path)
    for fmt in GRAPH_FORMATS.values():
        if fmt.detect(source):
            return fmt.name
    if source.is_dir:
        raise GraphFormatError(f"{path}: a folder with neither graph.json (GRBench) nor nodes.* + edges.* / "
                               f"node_info.pkl (STaRK-style); give --format, one of: {FORMATS_HELP}")
    raise GraphFormatError(f"{path}: cannot tell the graph format from its first bytes; give --format, one "
                           f"of: {FORMATS_HELP}")
