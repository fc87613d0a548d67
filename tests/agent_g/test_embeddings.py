"""Agent-G's embeddings as the paper's: the VSS embedder by name (OpenAI's text-embedding-ada-002 through any
OpenAI-compatible server, here a fake one on loopback), STaRK's released embeddings used instead of embedding
the documents again, exact search unless IVF is asked for, and the ego-graph cap as a setting whose cuts are
recorded."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kgagents.nodes.agent_g import AgentGContext, default_error
from kgagents.tools.pgraph import open_graph
from kgagents.tools.pgraph.embeddings import OpenAIEmbedder
from tests.agent_g.conftest import QUESTION, comment, decide, validate
from tests.agent_g.test_graph import run
from tests.fakes.openai_server import FakeOpenAIServer, fake_embedding

ADA = "openai:text-embedding-ada-002"


@pytest.fixture()
def embeddings_server():
    with FakeOpenAIServer() as server:
        yield server


def test_the_openai_embedder_batches_and_shortens_what_is_too_long(embeddings_server):
    embeddings_server.embedding_max_chars = 60
    embedder = OpenAIEmbedder(ADA, base_url=embeddings_server.base_url, api_key="k", batch_size=2)
    long = " ".join(["word"] * 30)  # 149 characters: refused, then cut to the share that fits
    vectors = embedder.encode(["red apples", "", long])
    assert vectors.shape == (3, 32) and np.allclose(np.linalg.norm(vectors[[0, 2]], axis=1), 1.0)
    assert np.allclose(vectors[0], fake_embedding("red apples"))
    sent = [r.body["input"] for r in embeddings_server.embedding_requests]
    assert sent[0] == ["red apples", " "] and all(r.body["model"] == "text-embedding-ada-002"
                                                  for r in embeddings_server.embedding_requests)
    assert sent[1] == [long] and len(sent[2][0]) <= 60 and sent[2][0].startswith("word word")
    assert embedder.model_id == "openai-text-embedding-ada-002"
    with pytest.raises(ValueError, match="needs a name"):
        OpenAIEmbedder("openai:")


async def test_the_text_module_with_openai_embeddings(stark_root, embeddings_server):
    steps = [decide(1, source="text documents"), validate(1, "yes")]
    graph = str(stark_root / "skb" / "amazon")
    state, _, _ = await run({"question": "a knot tying tool", "graph": graph}, steps, task="retrieval",
                            embedding_model=ADA, embedding_base_url=embeddings_server.base_url)
    assert sorted(state["ranked_ids"]) == ["0", "1", "2", "3", "4", "5"]  # the products, by ada's (fake) VSS
    inputs = [t for r in embeddings_server.embedding_requests for t in r.body["input"]]
    assert "a knot tying tool" in inputs
    documents = [t for t in inputs if t.startswith("product: Lake Products")]
    assert len(documents[0]) == len(open_graph(graph).features("0")["text"]) > 1000  # whole, not cut at 1,000
    assert "text--openai-text-embedding-ada-002" in open_graph(graph).indexes.status()


def write_stark_embeddings(folder, docs: dict[int, np.ndarray], queries: dict[int, np.ndarray]):
    import torch

    (folder / "doc").mkdir(parents=True)
    (folder / "query").mkdir()
    torch.save({k: torch.tensor(v, dtype=torch.float32).view(1, -1) for k, v in docs.items()},
               folder / "doc" / "candidate_emb_dict.pt")
    torch.save({k: torch.tensor(v, dtype=torch.float32).view(1, -1) for k, v in queries.items()},
               folder / "query" / "query_emb_dict.pt")
    return folder


async def test_starks_released_embeddings_instead_of_embedding_again(stark_root, tmp_path, embeddings_server):
    """Every PrimeKG node has a released document embedding; the test question's released embedding points at
    Albendazole (7), so the text module ranks it first without embedding anything; a question without one is
    embedded by the folder's model (ada-002, on the fake server) and no document is."""
    basis = np.eye(9, 32, dtype="float32")
    folder = write_stark_embeddings(tmp_path / "emb" / "prime" / "text-embedding-ada-002",
                                    {i: basis[i] for i in range(9)}, {1: basis[7] + 0.5 * basis[0]})
    graph = str(stark_root / "skb" / "prime")
    settings = {"task": "retrieval", "stark_embeddings": str(folder), "embedding_base_url": "http://127.0.0.1:9/v1"}
    steps = [decide(1, source="text documents", times=0), validate(1, "yes", times=0)]
    state, _, _ = await run({"question": QUESTION, "question_id": "1", "graph": graph}, steps, **settings)
    assert state["ranked_ids"][:2] == ["7", "0"]  # no server was needed (port 9 answers nothing)
    status = open_graph(graph).indexes.status()
    assert status["text--openai-text-embedding-ada-002--flat"]["count"] == 9
    settings["embedding_base_url"] = embeddings_server.base_url
    steps = [decide(1, entities=[("strongyloidiasis", "disease")], relations=["indication"], times=0),
             validate(1, "yes", times=0)]
    state, _, _ = await run({"question": "drugs for roundworms", "question_id": "77", "graph": graph}, steps,
                            **settings)
    assert sorted(state["ranked_ids"]) == ["0", "4", "7"]  # the graph module ranks by the same index
    sent = [t for r in embeddings_server.embedding_requests for t in r.body["input"]]
    assert sent == ["drugs for roundworms"]  # only the question without a released embedding


@pytest.fixture()
def own_instances():
    """Graphs opened afresh (a test that changes an instance's index threshold leaves others alone)."""
    from kgagents.tools.pgraph.registry import forget_open_graphs

    forget_open_graphs()
    yield
    forget_open_graphs()


@pytest.mark.slow
async def test_exact_unless_ivf_is_asked_for(stark_root, own_instances):
    graph = open_graph(str(stark_root / "skb" / "mag"))
    graph.indexes.ivf_threshold = 3  # as if MAG's 1.9 million nodes: the store's default would be IVF
    steps = [decide(1, source="text documents", times=0), validate(1, "yes", times=0)]
    task = {"question": "optical logic", "graph": str(stark_root / "skb" / "mag")}
    exact, _, _ = await run(task, steps, task="retrieval")
    assert graph.indexes.status()["text--all-MiniLM-L6-v2--flat"]["kind"] == "flat"
    approximate, _, _ = await run(task, steps, task="retrieval", vector_index="ivf")
    assert graph.indexes.status()["text--all-MiniLM-L6-v2"]["kind"] == "ivf" and approximate["ranked_ids"]
    assert sorted(exact["ranked_ids"]) == ["10", "11", "12", "13", "9"]
    with pytest.raises(ValueError, match="vector_index must be exact or ivf"):
        AgentGContext(vector_index="hnsw")


@pytest.mark.slow
async def test_a_cut_ego_graph_is_recorded_and_not_called_no_intersection(prime):
    """Uncut, CYP3A4's and tuberculosis's ego-graphs meet at Rifampin (6); cut at two nodes each they do not."""
    question = "Which antibiotic induces CYP3A4 and treats tuberculosis?"
    both = [("CYP3A4", "gene/protein"), ("tuberculosis", "disease")]
    steps = [decide(1, entities=both, relations=["enzyme", "indication"]),
             validate(1, "no"), comment(1, "not a type"), decide(2, source="text documents"), validate(2, "yes")]
    state, _, _ = await run({"question": question, "graph": prime}, steps, task="retrieval", max_nodes=2)
    first = state["iterations"][0]
    assert first["retrieval"]["truncated"] == ["CYP3A4", "tuberculosis"]
    assert any("no intersection found within the cut ego-graphs" in n for n in first["retrieval"]["notes"])
    assert first["error_type"] == "incorrect entity/relation"  # not "no intersection": the cut may hide one
    assert state["truncated_egos"] == [{"t": 1, "entities": ["CYP3A4", "tuberculosis"]}]
    uncut, _, _ = await run({"question": question, "graph": prime}, steps[:1] + [validate(1, "yes")],
                            task="retrieval")
    assert uncut["ranked_ids"] == ["6"] and uncut["truncated_egos"] == []  # no bound by default (the paper)
    notes = {"notes": ["no intersection between the ego-graphs of a, b"]}
    assert default_error({"module": "graph", "entities": [{}, {}]}, notes, "retrieval") == "no intersection"
    with pytest.raises(ValueError, match="max_nodes must be at least 1"):
        AgentGContext(max_nodes=0)


@pytest.mark.slow
def test_a_cut_is_counted_per_item(stark_root, tmp_path, capsys):
    from kgagents.cli import main

    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": [
        decide(1, entities=[("CYP3A4", "gene/protein"), ("strongyloidiasis", "disease")],
               relations=["enzyme", "indication"], times=0), validate(1, "yes", times=0)]}))  # cut at 1 node
    out = tmp_path / "run"
    assert main(["eval", "agent-g", "--dataset", "stark-prime", "--data", str(stark_root), "--model",
                 f"scripted:{script}", "--out", str(out), "--no-progress", "--no-report", "--set", "max_nodes=1"]) == 0
    record = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert record["details"]["truncated_egos"] == 1
    assert json.loads((out / "summary.json").read_text())["items with cut ego-graphs"] == 1


async def test_concurrent_items_load_and_build_starks_embeddings_once(prime, tmp_path, monkeypatch):
    """Four items that start together before the index exists (an evaluation at its default concurrency): the
    released document embeddings are loaded once and the index built once, and all four rank by it."""
    import asyncio

    from kgagents.tools.pgraph import stark
    from kgagents.tools.pgraph.vectors import IndexSet

    basis = np.eye(10, 32, dtype="float32")
    ids = (0, 1, 5, 6, 7, 8, 9)
    folder = write_stark_embeddings(tmp_path / "emb" / "prime" / "text-embedding-ada-002",
                                    {i: basis[i] for i in ids}, {n: basis[0] for n in range(4)})
    loads: list[str] = []
    builds: list[str] = []
    load, install = stark.StarkEmbeddings._load, IndexSet.install

    def counted_load(path):
        loads.append(path.parent.name)
        return load(path)

    def counted_install(self, *args, **kwargs):
        builds.append(args[1])
        return install(self, *args, **kwargs)

    monkeypatch.setattr(stark.StarkEmbeddings, "_load", staticmethod(counted_load))
    monkeypatch.setattr(IndexSet, "install", counted_install)
    settings = {"task": "retrieval", "stark_embeddings": str(folder), "embedding_base_url": "http://127.0.0.1:9/v1"}
    steps = [decide(1, source="text documents", times=0), validate(1, "yes", times=0)]
    runs = await asyncio.gather(*(run({"question": QUESTION, "question_id": str(n), "graph": prime}, steps,
                                      **settings) for n in range(4)))
    assert [state["ranked_ids"][0] for state, _, _ in runs] == ["0"] * 4  # each by the released vectors
    assert loads.count("doc") == 1 and builds == ["openai-text-embedding-ada-002"]
