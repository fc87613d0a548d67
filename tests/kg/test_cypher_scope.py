"""The scope rewrite that keeps LLM-written Cypher inside one run's KG on a shared Bolt database (no server)."""

from __future__ import annotations

import pytest

from tools.kg.cypher import (
    CypherScopeError,
    NodeRow,
    RelRow,
    build_snapshot,
    plan_ids,
    restore_statements,
    scope_query,
    snapshot_digest,
    split_statements,
)

L = "KGScope_test"
S = ":`KGScope_test`"


@pytest.mark.parametrize("query, expected", [
    ("MATCH (n) DETACH DELETE n", f"MATCH (n{S}) DETACH DELETE n"),
    ("MATCH ()-[r]->() DELETE r", f"MATCH ({S})-[r]->({S}) DELETE r"),
    ("MATCH (a {id: 'x'}), (b:Person {id: 'y'}) CREATE (a)-[:KNOWS]->(b)",
     f"MATCH (a{S} {{id: 'x'}}), (b:Person{S} {{id: 'y'}}) CREATE (a)-[:KNOWS]->(b)"),
    ("CREATE (a:Person {id: 'a'})-[:KNOWS]->(:Person {id: 'b'})",
     f"CREATE (a:Person{S} {{id: 'a'}})-[:KNOWS]->(:Person{S} {{id: 'b'}})"),
    ("MERGE (n:City {id: 'paris'}) ON CREATE SET n.name = 'Paris'",
     f"MERGE (n:City{S} {{id: 'paris'}}) ON CREATE SET n.name = 'Paris'"),
    # a variable dropped by WITH is a new variable afterwards: it gets the label again
    ("MATCH (a), (b) WITH a MERGE (b {x: 1})", f"MATCH (a{S}), (b{S}) WITH a MERGE (b{S} {{x: 1}})"),
    ("MATCH (a {id: 'x'}) WITH a AS c MERGE (c)-[:R]->(d)", f"MATCH (a{S} {{id: 'x'}}) WITH a AS c MERGE (c)-[:R]->(d{S})"),
    ("UNWIND [1, 2] AS x CREATE (:N {v: x})", f"UNWIND [1, 2] AS x CREATE (:N{S} {{v: x}})"),
    ("MATCH (a {id: 'x'}) FOREACH (v IN [1] | CREATE (a)-[:HAS]->(:V {v: v}))",
     f"MATCH (a{S} {{id: 'x'}}) FOREACH (v IN [1] | CREATE (a)-[:HAS]->(:V{S} {{v: v}}))"),
    ("MATCH p = shortestPath((a {id: 'x'})-[*]-(b {id: 'y'})) RETURN length(p)",
     f"MATCH p = shortestPath((a{S} {{id: 'x'}})-[*]-(b{S} {{id: 'y'}})) RETURN length(p)"),
    ("MATCH (n) WHERE (n)-->(:P) AND n.name STARTS WITH 'A' RETURN n",
     f"MATCH (n{S}) WHERE (n{S})-->(:P{S}) AND n.name STARTS WITH 'A' RETURN n"),
    ("MATCH (n) RETURN COUNT { (n)-->() } AS c, [(n)-->(m) | m.id] AS ids",
     f"MATCH (n{S}) RETURN COUNT {{ (n{S})-->({S}) }} AS c, [(n{S})-->(m{S}) | m.id] AS ids"),
    ("MATCH (n) RETURN n UNION MATCH (n) RETURN n", f"MATCH (n{S}) RETURN n UNION MATCH (n{S}) RETURN n"),
    ("MATCH (n {id: 'a'}) SET n += {order: 1, with: 2} WITH n MATCH (m) CREATE (n)-[:R]->(m)",
     f"MATCH (n{S} {{id: 'a'}}) SET n += {{order: 1, with: 2}} WITH n MATCH (m{S}) CREATE (n)-[:R]->(m)"),
    ("// a comment (n)\nMATCH (`my var`:`My Label`) RETURN '(x)' AS s",
     f"// a comment (n)\nMATCH (`my var`:`My Label`{S}) RETURN '(x)' AS s"),
    ("RETURN date.truncate('day', date('2020-01-05')) AS d", "RETURN date.truncate('day', date('2020-01-05')) AS d"),
    # patterns nested in a node pattern's properties or inline WHERE are scoped too
    ("CREATE (z:Z {ids: [(m)-->() | m.id]})", f"CREATE (z:Z{S} {{ids: [(m{S})-->({S}) | m.id]}})"),
    ("MATCH (a)-[:R]->(b WHERE b.n > COUNT { (c)-->() }) RETURN a",
     f"MATCH (a{S})-[:R]->(b{S} WHERE b.n > COUNT {{ (c{S})-->({S}) }}) RETURN a"),
])
def test_node_patterns_get_the_scope_label(query, expected):
    assert scope_query(query, L) == expected


@pytest.mark.parametrize("query, message", [
    ("CALL db.labels()", "only MATCH"),
    ("MATCH (n) CALL { WITH n DETACH DELETE n }", "CALL"),
    ("MATCH (n) CALL apoc.nodes.delete(n, 1) YIELD value RETURN value", "CALL"),
    ("MATCH (n) RETURN apoc.node.degree(n)", "apoc.node.degree"),
    ("MATCH (n IS Person) DETACH DELETE n", "IS"),
    ("MATCH (n:A|B) RETURN n", "label expressions"),
    ("MATCH (n:!A) RETURN n", "label expressions"),
    ("MATCH (n) SET n:KGScope_other", "reserved"),
    ("MATCH (n:`kgscope_x`) RETURN n", "reserved"),
    ("MATCH (n) SET n:$('X')", "dynamic labels"),
    ("CREATE INDEX FOR (n:P) ON (n.id)", "CREATE INDEX"),
    ("CREATE TRIGGER t ON CREATE BEFORE COMMIT EXECUTE MATCH (n) DETACH DELETE n", "CREATE TRIGGER"),
    ("DROP DATABASE neo4j", "only MATCH"),
    ("SHOW DATABASES", "only MATCH"),
    ("LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row", "only MATCH"),
    ("MATCH (n) LOAD CSV FROM 'file:///x' AS row RETURN row", "LOAD"),
    ("USE other MATCH (n) RETURN n", "only MATCH"),
    ("MATCH (n 'x') RETURN n", "unsupported pattern"),
    ("MATCH (n) RETURN 'unterminated", "unterminated"),
])
def test_what_could_escape_the_scope_is_rejected(query, message):
    with pytest.raises(CypherScopeError, match=message):
        scope_query(query, L)


def test_statements_split_on_top_level_semicolons():
    assert split_statements("CREATE (a {x: ';'}); // c;\nCREATE (b);  ;") == ["CREATE (a {x: ';'})", "// c;\nCREATE (b)"]
    assert split_statements("  ") == []


def test_ids_are_planned_deterministically_and_checked():
    rows = [NodeRow("#1", None, ["Person", L], {"name": "Bob"}), NodeRow("#2", None, ["Person", L], {"name": "Ann"}),
            NodeRow("#3", "person_1", ["Person", L], {}), NodeRow("#4", 7, ["City", L], {})]
    assign, problems = plan_ids(rows, [L])
    assert problems == []
    assert assign == {"#2": "person_2", "#1": "person_3", "#4": "7"}  # person_1 is taken; Ann sorts before Bob
    _, problems = plan_ids([NodeRow(1, "x", [], {}), NodeRow(2, "x", [], {})])
    assert problems and "'x'" in problems[0]


def test_snapshots_are_canonical_and_restorable():
    nodes = [NodeRow(2, "b", ["B", L], {"v": [1, 2], "id": "b"}), NodeRow(1, "a", ["A"], {"w": None})]
    rels = [RelRow(1, 2, "R", {"since": 2001}), RelRow(2, 99, "DANGLING", {})]
    snap = build_snapshot(nodes, rels, hidden_labels=[L])
    assert snap == {"nodes": [{"id": "a", "labels": ["A"], "properties": {}},
                              {"id": "b", "labels": ["B"], "properties": {"v": [1, 2]}}],
                    "relationships": [{"type": "R", "source": "a", "target": "b", "properties": {"since": 2001}}]}
    reordered = {"nodes": list(reversed(snap["nodes"])), "relationships": snap["relationships"]}
    assert snapshot_digest(reordered) == snapshot_digest(snap)
    statements = restore_statements(snap, L)
    assert [q.split(" SET")[0] for q, _ in statements] == [
        f"UNWIND $rows AS row CREATE (n:`A`{S})", f"UNWIND $rows AS row CREATE (n:`B`{S})",
        f"UNWIND $rows AS row MATCH (a{S} {{id: row.s}}), (b{S} {{id: row.t}}) CREATE (a)-[r:`R`]->(b)"]
