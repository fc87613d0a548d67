"""One LLM-written SPARQL query or update, run on a private in-memory Oxigraph store that holds one run's KG.

This module imports nothing of the project: with bubblewrap its source runs inside the sandbox
(:mod:`kgagents.tools.sandbox`: no network, time and memory limits), where :func:`execute` is called on the run's
triples; without it, :mod:`kgagents.tools.kg.sparql_store` calls :func:`execute` in its own process. Results travel as
JSON: terms as ``[kind, value, datatype, language]`` lists, triples as N-Triples text.
"""

from __future__ import annotations

from typing import Any, cast

import pyoxigraph as ox


def _term(term: Any) -> list[Any]:
    if isinstance(term, ox.NamedNode):
        return ["iri", term.value]
    if isinstance(term, ox.BlankNode):
        return ["bnode", term.value]
    if isinstance(term, ox.Literal):
        return ["literal", term.value, term.datatype.value, term.language]
    return ["other", str(term)]


def _ntriples(triples: Any) -> str:
    # without an output file serialize returns the bytes (its annotation says bytes | None for both cases)
    return cast(bytes, ox.serialize(triples, format=ox.RdfFormat.N_TRIPLES)).decode("utf-8")


def execute(triples: str, text: str, update: bool, prefixes: dict[str, str], max_rows: int) -> dict[str, Any]:
    """Load ``triples`` (N-Triples) as the default graph, run ``text`` and describe the outcome.

    An update returns the default graph afterwards (``triples``) and the named graphs it created
    (``named_graphs``); a query its boolean, its rows (at most ``max_rows``, ``more``: how many were cut) or its
    triples. Parse and evaluation errors propagate (``SyntaxError``, ``OSError``, ...).
    """
    store = ox.Store()
    if triples:
        store.load(triples.encode("utf-8"), format=ox.RdfFormat.N_TRIPLES)
    if update:
        store.update(text, prefixes=prefixes)
        default = [quad.triple for quad in store.quads_for_pattern(None, None, None, ox.DefaultGraph())]
        return {"named_graphs": sorted(str(g) for g in store.named_graphs()), "triples": _ntriples(default)}
    result = store.query(text, prefixes=prefixes)
    if isinstance(result, ox.QueryBoolean):
        return {"boolean": bool(result)}
    if isinstance(result, ox.QuerySolutions):
        variables = [v.value for v in result.variables]
        rows: list[dict[str, Any]] = []
        more = 0
        for solution in result:
            if len(rows) < max_rows:
                rows.append({v: _term(solution[v]) for v in variables if solution[v] is not None})
            else:
                more += 1
        return {"rows": rows, "more": more}
    found = list(result)
    return {"triples": _ntriples(found[:max_rows]), "more": max(0, len(found) - max_rows)}
