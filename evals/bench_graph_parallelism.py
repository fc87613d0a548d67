"""Benchmark (not a test): does graph-operation parallelism (KGoT paper §3.4, appendix B.6) pay here?

    python -m kgagents.evals.bench_graph_parallelism [--backends simulated falkordb sparql bolt]
                                            [--latency-ms 0 2 10 25] [--repeat 3] [--llm-split-s 1.0] [--json FILE]

The paper turns each KG write into a list of graph operations, asks an LLM to split the list into independent
chains and runs the chains concurrently. This benchmark replays the writes of a fixture
(``evals/data/graph_parallelism_writes.json``: 8 writes, 152 node/relationship creations in Cypher and SPARQL,
each write with its split into 2-5 independent chains) against real servers started here on loopback (FalkorDB,
the Oxigraph SPARQL server, ArcadeDB over Bolt) and against a pure simulation, with a simulated network
round-trip time added to every statement:

- ``sequential``: every operation of a write one after the other (one round trip each);
- ``chains``: the chains of a write concurrently (one thread and connection per chain), each chain in order.

It reports ``ratio = sequential time / chains time`` for the database work alone, and the end-to-end ratio
once the extra LLM call that splits each write into chains is counted (``--llm-split-s`` seconds per write,
1.0 s by default: a short structured reply of a hosted model).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from kgagents.tools.kg.cypher_scope import scope_label_for, scope_query
from kgagents.tools.kg.servers import start_arcadedb_bolt, start_falkordb, start_oxigraph
from kgagents.tools.kg.sparql_store import PREFIXES

FIXTURE = Path(__file__).resolve().parent / "data" / "graph_parallelism_writes.json"
BENCH_GRAPH = "urn:kgagents:bench"


class Executor:
    """Runs one statement per round trip against one backend."""

    name = "simulated"
    language = "cypher"

    def clear(self) -> None:
        pass

    def run(self, statement: str) -> None:
        pass

    def count_nodes(self) -> int | None:
        return None

    def close(self) -> None:
        pass


class FalkorDBExecutor(Executor):
    name = "falkordb"

    def __init__(self) -> None:
        from falkordb import FalkorDB  # the falkordb extra: loaded when a FalkorDB graph opens

        self.server = start_falkordb()
        self.graph = FalkorDB(host="127.0.0.1", port=self.server.port).select_graph("kgagents_bench")

    def clear(self) -> None:
        try:
            self.graph.delete()
        except Exception:  # noqa: BLE001 - nothing to delete
            pass
        self.graph.query("RETURN 0")

    def run(self, statement: str) -> None:
        self.graph.query(statement)

    def count_nodes(self) -> int:
        return int(self.graph.query("MATCH (n) RETURN count(n)").result_set[0][0])

    def close(self) -> None:
        self.server.stop()


class BoltExecutor(Executor):
    """ArcadeDB over Bolt, with the statements scoped exactly as the ``neo4j`` backend scopes LLM-written ones."""

    name = "bolt"

    def __init__(self) -> None:
        import neo4j  # the Neo4j driver: loaded when a Bolt database opens

        self.server = start_arcadedb_bolt()
        self.driver = neo4j.GraphDatabase.driver(self.server.url,
                                                 auth=(self.server.extra["user"], self.server.extra["password"]))
        self.database = self.server.extra["database"]
        self.label = scope_label_for("bench")

    def clear(self) -> None:
        with self.driver.session(database=self.database) as session:
            session.run(f"MATCH (n:`{self.label}`) DETACH DELETE n").consume()

    def run(self, statement: str) -> None:
        with self.driver.session(database=self.database) as session:
            session.run(scope_query(statement, self.label)).consume()

    def count_nodes(self) -> int:
        with self.driver.session(database=self.database) as session:
            return int(session.run(f"MATCH (n:`{self.label}`) RETURN count(n) AS c").single(strict=True)["c"])

    def close(self) -> None:
        self.driver.close()
        self.server.stop()


def _with_prefixes(text: str) -> str:
    """The update with ``PREFIX`` lines for the task KG's prefixes (a later one replaces it)."""
    return "".join(f"PREFIX {prefix}: <{ns}>\n" for prefix, ns in PREFIXES.items()) + text


class SparqlExecutor(Executor):
    name = "sparql"
    language = "sparql"

    def __init__(self) -> None:
        self.server = start_oxigraph()
        self.client = httpx.Client(timeout=60, trust_env=False)

    def clear(self) -> None:
        self._update(f"DROP SILENT GRAPH <{BENCH_GRAPH}>")

    def _update(self, text: str) -> None:
        response = self.client.post(self.server.extra["update"], data={"update": _with_prefixes(text)})
        response.raise_for_status()

    def run(self, statement: str) -> None:
        body = statement.strip()
        assert body.startswith("INSERT DATA {") and body.endswith("}")
        self._update(f"INSERT DATA {{ GRAPH <{BENCH_GRAPH}> {{ {body[len('INSERT DATA {'):-1]} }} }}")

    def count_nodes(self) -> int:
        response = self.client.post(self.server.extra["query"], headers={"Accept": "application/sparql-results+json"},
                                    data={"query": f"SELECT (COUNT(DISTINCT ?s) AS ?c) WHERE {{ GRAPH <{BENCH_GRAPH}> "
                                                   "{ ?s a ?t } }"})
        return int(response.json()["results"]["bindings"][0]["c"]["value"])

    def close(self) -> None:
        self.client.close()
        self.server.stop()


EXECUTORS = {"simulated": Executor, "falkordb": FalkorDBExecutor, "sparql": SparqlExecutor, "bolt": BoltExecutor}


def _statement(executor: Executor, write: dict[str, Any], index: int, latency_s: float) -> None:
    if latency_s:
        time.sleep(latency_s)  # the simulated network round trip of one statement
    executor.run(write["statements"][index][executor.language])


def run_sequential(executor: Executor, writes: list[dict[str, Any]], latency_s: float) -> float:
    start = time.perf_counter()
    for write in writes:
        for index in range(len(write["statements"])):
            _statement(executor, write, index, latency_s)
    return time.perf_counter() - start


def run_chains(executor: Executor, writes: list[dict[str, Any]], latency_s: float, pool: ThreadPoolExecutor) -> float:
    start = time.perf_counter()
    for write in writes:
        def chain(indices: list[int], write: dict[str, Any] = write) -> None:
            for index in indices:
                _statement(executor, write, index, latency_s)

        for future in [pool.submit(chain, c) for c in write["chains"]]:
            future.result()
    return time.perf_counter() - start


def measure(executor: Executor, writes: list[dict[str, Any]], latency_ms: float, repeat: int,
            llm_split_s: float) -> dict[str, Any]:
    expected_nodes = sum(1 for w in writes for s in w["statements"] if s["cypher"].startswith("CREATE"))
    latency_s = latency_ms / 1000
    times: dict[str, list[float]] = {"sequential": [], "chains": []}
    with ThreadPoolExecutor(max_workers=max(len(w["chains"]) for w in writes)) as pool:
        for _ in range(repeat):
            for mode in ("sequential", "chains"):
                executor.clear()
                elapsed = (run_sequential(executor, writes, latency_s) if mode == "sequential"
                           else run_chains(executor, writes, latency_s, pool))
                count = executor.count_nodes()
                if count is not None and count != expected_nodes:
                    raise RuntimeError(f"{executor.name}/{mode}: {count} nodes, expected {expected_nodes}")
                times[mode].append(elapsed)
    seq, par = statistics.median(times["sequential"]), statistics.median(times["chains"])
    split = llm_split_s * len(writes)
    return {"backend": executor.name, "latency_ms": latency_ms, "statements": sum(len(w["statements"]) for w in writes),
            "writes": len(writes), "sequential_s": round(seq, 4), "chains_s": round(par, 4),
            "ratio": round(seq / par, 2) if par else None,
            "end_to_end_ratio": round(seq / (par + split), 2) if par + split else None,
            "saved_per_write_ms": round((seq - par) / len(writes) * 1000, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgagents.evals.bench_graph_parallelism",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["simulated", "falkordb", "sparql", "bolt"],
                        choices=sorted(EXECUTORS))
    parser.add_argument("--latency-ms", nargs="+", type=float, default=[0, 2, 10, 25])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--llm-split-s", type=float, default=1.0,
                        help="seconds of the extra LLM call that splits one write into chains")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    writes = json.loads(FIXTURE.read_text())["writes"]
    rows = []
    print(f"{len(writes)} writes, {sum(len(w['statements']) for w in writes)} statements, "
          f"{sum(len(w['chains']) for w in writes)} chains; {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}", file=sys.stderr)
    print(f"{'backend':10} {'RTT ms':>7} {'sequential s':>13} {'chains s':>9} {'ratio':>6} "
          f"{'saved/write ms':>15} {'with LLM split':>15}")
    for name in args.backends:
        executor = EXECUTORS[name]()
        try:
            for latency in args.latency_ms:
                row = measure(executor, writes, latency, args.repeat, args.llm_split_s)
                rows.append(row)
                print(f"{name:10} {latency:7g} {row['sequential_s']:13.3f} {row['chains_s']:9.3f} {row['ratio']:6.2f} "
                      f"{row['saved_per_write_ms']:15.1f} {row['end_to_end_ratio']:15.2f}", flush=True)
        finally:
            executor.close()
    if args.json:
        Path(args.json).write_text(json.dumps({"llm_split_s": args.llm_split_s, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
