"""Embeddings (and texts derived from documents) kept by content, so that the same text is embedded once per model.

Agent-G's text module embeds every passage of a question's web pages (CRAG: five pages, a few hundred passages,
seconds of CPU per question with the packaged MiniLM) and converts each page's HTML to text first. An evaluation
that is run again — a resumed or retried item, a replay, another ablation or preset over the same CRAG sample —
meets the same pages again. An :class:`EmbeddingCache` keeps each vector under ``(model, SHA-256 of the text)``
and each converted text under ``(kind, SHA-256 of its source)``:

- in memory, per process, the most recently used first out beyond ``max_bytes`` (default 256 MB);
- optionally in a SQLite file (WAL, shared by processes and later runs): ``disk`` (``cache/embeddings.sqlite``
  in the data home, :func:`kgagents.core.config.data_home`) or a path.

What a cache returns is what the model returned for that text: a text missing from the cache is embedded with
the other missing texts of the call, in the caller's order, in one ``encode`` call — with an empty cache the same
call as without one, so the vectors are the same bit for bit. A vector computed in another call may differ from
a recomputation in its last bits (about 1e-7: the model pads each batch to its longest text), as any two calls
of the same model do. Texts being embedded by another thread are waited for, not embedded twice.

An embedder is keyed by its model id (:func:`kgagents.tools.pgraph.vectors.model_id_of`), its device and its
server; one without a stable id (an object of the caller's own) is never cached.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kgagents.core.config import data_home
from kgagents.core.private import private_dir, private_file
from kgagents.tools.pgraph.vectors import cache_model_id, resolve_embedder

#: Memory a process's cache holds at most (vectors and texts), the least recently used dropped first.
MEMORY_BYTES = 256 * 2**20
#: The ``embedding_cache`` settings besides a path.
SETTINGS = ("off", "memory", "disk")
#: The file name of a cache on disk.
FILE_NAME = "embeddings.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, digest BLOB NOT NULL, vector BLOB NOT NULL,
                                    PRIMARY KEY (model, digest)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS texts (kind TEXT NOT NULL, digest BLOB NOT NULL, text TEXT NOT NULL,
                                  PRIMARY KEY (kind, digest)) WITHOUT ROWID;
"""


def digest(text: str | bytes) -> bytes:
    """The key of a text: its SHA-256 (of its UTF-8 bytes)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text).digest()


class EmbeddingCache:
    """Vectors by ``(model, text)`` and derived texts by ``(kind, source)``, in memory and optionally on disk."""

    def __init__(self, path: str | Path | None = None, *, max_bytes: int = MEMORY_BYTES) -> None:
        self.path = Path(path) if path is not None else None
        self.max_bytes = max_bytes
        self.hits = 0
        """Vectors and texts served from the cache."""
        self.misses = 0
        """Vectors and texts computed."""
        self._memory: OrderedDict[tuple[str, bytes], Any] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, bytes], threading.Event] = {}
        self._db: sqlite3.Connection | None = None
        self._db_lock = threading.Lock()

    # -- memory ---------------------------------------------------------------------------------------------
    def _get(self, key: tuple[str, bytes]) -> Any:
        value = self._memory.get(key)
        if value is not None:
            self._memory.move_to_end(key)
        return value

    def _put(self, key: tuple[str, bytes], value: Any) -> None:
        size = value.nbytes if isinstance(value, np.ndarray) else len(value)
        old = self._memory.pop(key, None)
        if old is not None:
            self._bytes -= old.nbytes if isinstance(old, np.ndarray) else len(old)
        self._memory[key] = value
        self._bytes += size
        while self._bytes > self.max_bytes and len(self._memory) > 1:
            _, dropped = self._memory.popitem(last=False)
            self._bytes -= dropped.nbytes if isinstance(dropped, np.ndarray) else len(dropped)

    # -- disk -----------------------------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection | None:
        if self.path is None:
            return None
        if self._db is None:
            try:
                private_dir(self.path.parent, tighten=False)
                private_file(self.path)
                db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_SCHEMA)
            except (OSError, sqlite3.Error) as exc:
                raise ValueError(f"the embedding cache {self.path} cannot be opened ({type(exc).__name__}: {exc}): "
                                 "give embedding_cache another file, or memory") from exc
            self._db = db
        return self._db

    def _read(self, table: str, column: str, name: str, digests: list[bytes]) -> dict[bytes, Any]:
        found: dict[bytes, Any] = {}
        with self._db_lock:
            db = self._connection()
            if db is None:
                return found
            key_column = "model" if table == "vectors" else "kind"
            for start in range(0, len(digests), 500):
                part = digests[start:start + 500]
                marks = ",".join("?" * len(part))
                rows = db.execute(f"SELECT digest, {column} FROM {table} WHERE {key_column} = ? "
                                  f"AND digest IN ({marks})", [name, *part])
                found.update(rows.fetchall())
        return found

    def _write(self, table: str, rows: list[tuple[str, bytes, Any]]) -> None:
        if self.path is None or not rows:
            return
        with self._db_lock:
            db = self._connection()
            assert db is not None
            db.execute("BEGIN")
            try:
                db.executemany(f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?)", rows)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    # -- vectors --------------------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], embedder: Any = None) -> np.ndarray:
        """The embeddings of ``texts`` by ``embedder`` (as :func:`~kgagents.tools.pgraph.vectors.resolve_embedder`
        takes it), one row per text: cached ones from the cache, the others in one ``encode`` call."""
        texts = list(texts)
        model = cache_model_id(embedder)
        if model is None or not texts:
            return np.asarray(resolve_embedder(embedder).encode(texts), dtype=np.float32)
        keys = [(model, digest(t)) for t in texts]
        found: dict[tuple[str, bytes], np.ndarray] = {}
        computed = 0
        while True:
            with self._lock:
                for key in keys:
                    if key not in found and (value := self._get(key)) is not None:
                        found[key] = value
            wanted = [k for k in dict.fromkeys(keys) if k not in found]
            if wanted:
                on_disk = self._read("vectors", "vector", model, [d for _, d in wanted])
                with self._lock:
                    for key in wanted:
                        if key[1] in on_disk:
                            found[key] = np.frombuffer(on_disk[key[1]], dtype=np.float32)
                            self._put(key, found[key])
            with self._lock:
                missing = [k for k in dict.fromkeys(keys) if k not in found]
                mine = [k for k in missing if k not in self._pending]
                theirs = [self._pending[k] for k in missing if k in self._pending]
                for key in mine:
                    self._pending[key] = threading.Event()
            if not missing:
                break
            if mine:
                computed += self._compute(mine, texts, keys, embedder, model, found)
            for event in theirs:  # texts another thread is embedding: then read from memory (or embed here)
                event.wait()
        with self._lock:
            self.hits += len(found) - computed
        return np.stack([found[k] for k in keys])

    def _compute(self, mine: list[tuple[str, bytes]], texts: list[str], keys: list[tuple[str, bytes]],
                 embedder: Any, model: str, found: dict[tuple[str, bytes], np.ndarray]) -> int:
        """Embed the texts of ``mine`` (claimed by this thread) in the caller's order, in one call; how many."""
        try:
            claimed = set(mine)
            first = {k: t for k, t in zip(keys, texts, strict=True) if k in claimed}
            order = [k for k in dict.fromkeys(keys) if k in first]
            vectors = np.asarray(resolve_embedder(embedder).encode([first[k] for k in order]), dtype=np.float32)
            rows = [np.ascontiguousarray(v) for v in vectors]
            self._write("vectors", [(model, k[1], v.tobytes()) for k, v in zip(order, rows, strict=True)])
            with self._lock:
                for key, vector in zip(order, rows, strict=True):
                    found[key] = vector
                    self._put(key, vector)
                self.misses += len(order)
            return len(order)
        finally:
            with self._lock:
                for key in mine:
                    event = self._pending.pop(key, None)
                    if event is not None:
                        event.set()

    # -- texts ----------------------------------------------------------------------------------------------
    def text(self, kind: str, source: str | bytes, make: Callable[[], str]) -> str:
        """The text ``make`` derives from ``source`` (e.g. a page's HTML converted to text), kept under ``kind``
        (which names the conversion and its settings) and the source's digest."""
        key = (f"text:{kind}", digest(source))
        with self._lock:
            value = self._get(key)
            if value is not None:
                self.hits += 1
                return value
        value = self._read("texts", "text", kind, [key[1]]).get(key[1])
        fresh = value is None
        if value is None:
            value = make()
            self._write("texts", [(kind, key[1], value)])
        with self._lock:
            self._put(key, value)
            self.misses += fresh
            self.hits += not fresh
        return value

    def close(self) -> None:
        """Close the SQLite file (the memory stays)."""
        with self._db_lock:
            if self._db is not None:
                self._db.close()
                self._db = None


_caches: dict[str, EmbeddingCache] = {}
_caches_lock = threading.Lock()


def cache_path(setting: str) -> Path | None:
    """The SQLite file an ``embedding_cache`` setting names (``None``: memory only); a folder gets
    :data:`FILE_NAME` in it."""
    if setting == "memory":
        return None
    if setting == "disk":
        return data_home()[0] / "cache" / FILE_NAME
    path = Path(setting).expanduser()
    return path / FILE_NAME if path.is_dir() or setting.endswith(("/", "\\")) else path


def check_cache_setting(setting: Any) -> str:
    """``setting`` if it is an ``embedding_cache`` setting: one of :data:`SETTINGS`, or a file or folder path
    (one with a folder separator, or a name ending in ``.sqlite`` / ``.db``); else a ``ValueError`` that says so."""
    text = setting.strip() if isinstance(setting, str) else ""
    if text in SETTINGS or "/" in text or "\\" in text or text.endswith((".sqlite", ".db")):
        return text
    raise ValueError(f"embedding_cache is one of {', '.join(SETTINGS)}, or a SQLite file or folder path (with a "
                     f"'/' or ending in .sqlite), not {setting!r}")


def embedding_cache(setting: str | None) -> EmbeddingCache | None:
    """The process's cache for an ``embedding_cache`` setting: ``None``/``off`` none, ``memory`` in memory,
    ``disk`` in the data home's ``cache/embeddings.sqlite``, else that SQLite file (or folder); one instance per
    file in a process."""
    if setting is None or setting == "off":
        return None
    path = cache_path(check_cache_setting(setting))
    key = str(path.resolve()) if path is not None else ""
    with _caches_lock:
        if key not in _caches:
            _caches[key] = EmbeddingCache(path)
        return _caches[key]
