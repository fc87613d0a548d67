"""The property-graph snapshot <-> RDF mapping of the SPARQL backend (no server)."""

from __future__ import annotations

import base64

import httpx
import pyoxigraph as ox
import pytest

from kgagents.tools.kg.sparql_store import (
    KG,
    HttpDatabase,
    compact,
    derive_update_url,
    expand,
    graph_iri_for,
    skolemize,
    snapshot_triples,
    triples_snapshot,
)

SNAPSHOT = {
    "nodes": [
        {"id": "_b1", "labels": [], "properties": {"name": "Bob"}},
        {"id": "ann", "labels": ["Person", "schema:Person"],
         "properties": {"age": 41, "born": {"@value": "1983-04-01", "@type": "xsd:date"}, "height": 1.72,
                        "name": {"@value": "Ann", "@language": "en"}, "retired": False, "tags": ["a", "b"]}},
        {"id": "http://example.org/x", "labels": [], "properties": {}},
    ],
    "relationships": [
        {"type": "KNOWS", "source": "ann", "target": "_b1", "properties": {}},
        {"type": "SEES", "source": "http://example.org/x", "target": "ann", "properties": {}},
    ],
}


@pytest.mark.parametrize("iri, name", [
    (KG + "marie_curie", "marie_curie"), ("http://schema.org/Person", "schema:Person"),
    ("http://www.w3.org/2001/XMLSchema#date", "xsd:date"), ("http://example.org/x", "http://example.org/x"),
    (KG + "a:b", KG + "a:b"), ("http://schema.org/a b", "http://schema.org/a b"),
])
def test_names_compact_and_expand(iri, name):
    assert compact(iri) == name and expand(name) == iri


def test_snapshot_round_trips_through_triples():
    triples = snapshot_triples(SNAPSHOT)
    assert triples_snapshot(triples) == SNAPSHOT
    assert ox.Triple(ox.NamedNode(KG + "ann"), ox.NamedNode(KG + "age"),
                     ox.Literal("41", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#integer"))) in triples


def test_blank_nodes_get_stable_names():
    a, b = ox.BlankNode(), ox.BlankNode()
    p = ox.NamedNode(KG + "p")
    triples = [ox.Triple(ox.NamedNode(KG + "x"), p, a), ox.Triple(a, ox.NamedNode(KG + "name"), ox.Literal("A")),
               ox.Triple(ox.NamedNode(KG + "x"), p, b), ox.Triple(b, ox.NamedNode(KG + "name"), ox.Literal("B"))]
    named = skolemize(triples, used={"_b1"})
    snap = triples_snapshot(named)
    assert {n["id"]: n["properties"].get("name") for n in snap["nodes"]} == {"_b2": "A", "_b3": "B", "x": None}
    assert triples_snapshot(skolemize(list(reversed(triples)), used={"_b1"})) == snap


def test_endpoint_addresses_and_graph_names():
    assert derive_update_url("http://h:7878/query") == "http://h:7878/update"
    assert derive_update_url("http://h/rdf4j-server/repositories/kg") == "http://h/rdf4j-server/repositories/kg/statements"
    assert derive_update_url("http://h/sparql") == "http://h/sparql"
    assert graph_iri_for("t 1") != graph_iri_for("t_1")


@pytest.mark.parametrize("password, credentials", [("secret", b"reader:secret"), (None, b"reader:")])
def test_endpoint_user_without_password_gets_an_empty_one(monkeypatch, password, credentials):
    monkeypatch.setenv("SPARQL_ENDPOINT", "http://127.0.0.1:9/query")  # the server the credentials belong to
    monkeypatch.setenv("SPARQL_USER", "reader")
    if password is None:
        monkeypatch.delenv("SPARQL_PASSWORD", raising=False)
    else:
        monkeypatch.setenv("SPARQL_PASSWORD", password)
    db = HttpDatabase("http://127.0.0.1:9/query")
    try:
        request = next(db.auth_for(db.query_url).auth_flow(httpx.Request("GET", "http://127.0.0.1:9/query")))
    finally:
        db.client.close()
    assert request.headers["Authorization"] == "Basic " + base64.b64encode(credentials).decode()
