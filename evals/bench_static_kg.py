"""Benchmark (not a test): the compact static-KG store against Graph-CoT's Python dicts and networkx, side by side.

    python -m kgagents.evals.bench_static_kg [--scales 10000:100000 100000:1000000] [--stores compact dicts networkx]
                                    [--nodes 4000000 --edges 40000000] [--large-stores compact]
                                    [--ivf-vectors 1200000] [--ivf-data clustered uniform names]
                                    [--lookups 20000] [--egos 200] [--ego-max-nodes 20000] [--nearest 50]
                                    [--nearest-max-nodes 200000] [--seed 0] [--workdir DIR] [--keep] [--out FILE]

Every graph is a synthetic academic graph in GRBench's ``graph.json`` layout (:mod:`kgagents.evals.synthetic_kg`:
power-law degrees, realistic string lengths). Each scale ``NODES:EDGES`` of ``--scales`` is held by every store
of ``--stores``; the large graph (``--nodes`` / ``--edges``) by ``--large-stores`` only (the baselines do not fit
in memory there: their bytes per edge at the smaller scales give the extrapolation). The stores:

- ``compact``: :mod:`kgagents.tools.pgraph` — built once with ``import_graph`` (the GRBench loader), opened with
  ``open_graph`` (memory maps), queried through :class:`~kgagents.tools.pgraph.model.StaticKG`;
- ``dicts``: what Graph-CoT does — ``json.load`` of the whole file into dicts, plus a map from node id to its
  type; neighbours are ``graph[type][id]["neighbors"][relation]``;
- ``networkx``: a ``MultiDiGraph`` built from the loaded file (node type and features as attributes, the
  relation as the edge key).

Each measurement runs in a fresh process, so memory is that store's alone (``VmRSS`` / ``VmHWM`` of
``/proc/self/status``, less the process's size before it opened the graph):

- **build**: the compact store's import (time, peak RSS, bytes on disk); the baselines have no build, they
  parse the JSON at every open;
- **cold open**: the first open after the store's files were dropped from the page cache
  (``fsync`` + ``posix_fadvise(DONTNEED)``, no root needed), then lookups on the cold files;
- **warm open**: a second open in another fresh process (the files are cached), then the workload:
  neighbour lookups by relation (p50/p99 over ``--lookups`` nodes sampled uniformly among nodes with an edge,
  one of each node's relations), ego-graphs of radius 2 (``--egos`` seeds, all relations, at most
  ``--ego-max-nodes`` nodes each: Agent-G's ``ego_graph`` bound), nearest-name searches with the packaged
  all-MiniLM-L6-v2 model (``--nearest`` queries: a sampled name, lower-cased with one character dropped; only
  on graphs of at most ``--nearest-max-nodes`` nodes: embedding every name takes minutes per 100 k nodes on
  two CPU cores). The baselines search the same embeddings, held in memory as Graph-CoT's retriever does.
  Every store's answers are hashed; the run checks that all stores gave the same neighbours and ego-graphs.

``--ivf-vectors`` measures the recall of the store's IVF index (``IVF<4·√N>,SQ8``, ``nprobe`` 128 by default:
what :mod:`kgagents.tools.pgraph.vectors` builds above 1 M vectors) against exact search, built through the store's own
``VectorIndex.build``: on synthetic unit vectors (``clustered``: a Gaussian mixture with the cluster structure
of sentence embeddings; ``uniform``: uniform on the sphere, the worst case) and, with ``names``, on the real
MiniLM name embeddings of the largest scale that had them (the IVF recipe forced at that size).

Results: a table on stdout, everything as JSON with ``--out``. Timings are wall clock on a shared machine: run
with ``nice`` and read them as orders of magnitude.
"""

from __future__ import annotations

import argparse
import functools
import gc
import hashlib
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from kgagents.evals.synthetic_kg import generate
from kgagents.tools.pgraph.compact import CompactGraph
from kgagents.tools.pgraph.embeddings import load_embedder
from kgagents.tools.pgraph.registry import import_graph, open_graph
from kgagents.tools.pgraph.vectors import VectorIndex

STORES = ("compact", "dicts", "networkx")
IVF_DATA = ("clustered", "uniform", "names")
RADIUS = 2
TOP_K = 10

_STATUS = {"VmRSS": "rss", "VmHWM": "peak", "RssAnon": "anon", "RssFile": "file"}


# ----------------------------------------------------------------------------------------------------------
# Measuring
# ----------------------------------------------------------------------------------------------------------
def memory() -> dict[str, int]:
    """This process's resident memory in bytes: ``rss`` (anonymous + file-backed pages), its ``peak``, and the
    ``anon`` / ``file`` parts (Linux; elsewhere only the peak, from ``getrusage``)."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in _STATUS:
                    out[_STATUS[key]] = int(value.split()[0]) * 1024
    except OSError:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
        out = {"rss": peak, "peak": peak}
    return out


def evict(paths: Iterable[Path]) -> bool:
    """Drop the files under ``paths`` from the page cache (written back first); False where the OS cannot."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for root in paths:
        for path in [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
    return True


def percentiles(samples_ns: Sequence[int], scale: float) -> dict[str, float]:
    """p50 / p99 / mean of samples in nanoseconds, divided by ``scale`` (1e3: µs, 1e6: ms)."""
    if not samples_ns:
        return {}
    values = np.asarray(samples_ns, dtype=np.float64) / scale
    return {"p50": round(float(np.percentile(values, 50)), 3), "p99": round(float(np.percentile(values, 99)), 3),
            "mean": round(float(values.mean()), 3), "n": len(values)}


def timed(calls: Iterable[Any], run: Callable[[Any], Any], keep: Callable[[Any], Any] = len
          ) -> tuple[list[int], list[Any]]:
    """Run ``run`` on every call; the nanoseconds of each, and what ``keep`` retains of each answer (answers
    are not kept whole: their memory would count as the store's)."""
    times, kept = [], []
    clock = time.perf_counter_ns
    for call in calls:
        start = clock()
        answer = run(call)
        times.append(clock() - start)
        kept.append(keep(answer))
    return times, kept


def digest(values: Any) -> str:
    """A short hash of a JSON-able value (to compare the stores' answers)."""
    return hashlib.sha1(json.dumps(values, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def bounded_ego(seed: str, successors: Callable[[str], Iterable[str]], radius: int, max_nodes: int
                ) -> tuple[list[str], bool]:
    """The nodes within ``radius`` hops of ``seed``, breadth first, at most ``max_nodes`` of them (the bound and
    the visiting order of :meth:`StaticKG.ego_graph`); whether the bound stopped the search. Written apart from
    the store's on purpose: the baselines must not run the code whose answers they check."""
    hops = {seed: 0}
    frontier = [seed]
    truncated = False
    for depth in range(1, radius + 1):
        following = []
        for node in frontier:
            for other in successors(node):
                if other in hops:
                    continue
                if len(hops) >= max_nodes:
                    truncated = True
                    break
                hops[other] = depth
                following.append(other)
        frontier = following
        if not frontier:
            break
    return list(hops), truncated


# ----------------------------------------------------------------------------------------------------------
# The stores
# ----------------------------------------------------------------------------------------------------------
class Store:
    """One way of holding the graph, as the benchmark drives it."""

    name = ""
    vectors: InMemoryVectors | None = None
    """The baselines' embeddings for nearest-name searches (the compact store has its own index)."""

    def open(self, source: Path, directory: Path) -> None:
        raise NotImplementedError

    def neighbours(self, node_id: str, relation: str) -> Sequence[str]:
        raise NotImplementedError

    def ego(self, seed: str, max_nodes: int) -> tuple[list[str], bool]:
        raise NotImplementedError

    def nearest(self, text: str, k: int) -> list[str]:
        raise NotImplementedError


class CompactStore(Store):
    """The embedded compact store of :mod:`kgagents.tools.pgraph`."""

    name = "compact"

    @staticmethod
    def build(source: Path, directory: Path) -> dict[str, Any]:
        import_graph(source, format="grbench", to=directory, progress=False)
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
        return {"disk_bytes": sum(manifest["bytes"].values()), "nodes": manifest["counts"]["nodes"],
                "edges": manifest["counts"]["edges"]}

    def open(self, source: Path, directory: Path) -> None:
        self.graph = open_graph(directory)

    def neighbours(self, node_id: str, relation: str) -> Sequence[str]:
        return self.graph.neighbours(node_id, relation)

    def ego(self, seed: str, max_nodes: int) -> tuple[list[str], bool]:
        # GRBench lists every link at both ends, so "out" already follows both directions
        ego = self.graph.ego_graph([seed], radius=RADIUS, direction="out", max_nodes=max_nodes)
        return ego.nodes, ego.truncated

    def nearest(self, text: str, k: int) -> list[str]:
        return [node_id for node_id, _ in self.graph.nearest_nodes(text, k, field="name")]


class DictStore(Store):
    """Graph-CoT's layout: the whole ``graph.json`` in dicts, and a map from node id to its type's dict."""

    name = "dicts"

    def open(self, source: Path, directory: Path) -> None:
        with open(source, encoding="utf-8") as f:
            self.graph: dict[str, dict[str, Any]] = json.load(f)
        self.node_type = {node_id: nodes for nodes in self.graph.values() for node_id in nodes}

    def _node(self, node_id: str) -> dict[str, Any]:
        return self.node_type[node_id][node_id]

    def neighbours(self, node_id: str, relation: str) -> Sequence[str]:
        return self._node(node_id)["neighbors"].get(relation, [])

    def _successors(self, node_id: str) -> Iterable[str]:
        for ids in self._node(node_id)["neighbors"].values():
            yield from ids

    def ego(self, seed: str, max_nodes: int) -> tuple[list[str], bool]:
        return bounded_ego(seed, self._successors, RADIUS, max_nodes)

    def nearest(self, text: str, k: int) -> list[str]:
        assert self.vectors is not None, "the baselines search the compact store's embeddings: build it first"
        return self.vectors.nearest(text, k)


class NetworkxStore(Store):
    """A ``networkx.MultiDiGraph``: node type and features as attributes, the relation as the edge key."""

    name = "networkx"

    def open(self, source: Path, directory: Path) -> None:
        with open(source, encoding="utf-8") as f:
            data = json.load(f)
        graph = nx.MultiDiGraph()
        for type_key, nodes in data.items():
            node_type = type_key.removesuffix("_nodes")
            graph.add_nodes_from((node_id, {"type": node_type, "features": node["features"]})
                                 for node_id, node in nodes.items())
            graph.add_edges_from((node_id, other, relation) for node_id, node in nodes.items()
                                 for relation, ids in node["neighbors"].items() for other in ids)
        del data
        gc.collect()
        self.graph = graph

    def neighbours(self, node_id: str, relation: str) -> Sequence[str]:
        return [other for other, keys in self.graph.succ[node_id].items() if relation in keys]

    def ego(self, seed: str, max_nodes: int) -> tuple[list[str], bool]:
        return bounded_ego(seed, self.graph.successors, RADIUS, max_nodes)

    nearest = DictStore.nearest


STORE_CLASSES: dict[str, type[Store]] = {"compact": CompactStore, "dicts": DictStore, "networkx": NetworkxStore}


class InMemoryVectors:
    """The baselines' nearest-name search: every name's embedding in memory, exact dot products (the compact
    store's saved embeddings, so no store embeds twice)."""

    def __init__(self, vectors: Path, ids: Path) -> None:
        self.matrix = np.asarray(np.load(vectors), dtype=np.float32)
        self.ids: list[str] = json.loads(ids.read_text(encoding="utf-8"))
        self.embedder = load_embedder()

    def nearest(self, text: str, k: int) -> list[str]:
        query = np.asarray(self.embedder.encode([text]), dtype=np.float32)[0]
        scores = self.matrix @ query
        top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
        return [self.ids[int(i)] for i in top[np.argsort(-scores[top], kind="stable")]]


# ----------------------------------------------------------------------------------------------------------
# Workers: each measurement in a fresh process
# ----------------------------------------------------------------------------------------------------------
def _limit_threads(spec: dict[str, Any]) -> None:
    threads = spec.get("embed_threads")
    if threads:
        import torch  # torch: seconds to import, only where tensors are read

        torch.set_num_threads(int(threads))


def measure_build(spec: dict[str, Any]) -> dict[str, Any]:
    """Build the compact store (and its name index when nearest searches are asked for)."""
    source, directory = Path(spec["source"]), Path(spec["directory"])
    before = memory()
    start = time.perf_counter()
    built = CompactStore.build(source, directory)
    out: dict[str, Any] = {**built, "build_s": round(time.perf_counter() - start, 3),
                           "build_peak_bytes": memory()["peak"] - before["rss"]}
    if spec.get("nearest"):
        _limit_threads(spec)

        load_embedder().encode(["warm up"])
        graph = open_graph(directory)
        if not isinstance(graph, CompactGraph):
            raise TypeError(f"{directory} opened as {type(graph).__name__}, not as a compact graph")
        start = time.perf_counter()
        graph.nearest_nodes("warm up", 1, field="name")
        out["name_index_s"] = round(time.perf_counter() - start, 3)
        index = next((directory / "index").glob("name--*"))
        out["name_index_bytes"] = sum(p.stat().st_size for p in index.iterdir())
        ids = [graph.id_of(i) for i in range(graph.node_count)]  # the index's rows, in node order
        Path(spec["nearest_ids"]).write_text(json.dumps(ids), encoding="utf-8")
    return out


def measure_open(spec: dict[str, Any]) -> dict[str, Any]:
    """Open a store (cold or warm) and run the workload on it."""
    store = STORE_CLASSES[spec["store"]]()
    queries = json.loads(Path(spec["queries"]).read_text(encoding="utf-8"))
    lookups = [tuple(q) for q in queries["lookups"][:spec["lookups"]]]
    if spec["store"] == "networkx":
        import networkx  # noqa: F401 - imported before the baseline memory, like the other stores' modules
    else:
        import kgagents.tools.pgraph.registry  # noqa: F401
    gc.collect()
    before = memory()
    start = time.perf_counter()
    store.open(Path(spec["source"]), Path(spec["directory"]))
    open_s = time.perf_counter() - start
    gc.collect()
    opened = memory()
    out: dict[str, Any] = {"open_s": round(open_s, 4), "rss_before": before["rss"],
                           "rss_open": opened["rss"] - before["rss"],
                           "anon_open": opened.get("anon", 0) - before.get("anon", 0),
                           "file_open": opened.get("file", 0) - before.get("file", 0)}
    times, answers = timed(lookups, lambda q: store.neighbours(*q), lambda a: (len(a), digest(sorted(a))))
    out["lookup_us"] = percentiles(times, 1e3)
    out["lookup_digest"] = digest([d for _, d in answers])
    out["neighbours_mean"] = round(float(np.mean([n for n, _ in answers])), 2) if answers else 0
    if spec["cold"]:
        out["peak"] = memory()["peak"] - before["rss"]
        return out
    seeds = queries["seeds"][:spec["egos"]]
    times, egos = timed(seeds, lambda s: store.ego(s, spec["ego_max_nodes"]),
                        lambda ego: (len(ego[0]), ego[1], digest(sorted(ego[0]))))
    out["ego_ms"] = percentiles(times, 1e6)
    out["ego_digest"] = digest([[d, truncated] for _, truncated, d in egos])
    out["ego_nodes_mean"] = round(float(np.mean([n for n, _, _ in egos])), 1) if egos else 0
    out["ego_truncated"] = sum(1 for _, truncated, _ in egos if truncated)
    gc.collect()
    worked = memory()
    out.update(rss_work=worked["rss"] - before["rss"], anon_work=worked.get("anon", 0) - before.get("anon", 0),
               file_work=worked.get("file", 0) - before.get("file", 0), peak=worked["peak"] - before["rss"])
    texts = queries["nearest"][:spec.get("nearest", 0)]
    if texts:
        _limit_threads(spec)

        load_embedder().encode(["warm up"])  # the model's load is the same for every store: not counted
        if store.name != "compact":
            store.vectors = InMemoryVectors(Path(spec["nearest_vectors"]), Path(spec["nearest_ids"]))
        start = time.perf_counter()
        store.nearest(texts[0], TOP_K)  # the first search loads the compact store's index (memory maps)
        out["nearest_first_ms"] = round((time.perf_counter() - start) * 1000, 2)
        times, _ = timed(texts[1:], lambda t: store.nearest(t, TOP_K))
        out["nearest_peak"] = memory()["peak"] - before["rss"]
        out["nearest_ms"] = percentiles(times, 1e6)
    return out


def measure_ivf(spec: dict[str, Any]) -> dict[str, Any]:
    """Recall@k of the store's IVF index against exact search, on synthetic or saved vectors."""
    import faiss  # faiss: a native library, loaded when an index is built or read

    data, queries = _ivf_vectors(spec)
    count, dim = data.shape
    embedder = _MatrixEmbedder(data, queries)
    directory = Path(spec["directory"])
    start = time.perf_counter()
    index = VectorIndex.build(directory, count, embedder.row_texts, embedder, model_id="synthetic",
                              label="vectors", ivf_threshold=spec.get("ivf_threshold", 1_000_000), progress=False)
    build_s = time.perf_counter() - start
    exact = faiss.IndexFlatIP(dim)  # exact search over the float32 vectors (FAISS keeps its own copy)
    exact.add(data)
    embedder.data = data = np.zeros((0, dim), dtype=np.float32)
    k = spec["k"]
    truth = exact.search(queries, k)[1]
    times, _ = timed(range(min(len(queries), 100)), lambda q: exact.search(queries[q:q + 1], k))
    out: dict[str, Any] = {"data": spec["data"], "vectors": count, "dim": dim, "queries": len(queries), "k": k,
                           "kind": index.meta["kind"], "nlist": index.meta["nlist"], "build_s": round(build_s, 1),
                           "exact_ms": percentiles(times, 1e6), "recall": {}, "ivf_ms": {}}
    for nprobe in spec["nprobes"]:
        times, found = timed(range(len(queries)), functools.partial(_probe, index, k, nprobe=nprobe),
                             lambda rows: [row for row, _ in rows])
        hits = [len(set(f) & set(t.tolist())) / k for f, t in zip(found, truth, strict=True)]
        out["recall"][str(nprobe)] = round(float(np.mean(hits)), 4)
        out["ivf_ms"][str(nprobe)] = percentiles(times, 1e6)
    return out


class _MatrixEmbedder:
    """An embedder over known vectors: the text ``"17"`` is row 17 of the data, ``"q3"`` query 3."""

    def __init__(self, data: np.ndarray, queries: np.ndarray) -> None:
        self.data, self.queries = data, queries

    @staticmethod
    def row_texts(start: int, end: int) -> list[str]:
        return [str(i) for i in range(start, end)]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if texts and texts[0].startswith("q"):
            return self.queries[[int(t[1:]) for t in texts]]
        return self.data[int(texts[0]):int(texts[-1]) + 1]


def _probe(index: VectorIndex, k: int, query: int, *, nprobe: int) -> list[tuple[int, float]]:
    """Search :func:`measure_ivf`'s query ``query`` (its embedder's text ``q<query>``) probing ``nprobe`` lists."""
    return index.search(f"q{query}", k, nprobe=nprobe)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _ivf_vectors(spec: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(spec["seed"])
    count, queries, dim = spec["vectors"], spec["queries"], spec.get("dim", 384)
    if spec["data"] == "names":
        _limit_threads(spec)
        data = np.asarray(np.load(spec["source"]), dtype=np.float32)
        texts = json.loads(Path(spec["texts"]).read_text(encoding="utf-8"))[:queries]
        return data, _unit(np.asarray(load_embedder().encode(texts), dtype=np.float32))
    if spec["data"] == "uniform":
        data = np.empty((count, dim), dtype=np.float32)
        for start in range(0, count, 100_000):
            end = min(count, start + 100_000)
            data[start:end] = _unit(rng.standard_normal((end - start, dim), dtype=np.float32))
        return data, _unit(rng.standard_normal((queries, dim), dtype=np.float32))
    # clustered: a mixture of Gaussians around unit centres, with power-law cluster sizes and spreads
    clusters = max(1, count // 600)
    centres = _unit(rng.standard_normal((clusters, dim), dtype=np.float32))
    weights = rng.pareto(1.5, clusters) + 1
    weights /= weights.sum()
    spread = rng.uniform(0.5, 1.2, clusters).astype(np.float32)

    def sample(n: int) -> np.ndarray:
        which = rng.choice(clusters, size=n, p=weights)
        noise = rng.standard_normal((n, dim), dtype=np.float32) * (spread[which] / np.sqrt(dim))[:, None]
        return _unit(centres[which] + noise)

    data = np.empty((count, dim), dtype=np.float32)
    for start in range(0, count, 100_000):
        end = min(count, start + 100_000)
        data[start:end] = sample(end - start)
    return data, sample(queries)


PHASES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {"build": measure_build, "open": measure_open,
                                                                  "ivf": measure_ivf}


def in_fresh_process(spec: dict[str, Any], work: Path) -> dict[str, Any]:
    """Run one phase in a new Python process; its result."""
    spec_file = work / f"spec-{time.monotonic_ns()}.json"
    result_file = spec_file.with_suffix(".result.json")
    spec_file.write_text(json.dumps({**spec, "result": str(result_file)}), encoding="utf-8")
    try:
        subprocess.run([sys.executable, "-m", "kgagents.evals.bench_static_kg", "--worker", str(spec_file)], check=True)
        return json.loads(result_file.read_text(encoding="utf-8"))
    finally:
        spec_file.unlink(missing_ok=True)
        result_file.unlink(missing_ok=True)


def _worker(spec_file: str) -> int:
    spec = json.loads(Path(spec_file).read_text(encoding="utf-8"))
    result = PHASES[spec["phase"]](spec)
    Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")
    return 0


# ----------------------------------------------------------------------------------------------------------
# A run
# ----------------------------------------------------------------------------------------------------------
def _noisy(name: str, rng: random.Random) -> str:
    """A name as a user would half-remember it: lower case, one character dropped."""
    text = name.lower()
    if len(text) > 4:
        cut = rng.randrange(len(text))
        text = text[:cut] + text[cut + 1:]
    return text


def run_scale(nodes: int, edges: int, stores: Sequence[str], options: argparse.Namespace, work: Path,
              log: Callable[[str], None] = print) -> dict[str, Any]:
    """Generate one graph and measure every store on it."""
    folder = work / f"graph-{nodes}-{edges}"
    samples = max(options.lookups, options.egos, options.nearest)
    log(f"generating {nodes:,} nodes / {edges:,} edges ...")
    graph = generate(folder, nodes=nodes, edges=edges, seed=options.seed, samples=samples)
    rng = random.Random(options.seed)
    nearest = options.nearest if 0 < nodes <= options.nearest_max_nodes else 0
    queries = {"lookups": graph.lookups, "seeds": graph.seeds,
               "nearest": [_noisy(name, rng) for _, name in graph.names]}
    (folder / "queries.json").write_text(json.dumps(queries), encoding="utf-8")
    source, directory = Path(graph.path), folder / "compact"
    common = {"source": str(source), "directory": str(directory), "queries": str(folder / "queries.json"),
              "lookups": options.lookups, "egos": options.egos, "ego_max_nodes": options.ego_max_nodes,
              "embed_threads": options.embed_threads, "nearest_ids": str(folder / "nearest-ids.json")}
    meta = {k: v for k, v in graph.as_dict().items() if k not in ("lookups", "seeds", "names")}
    log(f"  {graph.bytes / 2**20:,.0f} MB of graph.json in {graph.seconds:.0f} s; degree median "
        f"{graph.degree['median']:g}, p99 {graph.degree['p99']:g}, max {graph.degree['max']:,}")
    rows = []
    for name in sorted(stores, key=STORES.index):  # the compact store first: its embeddings serve the others
        row: dict[str, Any] = {"store": name, "nodes": nodes, "edges": graph.edges}
        if name == "compact":
            log("  compact: building ...")
            row.update(in_fresh_process({**common, "phase": "build", "nearest": nearest}, work))
        else:
            row["disk_bytes"] = graph.bytes
        vectors = next(iter((directory / "index").glob("name--*/vectors.npy")), None) if nearest else None
        searchable = nearest if (name == "compact" or vectors is not None) else 0
        evicted = evict([directory if name == "compact" else source])
        log(f"  {name}: cold open ...")
        cold = in_fresh_process({**common, "phase": "open", "store": name, "cold": True,
                                 "lookups": min(options.lookups, options.cold_lookups)}, work)
        log(f"  {name}: warm open and workload ...")
        warm = in_fresh_process({**common, "phase": "open", "store": name, "cold": False, "nearest": searchable,
                                 "nearest_vectors": str(vectors)}, work)
        row.update(evicted=evicted, cold_open_s=cold["open_s"], cold_lookup_us=cold["lookup_us"],
                   cold_peak_bytes=cold["peak"], **{k: v for k, v in warm.items() if k != "open_s"},
                   warm_open_s=warm["open_s"], bytes_per_edge=round(warm["rss_work"] / max(1, graph.edges), 1))
        rows.append(row)
        log("  " + _line(row))
    answers = {(r["lookup_digest"], r["ego_digest"]) for r in rows}
    return {"nodes": nodes, "edges": graph.edges, "graph": meta, "nearest_queries": nearest,
            "answers_agree": len(answers) <= 1, "rows": rows}


def run_ivf(data: str, options: argparse.Namespace, work: Path, names: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"phase": "ivf", "data": data, "seed": options.seed, "vectors": options.ivf_vectors,
                            "queries": options.ivf_queries, "k": TOP_K, "nprobes": options.nprobes,
                            "directory": str(work / f"ivf-{data}"), "embed_threads": options.embed_threads}
    if data == "names":
        if names is None:
            raise ValueError("the names recall needs a scale with nearest searches (see --nearest-max-nodes)")
        spec.update(source=names["vectors"], texts=names["texts"], ivf_threshold=0)
    try:
        return in_fresh_process(spec, work)
    finally:
        shutil.rmtree(work / f"ivf-{data}", ignore_errors=True)


def run_benchmark(options: argparse.Namespace, log: Callable[[str], None] = print) -> dict[str, Any]:
    work = Path(options.workdir) if options.workdir else Path(tempfile.mkdtemp(prefix="kgagents-bench-kg-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    result: dict[str, Any] = {"command": getattr(options, "command", None),
                              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                          "platform": platform.platform(), "load_at_start": os.getloadavg()},
                              "options": {k: v for k, v in vars(options).items() if k not in ("workdir", "command")},
                              "scales": [], "ivf": []}

    def save() -> None:  # after every step: a long run that fails late keeps what it measured
        if options.out:
            Path(options.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    try:
        runs = [(n, e, options.stores) for n, e in options.scales]
        if options.nodes and options.edges:
            runs.append((options.nodes, options.edges, options.large_stores))
        names = None
        for nodes, edges, stores in runs:
            scale = run_scale(nodes, edges, stores, options, work, log)
            result["scales"].append(scale)
            save()
            folder = work / f"graph-{nodes}-{edges}"
            vectors = next(iter((folder / "compact" / "index").glob("name--*/vectors.npy")), None)
            if vectors is not None:
                queries = json.loads((folder / "queries.json").read_text(encoding="utf-8"))["nearest"]
                (work / "name-queries.json").write_text(json.dumps(queries), encoding="utf-8")
                names = {"vectors": str(vectors), "texts": str(work / "name-queries.json"), "nodes": nodes}
            if not options.keep:
                for path in (folder / "graph.json", folder / "compact"):
                    if names is None or str(path) not in names["vectors"]:
                        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        for data in options.ivf_data if options.ivf_vectors else []:
            if data == "names" and names is None:
                log("ivf names: skipped (no scale embedded its names)")
                continue
            log(f"ivf recall on {data} vectors ...")
            row = run_ivf(data, options, work, names)
            if data == "names":
                row["scale_nodes"] = names["nodes"]  # type: ignore[index]
            result["ivf"].append(row)
            save()
            log(f"  {row['vectors']:,} × {row['dim']} {data}: recall@{row['k']} " +
                ", ".join(f"nprobe {p}: {r:.3f}" for p, r in row["recall"].items()))
    finally:
        if not options.keep:
            shutil.rmtree(work, ignore_errors=True)
    result["machine"]["load_at_end"] = os.getloadavg()
    result["seconds"] = round(time.monotonic() - started, 1)
    save()
    return result


# ----------------------------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------------------------
def _mb(value: float | None) -> str:
    return "–" if value is None else f"{value / 2**20:,.0f}"


def _q(stats: dict[str, float] | None, key: str, fmt: str = "{:,.1f}") -> str:
    return fmt.format(stats[key]) if stats else "–"


def _line(row: dict[str, Any]) -> str:
    return (f"{row['store']}: open cold {row['cold_open_s']:.3f} s / warm {row['warm_open_s']:.3f} s, "
            f"RSS {_mb(row['rss_work'])} MB ({row['bytes_per_edge']:.0f} B/edge), lookup p50 "
            f"{_q(row['lookup_us'], 'p50')} µs p99 {_q(row['lookup_us'], 'p99')} µs, ego p50 "
            f"{_q(row.get('ego_ms'), 'p50')} ms")


def markdown(result: dict[str, Any]) -> str:
    """The results as Markdown tables (one row per scale and store)."""
    header = ("| nodes / edges | store | build s (peak RSS MB) | disk MB | open s cold / warm | RSS MB open / after "
              "work | B/edge | lookup µs p50 / p99 (cold p50) | ego r=2 ms p50 / p99 | nearest ms p50 |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|"]
    for scale in result["scales"]:
        for r in scale["rows"]:
            build = f"{r['build_s']:,.1f} ({_mb(r['build_peak_bytes'])})" if "build_s" in r else "–"
            lines.append(
                f"| {r['nodes']:,} / {r['edges']:,} | {r['store']} | {build} | {_mb(r['disk_bytes'])} | "
                f"{r['cold_open_s']:.3f} / {r['warm_open_s']:.3f} | {_mb(r['rss_open'])} / {_mb(r['rss_work'])} | "
                f"{r['bytes_per_edge']:.0f} | {_q(r['lookup_us'], 'p50')} / {_q(r['lookup_us'], 'p99')} "
                f"({_q(r['cold_lookup_us'], 'p50')}) | "
                f"{_q(r.get('ego_ms'), 'p50', '{:,.2f}')} / {_q(r.get('ego_ms'), 'p99', '{:,.2f}')} | "
                f"{_q(r.get('nearest_ms'), 'p50')} |")
    notes = []
    for scale in result["scales"]:
        g = scale["graph"]
        notes.append(f"{scale['nodes']:,} nodes: graph.json {_mb(g['bytes'])} MB, degree median "
                     f"{g['degree']['median']:g} / p99 {g['degree']['p99']:g} / max {g['degree']['max']:,}; "
                     f"answers agree across stores: {'yes' if scale['answers_agree'] else 'NO'}")
    lines += [""] + [f"- {n}" for n in notes]
    if result.get("ivf"):
        lines += ["",
                  "| vectors | data | nlist | build s | recall@10 by nprobe | IVF ms p50 by nprobe | exact ms p50 |",
                  "|---|---|---|---|---|---|---|"]
        for r in result["ivf"]:
            recall = ", ".join(f"{p}: {v:.3f}" for p, v in r["recall"].items())
            times = ", ".join(f"{p}: {v['p50']:.2f}" for p, v in r["ivf_ms"].items())
            lines.append(f"| {r['vectors']:,} × {r['dim']} | {r['data']} | {r['nlist']} | {r['build_s']:.0f} | "
                         f"{recall} | {times} | {r['exact_ms']['p50']:.2f} |")
    return "\n".join(lines)


def _scale(text: str) -> tuple[int, int]:
    def number(part: str) -> int:
        part = part.strip().lower().replace("_", "")
        factor = {"k": 1_000, "m": 1_000_000}.get(part[-1:], 1)
        return int(float(part[:-1] if factor > 1 else part) * factor)

    try:
        nodes, edges = text.split(":")
        return number(nodes), number(edges)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a scale is NODES:EDGES (e.g. 100k:1m), not {text!r}") from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kgagents.evals.bench_static_kg",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", nargs="*", type=_scale, default=[(10_000, 100_000), (100_000, 1_000_000)],
                        metavar="NODES:EDGES", help="graphs every store of --stores holds (default 10k:100k 100k:1m)")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--nodes", type=int, default=4_000_000, help="the large graph's nodes (0: no large graph)")
    parser.add_argument("--edges", type=int, default=40_000_000, help="the large graph's edges")
    parser.add_argument("--large-stores", nargs="+", choices=STORES, default=["compact"])
    parser.add_argument("--lookups", type=int, default=20_000, help="neighbour lookups per store (default 20000)")
    parser.add_argument("--cold-lookups", type=int, default=1_000, help="lookups right after the cold open")
    parser.add_argument("--egos", type=int, default=200, help="ego-graphs per store (default 200)")
    parser.add_argument("--ego-max-nodes", type=int, default=20_000, help="the ego-graphs' node bound")
    parser.add_argument("--nearest", type=int, default=50, help="nearest-name searches per store (default 50)")
    parser.add_argument("--nearest-max-nodes", type=int, default=200_000,
                        help="search names only on graphs of at most this many nodes (every name is embedded)")
    parser.add_argument("--embed-threads", type=int, default=1,
                        help="torch threads for embedding (default 1: on a shared 2-core machine more is slower)")
    parser.add_argument("--ivf-vectors", type=int, default=1_200_000, help="vectors of the IVF recall test (0: none)")
    parser.add_argument("--ivf-queries", type=int, default=1_000)
    parser.add_argument("--ivf-data", nargs="+", choices=IVF_DATA, default=list(IVF_DATA))
    parser.add_argument("--nprobes", nargs="+", type=int, default=[8, 32, 128])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="where graphs and builds go (default: a new folder in the temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated graphs and builds")
    parser.add_argument("--out", help="also write the results as JSON to this file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is None and args.nodes and args.edges % 2:
        parser.error("--edges must be even (GRBench lists every link at both ends)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    args.command = "python -m kgagents.evals.bench_static_kg " + " ".join(sys.argv[1:] if argv is None else argv)
    result = run_benchmark(args, log=lambda text: print(text, file=sys.stderr, flush=True))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
