"""Static knowledge graphs that agents explore (ARK-V1, grounded Graph-CoT/ToT/GoT, Agent-G).

One read-only interface (:class:`StaticKG`), an embedded compact store built once per graph and shared by every
run of a process (:mod:`kgagents.tools.pgraph.compact`), Cypher databases for graphs beyond one machine
(:mod:`kgagents.tools.pgraph.cypher`), loaders for the benchmarks' formats (:mod:`kgagents.tools.pgraph.loaders`) and
persistent embedding indexes for fuzzy lookup (:mod:`kgagents.tools.pgraph.vectors`). :func:`open_graph` is the way in.
"""

from kgagents.tools.pgraph.embeddings import (
    Embedder,
    EmbeddingIndex,
    LazyEmbedder,
    SentenceTransformerEmbedder,
    load_embedder,
)
from kgagents.tools.pgraph.loaders import FORMATS, load_ark_record, load_ark_records
from kgagents.tools.pgraph.model import (
    EgoGraph,
    GraphFormatError,
    GraphRef,
    GraphStats,
    Node,
    ReasoningPath,
    StaticKG,
    Triple,
)
from kgagents.tools.pgraph.registry import (
    cached,
    graph_from_edges,
    graphs_dir,
    import_edges,
    import_graph,
    known_graphs,
    open_graph,
    resolve,
)

__all__ = ["FORMATS", "EgoGraph", "Embedder", "EmbeddingIndex", "GraphFormatError", "GraphRef", "GraphStats",
           "LazyEmbedder", "Node", "ReasoningPath", "SentenceTransformerEmbedder", "StaticKG", "Triple", "cached",
           "graph_from_edges", "graphs_dir", "import_edges", "import_graph", "known_graphs", "load_ark_record",
           "load_ark_records",
           "load_embedder", "open_graph", "resolve"]
