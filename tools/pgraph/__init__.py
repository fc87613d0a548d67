"""Static property-graph KGs that agents explore (ARK-V1, Graph-CoT, Agent-G), with fuzzy lookup."""

from tools.pgraph.embeddings import (
    Embedder,
    EmbeddingIndex,
    LazyEmbedder,
    SentenceTransformerEmbedder,
    load_embedder,
)
from tools.pgraph.store import (
    Edge,
    GraphFormatError,
    PropertyGraph,
    load_ark_record,
    load_ark_records,
)

__all__ = ["Edge", "Embedder", "EmbeddingIndex", "GraphFormatError", "LazyEmbedder", "PropertyGraph",
           "SentenceTransformerEmbedder", "load_ark_record", "load_ark_records", "load_embedder"]
