"""The Cypher parts of the KGoT prompts, per server dialect (Neo4j, ArcadeDB and other Bolt servers, FalkorDB).

The write guide carries the paper's ingestion rules for Cypher (appendix C.2, "Create Cypher for data
ingestion": combine operations with WITH clauses, group related queries, omit RETURN statements, omit ID usage,
merge existing nodes, relationships between entities only, escape characters). What differs between servers is
the dialect (:class:`kgagents.tools.kg.cypher_dialects.CypherDialect`, the store's ``dialect``): Neo4j gets the whole language the
paper's prompts allow ("You can use ALL Cypher/Neo4j functionalities": subqueries, ``CALL {}``, APOC functions
where installed), ArcadeDB and FalkorDB the parts they have. Procedure calls stay out everywhere: on a shared Bolt
database they could reach past the run's own KG (see docs/backends.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from kgagents.prompts.kgot import LANGUAGES, QueryLanguage

WRITE_RULES = """Write Cypher queries that add the new information to the graph database.
- Give one or more queries separated by `;`. Each query runs on its own and, if it fails, is fixed and run again
  on its own; a query cannot use the variables of another one.
- Combine operations with WITH clauses: inside one query, carry the nodes you matched or created on to the next
  operation with WITH (MERGE (a:Person {name: 'Marie Curie'}) WITH a MERGE (b:Award {name: 'Nobel Prize'})
  WITH a, b MERGE (a)-[:WON]->(b)), so that no ghost nodes appear. Every WITH is preceded and followed by another
  clause: a query never starts or ends with WITH.
- Group related queries: the operations that belong together form one continuous query.
- Omit RETURN statements.
- Omit ID usage: do not set, filter or match nodes by `id` or by internal ids (id(), elementId()); match existing
  nodes by their labels and properties as the existing data shows them (e.g. MATCH (p:Person {name: 'Marie
  Curie'})). The database gives every node an id of its own.
- Merge existing nodes: MATCH (or MERGE) a node that already exists instead of creating it again; MERGE on the
  properties that identify a node and SET the others.
- Avoid duplicates: if something has to be counted several times, keep a `counter` property and increase it.
- Relationships connect two nodes only (never a property or another relationship); give each node one or more
  labels (:Person, :Award) and each relationship an UPPER_CASE type (-[:WON]->).
- Property values are strings, numbers, booleans or lists of one of those (no maps, no nested lists).
- Escape characters: the query travels inside JSON first and then to the database, so escape quotes inside
  string literals (\\' and \\") or delimit a text that contains single quotes with double quotes.
- Do not delete data unless the new information says it is wrong."""

READ_RULES = """Write one Cypher query that reads the graph database and RETURNs the values needed for the answer.
- Match nodes by their labels and properties; relationships have a type.
- Return the relevant values (properties, counts, lists), not only whole nodes; use ORDER BY for order-dependent
  questions.
- The query must only read: no CREATE, MERGE, SET or DELETE.
- Do not compute the final answer beyond what the data gives; return the data the answer rests on."""

WRITE_EXAMPLES = """<example_write_1>
New information: The array in the script is [42, 23, 2, 88, 37, 15].
Code:
MERGE (s:Script {name: 'script.cpp'}) SET s.language = 'C++' WITH s CREATE (s)-[:CONTAINS]->(:Array {values: [42, 23, 2, 88, 37, 15]})
</example_write_1>
<example_write_2>
New information: Marie Curie won the Nobel Prize in Physics (1903) and in Chemistry (1911).
Code:
MERGE (p:Person {name: 'Marie Curie'}) WITH p MERGE (a:Award {name: 'Nobel Prize in Physics', year: 1903}) WITH p, a MERGE (p)-[:WON]->(a);
MATCH (p:Person {name: 'Marie Curie'}) MERGE (a:Award {name: 'Nobel Prize in Chemistry', year: 1911}) WITH p, a MERGE (p)-[:WON]->(a)
</example_write_2>
<example_write_3>
New information: The book "Alice's Adventures in Wonderland" was written by Lewis Carroll.
Code:
MERGE (a:Author {name: 'Lewis Carroll'}) WITH a MERGE (b:Book {title: "Alice's Adventures in Wonderland"}) WITH a, b MERGE (a)-[:WROTE]->(b)
</example_write_3>"""

READ_EXAMPLES = """<example_retrieve_1>
Initial problem: Retrieve all books written by 'J.K. Rowling'.
Code:
MATCH (a:Author {name: 'J.K. Rowling'})-[:WROTE]->(b:Book) RETURN b.title AS title ORDER BY title
</example_retrieve_1>
<example_retrieve_2>
Initial problem: List all colleagues of 'Bob'.
Code:
MATCH (e:Employee {name: 'Bob'})-[:WORKS_IN]->(:Department)<-[:WORKS_IN]-(c:Employee) WHERE c.name <> 'Bob' RETURN c.name AS colleague
</example_retrieve_2>
<example_retrieve_3>
Initial problem: Sort the array in the script and add the third and fifth values.
Code:
MATCH (a:Array) RETURN a.values AS values
</example_retrieve_3>"""


def dialect_guide(dialect: Any) -> str:
    """What this server's Cypher offers beyond the common subset, and what it lacks (for both guides)."""
    server = getattr(dialect, "server", "a Cypher server")
    if server == "Neo4j":
        has = [("the whole Cypher language: EXISTS { }, COUNT { } and COLLECT { } subqueries, CALL { } subqueries "
                "(CALL { WITH x ... } or CALL (x) { ... }), pattern comprehensions, list and string functions")]
        if getattr(dialect, "apoc", False):
            has.append("APOC's functions (apoc.text.*, apoc.coll.*, apoc.map.*, apoc.convert.*, apoc.date.*, ...)")
        lacks = ["procedure calls (CALL name(...)) and APOC procedures", "apoc.cypher.*", "LOAD CSV",
                 "schema and administration commands (this database is shared with other runs)"]
        if not getattr(dialect, "apoc", False):
            lacks.insert(0, "APOC (not installed on this server)")
    else:
        has, lacks = [], ["APOC", "procedure calls (CALL name(...))", "LOAD CSV", "schema and administration commands"]
        if getattr(dialect, "subqueries", False):
            has.append("EXISTS { }, COUNT { } and COLLECT { } subqueries")
        else:
            lacks.insert(0, "EXISTS { }, COUNT { } and COLLECT { } subqueries (use a pattern predicate such as "
                            "WHERE (a)-[:R]->(b) or size([(a)-[:R]->(b) | b]))")
        if getattr(dialect, "call_variable_scope", False):
            has.append("CALL { } subqueries (CALL { WITH x ... } or CALL (x) { ... })")
        elif getattr(dialect, "call_subqueries", False):
            has.append("CALL { WITH x ... } subqueries (not the CALL (x) { ... } form)")
        else:
            lacks.insert(0, "CALL { } subqueries")
    lines = [f"- This is {server}." + (f" You can use {'; '.join(has)}." if has else
                                       " Keep to the Cypher every server shares.")]
    lines.append(f"- Not available here: {'; '.join(lacks)}.")
    lines += [f"- On {server}: {note}." for note in getattr(dialect, "notes", ())]
    return "\n".join(lines)


@cache
def cypher_language(dialect: Any) -> QueryLanguage:
    """The Cypher prompts for one server dialect (cached: dialects are immutable values)."""
    guide = dialect_guide(dialect)
    return QueryLanguage(name="Cypher", write_guide=f"{WRITE_RULES}\n{guide}", write_examples=WRITE_EXAMPLES,
                         read_guide=f"{READ_RULES}\n{guide}", read_examples=READ_EXAMPLES)


@dataclass(frozen=True)
class CypherLanguage(QueryLanguage):
    """Cypher, whose guides follow the dialect of the store's server (:func:`cypher_language`)."""

    def for_dialect(self, dialect: object | None) -> QueryLanguage:
        return cypher_language(dialect) if dialect is not None else self


#: Without a known dialect: the subset every server shares.
_COMMON = cypher_language(None)
CYPHER = CypherLanguage(name=_COMMON.name, write_guide=_COMMON.write_guide, write_examples=_COMMON.write_examples,
                        read_guide=_COMMON.read_guide, read_examples=_COMMON.read_examples)

LANGUAGES["cypher"] = CYPHER
