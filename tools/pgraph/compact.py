"""The embedded compact store: a built graph directory (:mod:`kgagents.tools.pgraph.build`), memory-mapped read-only.

Opening costs two ``mmap`` calls and a JSON manifest, whatever the graph's size: pages are read from disk when
a lookup touches them and shared by every run and every process that opens the same directory. Node handles
are integers; a lookup by id or by name is a binary search over sorted 64-bit hashes with a string check.
The embedding indexes live in ``index/`` beside the arrays (:mod:`kgagents.tools.pgraph.vectors`), built when a search
first needs them.
"""

from __future__ import annotations

import json
import mmap
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from kgagents.tools.pgraph.build import FORMAT_VERSION, KIND_STR, string_hash
from kgagents.tools.pgraph.model import GraphFormatError, GraphRef, GraphStats, Node, StaticKG, Triple
from kgagents.tools.pgraph.vectors import IndexSet


class CompactGraph(StaticKG):
    """A read-only graph over the arrays of one build directory."""

    def __init__(self, directory: str | Path, *, ref: GraphRef | None = None) -> None:
        self.directory = Path(directory)
        try:
            manifest = json.loads((self.directory / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise GraphFormatError(f"{self.directory} is not a built graph (manifest.json: {exc})") from exc
        if manifest.get("format_version") != FORMAT_VERSION or manifest.get("backend") != "compact":
            raise GraphFormatError(f"{self.directory} holds a graph of another layout "
                                   f"(version {manifest.get('format_version')}); import it again")
        self.manifest = manifest
        self.name = str(manifest.get("name") or self.directory.name)
        self.fingerprint = str(manifest["fingerprint"])
        self.ref = ref or GraphRef(name=self.name, location=str(self.directory), fingerprint=self.fingerprint)
        self._types: list[str] = manifest["types"]
        self._relations: list[str] = manifest["relations"]
        self._relation_ids = {r: i for i, r in enumerate(self._relations)}
        self._feature_keys: list[str] = manifest["feature_keys"]
        self._qualifier_keys: list[str] = manifest["qualifier_keys"]
        self._a: dict[str, np.ndarray] = {}
        with open(self.directory / "arrays.bin", "rb") as f:
            size = f.seek(0, 2)
            self._arrays_map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        for key, spec in manifest["arrays"].items():
            dtype = np.dtype(spec["dtype"])
            count = int(np.prod(spec["shape"])) if spec["shape"] else 1
            self._a[key] = np.frombuffer(self._arrays_map, dtype=dtype, count=count, offset=spec["offset"]) \
                if count else np.zeros(spec["shape"], dtype=dtype)
        with open(self.directory / "strings.bin", "rb") as f:
            size = f.seek(0, 2)
            self._strings: Any = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self.indexes = IndexSet(self.directory / "index", self)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        c = self.manifest["counts"]
        return (f"CompactGraph({self.name!r}: {c['nodes']} nodes, {c['edges']} edges, {c['relations']} relations, "
                f"at {self.directory})")

    def __len__(self) -> int:
        return int(self.manifest["counts"]["edges"])

    @property
    def node_count(self) -> int:
        return int(self.manifest["counts"]["nodes"])

    # --- strings -----------------------------------------------------------------------------------------------
    def _str(self, offset: int, length: int) -> str:
        return self._strings[offset:offset + length].decode("utf-8")

    def _id_str(self, index: int) -> str:
        return self._str(int(self._a["id_off"][index]), int(self._a["id_len"][index]))

    def _name_str(self, index: int) -> str:
        return self._str(int(self._a["name_off"][index]), int(self._a["name_len"][index]))

    def _value(self, kind: int, offset: int, length: int) -> Any:
        text = self._str(offset, length)
        return text if kind == KIND_STR else json.loads(text)

    # --- primitives -------------------------------------------------------------------------------------------
    def _find(self, text: str, hashes: np.ndarray, perm: np.ndarray, read: Any) -> list[int]:
        h = np.uint64(string_hash(text))
        lo = int(np.searchsorted(hashes, h, side="left"))
        found: list[int] = []
        while lo < len(hashes) and hashes[lo] == h:
            index = int(perm[lo])
            if read(index) == text:
                found.append(index)
            lo += 1
        return found

    def _handle(self, node_id: str) -> int | None:
        found = self._find(node_id, self._a["id_hash"], self._a["id_perm"], self._id_str)
        return found[0] if found else None

    def _handles_named(self, name: str) -> list[int]:
        return sorted(self._find(name, self._a["name_hash"], self._a["name_perm"], self._name_str))

    def _node_of(self, handle: Any) -> Node:
        index = int(handle)
        type_id = int(self._a["node_type"][index])
        return Node(self._id_str(index), self._types[type_id] if type_id >= 0 else "", self._name_str(index))

    def _id_of(self, handle: Any) -> str:
        return self._id_str(int(handle))

    def _features_of(self, handle: Any) -> dict[str, Any]:
        index = int(handle)
        a = self._a
        start, end = int(a["feat_ptr"][index]), int(a["feat_ptr"][index + 1])
        return {self._feature_keys[int(a["feat_key"][i])]: self._value(int(a["feat_kind"][i]), int(a["feat_off"][i]),
                                                                        int(a["feat_len"][i]))
                for i in range(start, end)}

    def _run_range(self, index: int, direction: Literal["out", "in"]) -> tuple[int, int]:
        ptr = self._a[f"{direction}_ptr"]
        return int(ptr[index]), int(ptr[index + 1])

    def _run_span(self, run: int, direction: Literal["out", "in"]) -> tuple[int, int]:
        starts = self._a[f"{direction}_run_start"]
        start = int(starts[run])
        end = int(starts[run + 1]) if run + 1 < len(starts) else len(self._a["out_dst"])
        return start, end

    def _runs(self, handle: Any, direction: Literal["out", "in"]) -> list[tuple[str, int]]:
        first, last = self._run_range(int(handle), direction)
        rels = self._a[f"{direction}_run_rel"]
        out = []
        for run in range(first, last):
            start, end = self._run_span(run, direction)
            out.append((self._relations[int(rels[run])], end - start))
        return out

    def _find_run(self, index: int, relation: str, direction: Literal["out", "in"]) -> int | None:
        rel_id = self._relation_ids.get(relation)
        if rel_id is None:
            return None
        first, last = self._run_range(index, direction)
        if first == last:
            return None
        hits = np.flatnonzero(self._a[f"{direction}_run_rel"][first:last] == rel_id)
        return first + int(hits[0]) if len(hits) else None

    def _qualifiers(self, position: int) -> dict[str, Any]:
        a = self._a
        edges = a["qual_edge"]
        if not len(edges):
            return {}
        i = int(np.searchsorted(edges, position))
        if i >= len(edges) or int(edges[i]) != position:
            return {}
        start, end = int(a["qual_ptr"][i]), int(a["qual_ptr"][i + 1])
        return {self._qualifier_keys[int(a["qual_key"][j])]: self._value(int(a["qual_kind"][j]), int(a["qual_off"][j]),
                                                                          int(a["qual_len"][j]))
                for j in range(start, end)}

    def _run_edges(self, handle: Any, relation: str, direction: Literal["out", "in"], *,
                   limit: int | None = None) -> list[tuple[int, Mapping[str, Any]]]:
        run = self._find_run(int(handle), relation, direction)
        if run is None:
            return []
        start, end = self._run_span(run, direction)
        if limit is not None:
            end = min(end, start + max(0, limit))
        if direction == "out":
            others = self._a["out_dst"][start:end]
            positions: Sequence[int] | np.ndarray = range(start, end)
        else:
            others = self._a["in_src"][start:end]
            positions = self._a["in_pos"][start:end]
        with_qualifiers = len(self._a["qual_edge"]) > 0
        return [(int(o), self._qualifiers(int(p)) if with_qualifiers else {})
                for o, p in zip(others, positions, strict=True)]

    # --- fast paths --------------------------------------------------------------------------------------------
    def neighbour_indices(self, index: int, relations: Iterable[str] | None = None,
                          direction: Literal["out", "in"] = "out") -> np.ndarray:
        """The integer ids at the other ends of a node's edges (all relations, or those given): no strings."""
        first, last = self._run_range(index, direction)
        if first == last:
            return np.zeros(0, dtype=np.int64)
        wanted = None if relations is None else {self._relation_ids[r] for r in relations if r in self._relation_ids}
        ends = self._a["out_dst" if direction == "out" else "in_src"]
        rels = self._a[f"{direction}_run_rel"]
        parts = []
        for run in range(first, last):
            if wanted is None or int(rels[run]) in wanted:
                start, end = self._run_span(run, direction)
                parts.append(ends[start:end])
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)

    def index_of(self, node_id: str) -> int | None:
        """The integer id of a node (for :meth:`neighbour_indices`)."""
        return self._handle(str(node_id))

    def id_of(self, index: int) -> str:
        return self._id_str(int(index))

    # --- whole graph ------------------------------------------------------------------------------------------
    @property
    def meta(self) -> dict[str, Any]:
        return dict(self.manifest.get("meta") or {})

    def stats(self) -> GraphStats:
        """Counts and vocabularies, from memory (no I/O: nodes on the event loop call it); the embedding
        indexes on disk are listed by ``self.indexes.status()``."""
        c = self.manifest["counts"]
        return GraphStats(nodes=c["nodes"], edges=c["edges"], heads=c["heads"], relations=list(self._relations),
                          types=list(self._types), feature_keys=list(self._feature_keys),
                          qualifier_keys=list(self._qualifier_keys),
                          extra={"backend": "compact", "location": str(self.directory),
                                 "bytes_on_disk": sum(self.manifest["bytes"].values())})

    def schema(self) -> list[tuple[str, str, str, int]]:
        return [tuple(p) for p in self.manifest.get("schema", [])]

    def type_features(self) -> dict[str, list[str]]:
        return {t: list(keys) for t, keys in self.manifest.get("type_features", {}).items()}

    def type_counts(self) -> dict[str, int]:
        types = self._a["node_type"]
        counts: np.ndarray | list[int] = \
            np.bincount(types[types >= 0], minlength=len(self._types)) if len(types) else []
        out = {t: int(counts[i]) for i, t in enumerate(self._types)}
        untyped = int(np.count_nonzero(types < 0))
        if untyped:
            out[""] = untyped
        return out

    def relation_counts(self) -> dict[str, int]:
        starts = self._a["out_run_start"]
        if not len(starts):
            return {}
        lengths = np.diff(np.concatenate([starts, [len(self._a["out_dst"])]]))
        counts = np.bincount(self._a["out_run_rel"], weights=lengths, minlength=len(self._relations))
        return {r: int(counts[i]) for i, r in enumerate(self._relations)}

    def head_mask(self) -> np.ndarray:
        """A boolean per node: does it have an outgoing edge?"""
        return np.diff(self._a["out_ptr"]) > 0

    def type_mask(self, types: Iterable[str]) -> np.ndarray:
        ids = [i for i, t in enumerate(self._types) if t in set(types)]
        return np.isin(self._a["node_type"], ids)

    def iter_nodes(self) -> Iterator[Node]:
        for index in range(self.node_count):
            yield self._node_of(index)

    def iter_triples(self) -> Iterator[Triple]:
        rels = self._a["out_run_rel"]
        dst = self._a["out_dst"]
        ptr = self._a["out_ptr"]
        for index in range(self.node_count):
            head = None
            for run in range(int(ptr[index]), int(ptr[index + 1])):
                head = head or self._id_str(index)
                start, end = self._run_span(run, "out")
                relation = self._relations[int(rels[run])]
                for position in range(start, end):
                    yield Triple(head, relation, self._id_str(int(dst[position])), self._qualifiers(position))

    def node_texts(self, start: int, end: int, field: str, *, max_chars: int | None = 1000) -> list[str]:
        """The texts of nodes ``start..end`` for an embedding field (``name`` or ``text``)."""
        if field == "name":
            return [self._name_str(i) for i in range(start, end)]
        if field == "text":
            return [self._text_of(i, max_chars) for i in range(start, end)]
        raise ValueError(f"unknown embedding field {field!r}: use 'name' or 'text'")

    # --- nearest ---------------------------------------------------------------------------------------------
    def nearest_nodes(self, text: str, k: int = 5, *, field: str = "name", among: Iterable[str] | None = None,
                      types: Iterable[str] | None = None, heads_only: bool = False,
                      embedder: Any = None, kind: str | None = None,
                      vector: Any = None) -> list[tuple[str, float]]:
        if field not in ("name", "text"):
            raise ValueError(f"unknown embedding field {field!r}: use 'name' or 'text'")
        ids: np.ndarray | None = None
        mask: np.ndarray | None = None
        if among is not None:
            found = [self._handle(str(i)) for i in among]
            ids = np.asarray(sorted({h for h in found if h is not None}), dtype=np.int64)
        if types is not None:
            mask = self.type_mask(types)
        if heads_only:
            heads = self.head_mask()
            mask = heads if mask is None else mask & heads
        if ids is not None and mask is not None:
            ids, mask = ids[mask[ids]], None
        index = self.indexes.get(field, embedder, kind=kind)
        hits = index.search(text, k, ids=ids, mask=mask, vector=vector, embedder=embedder)
        return [(self._id_str(int(i)), s) for i, s in hits]

    def nearest_relations(self, text: str, k: int = 5, *, among: Iterable[str] | None = None,
                          embedder: Any = None) -> list[tuple[str, float]]:
        ids = None
        if among is not None:
            ids = np.asarray(sorted({self._relation_ids[r] for r in among if r in self._relation_ids}), dtype=np.int64)
        index = self.indexes.get("relation", embedder)
        return [(self._relations[int(i)], s) for i, s in index.search(text, k, ids=ids)]

    def relation_texts(self, start: int, end: int) -> list[str]:
        return self._relations[start:end]

    def close(self) -> None:
        for m in (self._arrays_map, self._strings):
            if isinstance(m, mmap.mmap):
                try:
                    m.close()
                except BufferError:  # arrays still point into the map: it goes with them
                    pass
