"""The static property-graph store: ARK-V1 format, parallel edges, lookups, keys, files, embedding index."""

from __future__ import annotations

import json

import pytest

from tools.pgraph import GraphFormatError, PropertyGraph, load_ark_record, load_ark_records

EDGES = [
    ["Ada", "Bob", {"relation": "knows"}],
    ["Ada", "Bob", {"relation": "knows", "start time": "2001"}],      # parallel edge, other qualifiers
    ["Ada", "Bob", {"relation": "knows"}],                            # identical parallel edge
    ["Ada", "Bob", {"relation": "works with"}],                       # parallel edge, other relation
    ["Ada", "London", {"relation": "lives in"}],
    ["Bob", "Paris", {"relation": "lives in"}],
]


def test_parallel_edges_are_kept_and_keys_are_unique():
    g = PropertyGraph.from_ark(EDGES)
    assert len(g) == 6
    knows = g.triples("Ada", "knows")
    assert [(e.head, e.relation, e.tail) for e in knows] == [("Ada", "knows", "Bob")] * 3
    assert [dict(e.qualifiers) for e in knows] == [{}, {"start time": "2001"}, {}]
    keys = [e.key for e in g.edges]
    assert len(set(keys)) == 6 and all(len(k) >= 4 for k in keys)
    assert g.edge(knows[1].key) is knows[1]
    assert g.to_ark() == EDGES


def test_lookups():
    g = PropertyGraph.from_ark(EDGES)
    assert g.heads() == ["Ada", "Bob"]
    assert g.entities() == ["Ada", "Bob", "London", "Paris"]
    assert g.relations() == ["knows", "works with", "lives in"]
    assert g.relations_of("Ada") == ["knows", "works with", "lives in"]
    assert g.relations_of("Paris") == [] and g.relations_of("nobody") == []
    assert g.is_head("Bob") and not g.is_head("Paris") and g.has_entity("Paris")
    assert [e.tail for e in g.triples("Bob", "lives in")] == ["Paris"]
    assert g.triples("Ada", "born in") == [] and len(g.outgoing("Ada")) == 5


def test_keys_and_fingerprint_are_stable():
    a, b = PropertyGraph.from_ark(EDGES), PropertyGraph.from_ark(json.loads(json.dumps(EDGES)))
    assert [e.key for e in a.edges] == [e.key for e in b.edges]
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != PropertyGraph.from_ark(EDGES[:-1]).fingerprint()
    # a key depends on its edge, not on the edges around it
    assert PropertyGraph.from_ark(EDGES[4:]).triples("Ada", "lives in")[0].key == a.triples("Ada", "lives in")[0].key


def test_example_graph_keys(example):
    g = PropertyGraph.from_ark(example["graph"])
    assert len(g) == 32 and g.heads() == ["Yui Yuigahama", "Sablé"]
    assert len(g.triples("Yui Yuigahama", "instance of")) == 4
    assert g.triples("Sablé", "animal breed")[0].render().endswith("(Sablé, animal breed, dachshund)")
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
        PropertyGraph.from_ark(bad)


def test_graph_files(tmp_path, example):
    single = tmp_path / "one.json"
    single.write_text(json.dumps(example), encoding="utf-8")
    assert load_ark_record(single)["question"] == example["question"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(EDGES), encoding="utf-8")
    assert load_ark_records(bare) == [{"graph": EDGES}]
    lines = tmp_path / "many.jsonl"
    lines.write_text("\n".join(json.dumps({"id": f"Q{i}", "question": f"q{i}?", "graph": EDGES}) for i in range(3)),
                     encoding="utf-8")
    assert load_ark_record(lines, "Q2")["question"] == "q2?"
    assert load_ark_record(lines, question="q1?")["id"] == "Q1"
    with pytest.raises(GraphFormatError, match="holds 3 graphs"):
        load_ark_record(lines)
    with pytest.raises(GraphFormatError, match="no record with id 'Q9'"):
        load_ark_record(lines, "Q9")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "graph": []}\n{"id": ', encoding="utf-8")
    with pytest.raises(GraphFormatError, match="line 2: not valid JSON"):
        load_ark_records(broken)
    with pytest.raises(GraphFormatError, match="cannot read"):
        load_ark_records(tmp_path / "missing.json")


def test_nearest_entities_and_relations(example_graph):
    g = example_graph
    assert g.nearest_entities("Sable", 1)[0][0] == "Sablé"
    assert g.nearest_entities("Yui Yuigahama's dog", 2)[0][0] in {"Yui Yuigahama", "Sablé"}
    names = [n for n, _ in g.nearest_entities("dachshund", 5)]
    assert set(names) <= set(g.heads())                    # only head entities by default
    assert "dachshund" in [n for n, _ in g.nearest_entities("dachshund", 3, heads_only=False)]
    assert g.nearest_relations("dog breed", 1)[0][0] == "animal breed"
    among = g.relations_of("Yui Yuigahama")
    near = g.nearest_relations("pets", 3, among=among)
    assert near[0][0] == "has pet" and all(r in among for r, _ in near)
    assert "animal breed" not in [r for r, _ in g.nearest_relations("breed", 30, among=among)]
    scores = [s for _, s in near]
    assert scores == sorted(scores, reverse=True)


def test_each_graph_has_its_own_index(embedder):
    a = PropertyGraph.from_ark([["Ada", "Bob", {"relation": "knows"}]], embedder=embedder)
    b = PropertyGraph.from_ark([["Cyd", "Dan", {"relation": "likes"}]], embedder=embedder)
    assert a.nearest_entities("anything", 5) == [("Ada", pytest.approx(a.nearest_entities("anything", 5)[0][1]))]
    assert [n for n, _ in b.nearest_entities("Ada", 5)] == ["Cyd"]
    assert [r for r, _ in b.nearest_relations("knows", 5)] == ["likes"]
