"""The checks of LLM-written Cypher and the scope label that confines it to one run's KG (no server)."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgagents.tools.kg.cypher import (
    NodeRow,
    RelRow,
    build_snapshot,
    plain_value,
    plan_ids,
    restore_statements,
    snapshot_digest,
)
from kgagents.tools.kg.cypher_dialects import ARCADEDB, COMMON_CYPHER, FALKORDB, NEO4J
from kgagents.tools.kg.cypher_scope import FUNCTIONS, SCOPE_PREFIX, prepare, scope_label_for, scope_query
from kgagents.tools.kg.cypher_text import CypherRejected

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
    ("MERGE (n:City {id: 'paris'}) ON MATCH SET n.seen = true",
     f"MERGE (n:City{S} {{id: 'paris'}}) ON MATCH SET n.seen = true"),
    # a variable dropped by WITH is a new variable afterwards: it gets the label again
    ("MATCH (a), (b) WITH a MERGE (b {x: 1})", f"MATCH (a{S}), (b{S}) WITH a MERGE (b{S} {{x: 1}})"),
    ("MATCH (a {id: 'x'}) WITH a AS c MERGE (c)-[:R]->(d)",
     f"MATCH (a{S} {{id: 'x'}}) WITH a AS c MERGE (c)-[:R]->(d{S})"),
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
     f"MATCH (`my var`:`My Label`{S}) RETURN '(x)' AS s"),
    ("RETURN date.truncate('day', date('2020-01-05')) AS d", "RETURN date.truncate('day', date('2020-01-05')) AS d"),
    # patterns nested in a node pattern's properties or inline WHERE are scoped too
    ("CREATE (z:Z {ids: [(m)-->() | m.id]})", f"CREATE (z:Z{S} {{ids: [(m{S})-->({S}) | m.id]}})"),
    ("MATCH (a)-[:R]->(b WHERE b.n > COUNT { (c)-->() }) RETURN a",
     f"MATCH (a{S})-[:R]->(b{S} WHERE b.n > COUNT {{ (c{S})-->({S}) }}) RETURN a"),
    # arithmetic next to parentheses is no pattern
    ("MATCH (n) RETURN size(n.list) - 1 AS x", f"MATCH (n{S}) RETURN size(n.list) - 1 AS x"),
    ("MATCH (n) WITH n, size(n.x) AS s RETURN s - (1) AS y, (s) - 2 AS z",
     f"MATCH (n{S}) WITH n, size(n.x) AS s RETURN s - (1) AS y, (s) - 2 AS z"),
    ("MATCH (n) RETURN exists((n)-->()) AS e", f"MATCH (n{S}) RETURN exists((n{S})-->({S})) AS e"),
    # the label stays on: a label that is a clause keyword, a property called like a keyword
    ("MATCH (n) SET n:Create, n.match = 1", f"MATCH (n{S}) SET n:Create, n.match = 1"),
    ("MATCH (n)<-[:R]-(m) RETURN m", f"MATCH (n{S})<-[:R]-(m{S}) RETURN m"),
    ("MATCH ((a)-[:R]->(b)){1,3} RETURN b", f"MATCH ((a{S})-[:R]->(b{S})){{1,3}} RETURN b"),
    ("MATCH (n) WHERE n.x IS NOT NULL AND n.y IS NULL RETURN n",
     f"MATCH (n{S}) WHERE n.x IS NOT NULL AND n.y IS NULL RETURN n"),
])
def test_node_patterns_get_the_scope_label(query, expected):
    assert scope_query(query, L, NEO4J) == expected


@pytest.mark.parametrize("query, expected", [
    # a node bound by MATCH ... WHERE is scoped already: a bare (x) in CREATE stays as it is ...
    ("MATCH (x) WHERE x.a = 1 CREATE (x)-[:R]->(y)", f"MATCH (x{S}) WHERE x.a = 1 CREATE (x)-[:R]->(y{S})"),
    # ... while a variable that only a WHERE pattern mentions is not bound: CREATE makes a new, scoped node
    ("MATCH (a) WHERE (a)-->(x) CREATE (x)", f"MATCH (a{S}) WHERE (a{S})-->(x{S}) CREATE (x{S})"),
    # a FOREACH variable does not leak out of the FOREACH
    ("FOREACH (x IN [1] | CREATE (y:T)) CREATE (x)", f"FOREACH (x IN [1] | CREATE (y:T{S})) CREATE (x{S})"),
    ("MATCH (a) FOREACH (x IN [1] | MERGE (a)-[:R]->(y)) CREATE (x)",
     f"MATCH (a{S}) FOREACH (x IN [1] | MERGE (a)-[:R]->(y{S})) CREATE (x{S})"),
    # nodes of a pattern comprehension are not bound after it
    ("MATCH (a) WITH a, [(a)-->(m) | m] AS ms CREATE (m)", f"MATCH (a{S}) WITH a, [(a{S})-->(m{S}) | m] AS ms "
                                                          f"CREATE (m{S})"),
    # WITH DISTINCT and WITH * keep what they project
    ("MATCH (n) WITH DISTINCT n CREATE (n)-[:R]->(m)", f"MATCH (n{S}) WITH DISTINCT n CREATE (n)-[:R]->(m{S})"),
    ("MATCH (n) WITH DISTINCT n, 1 AS one CREATE (n)-[:R]->(m)",
     f"MATCH (n{S}) WITH DISTINCT n, 1 AS one CREATE (n)-[:R]->(m{S})"),
    ("MATCH (n) WITH *, 1 AS one CREATE (n)-[:R]->(m)", f"MATCH (n{S}) WITH *, 1 AS one CREATE (n)-[:R]->(m{S})"),
    ("MATCH (n) WITH 1 AS one CREATE (n)", f"MATCH (n{S}) WITH 1 AS one CREATE (n{S})"),
    # CALL (x) { ... } carries x into the subquery; CALL { } without it does not; what it returns is bound after
    ("MATCH (n:A) CALL (n) { CREATE (n)-[:R]->(m) } RETURN n",
     f"MATCH (n:A{S}) CALL (n) {{ CREATE (n)-[:R]->(m{S}) }} RETURN n"),
    ("MATCH (n:A) CALL (*) { CREATE (n)-[:R]->(m) } RETURN n",
     f"MATCH (n:A{S}) CALL (*) {{ CREATE (n)-[:R]->(m{S}) }} RETURN n"),
    ("MATCH (m) CALL { CREATE (m) }", f"MATCH (m{S}) CALL {{ CREATE (m{S}) }}"),
    ("MATCH (m) CALL { WITH m CREATE (m)-[:R]->(x) }", f"MATCH (m{S}) CALL {{ WITH m CREATE (m)-[:R]->(x{S}) }}"),
    ("CALL { MATCH (a) RETURN a } CREATE (a)-[:R]->(:B)", f"CALL {{ MATCH (a{S}) RETURN a }} CREATE (a)-[:R]->(:B{S})"),
    ("CALL { MATCH (a) RETURN a AS b } CREATE (a)", f"CALL {{ MATCH (a{S}) RETURN a AS b }} CREATE (a{S})"),
    # UNION starts afresh
    ("MATCH (a) RETURN a UNION CREATE (a) RETURN a", f"MATCH (a{S}) RETURN a UNION CREATE (a{S}) RETURN a"),
    # a path variable and an UNWIND alias are bound; a relationship variable too
    ("MATCH p = (a)-->(b) UNWIND nodes(p) AS x CREATE (x)-[:R]->(y)",
     f"MATCH p = (a{S})-->(b{S}) UNWIND nodes(p) AS x CREATE (x)-[:R]->(y{S})"),
    ("OPTIONAL MATCH (a)-[r]->(b) RETURN r", f"OPTIONAL MATCH (a{S})-[r]->(b{S}) RETURN r"),
])
def test_variables_are_followed_through_the_statement(query, expected):
    assert scope_query(query, L, NEO4J) == expected


@pytest.mark.parametrize("query, message", [
    ("CALL db.labels()", "CALL"),
    ("MATCH (n) CALL { WITH n DETACH DELETE n }", None),  # allowed on Neo4j: refused below for FalkorDB's sake
    ("MATCH (n) CALL apoc.nodes.delete(n, 1) YIELD value RETURN value", "CALL"),
    ("MATCH (n) RETURN apoc.node.degree(n)", "apoc.node.degree"),
    ("MATCH (n IS Person) DETACH DELETE n", "IS"),
    ("MATCH (n) WHERE n IS Person RETURN n", "IS Label"),
    ("MATCH (n) WHERE n IS NOT Person RETURN n", "IS Label"),
    ("MATCH (n:A|B) RETURN n", "label expressions"),
    ("MATCH (n:!A) RETURN n", "label expressions"),
    ("MATCH (n:A&B) RETURN n", "label expressions"),
    ("MATCH (n:%) RETURN n", "label expressions"),
    ("MATCH (n) SET n:KGScope_other", "reserved"),
    ("MATCH (n:`kgscope_x`) RETURN n", "reserved"),
    ("CREATE INDEX FOR (n:P) ON (n.id)", "CREATE INDEX"),
    ("CREATE TRIGGER t ON CREATE BEFORE COMMIT EXECUTE MATCH (n) DETACH DELETE n", "CREATE TRIGGER"),
    ("MATCH (n) CREATE OR REPLACE DATABASE x", "CREATE OR"),
    ("DROP DATABASE neo4j", "only MATCH"),
    ("SHOW DATABASES", "only MATCH"),
    ("LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row", "only MATCH"),
    ("MATCH (n) LOAD CSV FROM 'file:///x' AS row RETURN row", "LOAD"),
    ("WITH 1 AS x LOAD CSV FROM 'https://example.org/x.csv' AS row RETURN row", "LOAD"),
    ("USE other MATCH (n) RETURN n", "only MATCH"),
    ("MATCH (n) CALL { USE other MATCH (m) RETURN m } RETURN m", "USE"),
    ("MATCH (n 'x') RETURN n", "unsupported pattern"),
    ("MATCH (n) RETURN 'unterminated", "unterminated"),
    # GQL path modes and selectors are no function calls
    ("MATCH TRAIL (a)-->(b) RETURN b", "shortestPath"),
    ("MATCH WALK (a)-->(b) RETURN b", "shortestPath"),
    ("MATCH ACYCLIC (a)-->(b) RETURN b", "shortestPath"),
    ("MATCH ALL PATHS (a)-->(b) RETURN b", "in a pattern"),
    ("MATCH ANY SHORTEST (a)-->(b) RETURN b", "in a pattern"),
    ("MATCH ANY (a)-->(b) RETURN b", "shortestPath"),
    ("MATCH SHORTEST 2 (a)-->(b) RETURN b", "in a pattern"),
    ("MATCH DIFFERENT RELATIONSHIPS (a)-->(b) RETURN b", "in a pattern"),
    ("MATCH (a)-->(b) USING INDEX a:P(name) RETURN b", "in a pattern"),
    ("CREATE 'x' (a)", "in a pattern"),
    ("MATCH (x) WHERE ANY (a)-->(b) RETURN x", "shortestPath"),
    ("MATCH (x) RETURN size(x)-->() AS s", "shortestPath"),
    # functions that are not Cypher's, internal ids
    ("INSERT (n:X)", "only MATCH"),
    ("WITH 1 AS a INSERT (n:X)", "not a Cypher function"),
    ("RETURN file('/etc/passwd') AS f", "not a Cypher function"),
    ("MATCH (n) RETURN id(n)", "internal ids"),
    ("MATCH (n) WHERE elementId(n) = '4:x:1' RETURN n", "internal ids"),
    ("WITH '1' AS r MATCH (n) WHERE elementId(n) = r RETURN n", "internal ids"),
    ("RETURN db.nameFromElementId('x') AS d", "not allowed"),
    ("RETURN gds.util.asNode(1) AS n", "not allowed"),
    # brackets must match
    ("MATCH (n RETURN n", "unsupported pattern"),
    ("MATCH (n)) RETURN n", "unbalanced"),
    ("MATCH (n) RETURN [1, 2", "unbalanced"),
    ("MATCH (n) RETURN {a: 1]", "unbalanced"),
])
def test_what_could_escape_the_scope_is_rejected(query, message):
    if message is None:
        with pytest.raises(CypherRejected, match="CALL"):
            scope_query(query, L, COMMON_CYPHER)
        return
    with pytest.raises(CypherRejected, match=message):
        scope_query(query, L, NEO4J)


def test_every_prefix_of_a_statement_is_read_or_refused_clearly():
    """A truncated statement (a reply cut short) is refused with a message, never an IndexError."""
    statements = [
        "MATCH (a:Person {id: 'x'})-[r:KNOWS*1..2]->(b) WHERE b.age > 3 WITH a, collect(b) AS bs "
        "UNWIND bs AS c MERGE (c)-[:SEEN {at: date('2020-01-01')}]->(:Place {n: 'p'}) RETURN a.id, size(bs) - 1",
        "MATCH (n) CALL (n) { MATCH (n)-->(m) RETURN count(m) AS k } FOREACH (x IN [1] | SET n.k = k) RETURN n",
        "MATCH p = shortestPath((a)-[*]-(b)) RETURN [(a)-->(c) WHERE c.x IS NOT NULL | c.x], COUNT { (b)--() }",
    ]
    for statement in statements:
        assert scope_query(statement, L, NEO4J)
        for end in range(len(statement)):
            try:
                prepare(statement[:end], NEO4J, L)
            except CypherRejected:
                pass


_WORDS = st.sampled_from(["MATCH", "CREATE", "MERGE", "WITH", "RETURN", "WHERE", "UNWIND", "AS", "FOREACH", "IN",
                          "CALL", "SET", "DELETE", "DETACH", "OPTIONAL", "UNION", "IS", "NOT", "NULL", "COUNT",
                          "EXISTS", "size", "shortestPath", "a", "b", "n", "x", "(", ")", "[", "]", "{", "}", "-",
                          "->", "<-", ":", ":L", ",", "|", "=", "*", "1", "'s'", "`q`", ".", "..", "id"])


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_WORDS, min_size=1, max_size=25))
def test_any_statement_is_rewritten_or_refused_and_node_patterns_in_patterns_carry_the_label(words):
    statement = " ".join(words)
    try:
        rewritten = prepare(statement, NEO4J, L)
    except CypherRejected:
        return
    # the rewrite only adds the label; and the rewritten statement is accepted again, unchanged but for labels
    assert rewritten.replace(S, "") == prepare(statement, NEO4J)
    again = prepare(rewritten.replace(S, ""), NEO4J, L)
    assert again == rewritten


def test_dialects_decide_subqueries_and_apoc():
    with pytest.raises(CypherRejected, match="CALL"):
        scope_query("MATCH (a) CALL (a) { RETURN 1 AS x } RETURN x", L, FALKORDB)
    with pytest.raises(CypherRejected, match="subqueries"):
        scope_query("MATCH (a) RETURN COUNT { (a)-->() } AS c", L, FALKORDB)
    assert scope_query("MATCH (a) RETURN COUNT { (a)-->() } AS c", L, ARCADEDB)
    assert prepare("MATCH (a) CALL { WITH a MATCH (a)-->(b) RETURN b } RETURN b", FALKORDB) == \
        "MATCH (a) CALL { WITH a MATCH (a)-->(b) RETURN b } RETURN b"


def test_prepare_without_a_label_checks_and_rebuilds_only():
    assert prepare("MATCH (n) // all\nRETURN n", FALKORDB) == "MATCH (n) RETURN n"
    for refused in ("CALL db.labels()", "LOAD CSV FROM 'file:///etc/passwd' AS l RETURN l",
                    "MATCH (n) RETURN id(n)", "MATCH (n) RETURN algo.pageRank(n)"):
        with pytest.raises(CypherRejected):
            prepare(refused, FALKORDB)


def test_the_function_list_is_cyphers_own():
    assert {"count", "collect", "tolower", "shortestpath", "coalesce", "tojson"} <= FUNCTIONS
    assert not {"id", "elementid", "file", "trail", "walk", "insert", "load"} & FUNCTIONS


def test_scope_labels_are_reserved_and_differ_per_run():
    assert scope_label_for("a").startswith(SCOPE_PREFIX) and scope_label_for("a") != scope_label_for("b")
    assert len(scope_label_for("x" * 1000)) == len(SCOPE_PREFIX) + 20


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


def test_dates_and_points_keep_their_values_in_snapshots():
    import neo4j.spatial
    import neo4j.time

    when = neo4j.time.Date(2020, 1, 5)
    moment = neo4j.time.DateTime(2020, 1, 5, 10, 30, 0)
    point = neo4j.spatial.CartesianPoint((1.5, 2.0))
    assert plain_value(when) == "2020-01-05"
    assert plain_value(moment).startswith("2020-01-05T10:30:00")
    assert plain_value(datetime.date(2021, 2, 3)) == "2021-02-03"
    assert plain_value(point) == "point({srid: 7203, x: 1.5, y: 2.0})"
    assert plain_value(float("nan")) == "nan" and plain_value([1, (2, 3)]) == [1, [2, 3]]
    snap = build_snapshot([NodeRow(1, "d", ["D"], {"on": when, "at": point, "none": None})], [])
    assert snap["nodes"][0]["properties"] == {"at": "point({srid: 7203, x: 1.5, y: 2.0})", "on": "2020-01-05"}


@pytest.mark.parametrize("query, expected", [
    # relationship patterns in expressions, in every direction and spacing: both ends get the label
    ("MATCH (a) WHERE (a)<--(b) RETURN a", f"MATCH (a{S}) WHERE (a{S})<--(b{S}) RETURN a"),
    ("MATCH (a) WHERE (a)--(b) RETURN a", f"MATCH (a{S}) WHERE (a{S})--(b{S}) RETURN a"),
    ("MATCH (a) WHERE (a)-[:R]-(b) RETURN a", f"MATCH (a{S}) WHERE (a{S})-[:R]-(b{S}) RETURN a"),
    ("MATCH (a) WHERE (a)<-[:R]-(b) RETURN a", f"MATCH (a{S}) WHERE (a{S})<-[:R]-(b{S}) RETURN a"),
    ("MATCH (a) WHERE (a)-[:R]->(b) RETURN a", f"MATCH (a{S}) WHERE (a{S})-[:R]->(b{S}) RETURN a"),
    ("MATCH (a) WHERE (a)- - >(b) RETURN a", f"MATCH (a{S}) WHERE (a{S})- - >(b{S}) RETURN a"),
    ("MATCH (a) WHERE (a)-[:R]- >(b) RETURN a", f"MATCH (a{S}) WHERE (a{S})-[:R]- >(b{S}) RETURN a"),
    # ... and arithmetic is left alone
    ("MATCH (a) RETURN 1 -(x) AS y, a.v > (x) AS z, [1] - (x) AS w",
     f"MATCH (a{S}) RETURN 1 -(x) AS y, a.v > (x) AS z, [1] - (x) AS w"),
    ("MATCH (a) RETURN (x) -1 AS y, (x) - [1][0] AS z", f"MATCH (a{S}) RETURN (x) -1 AS y, (x) - [1][0] AS z"),
    # words that are clauses elsewhere: a map key, a property, a label
    ("MATCH (n) RETURN {match: 1, create: 2, with: 3} AS m, n.match AS x",
     f"MATCH (n{S}) RETURN {{match: 1, create: 2, with: 3}} AS m, n.match AS x"),
    ("MATCH (n) SET n:Match CREATE (m)", f"MATCH (n{S}) SET n:Match CREATE (m{S})"),
    # STARTS WITH / ENDS WITH are no projections: n stays bound
    ("MATCH (n) WHERE n.name ENDS WITH 'a' CREATE (n)-[:R]->(m)",
     f"MATCH (n{S}) WHERE n.name ENDS WITH 'a' CREATE (n)-[:R]->(m{S})"),
    ("MATCH (n) WHERE n.name STARTS WITH 'a' CREATE (n)-[:R]->(m)",
     f"MATCH (n{S}) WHERE n.name STARTS WITH 'a' CREATE (n)-[:R]->(m{S})"),
    # = binds a path variable in a pattern only: SET n.x = 1 binds nothing
    ("MATCH (n) SET n.x = 1 CREATE (x)", f"MATCH (n{S}) SET n.x = 1 CREATE (x{S})"),
    ("MATCH p = (a)-->(b) CREATE (p)", f"MATCH p = (a{S})-->(b{S}) CREATE (p)"),
    ("MATCH (a), p = (b)-->(c) CREATE (p)", f"MATCH (a{S}), p = (b{S})-->(c{S}) CREATE (p)"),
    # UNWIND binds its alias (and only UNWIND)
    ("UNWIND [1] AS x CREATE (x)", "UNWIND [1] AS x CREATE (x)"),
    ("MATCH (a) WITH [a] AS l UNWIND l AS x CREATE (x)-[:R]->(y)",
     f"MATCH (a{S}) WITH [a] AS l UNWIND l AS x CREATE (x)-[:R]->(y{S})"),
    ("UNWIND [{a: 1}] AS x CREATE (y)", f"UNWIND [{{a: 1}}] AS x CREATE (y{S})"),
    ("UNWIND [[1] AS z] AS x CREATE (z)", f"UNWIND [[1] AS z] AS x CREATE (z{S})"),
    # a FOREACH variable is bound inside its FOREACH (and only there); nodes made inside stay inside
    ("MATCH (a) FOREACH (n IN [a] | CREATE (n)-[:R]->(m))",
     f"MATCH (a{S}) FOREACH (n IN [a] | CREATE (n)-[:R]->(m{S}))"),
    ("FOREACH (x IN [1] | CREATE (y:T)) CREATE (y)", f"FOREACH (x IN [1] | CREATE (y:T{S})) CREATE (y{S})"),
    ("FOREACH (x IN [1] | FOREACH (z IN [x] | CREATE (z))) CREATE (x), (z)",
     f"FOREACH (x IN [1] | FOREACH (z IN [x] | CREATE (z))) CREATE (x{S}), (z{S})"),
    # relationship variables are bound in patterns; a list that follows a minus is no relationship
    ("MATCH (a)-[r]->(b) CREATE (r)", f"MATCH (a{S})-[r]->(b{S}) CREATE (r)"),
    ("MATCH (a) WITH a, 3-[1][0] AS r CREATE (r)", f"MATCH (a{S}) WITH a, 3-[1][0] AS r CREATE (r)"),
    ("MATCH (a) WHERE (a)-[r]->() CREATE (r)", f"MATCH (a{S}) WHERE (a{S})-[r]->({S}) CREATE (r{S})"),
    # nested subqueries bind locally
    ("MATCH (a) WHERE EXISTS { (a)-->(b) } CREATE (b)",
     f"MATCH (a{S}) WHERE EXISTS {{ (a{S})-->(b{S}) }} CREATE (b{S})"),
    ("CALL { CREATE (x) RETURN x } CREATE (x)-[:R]->(y)", f"CALL {{ CREATE (x{S}) RETURN x }} CREATE (x)-[:R]->(y{S})"),
    ("CALL { CREATE (x) } CREATE (x)", f"CALL {{ CREATE (x{S}) }} CREATE (x{S})"),
    ("MATCH (a) CALL (a, b) { CREATE (a)-[:R]->(b) } RETURN a",
     f"MATCH (a{S}) CALL (a, b) {{ CREATE (a)-[:R]->(b) }} RETURN a"),
    ("MATCH (a) CALL () { CREATE (a) } RETURN a", f"MATCH (a{S}) CALL () {{ CREATE (a{S}) }} RETURN a"),
    ("MATCH (a) CALL { WITH a RETURN a AS b } CREATE (b)", f"MATCH (a{S}) CALL {{ WITH a RETURN a AS b }} CREATE (b)"),
    # projections: what a projection keeps
    ("MATCH (a), (b) WITH a ORDER BY a.x LIMIT 1 CREATE (b)",
     f"MATCH (a{S}), (b{S}) WITH a ORDER BY a.x LIMIT 1 CREATE (b{S})"),
    ("MATCH (a) WITH a SKIP 1 CREATE (a)-[:R]->(c)", f"MATCH (a{S}) WITH a SKIP 1 CREATE (a)-[:R]->(c{S})"),
    ("MATCH (a) WITH a WHERE a.x > 1 CREATE (a)-[:R]->(c)",
     f"MATCH (a{S}) WITH a WHERE a.x > 1 CREATE (a)-[:R]->(c{S})"),
    ("MATCH (a) WITH a OFFSET 1 CREATE (a)-[:R]->(c)", f"MATCH (a{S}) WITH a OFFSET 1 CREATE (a)-[:R]->(c{S})"),
    ("MATCH (a) WITH a LIMIT 1 CREATE (a)-[:R]->(c)", f"MATCH (a{S}) WITH a LIMIT 1 CREATE (a)-[:R]->(c{S})"),
    ("MATCH (a) WITH {k: [a]} AS m, a CREATE (a)-[:R]->(c)",
     f"MATCH (a{S}) WITH {{k: [a]}} AS m, a CREATE (a)-[:R]->(c{S})"),
    ("MATCH (a) WITH (a) AS b CREATE (b)", f"MATCH (a{S}) WITH (a) AS b CREATE (b)"),
    ("MATCH (a) WITH a AS `b c` CREATE (`b c`)", f"MATCH (a{S}) WITH a AS `b c` CREATE (`b c`)"),
    ("MATCH (a) WITH `a` CREATE (a)", f"MATCH (a{S}) WITH `a` CREATE (a)"),
    ("MATCH (a) WITH a AS 1 CREATE (a)", f"MATCH (a{S}) WITH a AS 1 CREATE (a{S})"),
    ("MATCH (a), (b) WITH a, DISTINCT b CREATE (b)", f"MATCH (a{S}), (b{S}) WITH a, DISTINCT b CREATE (b{S})"),
    # a node pattern with only a variable is bare; with labels, properties or WHERE it is not
    ("MATCH (a) MERGE (a)-[:R]->(b)", f"MATCH (a{S}) MERGE (a)-[:R]->(b{S})"),
    ("MATCH (a) MERGE (a:X)", f"MATCH (a{S}) MERGE (a:X{S})"),
    ("MATCH (a) MERGE (a {v: 1})", f"MATCH (a{S}) MERGE (a{S} {{v: 1}})"),
    ("MATCH (a) CREATE (:X)-[:R]->(a)", f"MATCH (a{S}) CREATE (:X{S})-[:R]->(a)"),
    ("MATCH (a) CREATE ()-[:R]->(a)", f"MATCH (a{S}) CREATE ({S})-[:R]->(a)"),
    # namespaced functions, backticked too
    ("RETURN `date`.truncate('day', date()) AS d", "RETURN `date`.truncate('day', date()) AS d"),
    ("MATCH (n) RETURN point.distance(point({x: 1, y: 2}), point({x: 2, y: 2})) AS d, "
     "vector.similarity.cosine([1], [1]) AS v", None),
    # IS type and null predicates
    ("MATCH (n) WHERE n.x IS :: INTEGER AND n.y IS NOT :: STRING AND n.z IS TYPED BOOLEAN RETURN n", None),
    ("MATCH (n) WHERE n.s IS NORMALIZED AND n.t IS NOT NFC NORMALIZED RETURN n", None),
])
def test_the_walk_knows_what_is_bound_and_what_is_a_pattern(query, expected):
    rewritten = scope_query(query, L, NEO4J)
    if expected is None:
        assert rewritten.startswith(query[:5]) and rewritten.replace(S, "") == query
    else:
        assert rewritten == expected


@pytest.mark.parametrize("query, message", [
    ("MATCH (n) WHERE n IS NOT NOT NULL RETURN n", "IS Label"),
    ("MATCH (n) WHERE n IS :Person RETURN n", "IS Label"),
    ("CREATE CONSTRAINT c FOR (n:P) REQUIRE n.id IS UNIQUE", "administration commands"),
    ("CREATE INDEX FOR (n:P) ON (n.id)", "administration commands"),
    ("MATCH (n) RETURN apoc.node.degree(n)", r"apoc\.node\.degree\(\) is not allowed"),
    ("MATCH (n) RETURN n.name.size(1)", r"n\.name\.size\(\) is not allowed"),
    ("MATCH (n) CALL (n, 1) { RETURN 1 AS x } RETURN x", "list the variables"),
    ("MATCH (a) RETURN COUNT { (a)-->() }", "has no COUNT"),
    ("MATCH (a) RETURN EXISTS { (a)-->() }", "has no EXISTS"),
    ("", "empty"),
    ("// nothing but a comment", "empty"),
    ("MATCH (n) CALL { WITH n RETURN n AS m } RETURN m", "no CALL"),
    ("MATCH (n) WITH n CALL db.labels() YIELD label RETURN label", "no procedures"),
])
def test_refusals_name_what_is_wrong(query, message):
    dialect = FALKORDB if "COUNT {" in query or "EXISTS {" in query else COMMON_CYPHER \
        if "CALL {" in query else NEO4J
    with pytest.raises(CypherRejected, match=message):
        prepare(query, dialect, L)


def test_apoc_pure_functions_only_where_the_server_has_apoc():
    import dataclasses

    apoc = dataclasses.replace(NEO4J, apoc=True)
    assert prepare("RETURN apoc.text.join(['a'], ',') AS s", apoc)
    assert prepare("RETURN apoc.coll.sum([1, 2]) AS s", apoc)
    for refused in ("RETURN apoc.text.join(['a'], ',') AS s",):
        with pytest.raises(CypherRejected, match="APOC"):
            prepare(refused, NEO4J)
    for refused in ("RETURN apoc.cypher.runFirstColumnMany('MATCH (n) RETURN n', {}) AS x",
                    "RETURN apoc.text(1) AS x", "RETURN apoc.load.json('http://x') AS x",
                    "RETURN text.apoc.join(1) AS x"):
        with pytest.raises(CypherRejected, match="APOC only for its pure functions"):
            prepare(refused, apoc)


@pytest.mark.parametrize("query", [
    "RETURN {a: file('/etc/passwd')} AS m",  # a function in a map value is checked like any other
    "MATCH (n) WHERE NOT n IS NOT Person RETURN n",
    "MATCH (x) RETURN size(x)<--() AS s",
    "MATCH 2 (a)-->(b) RETURN b",
    "MATCH 'x' (a)-->(b) RETURN b",
    "MATCH (n) CREATE INDEX FOR (m:P) ON (m.id)",
])
def test_more_ways_out_are_refused(query):
    with pytest.raises(CypherRejected):
        prepare(query, NEO4J, L)


@pytest.mark.parametrize("query, expected", [
    ("MATCH p = `shortestPath`((a)-->(b)) RETURN p", f"MATCH p = `shortestPath`((a{S})-->(b{S})) RETURN p"),
    ("RETURN {a: toUpper('x'), b: `size`([1])} AS m", "RETURN {a: toUpper('x'), b: `size`([1])} AS m"),
    ("MATCH (a) RETURN [(b WHERE b.x IN [1, 2])-->(c) | c.v] AS vs",
     f"MATCH (a{S}) RETURN [(b{S} WHERE b.x IN [1, 2])-->(c{S}) | c.v] AS vs"),
    ("MATCH (a) RETURN [(b {k: [1]})-->(c) | c.v] AS vs",
     f"MATCH (a{S}) RETURN [(b{S} {{k: [1]}})-->(c{S}) | c.v] AS vs"),
])
def test_more_patterns_and_calls_read_right(query, expected):
    assert scope_query(query, L, NEO4J) == expected
