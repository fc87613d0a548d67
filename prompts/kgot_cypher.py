"""The Cypher parts of the KGoT prompts (Neo4j and other Bolt servers, FalkorDB): one dialect for all of them.

The guides keep to the Cypher that Neo4j, Memgraph, ArcadeDB and FalkorDB share: no APOC, no ``elementId()``,
no ``EXISTS {}`` subqueries, no procedures; property values are scalars or lists of scalars.
"""

from __future__ import annotations

from prompts.kgot import LANGUAGES, QueryLanguage

CYPHER = QueryLanguage(
    name="Cypher",
    write_guide="""Write Cypher statements that update the graph database (several statements may be separated by `;`).
- Every node has a unique string property `id` (the `id` shown in the existing data). Give each new node a
  short, meaningful id: CREATE (:Person {id: 'marie_curie', name: 'Marie Curie'}).
- Match existing nodes by their id, e.g. MATCH (p {id: 'marie_curie'}), and reuse them instead of creating
  duplicates; MERGE (n:Label {id: '...'}) creates a node only if it does not exist yet.
- Use one or more labels per node (:Person, :Award) and an UPPER_CASE type per relationship (-[:WON]->).
- Property values must be strings, numbers, booleans or lists of one of those (no maps, no nested lists).
- Do not use APOC, procedures (CALL ...), elementId(), EXISTS { } subqueries, LOAD CSV or schema commands
  (indexes, constraints); do not delete data unless the new information says it is wrong.""",
    write_examples="""<example_write_1>
New information: The array in the script is [42, 23, 2, 88, 37, 15].
Code:
CREATE (:Script {id: 'script_1', language: 'C++'})-[:CONTAINS]->(:Array {id: 'array_1', values: [42, 23, 2, 88, 37, 15]})
</example_write_1>
<example_write_2>
New information: Marie Curie won the Nobel Prize in Physics (1903) and in Chemistry (1911).
Code:
MERGE (p:Person {id: 'marie_curie'}) SET p.name = 'Marie Curie';
MATCH (p {id: 'marie_curie'})
CREATE (p)-[:WON]->(:Award {id: 'nobel_physics_1903', name: 'Nobel Prize in Physics', year: 1903}),
       (p)-[:WON]->(:Award {id: 'nobel_chemistry_1911', name: 'Nobel Prize in Chemistry', year: 1911})
</example_write_2>""",
    read_guide="""Write one Cypher query that reads the graph database and RETURNs the values needed for the answer.
- Nodes have labels and properties; every node has a unique `id` property; relationships have a type.
- Return the relevant values (properties, counts, lists), not only whole nodes; use ORDER BY for order-dependent
  questions.
- The query must only read: no CREATE, MERGE, SET or DELETE. Do not use APOC, procedures (CALL ...),
  elementId() or EXISTS { } subqueries; a pattern predicate such as WHERE (a)-[:R]->(b) works everywhere.
- Do not compute the final answer beyond what the data gives; return the data the answer rests on.""",
    read_examples="""<example_retrieve_1>
Initial problem: Retrieve all books written by 'J.K. Rowling'.
Code:
MATCH (a:Author {name: 'J.K. Rowling'})-[:WROTE]->(b:Book) RETURN b.title AS title ORDER BY title
</example_retrieve_1>
<example_retrieve_2>
Initial problem: Sort the array in the script and add the third and fifth values.
Code:
MATCH (a:Array) RETURN a.values AS values
</example_retrieve_2>""",
)

LANGUAGES["cypher"] = CYPHER
