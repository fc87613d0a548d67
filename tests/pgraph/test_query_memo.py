"""Query embeddings kept per process (``kgagents.tools.pgraph.vectors.query_vector``): a search asked again with
the same text by the same model embeds it once; the vector is the model's."""

from __future__ import annotations

import numpy as np
import pytest

from kgagents.tools.pgraph import vectors
from kgagents.tools.pgraph.build import GraphBuilder
from kgagents.tools.pgraph.compact import CompactGraph
from kgagents.tools.pgraph.embeddings import LazyEmbedder


class CountingModel(LazyEmbedder):
    """A project embedder (by name) whose vectors come from the text's letters, counting its calls."""

    def __init__(self, name: str, device: str | None = None) -> None:
        super().__init__(name, device=device)
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        out = np.zeros((len(texts), 8), dtype="float32")
        for row, text in enumerate(texts):
            for ch in text.lower():
                out[row, ord(ch) % 8] += 1
        return out


class Plain:
    """An embedder object of the caller's own: never kept."""

    model_id = "plain"

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        return np.ones((len(texts), 8), dtype="float32")


def test_a_query_is_embedded_once_per_model_and_device(monkeypatch):
    monkeypatch.setattr(vectors, "_queries", vectors.OrderedDict())
    model = CountingModel("query-memo-test-model")
    first = vectors.query_vector("Deep Graphs", model)
    assert np.array_equal(first, model.encode(["Deep Graphs"]))
    model.calls.clear()
    assert np.array_equal(vectors.query_vector("Deep Graphs", model), first) and model.calls == []
    vectors.query_vector("Other", model)
    other_device = CountingModel("query-memo-test-model", device="cuda")
    vectors.query_vector("Deep Graphs", other_device)
    assert model.calls == [["Other"]] and other_device.calls == [["Deep Graphs"]]
    plain = Plain()
    vectors.query_vector("Deep Graphs", plain)
    vectors.query_vector("Deep Graphs", plain)
    assert plain.calls == 2


def test_the_environment_sets_the_memo_or_turns_it_off(monkeypatch):
    monkeypatch.setattr(vectors, "_queries", vectors.OrderedDict())
    model = CountingModel("query-memo-env-model")
    monkeypatch.setenv("KGAGENTS_QUERY_MEMO", "0")
    vectors.query_vector("a", model)
    vectors.query_vector("a", model)
    assert model.calls == [["a"], ["a"]]
    monkeypatch.setenv("KGAGENTS_QUERY_MEMO", "many")
    with pytest.raises(ValueError, match="KGAGENTS_QUERY_MEMO is a number"):
        vectors.query_vector("a", model)


def test_the_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(vectors, "_queries", vectors.OrderedDict())
    monkeypatch.setattr(vectors, "QUERY_MEMO", 2)
    model = CountingModel("query-memo-bound-model")
    for text in ("a", "b", "a", "c", "a", "b"):
        vectors.query_vector(text, model)
    assert model.calls == [["a"], ["b"], ["c"], ["b"]]  # b was the least recently used when c came


def test_searches_repeated_in_a_run_embed_the_query_once(tmp_path, monkeypatch):
    monkeypatch.setattr(vectors, "_queries", vectors.OrderedDict())
    b = GraphBuilder(tmp_path / "g")
    for i, name in enumerate(["Deep Graphs", "Shallow Trees", "Graph Depth"]):
        b.add_node(f"n{i}", type="paper", name=name)
    b.finish(name="g", fingerprint="3" * 16, source={})
    graph = CompactGraph(tmp_path / "g")
    model = CountingModel("query-memo-search-model")
    hits = graph.nearest_nodes("deep graphs", 2, embedder=model)
    assert graph.nearest_nodes("deep graphs", 2, embedder=model) == hits
    assert [c for c in model.calls if c == ["deep graphs"]] == [["deep graphs"]]
