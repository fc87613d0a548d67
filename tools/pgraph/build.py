"""Building the compact store: stream nodes and edges in, get a directory of flat arrays out.

:class:`GraphBuilder` takes nodes (id, type, name, features) and edges (head, relation, tail, qualifiers) from
a loader in any order — an edge may name a node that is declared later, or never — and writes:

- ``strings.bin``: every string (node ids, names, feature and qualifier values) as UTF-8, back to back;
- ``arrays.bin``: NumPy arrays at aligned offsets: per node its id/name string (offset, length), its type and a
  64-bit hash of its id and of its name (sorted, for lookups by binary search); CSR adjacency in both
  directions as *runs* (one per node and relation, in order of first appearance, so a node's relations come
  out in source order) over the edges' other ends; features and qualifiers in a columnar layout with offsets;
- ``manifest.json``: counts, the vocabularies (types, relations, feature and qualifier keys), where each array
  lies, the source and the fingerprint.

Memory while building is a dict from node id to integer plus a few integers per edge; the strings go to disk
as they arrive. :class:`~kgagents.tools.pgraph.compact.CompactGraph` memory-maps the result.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from array import array
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from kgagents.tools.pgraph.limits import GraphLimitError, ImportLimits

#: Version of the on-disk layout; a store of another version is rebuilt.
FORMAT_VERSION = 1
ALIGN = 64

KIND_STR = 0
KIND_JSON = 1


def string_hash(text: str) -> int:
    """A stable 64-bit hash of a string (lookups by id and by name)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class _Strings:
    """An append-only UTF-8 blob on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO = open(path, "wb", buffering=1 << 20)  # noqa: SIM115 - closed by close()
        self.size = 0

    def add(self, text: str) -> tuple[int, int]:
        data = text.encode("utf-8")
        offset = self.size
        self._file.write(data)
        self.size += len(data)
        return offset, len(data)

    def close(self) -> None:
        self._file.close()


def _value(value: Any) -> tuple[int, str]:
    if isinstance(value, str):
        return KIND_STR, value
    return KIND_JSON, json.dumps(value, ensure_ascii=False, default=str)


class GraphBuilder:
    """Streams a graph into ``directory`` (which must not exist yet, or be empty), within ``limits`` (the
    loaders read their source files through them; the builder counts nodes and edges); ``source`` names the
    graph's source in the errors."""

    def __init__(self, directory: str | Path, limits: ImportLimits | None = None, source: str = "") -> None:
        self.limits = limits if limits is not None else ImportLimits.from_env()
        self.source = source
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._strings = _Strings(self.directory / "strings.bin")
        self._ids: dict[str, int] = {}
        self._types: dict[str, int] = {}
        self._relations: dict[str, int] = {}
        self._feature_keys: dict[str, int] = {}
        self._qualifier_keys: dict[str, int] = {}
        # declared nodes: (node, type, name offset, name length, name hash), in declaration order
        self._decl_node = array("q")
        self._decl_type = array("i")
        self._decl_name_off = array("q")
        self._decl_name_len = array("q")
        self._decl_name_hash = array("Q")
        # features: (node, key, kind, offset, length)
        self._feat = [array("q"), array("i"), array("b"), array("q"), array("q")]
        # edges: (head, relation, tail); qualifiers: (edge, key, kind, offset, length)
        self._src = array("q")
        self._rel = array("i")
        self._dst = array("q")
        self._qual = [array("q"), array("i"), array("b"), array("q"), array("q")]
        self._started = time.monotonic()
        self.meta: dict[str, Any] = {}
        """What a loader knows of its source beyond nodes and edges (e.g. a STaRK knowledge base's dataset and
        candidate types): written to the manifest's ``meta``, read back as ``graph.meta``."""

    # --- input -------------------------------------------------------------------------------------------------
    def _intern(self, node_id: str) -> int:
        ids = self._ids
        index = ids.get(node_id)
        if index is None:
            if len(ids) >= self.limits.max_nodes:
                raise self._too_many("nodes", "max_nodes")
            index = ids[node_id] = len(ids)
        return index

    def _too_many(self, what: str, name: str) -> GraphLimitError:
        most = getattr(self.limits, name)
        where = f"{self.source}: " if self.source else ""
        return GraphLimitError(f"{where}the graph has more than {most:,} {what}, the limit of an import "
                               f"({self.limits.hint(name)})")

    def add_node(self, node_id: str, *, type: str = "", name: str | None = None,  # noqa: A002
                 features: Mapping[str, Any] | None = None) -> int:
        """Declare a node (again: its type and name are replaced, its features added; the last value of a key
        wins). Returns its integer id."""
        node_id = str(node_id)
        index = self._intern(node_id)
        type_id = self._types.setdefault(type, len(self._types)) if type else -1
        name = node_id if name is None or str(name) == "" else str(name)
        offset, length = self._strings.add(name)
        self._decl_node.append(index)
        self._decl_type.append(type_id)
        self._decl_name_off.append(offset)
        self._decl_name_len.append(length)
        self._decl_name_hash.append(string_hash(name))
        if features:
            nodes, keys, kinds, offsets, lengths = self._feat
            for key, value in features.items():
                kind, text = _value(value)
                offset, length = self._strings.add(text)
                nodes.append(index)
                keys.append(self._feature_keys.setdefault(str(key), len(self._feature_keys)))
                kinds.append(kind)
                offsets.append(offset)
                lengths.append(length)
        return index

    def add_edge(self, head: str, relation: str, tail: str, qualifiers: Mapping[str, Any] | None = None) -> None:
        """Add one directed edge; parallel edges are kept."""
        if len(self._src) >= self.limits.max_edges:
            raise self._too_many("edges", "max_edges")
        self._src.append(self._intern(str(head)))
        self._rel.append(self._relations.setdefault(str(relation), len(self._relations)))
        self._dst.append(self._intern(str(tail)))
        if qualifiers:
            edge = len(self._src) - 1
            edges, keys, kinds, offsets, lengths = self._qual
            for key, value in qualifiers.items():
                kind, text = _value(value)
                offset, length = self._strings.add(text)
                edges.append(edge)
                keys.append(self._qualifier_keys.setdefault(str(key), len(self._qualifier_keys)))
                kinds.append(kind)
                offsets.append(offset)
                lengths.append(length)

    def add_edges(self, head: str, relation: str, tails: Iterable[str]) -> None:
        """Add edges ``(head, relation, t)`` for every ``t`` (no qualifiers): the fast path for adjacency lists."""
        intern = self._intern
        tail_ids = [intern(str(t)) for t in tails]
        if not tail_ids:
            return
        if len(self._src) + len(tail_ids) > self.limits.max_edges:
            raise self._too_many("edges", "max_edges")
        self._src.extend([intern(str(head))] * len(tail_ids))
        self._rel.extend([self._relations.setdefault(str(relation), len(self._relations))] * len(tail_ids))
        self._dst.extend(tail_ids)

    @property
    def node_count(self) -> int:
        return len(self._ids)

    @property
    def edge_count(self) -> int:
        return len(self._src)

    # --- output ------------------------------------------------------------------------------------------------
    def finish(self, *, name: str, fingerprint: str, source: Mapping[str, Any]) -> dict[str, Any]:
        """Write the arrays and the manifest; returns the manifest."""
        n = len(self._ids)
        e = len(self._src)
        arrays: dict[str, np.ndarray] = {}
        node_dtype = np.int32 if n < 2**31 else np.int64
        pos_dtype = np.int32 if e < 2**31 else np.int64

        # node ids, in the order they were first seen
        id_off = np.empty(n, dtype=np.int64)
        id_len = np.empty(n, dtype=np.int32)
        id_hash = np.empty(n, dtype=np.uint64)
        for index, node_id in enumerate(self._ids):
            id_off[index], id_len[index] = self._strings.add(node_id)
            id_hash[index] = string_hash(node_id)
        self._ids.clear()  # the dict is the largest thing in memory; it is not needed any more
        # declared names and types (the last declaration wins); undeclared nodes are named by their id
        name_off, name_len, name_hash = id_off.copy(), id_len.copy(), id_hash.copy()
        node_type = np.full(n, -1, dtype=np.int32)
        decl = np.frombuffer(self._decl_node, dtype=np.int64) if len(self._decl_node) else np.zeros(0, np.int64)
        if len(decl):
            name_off[decl] = np.frombuffer(self._decl_name_off, dtype=np.int64)
            name_len[decl] = np.frombuffer(self._decl_name_len, dtype=np.int64)
            name_hash[decl] = np.frombuffer(self._decl_name_hash, dtype=np.uint64)
            node_type[decl] = np.frombuffer(self._decl_type, dtype=np.int32)
        arrays.update(id_off=id_off, id_len=id_len, name_off=name_off, name_len=name_len, node_type=node_type)
        order = np.argsort(id_hash, kind="stable")
        arrays["id_hash"], arrays["id_perm"] = id_hash[order], order.astype(node_dtype)
        order = np.argsort(name_hash, kind="stable")
        arrays["name_hash"], arrays["name_perm"] = name_hash[order], order.astype(node_dtype)
        del id_hash, name_hash, order

        # features: CSR per node
        fnode = np.frombuffer(self._feat[0], dtype=np.int64) if len(self._feat[0]) else np.zeros(0, np.int64)
        order = np.argsort(fnode, kind="stable")
        fnode_sorted = fnode[order]
        arrays["feat_ptr"] = np.concatenate([[0], np.cumsum(np.bincount(fnode, minlength=n))]).astype(np.int64)
        for field_name, column, dtype in (("feat_key", 1, np.int32), ("feat_kind", 2, np.int8),
                                          ("feat_off", 3, np.int64), ("feat_len", 4, np.int64)):
            values = np.frombuffer(self._feat[column], dtype=dtype) if len(self._feat[column]) \
                else np.zeros(0, dtype)
            arrays[field_name] = values[order].astype(np.int32 if field_name == "feat_len" else dtype)
        del fnode, order

        # the schema: which features each node type has, which (type, relation, type) patterns the edges form
        fkeys = arrays["feat_key"]
        type_features: dict[str, list[str]] = {}
        if len(fkeys):
            types, keys = list(self._types), list(self._feature_keys)
            pairs = np.unique(np.stack([node_type[fnode_sorted].astype(np.int64), fkeys.astype(np.int64)], axis=1),
                              axis=0)
            for t, k in pairs.tolist():
                type_features.setdefault(types[t] if t >= 0 else "", []).append(keys[k])
        del fnode_sorted
        src = np.frombuffer(self._src, dtype=np.int64) if e else np.zeros(0, np.int64)
        rel = np.frombuffer(self._rel, dtype=np.int32) if e else np.zeros(0, np.int32)
        dst = np.frombuffer(self._dst, dtype=np.int64) if e else np.zeros(0, np.int64)
        r = max(1, len(self._relations))
        schema = _schema(node_type, src, rel, dst, list(self._types), list(self._relations))

        # edges: runs of (node, relation) in order of first appearance, both directions
        out_order, out_run_rel, out_run_start, out_ptr = _runs(src, rel, n, r)
        position = np.empty(e, dtype=np.int64)
        position[out_order] = np.arange(e, dtype=np.int64)
        arrays["out_dst"] = dst[out_order].astype(node_dtype)
        arrays["out_run_rel"] = out_run_rel.astype(np.int32)
        arrays["out_run_start"] = out_run_start.astype(np.int64)
        arrays["out_ptr"] = out_ptr
        del out_order
        in_order, in_run_rel, in_run_start, in_ptr = _runs(dst, rel, n, r)
        arrays["in_src"] = src[in_order].astype(node_dtype)
        arrays["in_pos"] = position[in_order].astype(pos_dtype)
        arrays["in_run_rel"] = in_run_rel.astype(np.int32)
        arrays["in_run_start"] = in_run_start.astype(np.int64)
        arrays["in_ptr"] = in_ptr
        del in_order

        # qualifiers: per edge that has any, by its position in the outgoing order
        qedge = np.frombuffer(self._qual[0], dtype=np.int64) if len(self._qual[0]) else np.zeros(0, np.int64)
        qpos = position[qedge]
        order = np.argsort(qpos, kind="stable")
        qpos = qpos[order]
        edges_with, first = np.unique(qpos, return_index=True)
        arrays["qual_edge"] = edges_with.astype(np.int64)
        arrays["qual_ptr"] = np.concatenate([first, [len(qpos)]]).astype(np.int64)
        for field_name, column, dtype in (("qual_key", 1, np.int32), ("qual_kind", 2, np.int8),
                                          ("qual_off", 3, np.int64), ("qual_len", 4, np.int64)):
            values = np.frombuffer(self._qual[column], dtype=dtype) if len(self._qual[column]) \
                else np.zeros(0, dtype)
            arrays[field_name] = values[order].astype(np.int32 if field_name == "qual_len" else dtype)
        heads = int(np.count_nonzero(np.diff(out_ptr)))
        del position, qedge, qpos, order

        self._strings.close()
        layout = _write_arrays(self.directory / "arrays.bin", arrays)
        manifest = {
            "format_version": FORMAT_VERSION,
            "backend": "compact",
            "name": name,
            "fingerprint": fingerprint,
            "source": dict(source),
            "counts": {"nodes": n, "edges": e, "heads": heads, "relations": len(self._relations),
                       "types": len(self._types), "features": len(arrays["feat_key"]),
                       "qualified_edges": len(arrays["qual_edge"])},
            "types": list(self._types),
            "relations": list(self._relations),
            "feature_keys": list(self._feature_keys),
            "qualifier_keys": list(self._qualifier_keys),
            "type_features": type_features,
            "schema": schema,
            "meta": self.meta,
            "arrays": layout,
            "bytes": {"arrays": (self.directory / "arrays.bin").stat().st_size,
                      "strings": (self.directory / "strings.bin").stat().st_size},
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "build_seconds": round(time.monotonic() - self._started, 3),
        }
        tmp = self.directory / "manifest.json.tmp"
        tmp.write_text(json.dumps(manifest, indent=1, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self.directory / "manifest.json")
        return manifest

    def abort(self) -> None:
        """Close the files (the caller removes the directory)."""
        self._strings.close()


#: The schema lists at most this many (head type, relation, tail type) patterns, the most frequent first.
SCHEMA_LIMIT = 500


def _schema(node_type: np.ndarray, src: np.ndarray, rel: np.ndarray, dst: np.ndarray, types: list[str],
            relations: list[str]) -> list[list[Any]]:
    """The (head type, relation, tail type, edge count) patterns of the edges, most frequent first."""
    if not len(src):
        return []
    t = len(types) + 1
    key = ((node_type[src].astype(np.int64) + 1) * len(relations) + rel) * t + (node_type[dst].astype(np.int64) + 1)
    values, counts = np.unique(key, return_counts=True)
    out = []
    for value, count in sorted(zip(values.tolist(), counts.tolist(), strict=True),
                               key=lambda vc: -vc[1])[:SCHEMA_LIMIT]:
        head_rel, tail = divmod(value, t)
        head, relation = divmod(head_rel, len(relations))
        out.append([types[head - 1] if head else "", relations[relation], types[tail - 1] if tail else "", count])
    return out


def _runs(node: np.ndarray, rel: np.ndarray, n: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Order edges by node, then by the first appearance of (node, relation), then by source order.

    Returns the edge order, each run's relation and first position, and ``ptr`` (node → its runs).
    """
    e = len(node)
    if e == 0:
        return (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(n + 1, np.int64))
    key = node.astype(np.int64) * r + rel
    first = np.argsort(key, kind="stable")  # by (node, relation), source order inside
    sorted_key = key[first]
    del key
    starts = np.flatnonzero(np.concatenate([[True], sorted_key[1:] != sorted_key[:-1]]))
    del sorted_key
    lengths = np.diff(np.concatenate([starts, [e]]))
    run_node = node[first[starts]]
    run_first_edge = first[starts]  # the smallest source index of the run (stable sort)
    run_order = np.lexsort((run_first_edge, run_node))
    run_starts_old = starts[run_order]
    run_lengths = lengths[run_order]
    new_starts = np.concatenate([[0], np.cumsum(run_lengths)[:-1]])
    # the edge order: every run's slice of ``first``, runs in their new order
    order = first[np.repeat(run_starts_old - new_starts, run_lengths) + np.arange(e, dtype=np.int64)]
    run_rel = rel[first[run_starts_old]]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(run_node[run_order], minlength=n))]).astype(np.int64)
    return order, run_rel, new_starts.astype(np.int64), ptr


def _write_arrays(path: Path, arrays: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    layout: dict[str, dict[str, Any]] = {}
    with open(path, "wb") as f:
        offset = 0
        for key, value in arrays.items():
            value = np.ascontiguousarray(value)
            pad = (-offset) % ALIGN
            f.write(b"\0" * pad)
            offset += pad
            layout[key] = {"dtype": value.dtype.str, "shape": list(value.shape), "offset": offset}
            f.write(value.tobytes())
            offset += value.nbytes
    return layout
