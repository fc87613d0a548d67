"""The static-KG store in Cypher databases (ArcadeDB over Bolt, FalkorDB): every interface method answers as the
compact store does on real-shaped graphs (ARK-V1's example with parallel edges and qualifiers, a GRBench-shaped
graph), imports run in batches, graphs in one database stay apart, re-imports replace, and a database that is
down gives a clear error."""

from __future__ import annotations

import io
import json
import math
import re
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from kgagents.cli import main
from kgagents.tools.kg.cypher import quote_name
from kgagents.tools.kg.servers import free_port
from kgagents.tools.pgraph import GraphFormatError, import_graph, known_graphs, open_graph
from kgagents.tools.pgraph import cypher as cypher_module
from kgagents.tools.pgraph.compact import CompactGraph
from kgagents.tools.pgraph.cypher import (
    CATALOG_GRAPH,
    CATALOG_LABEL,
    CypherGraph,
    GraphDatabaseError,
    Location,
    import_to_cypher,
    redact,
)
from kgagents.tools.pgraph.model import StaticKG
from kgagents.tools.pgraph.registry import forget_open_graphs

DBLP = Path(str(resources.files("evals") / "data" / "grbench" / "fixture" / "dblp" / "graph.json"))

#: Added to ARK-V1's example: parallel edges (identical ones, and ones with other qualifiers of other JSON types),
#: incoming edges of one relation from two heads interleaved in source order, and a relation with characters no
#: relationship type allows.
ARK_EXTRA = [
    ["dachshund", "Sablé", {"relation": "has pet"}],
    ["Yui Yuigahama", "Sablé", {"relation": "has pet", "since": 2011, "sources": ["anime", 3]}],
    ["Yui Yuigahama", "Sablé", {"relation": "has pet"}],
    ["Sablé", "dachshund", {"relation": "`odd` relation: ü/ß {x}"}],
    ["Sablé", "dachshund", {"relation": "`odd` relation: ü/ß {x}"}],
]


@pytest.fixture(autouse=True)
def no_open_graphs():
    """Open instances are shared by fingerprint across the process: every test opens its own graphs."""
    forget_open_graphs()
    yield
    forget_open_graphs()


@pytest.fixture
def ark_source(tmp_path, ark_example) -> Path:
    path = tmp_path / "yui.json"
    path.write_text(json.dumps({**ark_example, "graph": ark_example["graph"] + ARK_EXTRA}), encoding="utf-8")
    return path


def pair(source: Path, database: Any, name: str, **kw: Any) -> tuple[CompactGraph, CypherGraph]:
    """The compact store of ``source`` and its import into ``database``, opened by name."""
    compact_ref = import_graph(source, name=f"{name}-compact")
    assert isinstance(open_graph(f"{name}-compact"), CompactGraph)
    ref = import_to_cypher(source, backend=database.backend, url=database.url, name=name, **kw)
    graph = open_graph(name)  # the same fingerprint as the compact build, another instance
    assert isinstance(graph, CypherGraph) and ref["fingerprint"] == compact_ref["fingerprint"]
    compact = open_graph(f"{name}-compact")
    assert isinstance(compact, CompactGraph)
    return compact, graph


def answers(g: StaticKG) -> dict[str, Any]:
    """What every method of the interface answers on ``g``, for every node, direction and relation."""
    stats = g.stats()
    out: dict[str, Any] = {
        "stats": [stats.nodes, stats.edges, stats.heads, stats.relations, stats.types, stats.feature_keys,
                  stats.qualifier_keys],
        "len": len(g), "schema": g.schema(), "type_features": g.type_features(), "definition": g.definition(),
        "type_counts": g.type_counts(), "relation_counts": g.relation_counts(),  # type: ignore[attr-defined]
        "nodes": list(g.iter_nodes()), "triples": list(g.iter_triples()),
    }
    ids = [n.id for n in out["nodes"]] + ["no such node"]
    for node_id in ids:
        node = g.node(node_id)
        per: dict[str, Any] = {
            "node": node, "has": g.has_node(node_id), "type": g.node_type(node_id), "features": g.features(node_id),
            "text": g.node_text(node_id), "named": g.nodes_named(node.name) if node else [],
            "head": g.is_head(node_id), "display": g.display_name(node_id), "describe": g.describe(node_id),
        }
        for d in ("out", "in", "both"):
            relations = g.relations_of(node_id, d)
            per[d] = [relations, g.degree(node_id, None, d), g.neighbours(node_id, None, d),
                      g.neighbours(node_id, None, d, limit=2), g.edges(node_id, None, d),
                      g.edges(node_id, None, d, limit=3)]
            per[d] += [(r, g.degree(node_id, r, d), g.neighbours(node_id, r, d), g.edges(node_id, r, d))
                       for r in relations + ["no such relation"]]
        per["triples"] = [g.triples(node_id, r) for r in g.relations_of(node_id)]
        out[f"node {node_id}"] = per
    seeds = ids[:6]
    for seed in seeds:
        for kw in ({"radius": 1}, {"radius": 2}, {"radius": 2, "direction": "out"}, {"max_nodes": 5},
                   {"relations": stats.relations[:2]}):
            ego = g.ego_graph([seed, "no such node"], **kw)
            out[f"ego {seed} {kw}"] = [ego.seeds, list(ego.hops.items()), list(ego.paths.items()), ego.truncated]
    egos = [g.ego_graph([s]) for s in seeds[:3]]
    common = g.intersection(egos)
    paths = g.reasoning_paths(seeds[:3], targets=common or None)
    out["paths"] = [common, paths, [g.verbalise(p) for p in paths], [g.verbalise(p, ids=True) for p in paths]]
    out["export"] = [g.export(ids[:10]), g.neighbourhood(ids[0], radius=2), g.export()]
    lines = io.StringIO()
    out["jsonl"] = [g.export_jsonl(lines), lines.getvalue()]
    return out


def assert_same(cypher: StaticKG, compact: StaticKG) -> None:
    got, expected = answers(cypher), answers(compact)
    assert list(got) == list(expected)
    for key, value in expected.items():
        assert got[key] == value, key


# ----------------------------------------------------------------------------------------------------------
# The same answers as the compact store
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_ark_graph_answers_as_the_compact_store(cypher_database, ark_source, embedder):
    compact, g = pair(ark_source, cypher_database, "yui", batch_size=7)
    assert g.stats().edges == 37  # five batches of 7 or fewer
    assert_same(g, compact)
    # what ARK-V1 reads, spelled out: parallel edges with their qualifiers and keys, in source order
    pets = g.triples("Yui Yuigahama", "has pet")
    assert [dict(t.qualifiers) for t in pets] == [{}, {"since": 2011, "sources": ["anime", 3]}, {}]
    assert len({t.key for t in pets}) == 3 and [t.key for t in pets] == [t.key for t in compact.triples(
        "Yui Yuigahama", "has pet")]
    assert g.triples("Sablé", "animal breed")[0].render() == "[27ea] (Sablé, animal breed, dachshund)"
    assert g.neighbours("Sablé", "has pet", "in") == ["Yui Yuigahama", "dachshund", "Yui Yuigahama", "Yui Yuigahama"]
    assert [t.relation for t in g.triples("Sablé", "`odd` relation: ü/ß {x}")] == ["`odd` relation: ü/ß {x}"] * 2
    fandom = g.triples("Sablé", "Fandom article ID")[0]
    assert fandom.qualifiers["MediaWiki page ID"] == "14567"
    # unknown ids give empty answers, never an exception
    assert g.node("nobody") is None and g.features("nobody") == {} and g.triples("nobody", "has pet") == []
    assert g.neighbours("nobody") == [] and g.degree("nobody") == 0 and g.ego_graph(["nobody"]).nodes == []
    assert g.triples("Sablé", "no such relation") == [] and g.neighbours("Sablé", limit=0) == []
    with pytest.raises(KeyError, match="no feature 'colour'"):
        g.feature("Sablé", "colour")
    # ARK-V1's fuzzy anchoring among head entities
    heads = g.nearest_nodes("a dog", 5, heads_only=True, embedder=embedder)
    assert sorted(i for i, _ in heads) == ["Sablé", "Yui Yuigahama", "dachshund"]
    assert heads == compact.nearest_nodes("a dog", 5, heads_only=True, embedder=embedder)


@pytest.mark.slow
def test_grbench_graph_answers_as_the_compact_store(cypher_database):
    compact, g = pair(DBLP, cypher_database, "dblp", batch_size=10)
    assert g.stats().nodes == 78 and g.stats().types == ["paper", "author", "venue"]
    assert_same(g, compact)
    paper = next(n for n in g.iter_nodes() if n.type == "paper")
    assert g.feature(paper.id, "title") == paper.name and g.nodes_named(paper.name) == [paper]


@pytest.mark.slow
def test_names_with_cypher_metacharacters_are_data(cypher_database, ark_source, ark_example, tmp_path):
    """Ids, names, relations and qualifier keys from a source go into parameters, never into the query text:
    every method answers as the compact store, and another graph in the database stays as it was."""
    from tests.kg.test_hostile_names import HOSTILE

    where = {"backend": cypher_database.backend, "url": cypher_database.url}
    import_to_cypher(ark_source, name="yui", **where)
    before = list(open_graph("yui").iter_triples())
    triples = [[HOSTILE[i], HOSTILE[(i + 1) % len(HOSTILE)], {"relation": HOSTILE[i - 1], HOSTILE[i]: HOSTILE[i]}]
               for i in range(len(HOSTILE))]
    source = tmp_path / "hostile.json"
    source.write_text(json.dumps({**ark_example, "graph": triples}), encoding="utf-8")
    compact, g = pair(source, cypher_database, "hostile")
    assert_same(g, compact)
    for i, name in enumerate(HOSTILE):
        assert g.node(name).id == name and g.nodes_named(name) == [g.node(name)]
        assert g.neighbours(name, HOSTILE[i - 1]) == [HOSTILE[(i + 1) % len(HOSTILE)]]
        assert dict(g.triples(name, HOSTILE[i - 1])[0].qualifiers) == {name: name}
    forget_open_graphs()
    assert list(open_graph("yui").iter_triples()) == before and len(before) == 37


@pytest.mark.slow
def test_imports_run_in_batches(cypher_database, ark_source, monkeypatch):
    batches: list[tuple[str, int]] = []
    run = cypher_module.Database.run

    def spy(self, graph, query, params=None, **kw):
        if query.startswith("UNWIND"):
            batches.append(("edges" if cypher_module.EDGE_TYPE in query else "nodes", len(params["rows"])))
        return run(self, graph, query, params, **kw)

    monkeypatch.setattr(cypher_module.Database, "run", spy)
    ref = import_to_cypher(ark_source, backend=cypher_database.backend, url=cypher_database.url, name="yui",
                           batch_size=4)
    nodes = [size for kind, size in batches if kind == "nodes"]
    edges = [size for kind, size in batches if kind == "edges"]
    assert sum(nodes) == 30 and len(nodes) == math.ceil(30 / 4) and max(nodes) == 4
    assert sum(edges) == 37 and len(edges) == math.ceil(37 / 4) and max(edges) == 4
    manifest = json.loads((Path(ref["location"]) / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["batch_size"] == 4 and manifest["counts"]["edges"] == 37
    with pytest.raises(GraphFormatError, match="batch size must be at least 1"):
        import_to_cypher(ark_source, backend=cypher_database.backend, url=cypher_database.url, batch_size=0)


@pytest.mark.slow
def test_nearest_nodes_and_relations(cypher_database, embedder):
    compact, g = pair(DBLP, cypher_database, "dblp")
    authors = [n.id for n in g.iter_nodes() if n.type == "author"][:12]
    for kw in ({}, {"field": "text"}, {"types": ["venue"]}, {"heads_only": True}, {"among": authors},
               {"among": authors, "types": ["paper"]}, {"among": []}, {"types": ["paper"], "heads_only": True}):
        found = g.nearest_nodes("neural networks for graphs", 5, embedder=embedder, **kw)
        assert found == compact.nearest_nodes("neural networks for graphs", 5, embedder=embedder, **kw), kw
    assert g.nearest_nodes("x", 3, among=authors, types=["paper"], embedder=embedder) == []
    assert g.nearest_relations("written by", 2, embedder=embedder) == compact.nearest_relations(
        "written by", 2, embedder=embedder)
    assert g.nearest_relations("written by", 2, among=["venue"], embedder=embedder)[0][0] == "venue"
    # the indexes live in the graph's local directory, and a second open reuses them
    index_dir = Path(g.ref["location"]) / "index"
    assert {p.name for p in index_dir.iterdir() if p.is_dir()} >= {"name--all-MiniLM-L6-v2",
                                                                   "text--all-MiniLM-L6-v2"}
    forget_open_graphs()
    again = open_graph("dblp")
    again.nearest_nodes("graphs", 1, embedder=embedder)
    assert again.indexes.builds == 0 and "name--all-MiniLM-L6-v2" in again.indexes.status()
    with pytest.raises(ValueError, match="unknown embedding field"):
        g.nearest_nodes("x", field="title")


# ----------------------------------------------------------------------------------------------------------
# Namespaces, re-imports, the manifest
# ----------------------------------------------------------------------------------------------------------
def namespace_size(g: CypherGraph, namespace: str) -> int:
    """How many nodes a namespace holds (0 when it is gone: on FalkorDB reading a namespace that is gone is an
    error, never no rows)."""
    try:
        rows = g.db.run(namespace, f"MATCH (n:{quote_name(namespace)}) RETURN count(n)")
    except GraphDatabaseError as exc:
        assert "no longer in the falkordb database" in str(exc)
        return 0
    return int(rows[0][0]) if rows else 0


def catalog(g: CypherGraph, name: str) -> list[str]:
    return [r[0] for r in g.db.run(CATALOG_GRAPH, f"MATCH (c:{CATALOG_LABEL} {{name: $name}}) RETURN c.namespace",
                                   {"name": name})]


@pytest.mark.slow
def test_graphs_stay_apart_and_a_reimport_replaces(cypher_database, ark_source):
    where = {"backend": cypher_database.backend, "url": cypher_database.url}
    import_to_cypher(ark_source, name="one", **where)
    import_to_cypher(DBLP, name="two", **where)
    one, two = open_graph("one"), open_graph("two")
    assert isinstance(one, CypherGraph) and isinstance(two, CypherGraph) and one.namespace != two.namespace
    paper = next(n.id for n in two.iter_nodes() if n.type == "paper")
    assert one.has_node("Sablé") and not two.has_node("Sablé")
    assert two.has_node(paper) and not one.has_node(paper)
    assert (one.stats().nodes, two.stats().nodes) == (30, 78) == (len(list(one.iter_nodes())),
                                                                  len(list(two.iter_nodes())))
    assert len(list(one.iter_triples())) == 37 and len(list(two.iter_triples())) == 96

    old = one.namespace
    import_to_cypher(DBLP, name="one", **where)
    forget_open_graphs()
    replaced = open_graph("one")
    assert replaced.namespace not in (old, two.namespace) and replaced.has_node(paper)
    assert not replaced.has_node("Sablé") and replaced.stats().nodes == 78
    assert namespace_size(replaced, old) == 0 and catalog(replaced, "one") == [replaced.namespace]
    assert two.has_node(paper) and namespace_size(two, two.namespace) == 78  # the other graph is untouched
    with pytest.raises(GraphDatabaseError, match=r"is no longer there.*import it again"):
        CypherGraph.from_manifest(one.directory, one.manifest)


@pytest.mark.slow
def test_a_failed_import_leaves_the_previous_graph(cypher_database, ark_source, monkeypatch):
    where = {"backend": cypher_database.backend, "url": cypher_database.url}
    import_to_cypher(ark_source, name="g", **where)
    before = open_graph("g")
    edge_rows = cypher_module._edge_rows

    def broken(compact):
        for number, row in enumerate(edge_rows(compact)):
            if number == 12:
                raise RuntimeError("the import was stopped")
            yield row

    monkeypatch.setattr(cypher_module, "_edge_rows", broken)
    with pytest.raises(RuntimeError, match="stopped"):
        import_to_cypher(DBLP, name="g", batch_size=5, **where)
    forget_open_graphs()
    after = open_graph("g")
    assert after.namespace == before.namespace and after.has_node("Sablé") and catalog(after, "g") == [
        after.namespace]


@pytest.mark.slow
def test_the_manifest_holds_no_credentials(cypher_database, ark_source):
    ref = import_to_cypher(ark_source, backend=cypher_database.backend, url=cypher_database.url, name="yui")
    text = (Path(ref["location"]) / "manifest.json").read_text(encoding="utf-8")
    manifest = json.loads(text)
    assert manifest["backend"] == cypher_database.backend and manifest["database"]["url"] == cypher_database.url
    assert manifest["namespace"].startswith("KGStatic_yui_") and manifest["source"]["format"] == "ark"
    password = cypher_database.env.get("NEO4J_PASSWORD")
    assert password is None or password not in text


def test_urls_lose_their_credentials():
    assert redact("redis://user:secret@db.example:6380/0") == "redis://db.example:6380/0"
    assert redact("rediss://:secret@[::1]:6379") == "rediss://[::1]:6379"
    assert redact("bolt://127.0.0.1:7687") == "bolt://127.0.0.1:7687"
    where, given = Location.of_import("falkordb", "redis://user:secret@db.example:6380")
    assert where.url == "redis://db.example:6380" and given == "redis://user:secret@db.example:6380"
    assert "secret" not in json.dumps(where.as_dict())
    with pytest.raises(GraphFormatError, match="unknown graph database 'mysql'"):
        Location.of_import("mysql", None)


@pytest.fixture
def embedded_falkordb(monkeypatch):
    """No FALKORDB_URL: the process's embedded FalkorDB server, stopped after the test."""
    monkeypatch.delenv("FALKORDB_URL", raising=False)
    yield
    from kgagents.tools.kg import servers

    server = servers._embedded.pop("falkordb", None)
    if server is not None:
        server.stop()


@pytest.mark.slow
def test_without_a_url_the_embedded_server_holds_the_graph(embedded_falkordb, ark_source, capsys):
    ref = import_to_cypher(ark_source, backend="falkordb", name="yui")
    assert "keeps it only while this process runs" in capsys.readouterr().err
    manifest = json.loads((Path(ref["location"]) / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["database"] == {"url": None, "embedded": True, "database": None}
    g = open_graph("yui")
    assert isinstance(g, CypherGraph) and g.stats().extra["database"].endswith("(embedded)")
    assert g.triples("Sablé", "animal breed")[0].key == "27ea"


# ----------------------------------------------------------------------------------------------------------
# A database that is down; the command line
# ----------------------------------------------------------------------------------------------------------
def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("backend, scheme", [("neo4j", "bolt"), ("falkordb", "redis")])
def test_a_database_that_is_down_gives_a_clear_error(backend, scheme, ark_source, capsys, monkeypatch):
    url = f"{scheme}://127.0.0.1:{free_port()}"
    if backend == "neo4j":
        monkeypatch.setenv("NEO4J_URI", url)  # the password's own server, down
    monkeypatch.setenv("NEO4J_PASSWORD", "not-a-real-password")
    with pytest.raises(GraphDatabaseError, match=f"cannot use the {backend} database at {re.escape(url)}: "):
        import_to_cypher(ark_source, backend=backend, url=url, name="yui")
    code, out, err = cli(capsys, "graph", "import", str(ark_source), f"--{backend}", url, "--name", "yui")
    assert code == 2 and out == "" and url in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert known_graphs() == []


@pytest.mark.slow
def test_opening_a_graph_whose_database_is_down(cypher_database, ark_source, capsys):
    ref = import_to_cypher(ark_source, backend=cypher_database.backend, url=cypher_database.url, name="yui")
    path = Path(ref["location"]) / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    dead = re.sub(r":\d+$", f":{free_port()}", cypher_database.url)
    manifest["database"]["url"] = dead
    path.write_text(json.dumps(manifest), encoding="utf-8")
    forget_open_graphs()
    with pytest.raises(GraphDatabaseError, match=re.escape(dead)):
        open_graph("yui")
    code, _, err = cli(capsys, "graph", "info", "yui")
    assert code == 2 and dead in err and "Traceback" not in err


@pytest.mark.slow
def test_cli_import_then_info_list_and_show(cypher_database, capsys):
    flag = f"--{cypher_database.backend}"
    code, out, err = cli(capsys, "graph", "import", str(DBLP), flag, cypher_database.url, "--name", "dblp",
                         "--batch-size", "25", "--quiet")
    assert code == 0 and out.strip() == "dblp" and "fingerprint" in err
    code, out, _ = cli(capsys, "graph", "list")
    assert out.split()[:5] == ["dblp", cypher_database.backend, "78", "nodes", "96"]
    code, out, _ = cli(capsys, "graph", "info", "dblp", "--json")
    info = json.loads(out)
    assert (info["nodes"], info["edges"], info["format"], info["backend"]) == (78, 96, "grbench",
                                                                                cypher_database.backend)
    assert info["database"] == cypher_database.url and info["namespace"].startswith("KGStatic_dblp_")
    assert sum(info["types"].values()) == 78 and sum(info["relations"].values()) == 96
    code, out, _ = cli(capsys, "graph", "info", "dblp")
    assert code == 0 and "78 nodes, 96 edges" in out and f"{cypher_database.backend} at" in out
    g = open_graph("dblp")
    paper = next(n for n in g.iter_nodes() if n.type == "paper" and g.degree(n.id))
    code, out, _ = cli(capsys, "graph", "show", "dblp", paper.name)
    assert code == 0 and out.startswith(f"{paper.id}  type: paper  name: {paper.name}")
