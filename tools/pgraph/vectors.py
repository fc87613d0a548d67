"""Persistent embedding indexes of a static KG: one per field (node names, node texts, relations) and model.

An index is built the first time a search needs it — the texts are embedded in batches with a progress bar —
and saved under the graph's ``index/`` directory, so later opens (and other processes) memory-map it instead
of embedding again:

- ``vectors.npy``: the normalised embeddings as float16, one row per node (or relation);
- ``index.faiss``: a FAISS inner-product index: exact (``IndexFlatIP``) up to :data:`IVF_THRESHOLD` vectors,
  above it an inverted-file index with 8-bit scalar quantisation (``IVF<nlist>,SQ8``, ``nlist = 4·√N``,
  searched with ``nprobe`` lists). The benchmark in ``evals/bench_static_kg.py`` measures its recall against
  exact search; the README gives the numbers.
- ``meta.json``: the model, dimension, count, kind and build time.

A search restricted to a subset (``ids``: a few rows, or ``mask``: one boolean per row) is exact: up to
:data:`EXACT_LIMIT` rows it is a dot product over their vectors (the flat index's float32 vectors, or the stored
float16 ones of an IVF index), beyond that FAISS with an ID selector.
Embedders are identified by a model id (the packaged all-MiniLM-L6-v2, or the name or path given); an
embedder object without one is used in memory only, never saved.

A caller that needs exact search whatever the size asks for ``kind="flat"`` (an IVF index of the same field and
model is then left alone and a flat one built beside it, ``<field>--<model>--flat``), and ``kind="ivf"`` for an
IVF index whatever the size. An index can also hold vectors computed elsewhere for some of the rows only (STaRK's
released embeddings of its candidate nodes: :meth:`IndexSet.install`); a search then ranks only those rows. A
search takes the query's text (embedded by the index's model) or its vector (``vector=``: a precomputed query
embedding).
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
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kgagents.tools.pgraph.embeddings import (
    OPENAI_PREFIX,
    Embedder,
    LazyEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    canonical_model,
    embedder_from_name,
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
#: Characters of a node's text the ``text`` index embeds, unless the embedder says (``max_chars``; ``None``: all).
TEXT_CHARS = 1000


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


def cache_model_id(embedder: Any) -> str | None:
    """What identifies an embedder's vectors: its model id, with its device and server when it names them;
    ``None`` when it has no stable id (its vectors are not cached)."""
    model = model_id_of(embedder)
    if model is None:
        return None
    device = getattr(embedder, "device", None)
    base_url = getattr(embedder, "base_url", None)
    return model + (f"@{device}" if device else "") + (f"@{base_url}" if base_url else "")


#: Query embeddings a process keeps (:meth:`VectorIndex.encode`), the least recently used dropped first;
#: ``KGAGENTS_QUERY_MEMO`` sets another number (0: none kept).
QUERY_MEMO = 10_000
_queries: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_queries_lock = threading.Lock()
#: Query embeddings served from the memo and computed (``[hits, misses]``), for the benchmarks.
query_counts = [0, 0]


def _memo_size() -> int:
    value = os.environ.get("KGAGENTS_QUERY_MEMO", "").strip()
    if not value:
        return QUERY_MEMO
    try:
        return max(0, int(value))
    except ValueError:
        raise ValueError(f"KGAGENTS_QUERY_MEMO is a number of query embeddings (0: none), not {value!r}") from None


def query_vector(text: str, model: Any) -> np.ndarray:
    """``model``'s embedding of one query text (a row), kept per process by the model's id, device and server
    and the text: a search repeated within a run (every iteration asks with the same question) or by a later
    run embeds it once. One text alone is one ``encode`` call of one text either way, so the vector is the one
    the model returns for it every time. Only the project's embedders are kept (a sentence-transformers model,
    by name or loaded, and OpenAI's embeddings); any other object is asked every time."""
    size = _memo_size()
    key = cache_model_id(model) if size and isinstance(model, (SentenceTransformerEmbedder, LazyEmbedder,
                                                               OpenAIEmbedder)) else None
    if key is None:
        return np.asarray(model.encode([text]), dtype=np.float32).reshape(1, -1)
    with _queries_lock:
        vector = _queries.get((key, text))
        if vector is not None:
            _queries.move_to_end((key, text))
            query_counts[0] += 1
            return vector
    vector = np.asarray(model.encode([text]), dtype=np.float32).reshape(1, -1)
    vector.setflags(write=False)
    with _queries_lock:
        _queries[(key, text)] = vector
        query_counts[1] += 1
        while len(_queries) > size:
            _queries.popitem(last=False)
    return vector


def _model_id_for_name(name: str | None) -> str:
    name = canonical_model(name)
    if name is None:
        return DEFAULT_MODEL_ID
    if name.startswith(OPENAI_PREFIX):
        return f"openai-{name[len(OPENAI_PREFIX):]}"
    with contextlib.suppress(RuntimeError):
        if Path(name).resolve() == packaged_model_path().resolve():
            return DEFAULT_MODEL_ID
    slug = re.sub(r"[^0-9A-Za-z._-]+", "_", name.strip("/"))[-80:]
    return slug or "model"


def resolve_embedder(embedder: Any) -> Embedder:
    """An object with ``encode``: the packaged model for ``None``, a model by name or path (``openai:<model>``
    too), or ``embedder``."""
    if embedder is None:
        return load_embedder()
    if isinstance(embedder, (str, Path)):
        return embedder_from_name(str(embedder))
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


KINDS = ("flat", "ivf")


def index_kind(setting: str | None) -> str | None:
    """The index kind a run's ``vector_index`` setting asks for: ``exact`` (or ``flat``) -> ``flat``, ``ivf`` ->
    ``ivf``, ``None`` -> what the size gives."""
    if setting is None:
        return None
    kind = {"exact": "flat", "flat": "flat", "ivf": "ivf"}.get(setting)
    if kind is None:
        raise ValueError(f"vector_index is exact or ivf, not {setting!r}")
    return kind


class VectorIndex:
    """Embeddings of ``count`` texts and a FAISS index over them; searches return ``(row, score)``.

    ``rows`` (sorted) says which rows the vectors belong to when they are not all of them (vectors computed
    elsewhere for some nodes); ``None``: vector ``i`` is row ``i``."""

    def __init__(self, vectors: np.ndarray, index: Any, meta: dict[str, Any], embedder: Embedder,
                 rows: np.ndarray | None = None) -> None:
        self.vectors = vectors
        self.index = index
        self.meta = meta
        self.embedder = embedder
        self.rows = rows
        self.exact = vectors
        if meta.get("kind") == "flat" and int(meta.get("count") or 0):
            import faiss  # faiss: a native library, loaded when an index is built or read

            with contextlib.suppress(AttributeError, RuntimeError):  # the flat index's own float32 vectors
                self.exact = faiss.rev_swig_ptr(index.get_xb(), index.ntotal * index.d).reshape(index.ntotal,
                                                                                                   index.d)

    @property
    def count(self) -> int:
        return int(self.meta["count"])

    @classmethod
    def from_matrix(cls, directory: Path | None, matrix: np.ndarray, embedder: Embedder, *, model_id: str | None,
                    label: str, kind: str = "flat", rows: np.ndarray | None = None) -> VectorIndex:
        """An index over vectors computed elsewhere (normalised here), for ``rows`` when given; saved under
        ``directory`` when given."""
        if kind not in KINDS:
            raise ValueError(f"an index is {' or '.join(KINDS)}, not {kind!r}")
        started = time.monotonic()
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        if rows is not None:
            order = np.argsort(rows, kind="stable")
            rows, matrix = np.asarray(rows, dtype=np.int64)[order], matrix[order]
            if len(rows) and bool((np.diff(rows) == 0).any()):
                raise ValueError("a row has two vectors")
        return cls._finish(directory, matrix, embedder, model_id=model_id, label=label, kind=kind, rows=rows,
                           started=started)

    @classmethod
    def build(cls, directory: Path | None, count: int, texts: Callable[[int, int], list[str]], embedder: Embedder,
              *, model_id: str | None, label: str, ivf_threshold: int = IVF_THRESHOLD,
              progress: bool | None = None, kind: str | None = None) -> VectorIndex:
        """Embed ``texts(start, end)`` for ``0..count`` in batches; save under ``directory`` when given. ``kind``:
        ``flat`` or ``ivf`` whatever the count; ``None``: IVF above ``ivf_threshold`` vectors, else flat."""
        started = time.monotonic()
        show = progress if progress is not None else count >= PROGRESS_FROM
        bar = None
        if show:
            from tqdm import tqdm  # only for the progress bar of a big index (not at the CLI's startup)

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
        kind = kind or ("ivf" if count > ivf_threshold else "flat")
        return cls._finish(directory, matrix, embedder, model_id=model_id, label=label, kind=kind, rows=None,
                           started=started)

    @classmethod
    def _finish(cls, directory: Path | None, matrix: np.ndarray, embedder: Embedder, *, model_id: str | None,
                label: str, kind: str, rows: np.ndarray | None, started: float) -> VectorIndex:
        import faiss  # faiss: a native library, loaded when an index is built or read

        count, dim = matrix.shape[0], (matrix.shape[1] if matrix.ndim == 2 and matrix.shape[1] else 1)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = matrix / np.where(norms == 0, 1, norms)
        if kind == "ivf" and count:
            nlist = max(1, min(int(4 * np.sqrt(count)), count))
            index = faiss.index_factory(dim, f"IVF{nlist},SQ8", faiss.METRIC_INNER_PRODUCT)
            rng = np.random.default_rng(0)
            sample = matrix[rng.choice(count, size=min(count, nlist * 40), replace=False)]
            index.train(sample)
            index.add(np.asarray(matrix, dtype=np.float32))  # what faiss's add makes of any array
            faiss.extract_index_ivf(index).nprobe = DEFAULT_NPROBE
            kind = "ivf"
        else:
            nlist = 0
            index = faiss.IndexFlatIP(dim)
            if count:
                index.add(np.asarray(matrix, dtype=np.float32))
            kind = "flat"
        meta = {"model": model_id, "dim": dim, "count": count, "kind": kind, "nlist": nlist,
                "nprobe": DEFAULT_NPROBE if kind == "ivf" else 0, "label": label,
                "build_seconds": round(time.monotonic() - started, 3), "subset": rows is not None}
        vectors = matrix.astype(np.float16)
        if directory is not None:
            tmp = directory.with_name(directory.name + f".tmp-{os.getpid()}-{threading.get_ident()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            np.save(tmp / "vectors.npy", vectors)
            if rows is not None:
                np.save(tmp / "rows.npy", rows)
            faiss.write_index(index, str(tmp / "index.faiss"))
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
            if directory.exists():
                shutil.rmtree(directory)
            os.replace(tmp, directory)
            return cls.load(directory, embedder)
        return cls(vectors, index, meta, embedder, rows)

    @classmethod
    def load(cls, directory: Path, embedder: Embedder) -> VectorIndex:
        """Memory-map a saved index."""
        import faiss  # faiss: a native library, loaded when an index is built or read

        meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
        vectors = np.load(directory / "vectors.npy", mmap_mode="r")
        flags = faiss.IO_FLAG_MMAP if meta["kind"] == "ivf" else faiss.IO_FLAG_MMAP_IFC
        index = faiss.read_index(str(directory / "index.faiss"), flags | faiss.IO_FLAG_READ_ONLY)
        if meta["kind"] == "ivf":
            faiss.extract_index_ivf(index).nprobe = max(int(meta.get("nprobe") or 0), DEFAULT_NPROBE)
        rows = np.load(directory / "rows.npy", mmap_mode="r") if (directory / "rows.npy").is_file() else None
        return cls(vectors, index, meta, embedder, rows)

    def encode(self, text: str, embedder: Any = None) -> np.ndarray:
        """The query's normalised embedding, by ``embedder`` (another object of the index's model, e.g. one with
        another server address) or the index's own."""
        model = self.embedder if embedder is None else resolve_embedder(embedder)
        vector = query_vector(text, model)
        norm = np.linalg.norm(vector)
        return vector / norm if norm else vector

    def _positions(self, ids: np.ndarray | None, mask: np.ndarray | None
                   ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Rows (``ids``) or a row mask as positions among this index's vectors (when they cover some rows)."""
        if self.rows is None:
            return ids, mask
        if mask is not None:
            return None, np.asarray(mask, dtype=bool)[self.rows]
        if ids is None:
            return None, None
        ids = np.asarray(ids, dtype=np.int64)
        at = np.searchsorted(self.rows, ids)
        at = np.minimum(at, max(len(self.rows) - 1, 0))
        found = (self.rows[at] == ids) if len(self.rows) else np.zeros(len(ids), dtype=bool)
        return at[found], None

    def search(self, text: str | None, k: int = 5, *, ids: np.ndarray | None = None,
               mask: np.ndarray | None = None, nprobe: int | None = None,
               vector: np.ndarray | None = None, embedder: Any = None) -> list[tuple[int, float]]:
        """The ``k`` rows closest to ``text`` — or to the query embedding ``vector`` — (among ``ids`` / where
        ``mask`` is true), best first; ``embedder`` embeds ``text`` (default: the index's)."""
        if k <= 0 or self.count == 0:
            return []
        if vector is not None:
            query = np.asarray(vector, dtype=np.float32).reshape(1, -1)
            if query.shape[1] != self.index.d:
                raise ValueError(f"a query vector of {query.shape[1]} dimensions for an index of {self.index.d}")
            norm = np.linalg.norm(query)
            query = query / norm if norm else query
        elif text is None:
            raise ValueError("a search needs a text or a vector")
        else:
            query = self.encode(text, embedder)
        ids, mask = self._positions(ids, mask)
        found = self._search_positions(query, k, ids=ids, mask=mask, nprobe=nprobe)
        if self.rows is None:
            return found
        return [(int(self.rows[p]), s) for p, s in found]

    def _search_positions(self, query: np.ndarray, k: int, *, ids: np.ndarray | None, mask: np.ndarray | None,
                          nprobe: int | None) -> list[tuple[int, float]]:
        if mask is not None:
            selected = int(np.count_nonzero(mask))
            if selected <= EXACT_LIMIT:
                ids, mask = np.flatnonzero(mask), None
        if ids is not None:
            ids = np.asarray(ids, dtype=np.int64)
            if len(ids) == 0:
                return []
            if len(ids) <= EXACT_LIMIT:
                rows = np.unique(ids)
                scores = np.asarray(self.exact[rows], dtype=np.float32) @ query[0]
                top = np.argsort(-scores, kind="stable")[:k]
                return [(int(rows[i]), round(float(scores[i]), 4)) for i in top]
        return self._faiss_search(query, k, ids=ids, mask=mask, nprobe=nprobe)

    def _faiss_search(self, query: np.ndarray, k: int, *, ids: np.ndarray | None, mask: np.ndarray | None,
                      nprobe: int | None) -> list[tuple[int, float]]:
        import faiss  # faiss: a native library, loaded when an index is built or read

        selector: faiss.IDSelector | None = None
        if ids is not None:
            selector = faiss.IDSelectorBatch(np.asarray(ids, dtype=np.int64))
        elif mask is not None:
            bits = np.packbits(np.asarray(mask, dtype=bool), bitorder="little")
            selector = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bits))
        k = min(k, self.count)
        params: faiss.SearchParameters | None
        if self.meta["kind"] == "ivf":
            probes = int(nprobe or max(int(self.meta.get("nprobe") or 0), DEFAULT_NPROBE))
            # faiss's annotations give its parameter classes no keyword arguments; they take their fields
            params = faiss.SearchParametersIVF(nprobe=probes)  # type: ignore[call-arg]
            if selector is not None:
                params.sel = selector
        else:
            params = faiss.SearchParameters(sel=selector) if selector is not None else None  # type: ignore[call-arg]
        scores, rows = self.index.search(query, k, params=params) if params is not None \
            else self.index.search(query, k)
        return [(int(r), round(float(s), 4)) for s, r in zip(scores[0], rows[0], strict=True) if r >= 0]


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
        self._built: dict[str, VectorIndex] = {}
        self._memory: dict[tuple[str, int, str | None], VectorIndex] = {}
        self._lock = threading.Lock()
        self.builds = 0
        """How many indexes this instance embedded (not loaded): tests check that runs share them."""

    def _spec(self, field: str, embedder: Any = None) -> tuple[int, Callable[[int, int], list[str]]]:
        if field == "relation":
            count = len(self.source.stats().relations)
            return count, self.source.relation_texts
        if field in ("name", "text"):
            # how much of a node's text the model reads (an embedder may say; the default fits MiniLM)
            chars = getattr(embedder, "max_chars", TEXT_CHARS) if embedder is not None else TEXT_CHARS
            return int(self.source.node_count), lambda s, e: self.source.node_texts(s, e, field, max_chars=chars)
        raise ValueError(f"unknown embedding field {field!r}: use one of {', '.join(self.FIELDS)}")

    def get(self, field: str, embedder: Any = None, *, kind: str | None = None) -> VectorIndex:
        """The index of ``field`` for ``embedder`` (see :func:`model_id_of`), built on first use. ``kind``:
        ``flat`` (exact) or ``ivf`` whatever the size; ``None``: IVF above the threshold, else flat (see the
        module docstring)."""
        if kind is not None and kind not in KINDS:
            raise ValueError(f"an index is {' or '.join(KINDS)}, not {kind!r}")
        model_id = model_id_of(embedder)
        if model_id is None:  # an embedder object without a model id: in memory, for this object only
            key = (field, id(embedder), kind)
            with self._lock:
                if key not in self._memory:
                    count, texts = self._spec(field, embedder)
                    self._memory[key] = VectorIndex.build(None, count, texts, resolve_embedder(embedder),
                                                          model_id=None, label=f"{field}s", kind=kind,
                                                          **self._threshold())
                    self.builds += 1
                return self._memory[key]
        with self._lock:
            for name in self._names(field, model_id, kind):
                found = self._built.get(name)
                if found is not None and (kind is None or found.meta.get("kind") == kind):
                    return found
            model = resolve_embedder(embedder)
            if self.directory is None:
                count, texts = self._spec(field, embedder)
                index = VectorIndex.build(None, count, texts, model, model_id=model_id, label=f"{field}s",
                                          kind=kind, **self._threshold())
                self.builds += 1
                self._built[self._names(field, model_id, kind)[-1]] = index
                return index
            for name in self._names(field, model_id, kind):  # saved by an earlier process
                target = self.directory / name
                if (target / "meta.json").is_file() and self._fits(target, kind):
                    with file_lock(self.directory / f".{name}.lock"):
                        index = VectorIndex.load(target, model)
                    self._built[name] = index
                    return index
            count, texts = self._spec(field, embedder)
            threshold = self.ivf_threshold if self.ivf_threshold is not None else IVF_THRESHOLD
            by_size = "ivf" if count > threshold else "flat"
            name = self._names(field, model_id, None if kind == by_size else kind)[-1]
            target = self.directory / name
            with file_lock(self.directory / f".{name}.lock"):
                if (target / "meta.json").is_file():
                    index = VectorIndex.load(target, model)
                else:
                    index = VectorIndex.build(target, count, texts, model, model_id=model_id, label=f"{field}s",
                                              kind=kind, **self._threshold())
                    self.builds += 1
            self._built[name] = index
            return index

    @staticmethod
    def _names(field: str, model_id: str, kind: str | None) -> list[str]:
        """Where an index of this kind may lie: the default one (whatever kind its size gave it) first, then the
        one built for the kind asked."""
        base = f"{field}--{model_id}"
        return [base] if kind is None else [base, f"{base}--{kind}"]

    @staticmethod
    def _fits(target: Path, kind: str | None) -> bool:
        if kind is None:
            return True
        try:
            return json.loads((target / "meta.json").read_text(encoding="utf-8")).get("kind") == kind
        except (OSError, ValueError):
            return False

    def install(self, field: str, model_id: str, rows: np.ndarray, matrix: np.ndarray, *, embedder: Any,
                kind: str = "flat") -> VectorIndex:
        """Keep vectors computed elsewhere (``matrix``, one per row of ``rows``) as the ``kind`` index of ``field``
        for ``model_id`` — what :meth:`get` then finds for an embedder of that model id (which embeds the queries
        a search gives as text)."""
        name = f"{field}--{model_id}--{kind}"
        with self._lock:
            directory = self.directory
            if directory is None:
                index = VectorIndex.from_matrix(None, matrix, resolve_embedder(embedder), model_id=model_id,
                                                label=f"{field}s", kind=kind, rows=rows)
            else:
                with file_lock(directory / f".{name}.lock"):
                    index = VectorIndex.from_matrix(directory / name, matrix, resolve_embedder(embedder),
                                                    model_id=model_id, label=f"{field}s", kind=kind, rows=rows)
            self._built[name] = index
            self._built.pop(f"{field}--{model_id}", None)
            return index

    def installed(self, field: str, model_id: str, kind: str = "flat") -> bool:
        """Whether vectors of ``model_id`` for ``field`` are there (in this process or saved)."""
        name = f"{field}--{model_id}--{kind}"
        return name in self._built or (self.directory is not None and (self.directory / name / "meta.json").is_file())

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
