"""The loaders on real-shaped data: ARK-V1 graphs (the 200 CR-LT Wikidata subgraphs), GRBench graph.json (the
fixture derived from GRBench's questions, streamed), STaRK-style KBs (PrimeKG's Ivermectin record, every table
layout and STaRK's processed files), triple files and CRAG's saved mock-API calls; format detection; clear
errors for missing or malformed sources."""

from __future__ import annotations

import functools
import gzip
import json
import pickle
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kgagents.evals import grbench_fixture
from kgagents.evals.colota import DATA_DIR as COLOTA_DIR
from kgagents.tools.crag_api import parse_repr
from kgagents.tools.pgraph import GraphFormatError, StaticKG, cached, loaders, open_graph
from kgagents.tools.pgraph.build import GraphBuilder
from kgagents.tools.pgraph.catalog import build
from kgagents.tools.pgraph.formats import grbench
from kgagents.tools.pgraph.loaders import detect_format

CR_LT = COLOTA_DIR / "customized_dataset.jsonl"
FIXTURE = grbench_fixture.FIXTURE_DIR
DOMAINS = list(grbench_fixture.DOMAINS)
MANIFEST = grbench_fixture.load_manifest()
CRAG_CALLS = grbench_fixture.DATA_DIR.parent / "crag" / "crag_mock_api_example_calls.json"
STARK_MINI = Path(__file__).resolve().parent / "data" / "stark_mini"


# ----------------------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------------------
def load(source: Path, **options: Any) -> StaticKG:
    """The graph a source builds into (through the cache, as the workflows open it)."""
    return open_graph(cached(source, **options))


def fresh(source: Path, target: Path, fmt: str) -> StaticKG:
    """A build of the source into its own directory (not the cache: the test changes how it is read)."""
    return open_graph(build(source, target, format=fmt, progress=False))


def contents(graph: StaticKG) -> tuple[list[tuple[str, str, str, dict[str, Any]]], list[tuple[Any, ...]]]:
    """Everything a graph holds, in its order: nodes (id, type, name, features) and edges with qualifiers."""
    nodes = [(n.id, n.type, n.name, graph.features(n.id)) for n in graph.iter_nodes()]
    edges = [(t.head, t.relation, t.tail, dict(t.qualifiers)) for t in graph.iter_triples()]
    return nodes, edges


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def write_lines(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def names(graph: StaticKG, ids: list[str]) -> list[str]:
    return [graph.node(i).name for i in ids]  # type: ignore[union-attr]


# ----------------------------------------------------------------------------------------------------------
# ARK-V1
# ----------------------------------------------------------------------------------------------------------
def test_ark_bare_edge_list_one_record_and_a_list_of_records(tmp_path, ark_example):
    edges = ark_example["graph"]
    bare = load(write_json(tmp_path / "bare.json", edges))
    record = load(write_json(tmp_path / "record.json", ark_example))
    assert contents(bare) == contents(record) and len(record) == 32
    assert [t.tail for t in record.triples("Yui Yuigahama", "present in work")] == [
        "My Youth Romantic Comedy Is Wrong, As I Expected"]

    other = {"id": "tiny", "question": "Does Ada know Bob?", "graph": [["Ada", "Bob", {"relation": "knows"}]]}
    many = write_json(tmp_path / "many.json", [{**ark_example, "id": "S2"}, other])
    with pytest.raises(GraphFormatError, match="holds 2 graphs: say which one"):
        load(many)
    assert contents(load(many, record="S2")) == contents(record)
    assert [t.as_ark() for t in load(many, record="#1").iter_triples()] == other["graph"]
    with pytest.raises(GraphFormatError, match="no record with id 'S3'"):
        load(many, record="S3")
    with pytest.raises(GraphFormatError, match=r"no record #5 \(it holds 2\)"):
        load(many, record="#5")


@pytest.mark.slow
def test_ark_json_lines_by_id_and_by_position(ark_example):
    by_id = load(CR_LT, record="S2")
    assert contents(by_id)[1] == [(h, p["relation"], t, {k: v for k, v in p.items() if k != "relation"})
                                  for h, t, p in ark_example["graph"]]
    first_two = [json.loads(line)["id"] for line in CR_LT.read_text(encoding="utf-8").splitlines()[:2]]
    assert first_two == ["S1", "S2"]
    assert contents(load(CR_LT, record="#1")) == contents(by_id)
    with pytest.raises(GraphFormatError, match="holds 200 graphs"):
        load(CR_LT)


@pytest.mark.slow
def test_every_cr_lt_subgraph_merged_into_one_graph():
    records = [json.loads(line) for line in CR_LT.read_text(encoding="utf-8").splitlines() if line.strip()]
    edges = [(h, p["relation"], t, {k: v for k, v in p.items() if k != "relation"})
             for r in records for h, t, p in r["graph"]]
    node_ids = {e[0] for e in edges} | {e[2] for e in edges}
    assert len(records) == 200 and len(edges) == 15_807

    graph = load(CR_LT, format="ark", merge=True)
    stats = graph.stats()
    assert (stats.nodes, stats.edges) == (len(node_ids), 15_807)
    assert stats.relations == list(dict.fromkeys(e[1] for e in edges))
    # the subgraphs overlap: the same edge from several records is kept once per record (parallel edges)
    repeated = Counter((h, r, t, json.dumps(q, sort_keys=True)) for h, r, t, q in edges)
    (head, relation, tail, qualifiers), times = repeated.most_common(1)[0]
    assert times > 1
    assert [(t.tail, dict(t.qualifiers)) for t in graph.triples(head, relation)].count(
        (tail, json.loads(qualifiers))) == times
    # triples and qualifiers, spot-checked against the file
    municipality = "Horsens Municipality (1970-2006)"
    capital = [t for t in graph.triples("Horsens", "capital of") if t.tail == municipality]
    assert capital and dict(capital[0].qualifiers) == {"start time": "+1970-04-01T00:00:00Z",
                                                       "end time": "+2006-12-31T00:00:00Z"}
    for h, r, t, q in edges[::997]:
        assert (t, q) in [(e.tail, dict(e.qualifiers)) for e in graph.triples(h, r)]
    assert graph.neighbours("Yui Yuigahama", "sex or gender") == ["female"]


@pytest.mark.parametrize(("graph", "match"), [
    ([["Ada", "Bob", {"relation": "knows"}], ["Ada", {"relation": "knows"}]],
     r"edge 1: expected \[head, tail"),
    ([["Ada", "Bob", "knows"]], r"edge 0: the third element must be an object"),
    ([["Ada", "Bob", {"relation": ""}]], r"edge 0: the relation must be a non-empty string"),
    ([["Ada", None, {"relation": "knows"}]], r"edge 0: the tail must be a non-empty string, got None"),
    ([["Ada", "Bob", {"since": 2001}]], r"edge 0: the relation must be a non-empty string, got None"),
])
def test_malformed_ark_edges_are_named(tmp_path, graph, match):
    with pytest.raises(GraphFormatError, match=match):
        load(write_json(tmp_path / "bad.json", {"question": "?", "graph": graph}))


def test_malformed_ark_files(tmp_path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "graph": []}\n{"id": "b", "graph": [}\n', encoding="utf-8")
    with pytest.raises(GraphFormatError, match=r"broken.jsonl, line 2: not valid JSON"):
        load(broken, format="ark", merge=True)
    with pytest.raises(GraphFormatError, match=r'record 0 has no "graph"'):
        load(write_json(tmp_path / "nograph.json", {"question": "?"}), format="ark")
    (tmp_path / "cut.json").write_text('{"graph": [["a", "b"', encoding="utf-8")
    with pytest.raises(GraphFormatError, match=r"cut.json: not valid JSON"):
        load(tmp_path / "cut.json", format="ark")


# ----------------------------------------------------------------------------------------------------------
# GRBench: the fixture derived from GRBench's questions
# ----------------------------------------------------------------------------------------------------------
Expected = tuple[dict[str, tuple[str, str, dict[str, Any]]], list[tuple[str, str, str]]]


def expected_grbench(path: Path) -> Expected:
    """What a graph.json holds, read with ``json.load``: nodes (id → type, name, features) and edges."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    nodes: dict[str, tuple[str, str, dict[str, Any]]] = {}
    edges: list[tuple[str, str, str]] = []
    for type_key, members in data.items():
        for node_id, node in members.items():
            features = node["features"]
            name = next((features[k].strip() for k in ("name", "title") if str(features.get(k, "")).strip()),
                        node_id)
            nodes[node_id] = (type_key.removesuffix("_nodes"), name, features)
            edges += [(node_id, relation, other)
                      for relation, ids in node["neighbors"].items() for other in ids]
    return nodes, edges


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_grbench_fixture_loads_as_written(domain):
    path = FIXTURE / domain / "graph.json"
    nodes, edges = expected_grbench(path)
    graph = load(FIXTURE / domain, format="grbench")
    stats = graph.stats()
    assert (stats.nodes, stats.edges) == (len(nodes), len(edges))
    assert set(stats.types) == {t for t, _, _ in nodes.values()}
    assert stats.relations == list(dict.fromkeys(r for _, r, _ in edges))
    for node_id, (node_type, name, features) in nodes.items():
        node = graph.node(node_id)
        assert node is not None and (node.type, node.name) == (node_type, name)
        assert graph.features(node_id) == features
    assert sorted((t.head, t.relation, t.tail) for t in graph.iter_triples()) == sorted(edges)
    # GRBench lists every edge in both directions
    pairs = {(h, t) for h, _, t in edges}
    assert all((t, h) in pairs for h, t in pairs)
    assert contents(load(path)) == contents(graph)  # the file itself, not its folder


def test_every_fixture_question_follows_its_gold_hop():
    per_domain = Counter(entry["domain"] for entry in MANIFEST)
    assert len(MANIFEST) >= 60 and len(per_domain) >= 4 and set(per_domain) == set(DOMAINS)
    graphs = {domain: load(FIXTURE / domain) for domain in DOMAINS}
    for entry in MANIFEST:
        graph = graphs[entry["domain"]]
        where = f"{entry['domain']} qid {entry['qid']}"
        assert int(entry["qid"]) // 10 == entry["template"], where
        # Graph-CoT: RetrieveNode[entity], then NeighbourCheck[start, relation] or NodeFeature[start, feature]
        assert entry["start"] in [n.id for n in graph.nodes_named(entry["entity"])], where
        hop = entry["hop"]
        if "relation" in hop:
            assert hop["relation"] in graph.relations_of(entry["start"]), where
            ends = graph.neighbours(entry["start"], hop["relation"])
            assert ends and all(entry["start"] in graph.neighbours(e, direction="out") for e in ends), where
        else:
            assert hop["feature"] in graph.features(entry["start"]), where
        assert grbench_fixture.gold_answer(graph, entry) == entry["answer"], where


@pytest.mark.slow
def test_the_fixture_is_what_the_questions_give(tmp_path):
    assert grbench_fixture.stale() == []
    assert grbench_fixture.main(["--out", str(tmp_path / "again")]) == 0
    for relative in grbench_fixture.render(*grbench_fixture.derive()):
        assert (tmp_path / "again" / relative).read_bytes() == (FIXTURE / relative).read_bytes()
    assert grbench_fixture.main(["--check", "--out", str(tmp_path / "again")]) == 0
    (tmp_path / "again" / "dblp" / "graph.json").write_text("{}", encoding="utf-8")
    assert grbench_fixture.main(["--check", "--out", str(tmp_path / "again")]) == 1


def test_answers_with_names_that_hold_commas_are_split_on_the_names():
    assert grbench_fixture.split_answer("biomedical", "Purpura, Thrombocytopenic, Idiopathic, Purpura, "
                                        "Schoenlein-Henoch, Proteinuria") == [
        "Purpura, Thrombocytopenic, Idiopathic", "Purpura, Schoenlein-Henoch", "Proteinuria"]
    genres = "poetry, fiction, history, historical fiction, biography"
    assert grbench_fixture.split_answer("goodreads", genres) == [
        "poetry", "fiction", "history, historical fiction, biography"]
    with pytest.raises(grbench_fixture.FixtureError, match="more than the template's 5"):
        grbench_fixture.split_answer("biomedical", "a, b, c, d, e, f")


@pytest.mark.parametrize("domain", ["dblp", "goodreads", "biomedical"])
def test_streaming_with_a_tiny_chunk_gives_the_same_graph(tmp_path, monkeypatch, domain):
    path = FIXTURE / domain / "graph.json"
    normal = fresh(path, tmp_path / "normal", "grbench")
    monkeypatch.setattr(grbench, "_JsonStream", functools.partial(grbench._JsonStream, chunk=7))
    tiny = fresh(path, tmp_path / "tiny", "grbench")
    assert contents(tiny) == contents(normal)


def test_long_strings_straddling_a_refill(tmp_path, monkeypatch):
    title = "A title much longer than sixty-four characters, with escapes (\u00e9, \u2014) and more " * 3
    data = {"paper_nodes": {f"p{i}": {"features": {"title": f"{i} {title}"},
                                      "neighbors": {"author": [f"a{i}"]}} for i in range(40)}}
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(data), encoding="utf-8")  # ASCII escapes, as GRBench wrote its files
    stream = grbench._JsonStream
    for chunk in (100, 333, 1000):
        monkeypatch.setattr(grbench, "_JsonStream", functools.partial(stream, chunk=chunk))
        graph = fresh(path, tmp_path / f"c{chunk}", "grbench")
        assert [n.name for n in graph.iter_nodes()][:2] == [f"0 {title}".strip(), "a0"]
        assert graph.stats().edges == 40


def test_gzipped_graphs(tmp_path):
    folder = tmp_path / "dblp"
    folder.mkdir()
    source = FIXTURE / "dblp" / "graph.json"
    with gzip.open(folder / "graph.json.gz", "wb") as f:
        f.write(source.read_bytes())
    assert detect_format(folder) == "grbench" and detect_format(folder / "graph.json.gz") == "grbench"
    assert contents(load(folder)) == contents(load(source))


def test_dict_valued_neighbours_become_weighted_edges(tmp_path):
    data = {"paper_nodes": {"p1": {"features": {"title": "Graph-CoT"},
                                   "neighbors": {"author": {"a1": 0.5, "a2": None}}}},
            "author_nodes": {"a1": {"features": {"name": "Bowen Jin"}, "neighbors": {"paper": ["p1"]}},
                             "a2": {"features": {"name": "Chulin Xie"}, "neighbors": {"paper": ["p1"]}}}}
    graph = load(write_json(tmp_path / "g" / "graph.json", data))
    assert [(t.tail, dict(t.qualifiers)) for t in graph.triples("p1", "author")] == [("a1", {"weight": 0.5}),
                                                                                      ("a2", {})]
    assert names(graph, graph.neighbours("p1", "author")) == ["Bowen Jin", "Chulin Xie"]
    assert graph.node("p1").type == "paper" and graph.neighbours("a2", "paper") == ["p1"]


@pytest.mark.parametrize(("text", "match"), [
    ("", r"expected '\{', found 'the end of the file'"),
    ("[1, 2]", r"expected '\{', found '\[1, 2\]'"),
    ("{}", r'the graph has no "<type>_nodes" members'),
    ('{"paper_nodes": {}} {"more": 1}', "unexpected content after the graph object"),
    ('{"paper_nodes": [1, 2]}', r"expected '\{', found '\[1, 2\]\}'"),
    ('{"paper_nodes": {"p1": [1]}}', r"paper_nodes\['p1'\] must be an object with \"features\" and "),
    ('{"paper_nodes": {"p1": {"features": "x", "neighbors": {}}}}', r"paper_nodes\['p1'\]: \"features\" and"),
    ('{"paper_nodes": {"p1": {"features": {}, "neighbors": {"author": "a1"}}}}',
     r"paper_nodes\['p1'\]\.neighbors\['author'\] must be a list of ids, got str"),
    ('{"paper_nodes": {"p1": {"features": {}, "neighbors": {"author": ["a1",, "a2"]}}}}',
     r"not valid JSON: Expecting value \(at character 70\)"),
    ('{"paper_nodes": {"p1": {"features": {"title": "Graph', r"not valid JSON: Unterminated string"),
    ('{"paper_nodes": {"p1": {"features": {}, "neighbors": {}}',
     r"expected ',' or '\}' after a member, found 'the end of the file'"),
    ('{"paper_nodes" {}}', r"expected ':', found '\{\}\}'"),
])
def test_malformed_grbench_graphs(tmp_path, text, match):
    path = tmp_path / "graph.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GraphFormatError, match=match):
        load(path, format="grbench")


def test_truncated_and_missing_grbench_graphs(tmp_path):
    text = (FIXTURE / "goodreads" / "graph.json").read_text(encoding="utf-8")
    for cut in (len(text) // 3, len(text) - 2):
        path = tmp_path / f"cut{cut}" / "graph.json"
        path.parent.mkdir()
        path.write_text(text[:cut], encoding="utf-8")
        with pytest.raises(GraphFormatError, match=r"graph.json: .* \(at character \d+\)"):
            load(path.parent)
    with pytest.raises(GraphFormatError, match="no such graph source"):
        load(tmp_path / "nowhere" / "graph.json", format="grbench")
    (tmp_path / "empty").mkdir()
    with pytest.raises(GraphFormatError, match=r"no graph.json in this folder"):
        load(tmp_path / "empty", format="grbench")
    (tmp_path / "notgz" / "graph.json.gz").parent.mkdir()
    (tmp_path / "notgz" / "graph.json.gz").write_bytes(b"not gzip at all")
    with pytest.raises(GraphFormatError, match="cannot read the GRBench graph"):
        load(tmp_path / "notgz", format="grbench")


def grbench_read(path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Exception | None, int]:
    """Load a graph.json straight into a builder, reading ``chunk`` characters at a time; the error (if any)
    and how many characters were read."""
    read = [0]

    def progress(done: int) -> None:
        read[0] = max(read[0], done)

    monkeypatch.setattr(grbench, "_JsonStream", functools.partial(grbench._JsonStream, chunk=chunk))
    builder = GraphBuilder(path.parent / "built")
    try:
        loaders.load_grbench(builder, path, progress=progress)
        return None, read[0]
    except GraphFormatError as exc:
        return exc, read[0]
    finally:
        builder.abort()


@pytest.mark.slow
@pytest.mark.parametrize("bad", ['["a0",, "a1"]', '["a0 is cut\n", "a1"]', '{"a0": tru}'])
def test_an_early_error_fails_without_reading_the_rest(tmp_path, monkeypatch, bad):
    good = {"features": {"title": "x" * 200}, "neighbors": {"author": ["a0"]}}
    rest = ",\n".join(f'"p{i}": {json.dumps(good)}' for i in range(1, 20_000))
    path = tmp_path / "graph.json"
    first = '"p0": {"features": {}, "neighbors": {"author": ' + bad + "}}"
    path.write_text('{"paper_nodes": {' + first + ",\n" + rest + "}}", encoding="utf-8")
    size = path.stat().st_size
    error, read = grbench_read(path, 4096, monkeypatch)
    assert isinstance(error, GraphFormatError) and "not valid JSON" in str(error)
    assert size > 4_000_000 and read <= 4 * 4096


def test_a_truncated_graph_fails_at_its_end(tmp_path, monkeypatch):
    text = (FIXTURE / "dblp" / "graph.json").read_text(encoding="utf-8")
    path = tmp_path / "graph.json"
    path.write_text(text[:len(text) // 2], encoding="utf-8")
    error, read = grbench_read(path, 512, monkeypatch)
    assert isinstance(error, GraphFormatError) and read == len(text) // 2


# ----------------------------------------------------------------------------------------------------------
# STaRK-style knowledge bases
# ----------------------------------------------------------------------------------------------------------
def stark_rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The mini KB's node and edge rows, from its JSON lines."""
    def read(name: str) -> list[dict[str, Any]]:
        text = (STARK_MINI / "jsonl" / name).read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines()]

    return read("nodes.jsonl"), read("edges.jsonl")


def check_stark_mini(graph: StaticKG) -> None:
    """The PrimeKG record: Ivermectin, its enzyme, targets and indications; STaRK's query answered."""
    nodes, _ = stark_rows()
    assert graph.stats().nodes == 6 and graph.stats().edges == 5
    assert [(n.id, n.type, n.name) for n in graph.iter_nodes()] == [
        (str(r["id"]), r["type"], r["name"]) for r in nodes]
    assert sorted(graph.stats().relations) == ["enzyme", "indication", "target"]
    assert names(graph, graph.neighbours("0", "target")) == ["GABRB3", "GLRA3"]
    assert {tuple(p) for p in graph.schema()} == {("drug", "enzyme", "gene/protein", 1),
                                                  ("drug", "target", "gene/protein", 2),
                                                  ("drug", "indication", "disease", 2)}
    # "What drugs target the CYP3A4 enzyme and are used to treat strongyloidiasis?" (STaRK-PrimeKG query 1)
    cyp3a4, disease = graph.nodes_named("CYP3A4")[0].id, graph.nodes_named("strongyloidiasis")[0].id
    drugs = set(graph.neighbours(cyp3a4, "enzyme", "in")) & set(graph.neighbours(disease, "indication", "in"))
    assert names(graph, sorted(drugs)) == ["Ivermectin"]
    assert "broad-spectrum anti-parasite" in graph.node_text("0")


def test_stark_tables_in_jsonl_csv_and_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    by_jsonl, by_csv = load(STARK_MINI / "jsonl"), load(STARK_MINI / "csv")
    check_stark_mini(by_jsonl)
    assert contents(by_csv) == contents(by_jsonl)
    assert by_jsonl.features("0") == {"source": "DrugBank", "text": stark_rows()[0][0]["text"]}

    nodes, edges = stark_rows()
    (tmp_path / "kb").mkdir()
    pq.write_table(pa.Table.from_pylist(nodes), tmp_path / "kb" / "nodes.parquet")
    pq.write_table(pa.Table.from_pylist(edges), tmp_path / "kb" / "edges.parquet")
    assert detect_format(tmp_path / "kb") == "stark"
    assert contents(load(tmp_path / "kb")) == contents(by_jsonl)


def check_stark_mini_structure(graph: StaticKG) -> None:
    """What the processed layout keeps of the mini KB: nodes, types, names and edges (not the documents)."""
    nodes, edges = stark_rows()
    assert [(n.id, n.type, n.name) for n in graph.iter_nodes()] == [
        (str(r["id"]), r["type"], r["name"]) for r in nodes]
    assert [(t.head, t.relation, t.tail) for t in graph.iter_triples()] == [
        (str(e["src"]), e["relation"], str(e["dst"])) for e in edges]


def test_stark_processed_layout(tmp_path):
    import torch

    nodes, edges = stark_rows()
    type_names = list(dict.fromkeys(r["type"] for r in nodes))
    relation_names = list(dict.fromkeys(e["relation"] for e in edges))
    folder = tmp_path / "prime_processed"
    folder.mkdir()
    info = {r["id"]: {"name": r["name"], "type": r["type"], "source": r["source"]} for r in nodes}
    info[0]["details"] = {"description": "Ivermectin is a broad-spectrum anti-parasite medication. ..."}
    for name, value in (("node_info.pkl", info), ("node_type_dict.pkl", dict(enumerate(type_names))),
                        ("edge_type_dict.pkl", dict(enumerate(relation_names)))):
        (folder / name).write_bytes(pickle.dumps(value))
    torch.save(torch.tensor([type_names.index(r["type"]) for r in nodes]), folder / "node_types.pt")
    torch.save(torch.tensor([[e["src"] for e in edges], [e["dst"] for e in edges]]), folder / "edge_index.pt")
    torch.save(torch.tensor([relation_names.index(e["relation"]) for e in edges]), folder / "edge_types.pt")

    assert detect_format(folder) == "stark"
    graph = load(folder)
    check_stark_mini_structure(graph)
    features = graph.features("0")
    assert features["source"] == "DrugBank" and features["details"] == info[0]["details"]
    # STaRK's retrieval document (get_doc_info with relations, compacted); its relation part as the STaRK
    # notebook prints it for Ivermectin, before compaction: "enzyme: {gene/protein: (CYP3A4),}" ...
    assert features["text"] == (
        "name: Ivermectin. type: drug. source: DrugBank. details: description: Ivermectin is a broad-spectrum "
        "anti-parasite medication. ... relations: enzyme: {gene/protein: (CYP3A4),}. target: {gene/protein: "
        "(GABRB3, GLRA3),}. indication: {disease: (onchocerciasis, strongyloidiasis),}")
    assert graph.meta["stark"]["dataset"] == "prime" and graph.meta["stark"]["candidate_types"] is None

    (folder / "edge_index.pt").unlink()
    with pytest.raises(GraphFormatError, match=r"cannot read .*edge_index.pt"):
        load(folder)


@pytest.mark.parametrize(("files", "match"), [
    ({"nodes.jsonl": [{"type": "drug", "name": "Ivermectin"}], "edges.jsonl": []},
     r"nodes.jsonl, row 1: no node id \(a column named id\)"),
    ({"nodes.jsonl": [{"id": 0, "name": "Ivermectin"}], "edges.jsonl": [{"src": 0, "dst": 1}]},
     r"edges.jsonl, row 1: an edge needs src, relation and dst columns, got \['dst', 'src'\]"),
    ({"nodes.jsonl": [{"id": 0, "name": "Ivermectin"}]}, r"no edges.jsonl / .csv / .tsv / .parquet"),
    ({"nodes.jsonl": ["Ivermectin"], "edges.jsonl": []}, r"nodes.jsonl, line 1: a row must be a JSON object"),
])
def test_stark_tables_with_missing_columns_or_files(tmp_path, files, match):
    folder = tmp_path / "kb"
    for name, rows in files.items():
        write_lines(folder / name, rows)
    with pytest.raises(GraphFormatError, match=match):
        load(folder, format="stark")


def test_stark_csv_without_an_id_column_and_other_errors(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "nodes.csv").write_text("type,name\ndrug,Ivermectin\n", encoding="utf-8")
    (folder / "edges.csv").write_text("src,relation,dst\n", encoding="utf-8")
    with pytest.raises(GraphFormatError, match=r"nodes.csv, row 2: no node id"):
        load(folder)
    with pytest.raises(GraphFormatError, match="a STaRK-style KB is a folder"):
        load(STARK_MINI / "jsonl" / "nodes.jsonl", format="stark")
    (folder / "nodes.parquet").write_bytes(b"PAR1 not really")
    (folder / "nodes.csv").unlink()
    with pytest.raises(GraphFormatError, match=r"cannot read .*nodes.parquet"):
        load(folder, format="stark")


# ----------------------------------------------------------------------------------------------------------
# Triples
# ----------------------------------------------------------------------------------------------------------
def test_tsv_triples_with_header_qualifiers_and_comments(tmp_path):
    path = tmp_path / "kb.tsv"
    path.write_text("head\trelation\ttail\tqualifiers\n"
                    "# Hetionet-style edges, one per line\n"
                    "Ivermectin\tenzyme\tCYP3A4\n"
                    "\n"
                    "Ivermectin\tindication\tstrongyloidiasis\t{\"source\": \"DrugBank\", \"phase\": 4}\n"
                    "Ivermectin\tindication\tstrongyloidiasis\t\n", encoding="utf-8")
    assert detect_format(path) == "triples"
    graph = load(path)
    assert [(t.tail, dict(t.qualifiers)) for t in graph.triples("Ivermectin", "indication")] == [
        ("strongyloidiasis", {"source": "DrugBank", "phase": 4}), ("strongyloidiasis", {})]
    assert graph.stats().edges == 3 and graph.neighbours("Ivermectin", "enzyme") == ["CYP3A4"]


def test_json_lines_triples_in_both_shapes(tmp_path):
    objects = write_lines(tmp_path / "objects.jsonl", [
        {"head": "Maroon 5", "relation": "member", "tail": "Adam Levine"},
        {"head": "Maroon 5", "relation": "member", "tail": "Matt Flynn", "qualifiers": {"since": 2006}}])
    lists = write_lines(tmp_path / "lists.jsonl", [["Maroon 5", "member", "Adam Levine"],
                                                  ["Maroon 5", "member", "Matt Flynn", {"since": 2006}]])
    assert detect_format(objects) == detect_format(lists) == "triples"
    assert contents(load(objects)) == contents(load(lists))
    assert [dict(t.qualifiers) for t in load(lists).triples("Maroon 5", "member")] == [{}, {"since": 2006}]


@pytest.mark.parametrize(("name", "text", "match"), [
    ("bad.tsv", "a\tr\tb\nonly\ttwo\n",
     r"bad.tsv, line 2: expected head<TAB>relation<TAB>tail, got 'only\\ttwo'"),
    ("bad.tsv", "a\tr\tb\n# fine\na\tr\tc\t{not json}\n", r"line 3: the fourth column must be a JSON object"),
    ("bad.tsv", "a\tr\tb\t[1]\n", r"line 1: the fourth column must be a JSON object of qualifiers$"),
    ("bad.tsv", "a\t\tb\n", r"line 1: expected head<TAB>relation<TAB>tail"),
    ("bad.jsonl", '["a", "r", "b"]\n["a", "r"\n', r"bad.jsonl, line 2: not valid JSON"),
    ("bad.jsonl", '["a", "r", "b"]\n{"head": "a", "relation": "r"}\n',
     r"line 2: expected \{\"head\", \"relation\""),
    ("bad.jsonl", '["a", "r", null]\n', r"line 1: the tail must be a non-empty string, got None"),
    ("bad.jsonl", '["a", "r", "b", [1]]\n', r"line 1: qualifiers must be an object, got \[1\]"),
])
def test_bad_triple_lines_are_named(tmp_path, name, text, match):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GraphFormatError, match=match):
        load(path, format="triples")


# ----------------------------------------------------------------------------------------------------------
# CRAG's mock KG API, from saved calls
# ----------------------------------------------------------------------------------------------------------
def test_crag_saved_calls_become_a_graph():
    assert detect_format(CRAG_CALLS) == "crag"
    graph = load(CRAG_CALLS)
    members = graph.neighbours("music:Maroon 5", "members")
    assert names(graph, members) == ["James Valentine", "Matt Flynn", "Ryan Dusick", "PJ Morton",
                                     "Mickey Madden", "Jesse Carmichael", "Adam Levine"]
    assert graph.neighbours("music:I Can Feel It", "song_author") == ["music:Kane Brown"]
    # finance_get_price_history("META"): one dated edge per day with its OHLC prices as qualifiers
    days = graph.triples("finance:META", "price_history")
    assert days and all(t.tail.startswith("finance:20") and t.tail.endswith(" EST") for t in days)
    assert days[0].tail == "finance:2023-02-28 00:00:00 EST"
    assert set(days[0].qualifiers) == {"Open", "High", "Low", "Close", "Volume"}
    assert days[0].qualifiers["Open"] == pytest.approx(171.71780629294318)
    # truncated outputs are recovered as far as they go: the people named Jackson, the cut entity page
    people = graph.neighbours("movie:Jackson", "person_info")
    assert 1 < len(people) < 20 and graph.node("movie:2949449").name == "Jackson"
    assert graph.neighbours("movie:2949449", "acted_movies") == ["movie:137113"]
    assert graph.has_node("open:Florida City, Florida")


def test_crag_calls_file_errors(tmp_path):
    with pytest.raises(GraphFormatError, match=r'expected \{"calls"'):
        load(write_json(tmp_path / "a.json", {"calls": "none"}), format="crag")
    no_output = {"calls": [{"call": "api.music_get_members('Maroon 5')"}]}
    with pytest.raises(GraphFormatError, match=r"call 0 \(api.music_get_members\('Maroon 5'\)\): no output"):
        load(write_json(tmp_path / "b.json", no_output), format="crag")
    with pytest.raises(GraphFormatError, match=r"call 0 \(members of Maroon 5\): not a call"):
        load(write_json(tmp_path / "c.json", {"calls": [{"call": "members of Maroon 5", "output": "{}"}]}),
             format="crag")
    with pytest.raises(GraphFormatError, match=r"call 0 \(api.music_get_members\(\)\): .*band_name is required"):
        load(write_json(tmp_path / "e.json", {"calls": [{"call": "api.music_get_members()", "output": "{}"}]}),
             format="crag")
    not_a_literal = {"calls": [{"call": "api.music_get_members('Maroon 5')", "output": "<html>"}]}
    with pytest.raises(GraphFormatError, match=r"call 0 \(api.music_get_members\('Maroon 5'\)\): not a Python lit"):
        load(write_json(tmp_path / "d.json", not_a_literal), format="crag")


@pytest.mark.parametrize(("text", "value"), [
    ("{'result': ['Lady Gaga', 'Ga-Ga']}", {"result": ["Lady Gaga", "Ga-Ga"]}),
    ("{'result': ['James Valentine',\n  'Matt Flynn',\n  'Ryan Du",
     {"result": ["James Valentine", "Matt Flynn"]}),
    ("{'result': {'2023-02-28': {'Open': 171.7, 'High': 177.3},\n  '2023-03-01': {'Open': 17",
     {"result": {"2023-02-28": {"Open": 171.7, "High": 177.3}, "2023-03-01": {}}}),
    ("{'result': {'summary_text': 'Florida City is a city in Miami-Dade County, Flo", {"result": {}}),
    ("{'result': [{'acted_movies': [137113], 'name': 'Jackson'}, {'acted_movies': [4542",
     {"result": [{"acted_movies": [137113], "name": "Jackson"}, {"acted_movies": []}]}),
    ("{'result': ('it\\'s', 'a', 'tup", {"result": ("it's", "a")}),
])
def test_parse_repr_recovers_cut_literals(text, value):
    assert parse_repr(text) == value


def test_parse_repr_rejects_what_is_no_literal():
    with pytest.raises(ValueError, match="not a Python literal"):
        parse_repr("<generator object at 0x7f>")


# ----------------------------------------------------------------------------------------------------------
# Format detection
# ----------------------------------------------------------------------------------------------------------
def test_detect_format_on_each_kind(tmp_path, ark_example):
    assert detect_format(write_json(tmp_path / "example.json", ark_example)) == "ark"
    assert detect_format(write_json(tmp_path / "bare.json", ark_example["graph"])) == "ark"
    assert detect_format(CR_LT) == "ark"
    assert detect_format(FIXTURE / "dblp") == detect_format(FIXTURE / "dblp" / "graph.json") == "grbench"
    assert detect_format(STARK_MINI / "csv") == detect_format(STARK_MINI / "jsonl") == "stark"
    assert detect_format(CRAG_CALLS) == "crag"
    (tmp_path / "kb.txt").write_text("a\tr\tb\n", encoding="utf-8")
    assert detect_format(tmp_path / "kb.txt") == "triples"


def test_detect_format_on_unknown_content(tmp_path):
    (tmp_path / "notes.json").write_text("hello, graph", encoding="utf-8")
    with pytest.raises(GraphFormatError, match=r"notes.json: cannot tell the graph format .* one of: ark \(.*"
                                               r"grbench \(.*stark \(.*triples \(.*crag \("):
        detect_format(tmp_path / "notes.json")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "readme.md").write_text("#", encoding="utf-8")
    with pytest.raises(GraphFormatError, match=r"a folder with neither graph.json"):
        detect_format(tmp_path / "folder")
    with pytest.raises(GraphFormatError, match="no such graph source"):
        detect_format(tmp_path / "missing.json")
    (tmp_path / "latin1.json").write_bytes(b"{\xff\xfe")
    with pytest.raises(GraphFormatError, match="cannot read the graph source"):
        detect_format(tmp_path / "latin1.json")
