"""What each Cypher server accepts beyond the subset all of them share.

Neo4j gets the whole language the KGoT paper's prompts allow (subqueries, ``CALL {}``, APOC's pure functions where
installed); ArcadeDB and FalkorDB their subsets; a Bolt server is recognised by the agent string it announces
(:func:`bolt_dialect`). The dialect selects the prompts and what the statement checks
(:mod:`kgagents.tools.kg.cypher_scope`) let through.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["APOC_NAMESPACES", "ARCADEDB", "COMMON_CYPHER", "FALKORDB", "NEO4J", "CypherDialect", "bolt_dialect"]


@dataclass(frozen=True)
class CypherDialect:
    """What one Cypher server accepts beyond the subset all of them share (the prompts describe it per server)."""

    server: str
    subqueries: bool = False
    """``EXISTS { }``, ``COUNT { }`` and ``COLLECT { }`` subqueries."""
    call_subqueries: bool = False
    """``CALL { WITH x ... }`` subqueries."""
    call_variable_scope: bool = False
    """``CALL (x) { ... }``, the subquery form with a variable scope clause."""
    apoc: bool = False
    """APOC's pure functions (``apoc.text.join``, ``apoc.coll.sum``, ...)."""
    notes: tuple[str, ...] = ()
    """Further rules of this server, for the prompts."""


#: The subset every supported server shares (Memgraph and Bolt servers that are not recognised).
COMMON_CYPHER = CypherDialect("a Cypher server")
#: Neo4j 5: the paper's dialect ("You can use ALL Cypher/Neo4j functionalities"); ``apoc`` where the plugin is in.
NEO4J = CypherDialect("Neo4j", subqueries=True, call_subqueries=True, call_variable_scope=True)
#: ArcadeDB's native Cypher engine over Bolt (measured on 26.10: subqueries and ``CALL {}`` work; only some APOC
#: functions exist, so the prompts offer none).
ARCADEDB = CypherDialect("ArcadeDB", subqueries=True, call_subqueries=True, call_variable_scope=True)
#: FalkorDB 4 (measured with falkordblite 0.11): no ``EXISTS``/``COUNT``/``COLLECT`` subqueries, no APOC,
#: ``CALL {}`` only with an importing ``WITH``.
FALKORDB = CypherDialect("FalkorDB", call_subqueries=True, notes=(
    "shortestPath() is allowed only in WITH and RETURN clauses, not in MATCH",
    "elementId() does not exist; nodes are told apart by their properties"))

#: APOC namespaces whose functions only compute on their arguments: allowed where the server has APOC. Namespaces
#: that run Cypher (``apoc.cypher``), load or export data, or change the schema stay rejected.
APOC_NAMESPACES = frozenset({"agg", "any", "bitwise", "coll", "convert", "date", "hashing", "json", "label", "map",
                             "math", "meta", "node", "nodes", "number", "path", "rel", "scoring", "temporal", "text",
                             "util"})


def bolt_dialect(agent: str, *, apoc: bool = False) -> CypherDialect:
    """The dialect of a Bolt server, from the agent string it announces on connecting.

    Neo4j says ``Neo4j/5.26.0``; servers that speak Bolt in Neo4j's stead say so (``Neo4j/5.26.0 compatible
    (ArcadeDB 26.10.2)``, ``Neo4j/v5.11.0 compatible graph database server - Memgraph``). ``CALL
    dbms.components()`` cannot tell them apart: ArcadeDB answers it as "Neo4j Kernel". ``apoc``: the server
    answered ``apoc.version()`` (Neo4j only).
    """
    text = agent.strip()
    if "arcadedb" in text.lower():
        return ARCADEDB
    if text.lower().startswith("neo4j/") and "compatible" not in text.lower():
        return dataclasses.replace(NEO4J, apoc=apoc) if apoc else NEO4J
    return COMMON_CYPHER
