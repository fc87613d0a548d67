"""Persistent embedding indexes of a static KG: one per field (node names, node texts, relations) and model.

An index is built the first time a search needs it — the texts are embedded in batches with a progress bar —
and saved under the graph's ``index/`` directory, so later opens (and other processes) memory-map it instead
of embedding again:

- ``vectors.npy``: the normalised embeddings as float16, one row per node (or relation);
- ``index.faiss``: a FAISS inner-product index: exact (``IndexFlatIP``) up to :data:`IVF_THRESHOLD` vectors,
  above it an inverted-file index with 8-bit scalar quantisation (``IVF<nlist>,SQ8``, ``nlist = 4·√N``,
  searched with ``nprobe`` lists). The benchmark in ``evals/bench_static_kg.py`` measures its recall against
  exact search; the README gives the numbers. A caller may ask for one kind (``kind="exact"`` or ``"ivf"``,
  see :meth:`IndexSet.get`): where the size-chosen index is of another kind, that kind is built beside it
  (``<field>--<model>--exact`` or ``--ivf``).
- ``meta.json``: the model, dimension, count, kind and build time.

A search restricted to a subset (``ids``: a few rows, or ``mask``: one boolean per row) is exact: up to
:data:`EXACT_LIMIT` rows it is a dot product over their stored vectors, beyond that FAISS with an ID selector.
Embedders are identified by a model id (the packaged all-MiniLM-L6-v2, or the name or path given); an
embedder object without one is used in memory only, never saved.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tools.pgraph.embeddings import (
    Embedder,
    LazyEmbedder,
    SentenceTransformerEmbedder,
    canonical_model,
    load_embedder,
    packaged_model_path,
)

#: Above this many vectors the index is an IVF index (approximate, see the module docstring).
IVF_THRESHOLD = 1_000_000
#: Restricted searches over at most this many rows are exact dot products over the stored vectors.
EXACT_LIMIT = 200_000
#: Inverted lists an IVF search probes: 128 of ~4·√N lists (recall@10 0.93 on real MiniLM name embeddings,
#: 0.98 on clustered vectors; the benchmark's numbers are in docs/graphs.md).
DEFAULT_NPROBE = 128
DEFAULT_MODEL_ID = "all-MiniLM-L6-v2"
BATCH = 2048
#: Build a progress bar from this many texts on.
PROGRESS_FROM = 5_000


def model_id_of(embedder: Any) -> str | None:
    """A stable id for an embedder spec (``None``, a name or path, an embedder); ``None`` if it has none."""
    if embedder is None:
        return DEFAULT_MODEL_ID
    if isinstance(embedder, (str, Path)):
        return _model_id_for_name(str(embedder))
    if isinstance(embedder, SentenceTransformerEmbedder):
        return _model_id_for_name(embedder.name)
    if isinstance(embedder, LazyEmbedder):
        return _model_id_for_name(None if embedder.model is None else str(embedder.model))
    explicit = getattr(embedder, "model_id", None)
    return str(explicit) if explicit else None


def _model_id_for_name(name: str | None) -> str:
    name = canonical_model(name)
    if name is None:
        return DEFAULT_MODEL_ID
    with contextlib.suppress(RuntimeError):
        if Path(name).resolve() == packaged_model_path().resolve():
            return DEFAULT_MODEL_ID
    slug = re.sub(r"[^0-9A-Za-z._-]+", "_", name.strip("/"))[-80:]
    return slug or "model"


def resolve_embedder(embedder: Any) -> Embedder:
    """An object with ``encode``: the packaged model for ``None``, a model by name or path, or ``embedder``."""
    if embedder is None:
        return load_embedder()
    if isinstance(embedder, (str, Path)):
        return load_embedder(str(embedder))
    if not hasattr(embedder, "encode"):
        raise TypeError(f"an embedder needs an encode(texts) method, got {type(embedder).__name__}")
    return embedder


@contextlib.contextmanager
def file_lock(path: Path):
    """An exclusive lock between processes (and threads: each call opens its own descriptor)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class VectorIndex:
    """Embeddings of ``count`` texts and a FAISS index over them; searches return ``(row, score)``."""

    def __init__(self, vectors: np.ndarray, index: Any, meta: dict[str, Any], embedder: Embedder) -> None:
        self.vectors = vectors
        self.index = index
        self.meta = meta
        self.embedder = embedder

    @property
    def count(self) -> int:
        return int(self.meta["count"])

    @classmethod
    def build(cls, directory: Path | None, count: int, texts: Callable[[int, int], list[str]], embedder: Embedder,
              *, model_id: str | None, label: str, ivf_threshold: int = IVF_THRESHOLD,
              progress: bool | None = None) -> VectorIndex:
        """Embed ``texts(start, end)`` for ``0..count`` in batches; save under ``directory`` when given."""
        import faiss

        started = time.monotonic()
        show = progress if progress is not None else count >= PROGRESS_FROM
        bar = None
        if show:
            from tqdm import tqdm

            bar = tqdm(total=count, desc=f"embedding {label}", unit="text", file=sys.stderr)
        chunks = []
        try:
            for start in range(0, count, BATCH):
                end = min(count, start + BATCH)
                batch = embedder.encode(texts(start, end))
                chunks.append(np.asarray(batch, dtype=np.float32))
                if bar is not None:
                    bar.update(end - start)
        finally:
            if bar is not None:
                bar.close()
        dim = chunks[0].shape[1] if chunks else int(getattr(embedder, "dimension", 1) or 1)
        matrix = np.concatenate(chunks) if chunks else np.zeros((0, dim), dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms == 0, 1, norms)
        if count > ivf_threshold:
            nlist = max(1, int(4 * np.sqrt(count)))
            index = faiss.index_factory(dim, f"IVF{nlist},SQ8", faiss.METRIC_INNER_PRODUCT)
            rng = np.random.default_rng(0)
            sample = matrix[rng.choice(count, size=min(count, nlist * 40), replace=False)]
            index.train(sample)
            index.add(matrix)
            faiss.extract_index_ivf(index).nprobe = DEFAULT_NPROBE
            kind = "ivf"
        else:
            nlist = 0
            index = faiss.IndexFlatIP(dim)
            if count:
                index.add(matrix)
            kind = "flat"
        meta = {"model": model_id, "dim": dim, "count": count, "kind": kind, "nlist": nlist,
                "nprobe": DEFAULT_NPROBE if kind == "ivf" else 0, "label": label,
                "build_seconds": round(time.monotonic() - started, 3)}
        vectors = matrix.astype(np.float16)
        if directory is not None:
            tmp = directory.with_name(directory.name + f".tmp-{os.getpid()}-{threading.get_ident()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            np.save(tmp / "vectors.npy", vectors)
            faiss.write_index(index, str(tmp / "index.faiss"))
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
            if directory.exists():
                shutil.rmtree(directory)
            os.replace(tmp, directory)
            return cls.load(directory, embedder)
        return cls(vectors, index, meta, embedder)

    @classmethod
    def load(cls, directory: Path, embedder: Embedder) -> VectorIndex:
        """Memory-map a saved index."""
        import faiss

        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
        vectors = np.load(directory / "vectors.npy", mmap_mode="r")
        flags = faiss.IO_FLAG_MMAP if meta["kind"] == "ivf" else faiss.IO_FLAG_MMAP_IFC
        index = faiss.read_index(str(directory / "index.faiss"), flags | faiss.IO_FLAG_READ_ONLY)
        if meta["kind"] == "ivf":
            faiss.extract_index_ivf(index).nprobe = max(int(meta.get("nprobe") or 0), DEFAULT_NPROBE)
        return cls(vectors, index, meta, embedder)

    def encode(self, text: str) -> np.ndarray:
        vector = np.asarray(self.embedder.encode([text]), dtype=np.float32).reshape(1, -1)
        norm = np.linalg.norm(vector)
        return vector / norm if norm else vector

    def search(self, text: str, k: int = 5, *, ids: np.ndarray | None = None, mask: np.ndarray | None = None,
               nprobe: int | None = None) -> list[tuple[int, float]]:
        """The ``k`` rows closest to ``text`` (among ``ids`` / where ``mask`` is true), best first."""
        if k <= 0 or self.count == 0:
            return []
        query = self.encode(text)
        if mask is not None:
            selected = int(np.count_nonzero(mask))
            if selected <= EXACT_LIMIT:
                ids, mask = np.flatnonzero(mask), None
        if ids is not None:
            ids = np.asarray(ids, dtype=np.int64)
            if len(ids) == 0:
                return []
            if len(ids) <= EXACT_LIMIT:
                scores = np.asarray(self.vectors[np.sort(ids)], dtype=np.float32) @ query[0]
                rows = np.sort(ids)
                top = np.argsort(-scores, kind="stable")[:k]
                return [(int(rows[i]), round(float(scores[i]), 4)) for i in top]
        return self._faiss_search(query, k, ids=ids, mask=mask, nprobe=nprobe)

    def _faiss_search(self, query: np.ndarray, k: int, *, ids: np.ndarray | None, mask: np.ndarray | None,
                      nprobe: int | None) -> list[tuple[int, float]]:
        import faiss

        selector = None
        if ids is not None:
            selector = faiss.IDSelectorBatch(np.asarray(ids, dtype=np.int64))
        elif mask is not None:
            bits = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
            selector = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bits))
        k = min(k, self.count)
        if self.meta["kind"] == "ivf":
            params = faiss.SearchParametersIVF(nprobe=int(nprobe or max(int(self.meta.get("nprobe") or 0), DEFAULT_NPROBE)))
            if selector is not None:
                params.sel = selector
        else:
            params = faiss.SearchParameters(sel=selector) if selector is not None else None
        scores, rows = self.index.search(query, k, params=params) if params is not None \
            else self.index.search(query, k)
        return [(int(r), round(float(s), 4)) for s, r in zip(scores[0], rows[0]) if r >= 0]


class IndexSet:
    """The embedding indexes of one graph, by (field, model): built once, shared by every run in the process.

    ``source`` must offer ``node_count``, ``node_texts(start, end, field)`` and ``relation_texts(start, end)``
    and a ``stats()`` whose ``relations`` give the relation count.
    """

    FIELDS = ("name", "text", "relation")

    def __init__(self, directory: Path | None, source: Any, *, ivf_threshold: int | None = None) -> None:
        self.directory = directory
        self.source = source
        self.ivf_threshold = ivf_threshold
        self._built: dict[tuple[str, str], VectorIndex] = {}
        self._memory: dict[tuple[str, int], VectorIndex] = {}
        self._lock = threading.Lock()
        self.builds = 0
        """How many indexes this instance embedded (not loaded): tests check that runs share them."""

    def _spec(self, field: str) -> tuple[int, Callable[[int, int], list[str]]]:
        if field == "relation":
            count = len(self.source.stats().relations)
            return count, self.source.relation_texts
        if field in ("name", "text"):
            return int(self.source.node_count), lambda s, e: self.source.node_texts(s, e, field)
        raise ValueError(f"unknown embedding field {field!r}: use one of {', '.join(self.FIELDS)}")

    def get(self, field: str, embedder: Any = None, kind: str | None = None) -> VectorIndex:
        """The index of ``field`` for ``embedder`` (see :func:`model_id_of`), built on first use. ``kind``:
        ``None`` for the kind the size chooses (exact up to the IVF threshold), ``exact`` or ``ivf`` for that kind
        whatever the size."""
        if kind not in (None, "exact", "ivf"):
            raise ValueError(f"unknown vector index kind {kind!r}: use 'exact' or 'ivf'")
        threshold = IVF_THRESHOLD if self.ivf_threshold is None else self.ivf_threshold
        if kind is not None and (kind == "ivf") == (self._spec(field)[0] > threshold):
            kind = None  # the size chooses that kind already: one index serves both
        forced = {} if kind is None else {"ivf_threshold": sys.maxsize if kind == "exact" else 0}
        suffix = "" if kind is None else f"--{kind}"
        model_id = model_id_of(embedder)
        if model_id is None:  # an embedder object without a model id: in memory, for this object only
            key = (field + suffix, id(embedder))
            with self._lock:
                if key not in self._memory:
                    count, texts = self._spec(field)
                    self._memory[key] = VectorIndex.build(None, count, texts, resolve_embedder(embedder),
                                                          model_id=None, label=f"{field}s",
                                                          **(forced or self._threshold()))
                    self.builds += 1
                return self._memory[key]
        with self._lock:
            found = self._built.get((field + suffix, model_id))
            if found is not None:
                return found
            model = resolve_embedder(embedder)
            if self.directory is None:
                count, texts = self._spec(field)
                index = VectorIndex.build(None, count, texts, model, model_id=model_id, label=f"{field}s",
                                          **(forced or self._threshold()))
                self.builds += 1
            else:
                name = f"{field}--{model_id}{suffix}"
                with file_lock(self.directory / f".{name}.lock"):
                    if (self.directory / name / "meta.json").is_file():
                        index = VectorIndex.load(self.directory / name, model)
                    else:
                        count, texts = self._spec(field)
                        index = VectorIndex.build(self.directory / name, count, texts, model, model_id=model_id,
                                                  label=f"{field}s", **(forced or self._threshold()))
                        self.builds += 1
            self._built[(field + suffix, model_id)] = index
            return index

    def _threshold(self) -> dict[str, Any]:
        return {} if self.ivf_threshold is None else {"ivf_threshold": self.ivf_threshold}

    def status(self) -> dict[str, Any]:
        """The saved indexes (field, model, kind, count) — what ``kgagents graph info`` shows."""
        out: dict[str, Any] = {}
        if self.directory is not None and self.directory.is_dir():
            for meta_file in sorted(self.directory.glob("*/meta.json")):
                with contextlib.suppress(OSError, ValueError):
                    meta = json.loads(meta_file.read_text(encoding="utf-8"))
                    out[meta_file.parent.name] = {k: meta.get(k) for k in ("kind", "count", "dim", "nlist", "nprobe",
                                                                            "build_seconds")}
        return out
