"""The hostile-query corpus: the project's own attack lists, multiplied by mutations that target the places where a
checker and a server could read a query differently.

A query is built from a base attack (what it tries: read another run's KG, change it, plant nodes in it, list
every run's labels, read a host file or the server's environment, reach the network) and a mutation (how it hides:
comment terminators, Unicode dashes and homoglyphs, keyword case and spacing, GQL syntax, nested subqueries,
FOREACH / UNWIND / CALL wrappers, string-escape tricks, keywords without word boundaries). Placeholders:
``{file}`` a host file whose text is a marker, ``{url}`` a loopback listener that counts connections,
``{victim}`` the victim run's graph (SPARQL) and ``{endpoint}`` the SPARQL server's own query URL.
"""

from __future__ import annotations

import re
from collections.abc import Callable

CYPHER_ATTACKS = [
    "MATCH (n) RETURN n",
    "MATCH (n) WHERE n.secret IS NOT NULL RETURN n.secret AS s",
    "MATCH (n) WHERE n.secret STARTS WITH 'SECRET' RETURN n",
    "MATCH (n:Victim) RETURN n.secret AS s",
    "MATCH (n) DETACH DELETE n",
    "MATCH (n) SET n.secret = 'pwned'",
    "MATCH (n:Victim) SET n:Planted",
    "CREATE (:Victim {id: 'planted', secret: 'planted'})",
    "MATCH (n) WITH n MATCH (m) RETURN m.secret AS s",
    "MATCH p = ()-[*0..3]-() RETURN p",
    "MATCH (n) RETURN labels(n) AS l",
    "MATCH (n) RETURN n UNION MATCH (m) RETURN m AS n",
    "OPTIONAL MATCH (n) RETURN collect(n.secret) AS s",
    "MATCH (n) RETURN [(n)-->(m) | m.secret] AS x",
    "RETURN EXISTS { MATCH (n:Victim) } AS e",
    "MATCH (a) CALL { WITH a MATCH (b) RETURN b } RETURN b.secret AS s",
    "UNWIND range(1, 2) AS i MATCH (n) RETURN n.secret AS s",
    "FOREACH (x IN [1] | CREATE (:Victim {id: 'planted', secret: 'planted'}))",
    "WITH '1' AS r MATCH (n:Victim) WHERE elementId(n) = r RETURN n",
    "MATCH (n) RETURN id(n) AS i, n.secret AS s",
    "CALL db.labels() YIELD label RETURN label",
    "CALL dbms.components() YIELD name RETURN name",
    "CALL apoc.load.json('{url}') YIELD value RETURN value",
    "LOAD CSV FROM 'file://{file}' AS l RETURN l",
    "LOAD CSV FROM '{url}' AS l RETURN l",
    "LOAD CSV FROM 'file:///proc/self/environ' AS l RETURN l",
    "USE kgagents MATCH (n) RETURN n.secret AS s",
    "MATCH TRAIL (a)-->(b) RETURN b.secret AS s",
    "MATCH (n IS Victim) RETURN n.secret AS s",
    "MATCH (n) SET n:KGScope_other RETURN n",
    "CALL { MATCH (n) DETACH DELETE n } IN TRANSACTIONS RETURN 1 AS one",
    "MATCH (n) CALL { WITH n SET n.secret = 'pwned' } IN TRANSACTIONS RETURN 1 AS one",
    "CALL { CREATE (:Victim {id: 'planted', secret: 'planted'}) } IN 2 CONCURRENT TRANSACTIONS RETURN 1 AS one",
]

#: Resource bombs: each would take down or stall the shared server every run's KG lives on, were it let through
#: (memory: a huge list, a value that doubles; time: rows or loops by the billion; FalkorDB's parser: deep nesting;
#: length). The checks refuse each as it is; the servers' caps stop what gets past (tests/kg/test_server_caps.py).
CYPHER_BOMBS = [
    "RETURN size(range(1, 3000000000)) AS n",
    "UNWIND range(1, 100000000) AS x RETURN count(x) AS n",
    "UNWIND range(1, 3000) AS x UNWIND range(1, 3000) AS y UNWIND range(1, 3000) AS z RETURN count(*) AS n",
    "RETURN size(reduce(s = 'ab', x IN range(1, 40) | s + s)) AS n",
    "RETURN size(reduce(l = [1], x IN range(1, 40) | l + l)) AS n",
    "RETURN size(reduce(l = [1], x IN range(1, 40) | [l, l])) AS n",
    "MATCH (n) FOREACH (i IN range(1, 40) | SET n.secret = n.secret + n.secret)",
    "MATCH (n) UNWIND range(1, 40) AS i SET n.secret = n.secret + n.secret",
    "RETURN reduce(s = 0, x IN range(1, 100000) | s + reduce(t = 0, y IN range(1, 100000) | t + y)) AS n",
    "RETURN [x IN range(1, 100000) | size([y IN range(1, 100000) WHERE y = x])] AS n",
    "RETURN " + "(" * 30 + "1" + ")" * 30 + " AS n",
    "RETURN " + "[" * 30 + "1" + "]" * 30 + " AS n",
    "RETURN " + "CASE WHEN true THEN " * 30 + "1" + " END" * 30 + " AS n",
    "RETURN " + "NOT " * 40 + "true AS n",
    "RETURN " + "-" * 40 + "1 AS n",
    "MATCH (n) WHERE " + "NOT (" * 20 + "n.secret = 'x'" + ")" * 20 + " RETURN n",
    "RETURN '" + "x" * 120_000 + "' AS n",
]

SPARQL_ATTACKS = [
    "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }",
    "SELECT * FROM <{victim}> WHERE { ?s ?p ?o }",
    "SELECT * FROM NAMED <{victim}> WHERE { GRAPH ?g { ?s ?p ?o } }",
    "SELECT * WHERE { GRAPH <{victim}> { ?s ?p ?o } }",
    "ASK { GRAPH <{victim}> { ?s ?p ?o } }",
    "CONSTRUCT { ?s ?p ?o } WHERE { GRAPH ?g { ?s ?p ?o } }",
    "SELECT * WHERE { ?s ?p ?o FILTER(CONTAINS(STR(?o), 'SECRET')) }",
    "SELECT * WHERE { SERVICE <{url}> { ?s ?p ?o } }",
    "SELECT * WHERE { SERVICE SILENT <{url}> { ?s ?p ?o } }",
    "SELECT * WHERE { SERVICE <{endpoint}?default-graph-uri={victim}> { ?s ?p ?o } }",
    "SELECT * WHERE { VALUES ?svc { <{url}> } SERVICE ?svc { ?a ?b ?c } }",
    "SELECT * WHERE { ?x ?y ?z OPTIONAL { SERVICE <{url}> { ?a ?b ?c } } }",
    "LOAD <{url}>",
    "LOAD SILENT <file://{file}>",
    "LOAD <{endpoint}?query=CONSTRUCT%7B%3Fs%3Fp%3Fo%7DWHERE%7BGRAPH%3Fg%7B%3Fs%3Fp%3Fo%7D%7D> INTO GRAPH <urn:x>",
    "DROP ALL",
    "CLEAR GRAPH <{victim}>",
    "INSERT { GRAPH <{victim}> { kg:planted kg:secret 'planted' } } WHERE {}",
    "INSERT DATA { GRAPH <{victim}> { kg:planted kg:secret 'planted' } }",
    "DELETE WHERE { GRAPH ?g { ?s ?p ?o } }",
    "COPY <{victim}> TO DEFAULT",
    "ADD <{victim}> TO DEFAULT",
    "MOVE <{victim}> TO DEFAULT",
    "WITH <{victim}> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
    "DELETE { GRAPH <{victim}> { ?s ?p ?o } } WHERE { GRAPH <{victim}> { ?s ?p ?o } }",
    "DROP GRAPH <{victim}>",
    "CREATE GRAPH <{victim}>",
    "LOAD <{url}> INTO GRAPH <{victim}>",
    "INSERT { ?s ?p ?o } WHERE { SERVICE <{url}> { ?s ?p ?o } }",
    "SELECT * WHERE { BIND(<{url}> AS ?u) SERVICE ?u { ?a ?b ?c } }",
    "DESCRIBE kg:victim",
    "SELECT * WHERE { ?s ?p ?o } LIMIT 1000",
    "SELECT * WHERE { GRAPH <{victim}> { ?s kg:secret ?o } }",
]


def _sub_first(pattern: str, repl: str, text: str) -> str:
    return re.sub(pattern, repl, text, count=1)


Mutation = Callable[[str], str]

CYPHER_MUTATIONS: dict[str, Mutation] = {
    "as is": lambda q: q,
    "lower case": lambda q: q.lower(),
    "mixed case": lambda q: "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(q)),
    "comment ended by CR": lambda q: "RETURN 1 AS x // hidden\r UNION " + q,
    "attack after a CR comment": lambda q: "MATCH (n) RETURN n // \r" + q,
    "block comments": lambda q: q.replace(" ", "/**/"),
    "tabs and newlines": lambda q: q.replace(" ", "\n\t"),
    "no spaces around brackets": lambda q: re.sub(r"\s*([()\[\]{}])\s*", r"\1", q),
    "em dash arrows": lambda q: q.replace("-", "\u2014") + " MATCH (a)\u2014[:R]\u2192(b) RETURN b",
    "en dash relationship": lambda q: q.replace("()", "(a)\u2013\u2013(b)"),
    "homoglyph keyword": lambda q: q.replace("MATCH", "M\u0410TCH").replace("CALL", "C\u0410LL"),
    "no-break spaces": lambda q: q.replace(" ", "\u00a0"),
    "path mode": lambda q: q.replace("MATCH ", "MATCH ANY SHORTEST ").replace("MATCH (n)", "MATCH WALK (n)"),
    "IS label": lambda q: q.replace("(n)", "(n IS Victim)").replace("n:Victim", "n IS Victim"),
    "FOREACH wrapper": lambda q: f"FOREACH (x IN [1] | CREATE (:Planted)) WITH 1 AS one {q}",
    "UNWIND wrapper": lambda q: f"UNWIND [1] AS u {q}",
    "CALL wrapper": lambda q: f"CALL {{ {q} }} RETURN 1 AS one",
    "CALL scope wrapper": lambda q: f"CALL () {{ {q} }} RETURN 1 AS one",
    "subquery": lambda q: f"RETURN COUNT {{ {q} }} AS c",
    "after a semicolon": lambda q: f"RETURN 1 AS one; {q}",
    "string escape": lambda q: f"RETURN 'a\\' {q} //' AS s",
    "unicode escape quote": lambda q: f"RETURN 'a\\u0027 {q} //' AS s",
    "parameter": lambda q: _sub_first(r"'[^']*'", "$p", q) if "'" in q else q + " LIMIT $p",
}

SPARQL_MUTATIONS: dict[str, Mutation] = {
    "as is": lambda q: q,
    "lower case": lambda q: re.sub(r"\b[A-Z]+\b", lambda m: m.group(0).lower(), q),
    "mixed case": lambda q: q.replace("SERVICE", "SeRvIcE").replace("LOAD", "LoAd").replace("GRAPH", "gRaPh"),
    "comment ended by CR": lambda q: "# hidden\r" + q,
    "keyword after a CR comment": lambda q: q.replace("SERVICE", "# x\rSERVICE").replace("LOAD", "# x\rLOAD"),
    "tabs and newlines": lambda q: q.replace(" ", "\n\t"),
    "no-break space": lambda q: q.replace(" ", "\u00a0", 2),
    "em space in an IRI": lambda q: q.replace("<urn:", "<urn:\u2003").replace("{url}", "{url}\u2003x"),
    "escaped keyword letter": lambda q: q.replace("SERVICE", "SE\\u0052VICE").replace("LOAD", "LO\\u0041D"),
    "no word boundary": lambda q: q.replace(" SERVICE", " ?q ?r true SERVICE").replace("SERVICE <", "SERVICE<"),
    "pname target": lambda q: "PREFIX : <{url}> " + re.sub(r"SERVICE(?: SILENT)? <[^>]*>", "SERVICE:x", q),
    "keyword fused with SILENT": lambda q: "PREFIX : <{url}> " + re.sub(r"SERVICE(?: SILENT)? <[^>]*>",
                                                                      "SERVICESILENT:x", q),
    "nested OPTIONAL": lambda q: q.replace("WHERE {", "WHERE { OPTIONAL {", 1).replace("}", "} }", 1)
    if "WHERE {" in q else q,
    "UNION": lambda q: q.replace("WHERE {", "WHERE { { } UNION {", 1) + " }" if "WHERE {" in q else q,
    "EXISTS filter": lambda q: q.replace("WHERE {", "WHERE { FILTER EXISTS {", 1) + " }" if "WHERE {" in q else q,
    "subquery": lambda q: "SELECT * WHERE { { " + q + " } }" if q.startswith("SELECT") else q,
    "CRLF spacing": lambda q: q.replace(" ", "\r\n"),
    "after an update": lambda q: "INSERT DATA { kg:x kg:y 1 } ;\n" + q,
    "escaped IRI characters": lambda q: re.sub(r"<(urn|http)", lambda m: "<\\u00" + format(ord(m.group(1)[0]), "x")
                                               + m.group(1)[1:], q),
    "keyword-named prefix": lambda q: "PREFIX service: <{url}> PREFIX load: <{url}> " + q,
    "GRAPH wrapper": lambda q: q.replace("WHERE {", "WHERE { GRAPH ?g {", 1) + " }" if "WHERE {" in q else q,
}


def corpus(attacks: list[str], mutations: dict[str, Mutation], **values: str) -> list[tuple[str, str]]:
    """``(name, query)`` for every attack under every mutation, placeholders filled in, duplicates dropped."""
    def fill(text: str) -> str:
        for key, value in values.items():
            text = text.replace("{" + key + "}", value)
        return text

    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for number, attack in enumerate(attacks):
        for name, mutate in mutations.items():
            query = fill(mutate(fill(attack)))
            if query not in seen:
                seen.add(query)
                out.append((f"{number}/{name}", query))
    return out
