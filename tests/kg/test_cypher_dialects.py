"""Cypher per server: each server's dialect in the prompts and the scope rewrite, the paper's ingestion rules, and
LLM-written writes run, fixed and discarded statement by statement (KGoT appendix C.2, §4 step 6).

The Bolt test server is ArcadeDB; the Neo4j dialect is tested on it by making the store take the server for Neo4j
(the agent string is the only thing patched), so its prompts and its subqueries and APOC functions run on a real
server. With ``NEO4J_URI`` set, the ``neo4j-env`` case runs against a real Neo4j as well.
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from kgagents.nodes.kgot import language_of
from kgagents.tools.kg.cypher_dialects import ARCADEDB, COMMON_CYPHER, FALKORDB, NEO4J, bolt_dialect
from kgagents.tools.kg.cypher_scope import scope_query
from kgagents.tools.kg.cypher_text import CypherRejected
from tests import kgot_script as S
from tests.kg.conftest import Backend
from tests.kg.helpers import run

QUESTION = "Who wrote 'Alice's Adventures in Wonderland' and when was it published?"


def test_bolt_servers_are_told_apart_by_the_agent_they_announce():
    assert bolt_dialect("Neo4j/5.26.0") == NEO4J and not NEO4J.apoc
    assert bolt_dialect("Neo4j/5.26.0", apoc=True).apoc
    # ArcadeDB answers CALL dbms.components() as "Neo4j Kernel": only its agent string gives it away
    assert bolt_dialect("Neo4j/5.26.0 compatible (ArcadeDB 26.10.2)") == ARCADEDB
    assert bolt_dialect("Neo4j/v5.11.0 compatible graph database server - Memgraph") == COMMON_CYPHER
    assert bolt_dialect("") == COMMON_CYPHER


def test_the_scope_rewrite_lets_through_what_the_server_has():
    label, scoped = "KGScope_t", ":`KGScope_t`"
    neo4j_apoc = dataclasses.replace(NEO4J, apoc=True)
    query = "MATCH (a:Author) CALL (a) { MATCH (a)-[:WROTE]->(b) RETURN count(b) AS n } RETURN a.name, n"
    assert scope_query(query, label, NEO4J) == query.replace("(a:Author)", f"(a:Author{scoped})").replace(
        "(a)-[:WROTE]->(b)", f"(a{scoped})-[:WROTE]->(b{scoped})")
    with pytest.raises(CypherRejected, match="CALL"):
        scope_query(query, label, FALKORDB)  # FalkorDB has CALL { WITH a ... } only
    with pytest.raises(CypherRejected, match="CALL"):
        scope_query(query, label, COMMON_CYPHER)
    # a subquery body sees only what it imports: a bare (m) there is a new node, so it gets the label
    assert scope_query("MATCH (m) CALL { CREATE (m) }", label, NEO4J) == \
        f"MATCH (m{scoped}) CALL {{ CREATE (m{scoped}) }}"
    assert scope_query("MATCH (m) CALL { WITH m CREATE (m)-[:R]->(x) }", label, NEO4J) == \
        f"MATCH (m{scoped}) CALL {{ WITH m CREATE (m)-[:R]->(x{scoped}) }}"
    # what a subquery returns is bound after it
    assert scope_query("CALL { MATCH (a) RETURN a } CREATE (a)-[:R]->(:B)", label, NEO4J) == \
        f"CALL {{ MATCH (a{scoped}) RETURN a }} CREATE (a)-[:R]->(:B{scoped})"
    apoc = "MATCH (a:Author) RETURN apoc.text.join([a.name], ', ') AS names"
    assert scope_query(apoc, label, neo4j_apoc).startswith(f"MATCH (a:Author{scoped})")
    for refused, dialect in [(apoc, NEO4J), ("RETURN apoc.cypher.runFirstColumnMany('MATCH (n) RETURN n', {})",
                                            neo4j_apoc), ("CALL apoc.create.node(['X'], {}) YIELD node", neo4j_apoc),
                             ("CALL db.labels()", neo4j_apoc)]:
        with pytest.raises(CypherRejected):
            scope_query(refused, label, dialect)


def neo4j_in_disguise(backend: Backend, monkeypatch: pytest.MonkeyPatch, *, apoc: bool = False) -> None:
    """Make the Bolt store take the ArcadeDB test server for Neo4j (what ``dialect_for`` concludes from an agent
    string ``Neo4j/5.26.0``)."""
    from kgagents.tools.kg import cypher_store

    config = cypher_store.bolt_config(backend.url)
    monkeypatch.setattr(cypher_store.server_for(config), "dialect", bolt_dialect("Neo4j/5.26.0", apoc=apoc))


@pytest.mark.slow
async def test_each_server_gets_its_dialect(cypher_backend: Backend, tmp_path, monkeypatch):
    store = cypher_backend.open(f"dialect-{uuid.uuid4().hex[:6]}", None, tmp_path)
    expected = {"neo4j": ARCADEDB, "falkordb": FALKORDB}.get(cypher_backend.case)
    if expected is not None:
        assert store.dialect == expected  # type: ignore[attr-defined]
    guide = language_of(store).write_guide
    # the paper's ingestion rules, on every server
    for rule in ("Combine operations with WITH clauses", "Omit RETURN statements", "Omit ID usage",
                 "Escape characters", "Merge existing nodes", "Group related queries"):
        assert rule in guide
    assert "unique string property `id`" not in guide  # ids are the database's business, not the LLM's
    if cypher_backend.case == "falkordb":
        assert "This is FalkorDB" in guide and "Not available here: EXISTS { }" in guide
        assert "CALL (x) { ... } form" in guide
    elif cypher_backend.case == "neo4j":
        assert "This is ArcadeDB" in guide and "You can use EXISTS { }" in guide and "Not available here: APOC" in guide


@pytest.mark.slow
async def test_neo4j_gets_the_papers_whole_dialect(cypher_backend: Backend, tmp_path, monkeypatch):
    if cypher_backend.backend != "neo4j":
        pytest.skip("a Bolt server")
    if cypher_backend.case == "neo4j":
        neo4j_in_disguise(cypher_backend, monkeypatch, apoc=True)
    store = cypher_backend.open(f"neo4j-{uuid.uuid4().hex[:6]}", None, tmp_path)
    assert store.dialect.server == "Neo4j"  # type: ignore[attr-defined]
    language = language_of(store)
    assert "This is Neo4j. You can use the whole Cypher language" in language.read_guide
    assert "This is Neo4j" in language.write_guide
    # what the paper's prompts allow runs, scoped to the run: subqueries and APOC's functions
    write = ("MERGE (a:Author {name: 'Lewis Carroll'}) WITH a MERGE (b:Book {title: \"Alice's Adventures\"}) "
             "WITH a, b MERGE (a)-[:WROTE]->(b)")
    assert (await store.write(write)).ok
    assert (await store.write("MATCH (a:Author) CALL (a) { MATCH (a)-[:WROTE]->(b:Book) SET b.year = 1865 }")).ok
    read = await store.read("MATCH (a:Author) WHERE EXISTS { MATCH (a)-[:WROTE]->(:Book) } "
                            "CALL { WITH a MATCH (a)-[:WROTE]->(b) RETURN collect(b.year) AS years } "
                            "RETURN a.name AS author, years, COUNT { (a)-->() } AS books")
    assert read.ok and read.result == [{"author": "Lewis Carroll", "years": [1865], "books": 1}], read.error
    if store.dialect.apoc:  # type: ignore[attr-defined]
        joined = await store.read("MATCH (b:Book) RETURN apoc.text.join([b.title, 'by Lewis Carroll'], ' ') AS t")
        assert joined.ok and joined.result == [{"t": "Alice's Adventures by Lewis Carroll"}], joined.error
    snapshot = await store.snapshot()
    assert sorted(n["labels"][0] for n in snapshot["nodes"]) == ["Author", "Book"]
    assert all(n["id"] for n in snapshot["nodes"])  # the store named the nodes the LLM wrote without ids


def statement_steps(code: str, fixes: list[str]) -> list[dict]:
    """One enhance iteration whose write is ``code``, its fixes in order, then a direct solve."""
    return [*S.votes("INSERT", 0, unless="Label: Author"), *S.votes("RETRIEVE", 0, when_extra="Label: Author"),
            *S.merge(times=0),
            S.step(S.DEFINE_TOOLS, times=1, tool_calls=[{"name": "llm_query", "args": {"query": QUESTION}}]),
            S.step("self-contained questions", content="Lewis Carroll wrote it; it was published in 1865."),
            S.step(S.WRITE, times=1, structured={"code": code}),
            *[S.step(S.FIX, times=1, structured={"code": fix}) for fix in fixes],
            S.step(S.DIRECT, times=0, structured={"solution": "Lewis Carroll, 1865"}), *S.need_math(False, times=0),
            S.step(S.PARSE, times=0, structured={"final_answer": "Lewis Carroll, 1865"})]


AUTHOR = "MERGE (a:Author {name: 'Lewis Carroll'})"
BROKEN = ("MATCH (a:Author {name: 'Lewis Carroll'}) MERGE (b:Book {title: 'Alice in Wonderland'}) "
          "MERGE (a)-[:WROTE]->(b) SET b.pages = ,")  # a syntax error every server reports
FIXED = "MATCH (a:Author {name: 'Lewis Carroll'}) MERGE (b:Book {title: 'Alice in Wonderland'}) MERGE (a)-[:WROTE]->(b)"
YEAR = "MERGE (y:Year {value: 1865})"


@pytest.mark.slow
@pytest.mark.parametrize("as_neo4j", [False, True])
async def test_a_failing_statement_is_fixed_alone(cypher_backend: Backend, tmp_path, monkeypatch, as_neo4j):
    """The authors' controller runs each insert query on its own, fixing only the one that fails."""
    if as_neo4j and cypher_backend.case != "neo4j":
        pytest.skip("the Neo4j dialect on the Bolt test server")
    if as_neo4j:
        neo4j_in_disguise(cypher_backend, monkeypatch)
    code = f"{AUTHOR};\n{BROKEN};\n{YEAR}"
    state, model = await run(cypher_backend, tmp_path, statement_steps(code, [FIXED]), question=QUESTION,
                             thread=f"stmt-{uuid.uuid4().hex[:6]}", solve_mode="direct")
    [write] = state["kg_writes"]
    assert write["status"] == "fixed" and write["attempts"] == 4 and len(write["errors"]) == 1
    assert write["code"] == f"{AUTHOR};\n{FIXED};\n{YEAR}"
    [fix_prompt] = [c for c in model.calls if S.FIX in c]
    assert BROKEN in fix_prompt and AUTHOR not in fix_prompt and YEAR not in fix_prompt  # only the failing one
    server = "Neo4j" if as_neo4j else {"neo4j": "ArcadeDB", "falkordb": "FalkorDB"}.get(cypher_backend.case, "")
    assert f"This is {server}" in fix_prompt and f"This is {server}" in next(c for c in model.calls if S.WRITE in c)
    assert sorted(n["labels"][0] for n in state["kg"]["nodes"]) == ["Author", "Book", "Year"]
    assert [(r["type"]) for r in state["kg"]["relationships"]] == ["WROTE"]


@pytest.mark.slow
async def test_a_statement_that_cannot_be_fixed_is_dropped_alone(cypher_backend: Backend, tmp_path):
    code = f"{AUTHOR};\n{BROKEN};\n{YEAR}"
    state, _ = await run(cypher_backend, tmp_path, statement_steps(code, [BROKEN, BROKEN]), question=QUESTION,
                         thread=f"drop-{uuid.uuid4().hex[:6]}", solve_mode="direct", max_cypher_fixing_retry=2)
    [write] = state["kg_writes"]
    assert write["status"] == "partial" and write["attempts"] == 5 and len(write["errors"]) == 3
    # the statements before and after the broken one stay written
    assert sorted(n["labels"][0] for n in state["kg"]["nodes"]) == ["Author", "Year"]
    assert write["snapshot"] == state["kg"] and state["final_answer"] == "Lewis Carroll, 1865"
    store = cypher_backend.open(state.get("run_key") or "", state["kg"], tmp_path)
    assert cypher_backend.db_snapshot(store) == state["kg"]


@pytest.mark.slow
async def test_a_fix_that_never_parses_drops_its_statement_alone(cypher_backend: Backend, tmp_path):
    """Appendix B.4.1: the fix's reply breaks its schema; that is logged, the broken statement is bypassed and
    the statement after it still runs."""
    code = f"{AUTHOR};\n{BROKEN};\n{YEAR}"
    steps = [*statement_steps(code, []), *S.unparseable(S.FIX)]
    state, _ = await run(cypher_backend, tmp_path, steps, question=QUESTION, thread=f"unp-{uuid.uuid4().hex[:6]}",
                         solve_mode="direct", max_parse_retries=0)
    [write] = state["kg_writes"]
    assert write["status"] == "partial" and write["attempts"] == 3 and "no valid Code" in write["errors"][-1]
    assert sorted(n["labels"][0] for n in state["kg"]["nodes"]) == ["Author", "Year"]
    [failure] = state["failures"]
    assert failure["node"] == "integrate_new_information" and failure["kind"] == "parse"
    assert state["final_answer"] == "Lewis Carroll, 1865"
