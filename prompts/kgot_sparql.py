"""The SPARQL 1.1 parts of the KGoT prompts (embedded Oxigraph or any SPARQL endpoint)."""

from __future__ import annotations

from kgagents.prompts.kgot import LANGUAGES, QueryLanguage

SPARQL = QueryLanguage(
    name="SPARQL 1.1",
    write_guide="""Write a SPARQL 1.1 UPDATE (INSERT DATA, DELETE/INSERT ... WHERE; several operations may be separated by `;`).
- The prefixes kg: <urn:kg:>, rdf:, rdfs:, xsd:, owl:, schema:, foaf:, dc:, dcterms: and skos: are predeclared.
- A node is an IRI in the kg: namespace named by its id (the `id` shown in the existing data): kg:marie_curie.
  Reuse existing ids instead of creating duplicates.
- Give each node a type with `a` (rdf:type): kg:marie_curie a kg:Person . Types are the labels shown.
- A property is a triple with a literal value: kg:marie_curie kg:name "Marie Curie" . Several values of one
  property are several triples (their order is not kept; store an ordered list as one string if order matters).
- A relationship is a triple between two nodes with an UPPER_CASE predicate: kg:marie_curie kg:WON kg:nobel_1903 .
- Write to the default graph only (no GRAPH clauses); do not use LOAD or SERVICE; do not delete data unless the
  new information says it is wrong.""",
    write_examples="""<example_write_1>
New information: The array in the script is [42, 23, 2, 88, 37, 15].
Code:
INSERT DATA {
  kg:script_1 a kg:Script ; kg:language "C++" ; kg:CONTAINS kg:array_1 .
  kg:array_1 a kg:Array ; kg:values "42, 23, 2, 88, 37, 15" .
}
</example_write_1>
<example_write_2>
New information: Marie Curie won the Nobel Prize in Physics (1903) and in Chemistry (1911).
Code:
INSERT DATA {
  kg:marie_curie a kg:Person ; kg:name "Marie Curie" ;
      kg:WON kg:nobel_physics_1903, kg:nobel_chemistry_1911 .
  kg:nobel_physics_1903 a kg:Award ; kg:name "Nobel Prize in Physics" ; kg:year 1903 .
  kg:nobel_chemistry_1911 a kg:Award ; kg:name "Nobel Prize in Chemistry" ; kg:year 1911 .
}
</example_write_2>""",
    read_guide="""Write one SPARQL 1.1 query (SELECT, ASK or CONSTRUCT) that returns the values needed for the answer.
- The prefixes kg: <urn:kg:>, rdf:, rdfs:, xsd:, owl:, schema:, foaf:, dc:, dcterms: and skos: are predeclared.
- Nodes are kg: IRIs named by their id; labels are rdf:type (`a`) values; properties and relationships are
  kg: predicates named as in the existing data.
- Query the default graph (no GRAPH or FROM clauses, no SERVICE). Use ORDER BY for order-dependent questions.
- Do not compute the final answer beyond what the data gives; return the data the answer rests on.""",
    read_examples="""<example_retrieve_1>
Initial problem: Retrieve all books written by 'J.K. Rowling'.
Code:
SELECT ?title WHERE {
  ?author a kg:Author ; kg:name "J.K. Rowling" ; kg:WROTE ?book .
  ?book kg:title ?title .
} ORDER BY ?title
</example_retrieve_1>
<example_retrieve_2>
Initial problem: Sort the array in the script and add the third and fifth values.
Code:
SELECT ?values WHERE { ?array a kg:Array ; kg:values ?values . }
</example_retrieve_2>""",
)

LANGUAGES["sparql"] = SPARQL
