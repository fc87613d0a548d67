"""The task KG in a SPARQL 1.1 store: the embedded ``pyoxigraph`` store, or any SPARQL 1.1 query/update endpoint.

Configuration (the context's ``kg_url``, else ``SPARQL_ENDPOINT``):

- nothing: an in-memory ``pyoxigraph`` store shared by the runs of this process (one named graph each);
- ``oxigraph:/path/to/dir``: a ``pyoxigraph`` store persisted in that directory (one process at a time);
- ``http(s)://.../query``: a SPARQL 1.1 endpoint (Oxigraph, RDF4J, GraphDB, Fuseki, Virtuoso). The update
  endpoint is ``SPARQL_UPDATE_ENDPOINT``, or derived from the query URL (``.../query`` -> ``.../update``,
  ``.../repositories/x`` -> ``.../repositories/x/statements``, otherwise the same URL); ``SPARQL_USER`` /
  ``SPARQL_PASSWORD`` give HTTP basic authentication (a user without a password: an empty one). The update
  endpoint and the credentials belong to ``SPARQL_ENDPOINT``'s server (and ``SPARQL_UPDATE_ENDPOINT``'s): a
  ``kg_url`` elsewhere gets neither (:mod:`kgagents.core.keys`).

Mapping between the snapshot's property graph and RDF (prefix ``kg:`` = ``urn:kg:``; the ids, labels, keys and
types are the compact names below, so the prompt and the queries use the same words):

- a node is an IRI (``kg:marie_curie`` has the id ``marie_curie``; IRIs in other well-known namespaces are
  written ``schema:Person``, any other IRI in full); its labels are its ``rdf:type`` objects;
- a property is a triple with a literal object (several values of one predicate make a list; strings,
  integers, decimals/doubles, booleans map to JSON values, other literals to ``{"@value", "@type"}`` or
  ``{"@value", "@language"}``);
- a relationship is a triple with an IRI object (its type is the predicate); blank nodes are given
  ``kg:_b<n>`` IRIs after each write.

Isolation: each run's KG is its own named graph, and no LLM-written text ever reaches the database. Updates and
queries run on a **private in-memory copy** of the run's graph (its default graph; no named graphs, no other
run's data): an update's result replaces the run's named graph in one update request built from ``pyoxigraph``
terms, so ``DROP ALL``, ``CLEAR ALL`` or ``GRAPH <other>`` can only affect the copy, and a query can only see
the run's own triples -- whatever an endpoint would make of ``FROM``, ``GRAPH ?g`` or ``SERVICE`` to itself.
Before it runs, the text passes :func:`kgagents.tools.kg.sparql_text.clean` (``SERVICE`` and ``LOAD`` refused, the
query rebuilt from its checked tokens); with bubblewrap the copy lives in the sandbox
(:mod:`kgagents.tools.kg.sparql_engine` runs there: no network at all, the sandbox's time and memory limits), so the
engine itself cannot reach the network either. Without bubblewrap it runs in the weak sandbox (its own process and
limits, and a network namespace of its own where the kernel allows an unprivileged one: most Linux hosts); only where
neither can be had (macOS) is the query check the only wall, which a warning says.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import inspect
import json
import math
import os
import re
import sys
import threading
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import httpx

from kgagents.core.errors import KGAgentsError
from kgagents.core.keys import same_server, say_once
from kgagents.tools.kg.base import (
    DatabaseStore,
    KGError,
    KGSnapshot,
    NodeRecord,
    ReadResult,
    RelationshipRecord,
    WriteResult,
    empty_snapshot,
)
from kgagents.tools.kg.cypher import canonical, snapshot_digest
from kgagents.tools.kg.sparql_text import SparqlRejected, clean
from kgagents.tools.sandbox import Sandbox, SandboxLimits, SandboxUnavailable, weak_network_isolation

KG = "urn:kg:"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
XSD = "http://www.w3.org/2001/XMLSchema#"
RDF_TYPE = RDF + "type"
PREFIXES: dict[str, str] = {
    "kg": KG,
    "rdf": RDF,
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "xsd": XSD,
    "owl": "http://www.w3.org/2002/07/owl#",
    "schema": "http://schema.org/",
    "foaf": "http://xmlns.com/foaf/0.1/",
    "dc": "http://purl.org/dc/elements/1.1/",
    "dcterms": "http://purl.org/dc/terms/",
    "skos": "http://www.w3.org/2004/02/skos/core#",
}
GRAPH_BASE = "urn:kgagents:graph:"
NO_NAMED_GRAPHS = "urn:kgagents:no-named-graphs"
MAX_RESULT_ROWS = 200
_LOCAL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def graph_iri_for(thread_id: str) -> str:
    """The named graph of one run."""
    readable = re.sub(r"[^0-9A-Za-z_-]+", "_", thread_id)[:40]
    return f"{GRAPH_BASE}{readable}:{hashlib.sha256(thread_id.encode('utf-8')).hexdigest()[:12]}"


# ------------------------------------------------------------------------------------------------------------
# Names and values
# ------------------------------------------------------------------------------------------------------------
def compact(iri: str) -> str:
    """The snapshot name of an IRI: ``kg:`` names bare, well-known namespaces as ``prefix:local``, others whole."""
    if iri.startswith(KG) and ":" not in iri[len(KG):]:
        return iri[len(KG):]
    for prefix, ns in PREFIXES.items():
        if prefix != "kg" and iri.startswith(ns) and _LOCAL.match(iri[len(ns):]):
            return f"{prefix}:{iri[len(ns):]}"
    return iri


def expand(name: str) -> str:
    """The inverse of :func:`compact`."""
    if ":" not in name:
        return KG + name
    prefix, local = name.split(":", 1)
    if prefix in PREFIXES and prefix != "kg":
        return PREFIXES[prefix] + local
    return name


def _iri(name: str) -> Any:
    import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

    iri = expand(str(name))
    try:
        return ox.NamedNode(iri)
    except ValueError:
        return ox.NamedNode(KG + quote(str(name), safe=""))


def literal_value(lit: Any) -> Any:
    """A literal as a JSON value (see the module docstring)."""
    value, lang = lit.value, lit.language
    if lang:
        return {"@value": value, "@language": lang}
    dt = lit.datatype.value
    try:
        if dt == XSD + "string":
            return value
        if dt == XSD + "integer":
            return int(value)
        if dt in (XSD + "decimal", XSD + "double", XSD + "float"):
            number = float(value)
            if math.isfinite(number):
                return number
        if dt == XSD + "boolean":
            return value in ("true", "1")
    except ValueError:
        pass
    return {"@value": value, "@type": compact(dt)}


def value_literal(value: Any) -> Any:
    import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

    if isinstance(value, bool):
        return ox.Literal("true" if value else "false", datatype=ox.NamedNode(XSD + "boolean"))
    if isinstance(value, int):
        return ox.Literal(str(value), datatype=ox.NamedNode(XSD + "integer"))
    if isinstance(value, float):
        if math.isfinite(value):
            return ox.Literal(format(Decimal(repr(value)), "f"), datatype=ox.NamedNode(XSD + "decimal"))
        lexical = "NaN" if math.isnan(value) else ("INF" if value > 0 else "-INF")
        return ox.Literal(lexical, datatype=ox.NamedNode(XSD + "double"))
    if isinstance(value, dict) and "@value" in value:
        if value.get("@language"):
            return ox.Literal(str(value["@value"]), language=str(value["@language"]))
        if value.get("@type"):
            return ox.Literal(str(value["@value"]), datatype=ox.NamedNode(expand(str(value["@type"]))))
        return ox.Literal(str(value["@value"]))
    if isinstance(value, str):
        return ox.Literal(value)
    return ox.Literal(json.dumps(value, ensure_ascii=False, sort_keys=True))


def snapshot_triples(snapshot: KGSnapshot) -> list[Any]:
    """The RDF triples of a snapshot."""
    import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

    rdf_type = ox.NamedNode(RDF_TYPE)
    triples = []
    for node in snapshot["nodes"]:
        subject = _iri(node["id"])
        for label in node["labels"]:
            triples.append(ox.Triple(subject, rdf_type, _iri(label)))
        for key, value in node["properties"].items():
            for v in (value if isinstance(value, list) else [value]):
                if v is not None:
                    triples.append(ox.Triple(subject, _iri(key), value_literal(v)))
    for rel in snapshot["relationships"]:
        triples.append(ox.Triple(_iri(rel["source"]), _iri(rel["type"]), _iri(rel["target"])))
    return triples


class RDFMappingError(KGAgentsError, ValueError):
    """RDF content the property-graph snapshot cannot hold (the message says what)."""


def triples_snapshot(triples: Iterable[Any]) -> KGSnapshot:
    """The snapshot of RDF triples (blank nodes must have been replaced by IRIs)."""
    import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

    nodes: dict[str, dict[str, Any]] = {}
    rels: set[tuple[str, str, str]] = set()

    def node(name: str) -> dict[str, Any]:
        return nodes.setdefault(name, {"labels": set(), "properties": {}})

    for t in triples:
        s, p, o = t.subject, t.predicate, t.object
        if not isinstance(s, ox.NamedNode):
            raise RDFMappingError(f"unsupported subject {s} (use IRIs such as kg:some_id)")
        sid = compact(s.value)
        entry = node(sid)
        if isinstance(o, ox.Literal):
            entry["properties"].setdefault(compact(p.value), []).append(literal_value(o))
        elif isinstance(o, ox.NamedNode):
            if p.value == RDF_TYPE:
                entry["labels"].add(compact(o.value))
            else:
                node(compact(o.value))
                rels.add((sid, compact(p.value), compact(o.value)))
        else:
            raise RDFMappingError(f"unsupported object {o} (quoted triples are not supported)")
    out_nodes: list[NodeRecord] = []
    for name in sorted(nodes):
        props: dict[str, Any] = {}
        for key, values in sorted(nodes[name]["properties"].items()):
            values = sorted(values, key=lambda v: (type(v).__name__, canonical(v)))
            props[key] = values[0] if len(values) == 1 else values
        out_nodes.append({"id": name, "labels": sorted(nodes[name]["labels"]), "properties": props})
    out_rels: list[RelationshipRecord] = [{"type": t, "source": s, "target": o, "properties": {}}
                                          for s, t, o in sorted(rels)]
    return {"nodes": out_nodes, "relationships": out_rels}


def skolemize(triples: list[Any], used: set[str]) -> list[Any]:
    """Replace blank nodes by ``kg:_b<n>`` IRIs, numbered in an order that depends on their triples only."""
    import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

    blanks: dict[str, list[str]] = {}
    for t in triples:
        for term in (t.subject, t.object):
            if isinstance(term, ox.BlankNode):
                blanks.setdefault(term.value, [])
    if not blanks:
        return triples
    for t in triples:
        if isinstance(t.subject, ox.BlankNode):
            obj = "_:" if isinstance(t.object, ox.BlankNode) else str(t.object)
            blanks[t.subject.value].append(f"{t.predicate} {obj}")
        if isinstance(t.object, ox.BlankNode):
            subj = "_:" if isinstance(t.subject, ox.BlankNode) else str(t.subject)
            blanks[t.object.value].append(f"^{t.predicate} {subj}")
    order = sorted(blanks, key=lambda b: (sorted(blanks[b]), b))
    names: dict[str, Any] = {}
    k = 0
    for b in order:
        while True:
            k += 1
            if f"_b{k}" not in used:
                break
        names[b] = ox.NamedNode(f"{KG}_b{k}")

    def sub(term: Any) -> Any:
        return names[term.value] if isinstance(term, ox.BlankNode) else term

    return [ox.Triple(sub(t.subject), t.predicate, sub(t.object)) for t in triples]


# ------------------------------------------------------------------------------------------------------------
# Databases: the embedded pyoxigraph store and HTTP endpoints
# ------------------------------------------------------------------------------------------------------------
class EmbeddedDatabase:
    """A ``pyoxigraph`` store (in memory or on disk)."""

    def __init__(self, path: str | None = None) -> None:
        import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

        self.path = path
        try:
            self.store = ox.Store(path) if path else ox.Store()
        except OSError as exc:
            raise KGError(f"cannot open the Oxigraph store at {path}: {exc} (is another process using it?)") from exc
        self.description = f"oxigraph:{path}" if path else "the embedded in-memory Oxigraph store"

    def graph_triples(self, graph: str) -> list[Any]:
        import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

        return [q.triple for q in self.store.quads_for_pattern(None, None, None, ox.NamedNode(graph))]

    def replace_graph(self, graph: str, triples: list[Any]) -> None:
        self.store.update(replace_update(graph, triples))


class HttpDatabase:
    """A SPARQL 1.1 protocol endpoint."""

    def __init__(self, query_url: str, update_url: str | None = None) -> None:
        self.query_url = query_url
        # SPARQL_UPDATE_ENDPOINT, SPARQL_USER and SPARQL_PASSWORD belong to SPARQL_ENDPOINT's server (and the update
        # endpoint's): a query URL elsewhere gets neither its update URL nor the credentials
        configured = [os.environ.get(name, "").strip() for name in ("SPARQL_ENDPOINT", "SPARQL_UPDATE_ENDPOINT")]
        ours = same_server(query_url, configured[0])
        self.update_url = update_url or (configured[1] if ours else "") or derive_update_url(query_url)
        user, password = os.environ.get("SPARQL_USER"), os.environ.get("SPARQL_PASSWORD") or ""
        self._auth = {url: httpx.BasicAuth(user, password) for url in {self.query_url, self.update_url}
                      if user and any(same_server(url, bound) for bound in configured)}
        if user and len(self._auth) < len({self.query_url, self.update_url}):
            say_once(f"{query_url} is not SPARQL_ENDPOINT's server ({configured[0] or 'SPARQL_ENDPOINT is not set'}): "
                     "its requests go without SPARQL_USER / SPARQL_PASSWORD")
        self.client = httpx.Client(timeout=60.0, trust_env=False)
        self.description = query_url

    def auth_for(self, url: str) -> httpx.Auth:
        """The HTTP authentication of requests to ``url``: the endpoint's user and password where they belong,
        else none."""
        return self._auth.get(url) or httpx.Auth()

    def _post(self, url: str, data: dict[str, Any], accept: str | None = None) -> Any:
        headers = {"Accept": accept} if accept else {}
        try:
            response = self.client.post(url, data=data, headers=headers, auth=self.auth_for(url))
        except httpx.HTTPError as exc:
            raise KGError(f"the SPARQL endpoint {url} cannot be reached: {exc}") from exc
        if response.status_code >= 400:
            raise SparqlEngineError(f"HTTP {response.status_code} from the endpoint: {response.text.strip()[:1500]}")
        return response

    def graph_triples(self, graph: str) -> list[Any]:
        import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

        response = self._post(self.query_url, {"query": f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH <{graph}> "
                                                        "{ ?s ?p ?o } }"}, accept="application/n-triples")
        return [q.triple for q in ox.parse(response.content, format=ox.RdfFormat.N_TRIPLES)]

    def replace_graph(self, graph: str, triples: list[Any]) -> None:
        self._post(self.update_url, {"update": replace_update(graph, triples)})


class SparqlEngineError(KGAgentsError, RuntimeError):
    """An error the SPARQL engine reported for a query (goes to the fix loop)."""


def derive_update_url(query_url: str) -> str:
    if query_url.rstrip("/").endswith("/query"):
        return query_url.rstrip("/")[: -len("query")] + "update"
    if "/repositories/" in query_url and not query_url.rstrip("/").endswith("/statements"):
        return query_url.rstrip("/") + "/statements"
    return query_url


def replace_update(graph: str, triples: list[Any]) -> str:
    body = "\n".join(f"{t.subject} {t.predicate} {t.object} ." for t in triples)
    return f"DROP SILENT GRAPH <{graph}> ;\nINSERT DATA {{ GRAPH <{graph}> {{\n{body}\n}} }}"


def term_value(term: Any) -> Any:
    """A ``pyoxigraph`` term as the LLM reads it: a compact name, a JSON value, ``_:id``."""
    import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

    if isinstance(term, ox.NamedNode):
        return compact(term.value)
    if isinstance(term, ox.Literal):
        value = literal_value(term)
        return value["@value"] if isinstance(value, dict) else value
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    return str(term)


def engine_term(term: list[Any]) -> Any:
    """A term as :func:`kgagents.tools.kg.sparql_engine.execute` describes it
    (``[kind, value, datatype, language]``), as
    the LLM reads it."""
    import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

    kind, value = term[0], term[1]
    if kind == "iri":
        return compact(value)
    if kind == "bnode":
        return f"_:{value}"
    if kind == "literal":
        datatype, language = term[2], term[3]
        lit = ox.Literal(value, language=language) if language else ox.Literal(value, datatype=ox.NamedNode(datatype))
        return term_value(lit)
    return value


def parse_ntriples(text: str) -> list[Any]:
    import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

    return [q.triple for q in ox.parse(text.encode("utf-8"), format=ox.RdfFormat.N_TRIPLES)] if text else []


def ntriples(triples: Iterable[Any]) -> str:
    import pyoxigraph as ox  # the sparql extra: loaded when a SPARQL store is used

    # without an output file serialize returns the bytes (its annotation says bytes | None for both cases)
    return cast(bytes, ox.serialize(list(triples), format=ox.RdfFormat.N_TRIPLES)).decode("utf-8")


def engine_result(outcome: dict[str, Any]) -> Any:
    """What a query's outcome looks like to the LLM: a boolean, rows of ``{variable: value}`` or ``[s, p, o]``
    triples, with a note when rows were cut."""
    if "boolean" in outcome:
        return bool(outcome["boolean"])
    if "rows" in outcome:
        result: list[Any] = [{var: engine_term(t) for var, t in row.items()} for row in outcome["rows"]]
    else:
        result = [[term_value(t.subject), term_value(t.predicate), term_value(t.object)]
                  for t in parse_ntriples(outcome["triples"])]
    if outcome.get("more"):
        result.append({"note": f"{outcome['more']} more rows were cut"})
    return result


_embedded: dict[str, EmbeddedDatabase | HttpDatabase] = {}
_embedded_lock = threading.Lock()


def database_for(url: str | None = None) -> EmbeddedDatabase | HttpDatabase:
    """The database for ``url`` / ``SPARQL_ENDPOINT`` (embedded stores are shared within the process)."""
    url = (url or os.environ.get("SPARQL_ENDPOINT", "")).strip()
    if url.startswith(("http://", "https://")):
        with _embedded_lock:
            key = f"{url} {os.environ.get('SPARQL_UPDATE_ENDPOINT', '')} {os.environ.get('SPARQL_USER', '')}"
            endpoint = _embedded.get(key)
            if endpoint is None:
                endpoint = _embedded[key] = HttpDatabase(url)
            return endpoint
    if url and not url.startswith("oxigraph:"):
        raise KGError(f"a SPARQL store is http(s)://... (an endpoint) or oxigraph:/path (embedded), not {url!r}")
    path = url[len("oxigraph:"):] if url else ""
    key = str(Path(path).resolve()) if path else ""
    with _embedded_lock:
        db = _embedded.get(key)
        if db is None:
            if key:
                Path(key).mkdir(parents=True, exist_ok=True)
            db = EmbeddedDatabase(key or None)
            _embedded[key] = db
        return db


# ------------------------------------------------------------------------------------------------------------
# The store
# ------------------------------------------------------------------------------------------------------------
_ENGINE_CALL = ("result = execute(inputs['triples'], inputs['text'], inputs['update'], inputs['prefixes'], "
                "inputs['max_rows'])")
_warned_in_process = False


class SparqlRunner:
    """Where LLM-written SPARQL runs: the sandbox, on a private store holding one KG
    (:mod:`kgagents.tools.kg.sparql_engine`). The code the sandbox runs is the engine, not LLM-written, so
    without bubblewrap it runs in the weak sandbox whether or not weak isolation was allowed for LLM-written
    code: its own process, with the sandbox's limits and, where the kernel allows one, a network namespace of its
    own (:func:`kgagents.tools.sandbox.weak_network_isolation`). Only without a work dir does it run in this
    process."""

    def __init__(self, work_dir: Path | None, limits: SandboxLimits) -> None:
        self.sandbox: Sandbox | None = None
        if work_dir is not None:
            try:  # the engine's own code: the weak sandbox is allowed whatever is allowed of LLM-written code
                self.sandbox = Sandbox(work_dir, limits, allow_weak=True)
            except SandboxUnavailable:
                self.sandbox = None
        off_network = self.sandbox is not None and (self.sandbox.isolation == "bwrap" or weak_network_isolation())
        if not off_network:
            global _warned_in_process
            if not _warned_in_process:
                _warned_in_process = True
                where = "in this process" if self.sandbox is None else "in a process that can reach the network"
                print(f"kgagents: LLM-written SPARQL runs {where} (no bubblewrap, no network namespace): only the "
                      "query check (no SERVICE, no LOAD) keeps it off the network", file=sys.stderr)

    async def run(self, triples: str, text: str, *, update: bool) -> tuple[dict[str, Any] | None, str | None]:
        """``(outcome, None)`` or ``(None, error for the model)``."""
        args: dict[str, Any] = {"triples": triples, "text": text, "update": update, "prefixes": PREFIXES,
                "max_rows": MAX_RESULT_ROWS}
        from kgagents.tools.kg import sparql_engine  # imports pyoxigraph (the sparql extra)

        if self.sandbox is None:
            try:
                return await asyncio.to_thread(sparql_engine.execute, **args), None
            except (SyntaxError, ValueError, OSError, RuntimeError) as exc:
                return None, f"{type(exc).__name__}: {exc}"
        run = await self.sandbox.run(_ENGINE_CALL, inputs=args, prelude=inspect.getsource(sparql_engine),
                                     result_var="result")
        if not run.ok or not isinstance(run.result, dict):
            return None, run.error or "the query did not run"
        return run.result, None


class SparqlStore(DatabaseStore):
    """A run's task KG as a named graph of a SPARQL store (see the module docstring)."""

    name = "sparql"
    query_language = "sparql"

    def __init__(self, snapshot: KGSnapshot | None = None, *, thread_id: str,
                 database: EmbeddedDatabase | HttpDatabase, work_dir: Path | None = None,
                 limits: SandboxLimits | None = None, allow_weak_sandbox: bool = False, sync: bool = True) -> None:
        self.db = database
        self.graph = graph_iri_for(thread_id)
        self._snapshot: KGSnapshot = copy.deepcopy(snapshot) if snapshot else empty_snapshot()
        self._runner = SparqlRunner(work_dir, limits or SandboxLimits())  # allow_weak_sandbox: see SparqlRunner
        try:
            if sync:
                self._sync()
        except KGError:
            raise
        except Exception as exc:
            raise KGError(f"cannot use the SPARQL store {database.description}: {type(exc).__name__}: {exc}") from exc

    def _current(self) -> KGSnapshot:
        return triples_snapshot(self.db.graph_triples(self.graph))

    def _sync(self) -> None:
        if snapshot_digest(self._current()) != snapshot_digest(self._snapshot):
            self.db.replace_graph(self.graph, snapshot_triples(self._snapshot))
            self._snapshot = self._current()

    def clear_sync(self) -> None:
        self.db.replace_graph(self.graph, [])
        self._snapshot = empty_snapshot()

    def restore_sync(self, snapshot: KGSnapshot) -> None:
        self.db.replace_graph(self.graph, snapshot_triples(snapshot))
        self._snapshot = self._current()

    async def write(self, code: str) -> WriteResult:
        try:
            text = clean(code)
        except SparqlRejected as exc:
            return WriteResult(False, f"Rejected: {exc}")
        outcome, error = await self._runner.run(ntriples(snapshot_triples(self._snapshot)), text, update=True)
        if outcome is None:
            return WriteResult(False, error)
        if outcome["named_graphs"]:
            return WriteResult(False, "Write to the default graph only: this knowledge graph has no named graphs "
                                      f"(the update wrote to {', '.join(outcome['named_graphs'])}); drop the GRAPH "
                                      "clauses")
        used = {n["id"] for n in self._snapshot["nodes"]}
        try:
            snapshot = triples_snapshot(skolemize(parse_ntriples(outcome["triples"]), used))
        except RDFMappingError as exc:
            return WriteResult(False, str(exc))
        try:
            await asyncio.to_thread(self.db.replace_graph, self.graph, snapshot_triples(snapshot))
        except SparqlEngineError as exc:
            return WriteResult(False, str(exc))
        self._snapshot = snapshot
        return WriteResult(True)

    async def read(self, query: str) -> ReadResult:
        try:
            text = clean(query)
        except SparqlRejected as exc:
            return ReadResult(False, None, f"Rejected: {exc}")
        outcome, error = await self._runner.run(ntriples(snapshot_triples(self._snapshot)), text, update=False)
        if outcome is None:
            return ReadResult(False, None, error)
        return ReadResult(True, engine_result(outcome))

    def database_snapshot(self) -> KGSnapshot:
        """What the database holds for this run right now (for tests and diagnostics)."""
        return self._current()
