"""Exact or IVF on request, vectors computed elsewhere for some rows only, and searches by a query vector."""

from __future__ import annotations

import numpy as np
import pytest

from kgagents.tools.pgraph.build import GraphBuilder
from kgagents.tools.pgraph.compact import CompactGraph
from kgagents.tools.pgraph.vectors import IndexSet


class HashEmbedder:
    """A deterministic embedder with a model id (its indexes are saved)."""

    model_id = "hashing"

    def encode(self, texts):
        out = np.zeros((len(texts), 16), dtype="float32")
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, sum(map(ord, word)) % 16] += 1
        return out


@pytest.fixture()
def many(tmp_path):
    b = GraphBuilder(tmp_path / "many")
    rng = np.random.default_rng(1)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
    for i in range(400):
        b.add_node(f"n{i}", type="t" if i % 2 else "u", name=" ".join(rng.choice(words, 3)))
    b.finish(name="many", fingerprint="2" * 16, source={})
    g = CompactGraph(tmp_path / "many")
    g.indexes = IndexSet(g.directory / "index", g, ivf_threshold=100)
    return g


@pytest.mark.slow
def test_exact_search_on_request_beside_an_ivf_index(many):
    emb = HashEmbedder()
    many.nearest_nodes("alpha beta", 5, embedder=emb)
    assert many.indexes.status()["name--hashing"]["kind"] == "ivf"  # above the threshold: IVF by default
    exact = many.nearest_nodes("alpha beta", 400, embedder=emb, kind="flat")
    status = many.indexes.status()
    assert status["name--hashing--flat"]["kind"] == "flat" and status["name--hashing"]["kind"] == "ivf"
    vectors = emb.encode([many.node(f"n{i}").name for i in range(400)])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = emb.encode(["alpha beta"])[0]
    scores = vectors @ (query / np.linalg.norm(query))
    assert [s for _, s in exact] == pytest.approx(sorted(scores, reverse=True), abs=1e-4)  # every node scored
    builds = many.indexes.builds
    again = CompactGraph(many.directory)
    again.indexes = IndexSet(again.directory / "index", again, ivf_threshold=100)
    assert [s for _, s in again.nearest_nodes("alpha beta", 3, embedder=emb, kind="flat")] == [s for _, s in exact[:3]]
    assert again.indexes.builds == 0 and many.indexes.builds == builds  # the flat index was saved and found
    assert again.nearest_nodes("alpha", 3, embedder=emb, kind="ivf")  # the default one already is IVF
    assert again.indexes.builds == 0
    with pytest.raises(ValueError, match="flat or ivf"):
        again.nearest_nodes("alpha", 3, embedder=emb, kind="hnsw")


def test_a_small_graph_asked_for_flat_uses_its_default_index(tmp_path):
    b = GraphBuilder(tmp_path / "few")
    for i in range(20):
        b.add_node(f"n{i}", name=f"node {i}")
    b.finish(name="few", fingerprint="3" * 16, source={})
    g = CompactGraph(tmp_path / "few")
    g.nearest_nodes("node 3", 2, embedder=HashEmbedder(), kind="flat")
    assert list(g.indexes.status()) == ["name--hashing"]


@pytest.mark.slow
def test_vectors_of_some_rows_and_a_query_vector(many):
    rows = np.array([10, 3, 250, 7])
    matrix = np.eye(4, 16, dtype="float32")  # row 10 → e0, 3 → e1, 250 → e2, 7 → e3
    many.indexes.install("text", "given", rows, matrix, embedder=HashEmbedder())
    assert many.indexes.installed("text", "given")
    emb = HashEmbedder()
    emb.model_id = "given"
    query = np.zeros(16, dtype="float32")
    query[2], query[0], query[1] = 1.0, 0.5, 0.2
    hits = many.nearest_nodes("ignored", 5, field="text", embedder=emb, kind="flat", vector=query)
    assert [i for i, _ in hits] == ["n250", "n10", "n3", "n7"]  # only the rows that have a vector
    among = many.nearest_nodes("x", 5, field="text", embedder=emb, kind="flat", vector=query,
                               among=["n3", "n7", "n11"])
    assert [i for i, _ in among] == ["n3", "n7"]  # n11 has no vector
    typed = many.nearest_nodes("x", 5, field="text", embedder=emb, kind="flat", vector=query, types=["t"])
    assert [i for i, _ in typed] == ["n3", "n7"]  # the odd rows are of type t
    with pytest.raises(ValueError, match="3 dimensions for an index of 16"):
        many.nearest_nodes("x", 1, field="text", embedder=emb, kind="flat", vector=np.ones(3))
    with pytest.raises(ValueError, match="a row has two vectors"):
        many.indexes.install("text", "dup", np.array([1, 1]), np.eye(2, 16), embedder=emb)
