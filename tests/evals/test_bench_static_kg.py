"""The static-KG benchmark and its synthetic graphs: the generator's output, the stores' agreement, a tiny run
(no timing is checked: the numbers of a shared test machine mean nothing)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from kgagents.evals.bench_static_kg import (
    CompactStore,
    DictStore,
    NetworkxStore,
    bounded_ego,
    evict,
    main,
    measure_ivf,
    memory,
)
from kgagents.evals.synthetic_kg import LINK_TYPES, VENUE, generate


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 2,000-node / 20,000-edge synthetic graph with its compact build."""
    folder = tmp_path_factory.mktemp("synthetic")
    graph = generate(folder, nodes=2_000, edges=20_000, seed=7, samples=300)
    CompactStore.build(Path(graph.path), folder / "compact")
    return graph, folder


def _sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.slow
def test_the_generator_is_deterministic_for_a_seed(tmp_path):
    a = generate(tmp_path / "a", nodes=500, edges=4_000, seed=3, samples=50)
    b = generate(tmp_path / "b", nodes=500, edges=4_000, seed=3, samples=50)
    c = generate(tmp_path / "c", nodes=500, edges=4_000, seed=4, samples=50)
    assert _sha(a.path) == _sha(b.path) != _sha(c.path)
    assert (a.lookups, a.seeds, a.names) == (b.lookups, b.seeds, b.names)
    assert a.degree == b.degree and a.relations == b.relations


@pytest.mark.slow
def test_the_graph_is_grbench_shaped_with_heavy_tails_and_realistic_strings(small):
    graph, _ = small
    data = json.loads(Path(graph.path).read_text(encoding="utf-8"))
    assert list(data) == ["paper_nodes", "author_nodes", "keyword_nodes", "venue_nodes"]
    assert {k.removesuffix("_nodes"): len(v) for k, v in data.items()} == graph.node_types
    assert sum(graph.node_types.values()) == graph.nodes == 2_000
    # every link is listed at both ends, under the relation and its reverse
    reverse = {(link.head, link.relation): link.reverse for link in (*LINK_TYPES, VENUE)}
    reverse.update({(link.tail, link.reverse): link.relation for link in (*LINK_TYPES, VENUE)})
    node_type = {i: k.removesuffix("_nodes") for k, nodes in data.items() for i in nodes}
    listed = 0
    for type_key, nodes in data.items():
        for node_id, node in nodes.items():
            for relation, ids in node["neighbors"].items():
                assert ids and len(set(ids)) == len(ids), "no empty lists, no parallel links"
                back = reverse[(type_key.removesuffix("_nodes"), relation)]
                for other in ids:
                    assert node_id in data[f"{node_type[other]}_nodes"][other]["neighbors"][back]
                listed += len(ids)
    assert listed == graph.edges == sum(graph.relations.values())
    assert graph.edges >= 0.95 * 20_000
    assert all(len(p["neighbors"]["venue"]) == 1 for p in data["paper_nodes"].values())
    # power-law degrees: hubs far above the typical node
    degrees = [sum(len(ids) for ids in n["neighbors"].values()) for nodes in data.values() for n in nodes.values()]
    assert max(degrees) == graph.degree["max"] >= 10 * np.median(degrees)
    cited = sorted((len(p["neighbors"].get("cited_by", [])) for p in data["paper_nodes"].values()), reverse=True)
    assert sum(cited[:len(cited) // 100]) >= 0.1 * sum(cited), "the top 1 % of papers collect 10 % of citations"
    papers = [p["features"] for p in data["paper_nodes"].values()]
    assert all(60 <= len(f["title"]) <= 100 and 1970 <= f["year"] <= 2024 for f in papers)
    abstracts = [len(f["abstract"]) for f in papers if "abstract" in f]
    assert 0.2 < len(abstracts) / len(papers) < 0.4 and all(300 <= n <= 902 for n in abstracts)
    names = [len(a["features"]["name"]) for a in data["author_nodes"].values()]
    assert 10 <= np.median(names) <= 20


def test_the_samples_are_nodes_with_edges(small):
    graph, _ = small
    data = json.loads(Path(graph.path).read_text(encoding="utf-8"))
    nodes = {i: n for nodes in data.values() for i, n in nodes.items()}
    assert len(graph.lookups) == len(set(graph.seeds)) == 300
    assert all(relation in nodes[i]["neighbors"] for i, relation in graph.lookups)
    assert all(nodes[i]["features"].get("name", nodes[i]["features"].get("title")) == name
               for i, name in graph.names)


@pytest.mark.parametrize("kwargs, message", [({"nodes": 10, "edges": 100}, "at least"),
                                             ({"nodes": 1000, "edges": 1001}, "even")])
def test_bad_sizes_are_clear_errors(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate(tmp_path, **kwargs)


@pytest.mark.slow
def test_the_compact_store_answers_like_the_dicts_and_networkx(small):
    graph, folder = small
    stores = {}
    for cls in (CompactStore, DictStore, NetworkxStore):
        stores[cls.name] = cls()
        stores[cls.name].open(Path(graph.path), folder / "compact")
    compact, dicts, nx = stores["compact"], stores["dicts"], stores["networkx"]
    for node_id, relation in graph.lookups:
        expected = list(dicts.neighbours(node_id, relation))
        assert compact.neighbours(node_id, relation) == expected  # the same order: the source's
        assert sorted(nx.neighbours(node_id, relation)) == sorted(expected)
        node = dicts._node(node_id)
        assert compact.graph.relations_of(node_id) == list(node["neighbors"])
        assert compact.graph.features(node_id) == node["features"]
    for max_nodes in (30, 20_000):
        for seed in graph.seeds[:40]:
            expected = dicts.ego(seed, max_nodes)
            assert compact.ego(seed, max_nodes) == expected
            assert nx.ego(seed, max_nodes) == expected
    assert any(dicts.ego(seed, 30)[1] for seed in graph.seeds[:40]), "some ego-graphs reach the bound"
    assert compact.graph.stats().edges == graph.edges and compact.graph.stats().nodes == graph.nodes


def test_bounded_ego_graphs():
    edges = {"a": ["b", "c"], "b": ["a", "d"], "c": ["e"], "d": ["f"], "e": [], "f": []}
    assert bounded_ego("a", edges.__getitem__, 2, 100) == (["a", "b", "c", "d", "e"], False)
    assert bounded_ego("a", edges.__getitem__, 1, 100) == (["a", "b", "c"], False)
    assert bounded_ego("a", edges.__getitem__, 2, 3) == (["a", "b", "c"], True)


def test_memory_and_eviction(tmp_path):
    usage = memory()
    assert usage["peak"] >= usage["rss"] > 0
    (tmp_path / "f.bin").write_bytes(b"x" * 100_000)
    assert evict([tmp_path]) in (True, False)  # no error either way


def test_ivf_recall_against_exact_search(tmp_path):
    spec = {"data": "clustered", "seed": 0, "vectors": 4_000, "queries": 40, "k": 10, "dim": 32,
            "nprobes": [1, 10_000], "directory": str(tmp_path / "ivf"), "ivf_threshold": 1_000}
    result = measure_ivf(spec)
    assert result["kind"] == "ivf" and result["nlist"] == int(4 * np.sqrt(4_000)) and result["vectors"] == 4_000
    assert 0 <= result["recall"]["1"] <= result["recall"]["10000"]
    assert result["recall"]["10000"] >= 0.9, "probing every list leaves only the 8-bit quantisation's error"
    assert set(result["ivf_ms"]) == {"1", "10000"} and result["exact_ms"]["n"] == 40


@pytest.mark.slow
def test_a_tiny_run_end_to_end(tmp_path, capsys):
    out, work = tmp_path / "result.json", tmp_path / "work"
    code = main(["--scales", "300:3000", "--stores", "dicts", "compact", "--nodes", "0", "--lookups", "300", "--egos",
                 "10", "--nearest", "4",
                 "--nearest-max-nodes", "1000", "--ivf-vectors", "1", "--ivf-data", "names", "--ivf-queries", "10",
                 "--nprobes", "4", "--workdir", str(work), "--out", str(out)])
    assert code == 0 and not work.exists(), "the work folder is removed without --keep"
    result = json.loads(out.read_text(encoding="utf-8"))
    scale = result["scales"][0]
    assert scale["answers_agree"] and scale["nodes"] == 300 and scale["nearest_queries"] == 4
    assert [r["store"] for r in scale["rows"]] == ["compact", "dicts"], "the compact store first (its embeddings)"
    sampled = scale["rows"][0]["lookup_us"]["n"]
    assert 250 <= sampled <= 300, "one lookup per sampled node with an edge"
    for row in scale["rows"]:
        assert row["lookup_us"]["n"] == sampled and row["ego_ms"]["n"] == 10 and row["nearest_ms"]["n"] == 3
        assert row["warm_open_s"] >= 0 and row["rss_work"] > 0 and row["bytes_per_edge"] > 0
    compact = scale["rows"][0]
    assert compact["build_s"] > 0 and compact["name_index_s"] > 0 and compact["edges"] == scale["edges"]
    assert result["ivf"][0]["data"] == "names" and result["ivf"][0]["vectors"] == 300
    table = capsys.readouterr().out
    assert "| compact |" in table and "| dicts |" in table and "answers agree across stores: yes" in table
