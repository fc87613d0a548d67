"""The static-KG interface over the compact store: ARK-V1 graphs (parallel edges, qualifiers, keys), typed nodes
with features, both directions, ego-graphs and reasoning paths, exports, embedding indexes."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from kgagents.tools.kg.base import snapshot_from_jsonl
from kgagents.tools.pgraph import GraphFormatError, graph_from_edges, import_edges, open_graph
from kgagents.tools.pgraph.build import GraphBuilder
from kgagents.tools.pgraph.compact import CompactGraph
from kgagents.tools.pgraph.vectors import IndexSet

EDGES = [
    ["Ada", "Bob", {"relation": "knows"}],
    ["Ada", "Bob", {"relation": "knows", "start time": "2001"}],      # parallel edge, other qualifiers
    ["Ada", "Bob", {"relation": "knows"}],                            # identical parallel edge
    ["Ada", "Bob", {"relation": "works with"}],                       # parallel edge, other relation
    ["Ada", "London", {"relation": "lives in"}],
    ["Bob", "Paris", {"relation": "lives in"}],
]


def test_parallel_edges_are_kept_and_keys_are_unique():
    g = graph_from_edges(EDGES)
    assert len(g) == 6 and g.stats().edges == 6
    knows = g.triples("Ada", "knows")
    assert [(e.head, e.relation, e.tail) for e in knows] == [("Ada", "knows", "Bob")] * 3
    assert [dict(e.qualifiers) for e in knows] == [{}, {"start time": "2001"}, {}]
    keys = [t.key for t in knows]
    assert len(set(keys)) == 3 and all(len(k) >= 4 for k in keys)
    assert [t.as_ark() for t in g.iter_triples()] == EDGES


def test_lookups():
    g = graph_from_edges(EDGES)
    assert [n.id for n in g.iter_nodes()] == ["Ada", "Bob", "London", "Paris"]
    assert g.stats().relations == ["knows", "works with", "lives in"] and g.stats().heads == 2
    assert g.relations_of("Ada") == ["knows", "works with", "lives in"]
    assert g.relations_of("Paris") == [] and g.relations_of("nobody") == []
    assert g.relations_of("Paris", "in") == ["lives in"] and g.relations_of("Bob", "both") == ["lives in", "knows",
                                                                                               "works with"]
    assert g.is_head("Bob") and not g.is_head("Paris") and g.has_node("Paris") and not g.has_node("paris")
    assert [e.tail for e in g.triples("Bob", "lives in")] == ["Paris"]
    assert g.triples("Ada", "born in") == [] and len(g.edges("Ada")) == 5
    assert g.neighbours("Bob", direction="in") == ["Ada"] * 4
    assert g.degree("Bob", "knows", "in") == 3 and g.degree("Ada") == 5 and g.degree("Bob", direction="both") == 5
    assert g.neighbours("Ada", "knows", limit=2) == ["Bob", "Bob"]
    assert g.node("Ada").name == "Ada" and g.node("nobody") is None and g.features("nobody") == {}


def test_keys_are_stable_and_match_the_content():
    a, b = graph_from_edges(EDGES), graph_from_edges(json.loads(json.dumps(EDGES)))
    assert a is b  # the same content is the same graph: one build, one instance
    other = graph_from_edges(EDGES[:-1])
    assert other.ref["fingerprint"] != a.ref["fingerprint"]
    # a key depends on its edge (and identical edges before it), not on the edges around it
    assert graph_from_edges(EDGES[4:]).triples("Ada", "lives in")[0].key == a.triples("Ada", "lives in")[0].key


def test_example_graph(ark_example):
    g = graph_from_edges(ark_example["graph"])
    assert len(g) == 32 and g.stats().heads == 2 and g.stats().nodes == 30 and len(g.stats().relations) == 22
    assert g.is_head("Yui Yuigahama") and g.is_head("Sablé")
    assert len(g.triples("Yui Yuigahama", "instance of")) == 4
    breed = g.triples("Sablé", "animal breed")[0]
    assert breed.render() == "[27ea] (Sablé, animal breed, dachshund)"  # the key ARK-V1 traces have always had
    fandom = g.triples("Sablé", "Fandom article ID")[0]
    assert fandom.qualifiers["MediaWiki page ID"] == "14567" and "MediaWiki page ID" in fandom.render()


@pytest.mark.parametrize("bad, message", [
    ("not a list", "expected a list"),
    ([["a", "b"]], "edge 0: expected"),
    ([["a", "b", {"relation": "r"}], ["a", "b", "r"]], "edge 1: the third element"),
    ([["a", "b", {"rel": "r"}]], "edge 0: the relation must be a non-empty string"),
    ([[None, "b", {"relation": "r"}]], "edge 0: the head"),
    ([["a", "", {"relation": "r"}]], "edge 0: the tail"),
])
def test_malformed_graphs_are_clear_errors(bad, message):
    with pytest.raises(GraphFormatError, match=message):
        graph_from_edges(bad)


@pytest.mark.slow
def test_nearest_entities_and_relations(ark_example, embedder):
    g = graph_from_edges(ark_example["graph"])
    assert g.nearest_nodes("Sable", 1, heads_only=True, embedder=embedder)[0][0] == "Sablé"
    assert g.nearest_nodes("Yui Yuigahama's dog", 2, heads_only=True)[0][0] in {"Yui Yuigahama", "Sablé"}
    names = [n for n, _ in g.nearest_nodes("dachshund", 5, heads_only=True)]
    assert set(names) <= {"Yui Yuigahama", "Sablé"}                  # only head entities when asked
    assert "dachshund" in [n for n, _ in g.nearest_nodes("dachshund", 3)]
    assert g.nearest_relations("dog breed", 1)[0][0] == "animal breed"
    among = g.relations_of("Yui Yuigahama")
    near = g.nearest_relations("pets", 3, among=among)
    assert near[0][0] == "has pet" and all(r in among for r, _ in near)
    assert "animal breed" not in [r for r, _ in g.nearest_relations("breed", 30, among=among)]
    scores = [s for _, s in near]
    assert scores == sorted(scores, reverse=True)
    assert g.nearest_nodes("anything", 3, among=["nobody"]) == []


@pytest.mark.slow
def test_each_graph_has_its_own_index():
    a = graph_from_edges([["Ada", "Bob", {"relation": "knows"}]])
    b = graph_from_edges([["Cyd", "Dan", {"relation": "likes"}]])
    assert [n for n, _ in a.nearest_nodes("anything", 5, heads_only=True)] == ["Ada"]
    assert [n for n, _ in b.nearest_nodes("Ada", 5, heads_only=True)] == ["Cyd"]
    assert [r for r, _ in b.nearest_relations("knows", 5)] == ["likes"]


# ----------------------------------------------------------------------------------------------------------
# Typed nodes, features, both directions
# ----------------------------------------------------------------------------------------------------------
@pytest.fixture()
def papers(tmp_path) -> CompactGraph:
    """A GRBench-like graph: typed nodes with features, nodes declared after edges name them, parallel edges."""
    b = GraphBuilder(tmp_path / "papers")
    b.add_edge("p1", "author", "a1")
    b.add_edge("a1", "paper", "p1")
    b.add_node("p1", type="paper", name="Deep Graphs", features={"year": 2020, "title": "Deep Graphs",
                                                                  "keywords": ["graphs", "depth"]})
    b.add_node("a1", type="author", name="Ann Lee", features={"org": "MIT"})
    b.add_edge("p1", "author", "a2", {"order": 2})
    b.add_edge("p1", "venue", "v1")
    b.add_edge("p1", "author", "a1", {"order": 1})
    b.add_edges("p2", "author", ["a2", "a3"])
    b.add_node("a2", type="author", name="Ann Lee")
    b.add_node("p2", type="paper", name="Shallow Nets", features={"year": 2021})
    b.add_node("p2", type="paper", name="Shallow Networks", features={"year": 2022})  # redeclared: last wins
    b.add_node("v1", type="venue", name="KDD")
    b.add_edge("v1", "paper", "p1")
    b.add_edges("a3", "paper", ["p2"])
    b.finish(name="papers", fingerprint="f" * 16, source={"path": "test"})
    return CompactGraph(tmp_path / "papers")


def test_typed_nodes_features_and_names(papers):
    g = papers
    p1 = g.node("p1")
    assert (p1.type, p1.name) == ("paper", "Deep Graphs")
    assert g.features("p1") == {"year": 2020, "title": "Deep Graphs", "keywords": ["graphs", "depth"]}
    assert g.feature("p1", "year") == 2020
    with pytest.raises(KeyError, match="its features: year, title, keywords"):
        g.feature("p1", "abstract")
    assert g.node("p2").name == "Shallow Networks" and g.feature("p2", "year") == 2022
    assert [n.id for n in g.nodes_named("Ann Lee")] == ["a1", "a2"] and g.nodes_named("Nobody") == []
    assert g.node("a3") == g.node("a3") and g.node("a3").type == "" and g.node("a3").name == "a3"
    assert g.type_counts() == {"paper": 2, "author": 2, "venue": 1, "": 1}
    assert g.relation_counts() == {"author": 5, "paper": 3, "venue": 1}
    assert "Deep Graphs (paper)" in g.node_text("p1") and "org: MIT" in g.node_text("a1")


def test_runs_keep_source_order_in_both_directions(papers):
    g = papers
    assert g.relations_of("p1") == ["author", "venue"]
    assert g.neighbours("p1", "author") == ["a1", "a2", "a1"]
    assert [t.qualifiers for t in g.triples("p1", "author")] == [{}, {"order": 2}, {"order": 1}]
    assert g.relations_of("p1", "in") == ["paper"] and sorted(g.neighbours("p1", "paper", "in")) == ["a1", "v1"]
    assert [(t.head, t.tail, dict(t.qualifiers)) for t in g.edges("a1", direction="in")] == [
        ("p1", "a1", {}), ("p1", "a1", {"order": 1})]
    assert g.degree("a2", direction="in") == 2 and g.neighbours("a2", "author", "in") == ["p1", "p2"]
    index = g.index_of("p1")
    assert sorted(g.id_of(i) for i in g.neighbour_indices(index, ["author"])) == ["a1", "a1", "a2"]


def test_ego_graphs_intersections_and_paths(papers):
    g = papers
    ann = g.ego_graph(["a2"], ["author"], radius=2)
    assert ann.hops == {"a2": 0, "p1": 1, "p2": 1, "a1": 2, "a3": 2}
    kdd = g.ego_graph(["v1"], None, radius=1)
    assert set(kdd.reached()) == {"p1"}
    assert g.intersection([ann, kdd]) == ["p1"]
    assert g.intersection([ann, g.ego_graph(["nobody"])]) == []
    paths = g.reasoning_paths(["a2", "v1"], None, radius=1, targets=["p1"])
    assert [g.verbalise(p) for p in paths] == ["Ann Lee ← author ← Deep Graphs", "KDD → paper → Deep Graphs"]
    assert [g.verbalise(p, ids=True) for p in paths] == ["Ann Lee [a2] ← author ← Deep Graphs [p1]",
                                               "KDD [v1] → paper → Deep Graphs [p1]"]
    capped = g.ego_graph(["p1"], radius=2, max_nodes=3)
    assert capped.truncated and len(capped.hops) == 3
    assert g.ego_graph(["p1"], ["venue"], direction="out", radius=2).hops == {"p1": 0, "v1": 1}


def test_exports_round_trip(papers):
    g = papers
    snapshot = g.export()
    assert len(snapshot["nodes"]) == 6 and len(snapshot["relationships"]) == 9
    out = io.StringIO()
    assert g.export_jsonl(out) == 15
    assert snapshot_from_jsonl(out.getvalue()) == snapshot
    sub = g.neighbourhood("v1", radius=1)
    assert {n["id"] for n in sub["nodes"]} == {"v1", "p1"}
    assert {(r["source"], r["type"], r["target"]) for r in sub["relationships"]} == {("v1", "paper", "p1"),
                                                                                       ("p1", "venue", "v1")}
    text = g.describe("p1")
    assert "type: paper" in text and "→ author (3): Ann Lee [a1], Ann Lee [a2], Ann Lee [a1]" in text
    assert g.describe("nobody") == "no node with id 'nobody'"


def test_an_empty_graph_answers_empty(tmp_path):
    b = GraphBuilder(tmp_path / "empty")
    b.finish(name="empty", fingerprint="0" * 16, source={})
    g = CompactGraph(tmp_path / "empty")
    assert g.stats().nodes == 0 and g.node("x") is None and g.neighbours("x") == []
    assert g.nearest_nodes("x") == [] and g.export() == {"nodes": [], "relationships": []}


def test_a_build_of_another_layout_is_refused(tmp_path, papers):
    manifest = json.loads((papers.directory / "manifest.json").read_text())
    manifest["format_version"] = 0
    (papers.directory / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(GraphFormatError, match="another layout"):
        CompactGraph(papers.directory)
    with pytest.raises(GraphFormatError, match="not a built graph"):
        CompactGraph(tmp_path / "nothing")


# ----------------------------------------------------------------------------------------------------------
# Embedding indexes
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_indexes_are_saved_and_reused(papers, embedder):
    first = papers.nearest_nodes("Anne Lee", 2, types=["author"], embedder=embedder)
    assert [i for i, _ in first] == ["a1", "a2"]
    assert papers.indexes.builds == 1 and "name--all-MiniLM-L6-v2" in papers.indexes.status()
    again = CompactGraph(papers.directory)  # another process would see the same files
    assert again.nearest_nodes("Anne Lee", 2, types=["author"], embedder=embedder) == first
    assert again.indexes.builds == 0
    text = again.nearest_nodes("a paper about graphs", 1, field="text")
    assert text[0][0] == "p1"
    with pytest.raises(ValueError, match="unknown embedding field"):
        again.nearest_nodes("x", field="abstract")


class CountingEmbedder:
    """A deterministic embedder without a model id: its indexes live in memory only."""

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), 16), dtype="float32")
        for row, text in enumerate(texts):
            for ch in text.lower():
                out[row, ord(ch) % 16] += 1
        return out


def test_an_embedder_without_a_model_id_is_not_saved(papers):
    fake = CountingEmbedder()
    papers.nearest_nodes("KDD", 1, embedder=fake)
    papers.nearest_nodes("KDD", 1, embedder=fake)
    assert fake.calls == 3  # one build (one batch) and two queries
    assert not any("CountingEmbedder" in name for name in papers.indexes.status())


@pytest.mark.slow
def test_ivf_indexes_search_approximately_and_restricted_searches_are_exact(tmp_path):
    b = GraphBuilder(tmp_path / "many")
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
    for i in range(3000):
        b.add_node(f"n{i}", type="t" if i % 2 else "u", name=" ".join(rng.choice(words, 3)) + f" {i}")
    b.finish(name="many", fingerprint="1" * 16, source={})
    g = CompactGraph(tmp_path / "many")
    g.indexes = IndexSet(g.directory / "index", g, ivf_threshold=1000)
    fake = CountingEmbedder()
    fake.model_id = "counting"  # type: ignore[attr-defined]
    hits = g.nearest_nodes("alpha beta gamma", 10, embedder=fake)
    assert len(hits) == 10 and g.indexes.status()["name--counting"]["kind"] == "ivf"
    among = [f"n{i}" for i in range(0, 3000, 7)]
    restricted = g.nearest_nodes("alpha beta gamma", 5, among=among, embedder=fake)
    assert {i for i, _ in restricted} <= set(among)
    vectors = fake.encode([g.node(i).name for i in among])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = fake.encode(["alpha beta gamma"])[0]
    exact = np.sort(vectors @ (query / np.linalg.norm(query)))[::-1][:5]
    assert [s for _, s in restricted] == pytest.approx(list(exact), abs=2e-3)
    typed = g.nearest_nodes("alpha", 5, types=["t"], embedder=fake)
    assert all(g.node(i).type == "t" for i, _ in typed)


@pytest.mark.slow
def test_a_search_may_ask_for_an_exact_or_an_ivf_index_whatever_the_size(tmp_path):
    b = GraphBuilder(tmp_path / "kinds")
    for i in range(1200):
        b.add_node(f"n{i}", type="t", name=f"node {i} " + "abcdefgh"[i % 8] * (1 + i % 5))
    b.finish(name="kinds", fingerprint="2" * 16, source={})
    g = CompactGraph(tmp_path / "kinds")
    g.indexes = IndexSet(g.directory / "index", g, ivf_threshold=1000)  # the size alone chooses IVF here
    fake = CountingEmbedder()
    fake.model_id = "counting"  # type: ignore[attr-defined]
    approximate = g.nearest_nodes("node 7 hhhh", 5, embedder=fake)
    exact = g.nearest_nodes("node 7 hhhh", 5, embedder=fake, kind="flat")
    assert g.nearest_nodes("node 7 hhhh", 5, embedder=fake, kind="ivf") == approximate  # the same index
    status = g.indexes.status()
    assert status["name--counting"]["kind"] == "ivf" and status["name--counting--flat"]["kind"] == "flat"
    assert "name--counting--ivf" not in status
    vectors = fake.encode([g.node(f"n{i}").name for i in range(1200)])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    query = fake.encode(["node 7 hhhh"])[0]
    best = np.sort(vectors @ (query / np.linalg.norm(query)))[::-1][:5]
    assert [s for _, s in exact] == pytest.approx(list(best), abs=1e-3)
    small = CompactGraph(tmp_path / "kinds")
    small.indexes = IndexSet(small.directory / "index2", small)  # below the threshold: exact by size
    assert small.nearest_nodes("node 7", 3, embedder=fake, kind="flat") == small.nearest_nodes("node 7", 3,
                                                                                                    embedder=fake)
    assert small.nearest_nodes("node 7", 3, embedder=fake, kind="ivf")
    assert set(small.indexes.status()) == {"name--counting", "name--counting--ivf"}
    assert small.indexes.status()["name--counting--ivf"]["kind"] == "ivf"
    with pytest.raises(ValueError, match="an index is flat or ivf"):
        small.nearest_nodes("x", 1, embedder=fake, kind="hnsw")


def test_inline_edges_are_built_once_by_content(tmp_path, monkeypatch):
    from kgagents.tools.pgraph import registry

    calls = []
    original = GraphBuilder.finish

    def counting(self, **kw):
        calls.append(kw["name"])
        return original(self, **kw)

    monkeypatch.setattr(GraphBuilder, "finish", counting)
    edges = [["x", "y", {"relation": "r"}], ["y", "z", {"relation": "s", "q": 1}]]
    first = import_edges(edges)
    registry.forget_open_graphs()
    assert import_edges(json.loads(json.dumps(edges))) == first and len(calls) == 1
    assert open_graph(first).triples("y", "s")[0].qualifiers == {"q": 1}


def test_the_schema_and_the_graph_definition(papers):
    g = papers
    assert g.type_features() == {"paper": ["year", "title", "keywords"], "author": ["org"]}
    assert set(g.schema()) == {("paper", "author", "author", 4), ("paper", "author", "", 1),
                               ("paper", "venue", "venue", 1), ("author", "paper", "paper", 1),
                               ("venue", "paper", "paper", 1), ("", "paper", "paper", 1)}
    assert g.schema()[0] == ("paper", "author", "author", 4)
    text = g.definition()
    assert "paper nodes have a name and the features: year, title, keywords." in text
    assert "  paper -[author]-> author" in text and "venue nodes have a name." in text
