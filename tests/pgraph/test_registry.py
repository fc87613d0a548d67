"""Where graphs are built and found: names, paths, the cache and its freshness, stored references, one instance
per graph and process, builds that happen once and never half."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from kgagents.tools.pgraph import (
    GraphFormatError,
    cached,
    graphs_dir,
    import_graph,
    known_graphs,
    loaders,
    open_graph,
    registry,
    resolve,
)
from kgagents.tools.pgraph.build import GraphBuilder

EDGES = [["Ada", "Bob", {"relation": "knows"}], ["Bob", "Paris", {"relation": "lives in"}]]


@pytest.fixture()
def builds(monkeypatch) -> list[str]:
    """The names of the graphs built (finished) during the test."""
    done: list[str] = []
    original = GraphBuilder.finish

    def counting(self, **kw):
        done.append(kw["name"])
        return original(self, **kw)

    monkeypatch.setattr(GraphBuilder, "finish", counting)
    return done


def write(path, edges=EDGES):
    path.write_text(json.dumps({"question": "Does Ada know Bob?", "graph": edges}), encoding="utf-8")
    return path


def test_a_source_is_built_once_and_reused_while_unchanged(tmp_path, builds):
    source = write(tmp_path / "g.json")
    first = cached(source)
    assert first["format"] == "ark" and first["source"] == str(source.resolve()) and len(builds) == 1
    assert cached(source) == first and len(builds) == 1
    # touched (or copied) but unchanged: the content hash says so, nothing is rebuilt
    stamp = time.time() + 5
    os.utime(source, (stamp, stamp))
    assert cached(source)["fingerprint"] == first["fingerprint"] and len(builds) == 1
    # changed: rebuilt, with another fingerprint
    write(source, [*EDGES, ["Ada", "Rome", {"relation": "visited"}]])
    changed = cached(source)
    assert changed["fingerprint"] != first["fingerprint"] and len(builds) == 2
    assert open_graph(changed).relations_of("Ada") == ["knows", "visited"]


def test_names_paths_and_errors(tmp_path, builds):
    source = write(tmp_path / "g.json")
    ref = import_graph(source, name="tiny")
    assert ref["location"] == str((graphs_dir() / "tiny").resolve()) and known_graphs() == ["tiny"]
    assert resolve("tiny") == ref and resolve(ref["location"]) == ref
    assert open_graph("tiny") is open_graph(ref["location"]) is open_graph(source)  # one instance per graph
    elsewhere = import_graph(source, to=tmp_path / "built")
    assert resolve(str(tmp_path / "built"))["fingerprint"] == ref["fingerprint"] == elsewhere["fingerprint"]
    with pytest.raises(GraphFormatError, match="no graph named or at 'missing'; imported graphs: tiny"):
        resolve("missing")
    with pytest.raises(GraphFormatError, match="letters, digits"):
        import_graph(source, name="../escape")
    with pytest.raises(GraphFormatError, match="unknown graph format"):
        import_graph(source, name="x", format="xml")


def test_a_stored_reference_survives_a_lost_cache_and_detects_a_changed_source(tmp_path, builds):
    import shutil

    source = write(tmp_path / "g.json")
    ref = cached(source)
    shutil.rmtree(ref["location"])
    registry.forget_open_graphs()
    again = resolve(dict(ref))  # what a resumed run does: rebuilt from its source, same fingerprint
    assert again["fingerprint"] == ref["fingerprint"] and len(builds) == 2
    write(source, [["Ada", "Eve", {"relation": "knows"}]])
    shutil.rmtree(ref["location"])
    with pytest.raises(GraphFormatError, match="changed since this run started"):
        resolve(dict(ref))
    inline = {"name": "inline edges", "location": str(tmp_path / "gone"), "source": "inline",
              "fingerprint": "0" * 16}
    with pytest.raises(GraphFormatError, match="is gone"):
        resolve(inline)


def test_concurrent_opens_build_once(tmp_path, builds):
    source = write(tmp_path / "g.json")
    results: list[object] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        barrier.wait()
        results.append(open_graph(source))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and len({id(g) for g in results}) == 1


def test_a_failed_build_leaves_nothing_behind(tmp_path, monkeypatch):
    source = write(tmp_path / "g.json")

    def broken(builder, path, **kw):
        builder.add_edge("a", "r", "b")
        raise RuntimeError("killed mid-build")

    monkeypatch.setitem(loaders.LOADERS, "ark", broken)
    with pytest.raises(RuntimeError, match="killed mid-build"):
        cached(source)
    cache = graphs_dir() / "cache"
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == []


def test_a_source_that_does_not_exist(tmp_path):
    with pytest.raises(GraphFormatError, match="no graph named or at"):
        open_graph(str(tmp_path / "nope.json"))
    with pytest.raises(GraphFormatError, match="no such graph source"):
        cached(tmp_path / "nope.json")


def test_static_kg_backends_are_chosen_through_their_registry(tmp_path, monkeypatch):
    """A graph's manifest names its backend; the backend registry opens it (a new backend is one
    register_backend call), and an unknown one is a clear error naming the known ones."""
    from kgagents.tools.pgraph import backends

    monkeypatch.setattr(backends, "_backends", dict(backends._backends))
    ref = import_graph(write(tmp_path / "g.json"), name="mine")
    manifest_file = graphs_dir() / "mine" / "manifest.json"
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    manifest["backend"] = "in-memory"
    manifest_file.write_text(json.dumps(manifest), encoding="utf-8")
    registry.forget_open_graphs()
    with pytest.raises(GraphFormatError, match="unknown graph backend 'in-memory'; known: compact, falkordb, neo4j"):
        open_graph("mine")
    opened, instance = [], object()

    def in_memory(location, manifest, ref):
        opened.append((location, manifest["backend"], ref["fingerprint"]))
        return instance

    backends.register_backend("in-memory", in_memory)
    assert open_graph("mine") is instance and open_graph("mine") is instance  # one instance per graph
    assert opened == [(graphs_dir() / "mine", "in-memory", ref["fingerprint"])]
    assert "in-memory" in backends.backend_names()
