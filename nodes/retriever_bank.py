"""Agent-G's retriever bank (paper 004, §2.2, Table 2): a text and a graph retrieval module, each a retriever
and a ranker, selected and fed by the agent's action.

- **Text module**: dense retrieval by vector similarity (VSS) — over the documents of a static KG's nodes
  (STaRK: each entity has a document), or over a question's pre-fetched web pages (CRAG), ranked once and read
  in batches of ``batch_size`` (the agent can ask for the next batch).
- **Graph module**: each topic entity linked to a node (exact name, else the store's nearest-node search
  within its type); the ego-graph of each along the useful relations (radius ≤ 2); the intersection of the
  ego-graphs when there are several; then either the *documents* of the entities reached, ranked by VSS
  (STaRK), or the verbalised *reasoning paths* ``{e} → {r} → … → {n}`` from the topic entities to them, ranked
  by VSS (CRAG). For CRAG's knowledge graphs, reachable only through its API, :mod:`kgagents.nodes.crag_paths` gives
  the same paths.

Every retrieval says what happened (entities not found, relations unknown, ego-graphs without an
intersection): the commentor reads it. """

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

import numpy as np

from kgagents.tools.pgraph import StaticKG
from kgagents.tools.pgraph.embedding_cache import EmbeddingCache
from kgagents.tools.pgraph.vectors import resolve_embedder


class Reference(TypedDict):
    """One retrieved reference: a page, a node's document, or a reasoning path."""

    id: str
    text: str
    score: float
    kind: Literal["page", "document", "path"]


class Retrieval(TypedDict, total=False):
    """What one call of the retriever bank returned, and how."""

    module: Literal["text", "graph", "none"]
    references: list[Reference]
    ranked_ids: list[str]
    """Retrieval task: every candidate, best first (the output the metrics rank)."""
    paths: list[str]
    """The reasoning paths behind the references (the validation context of the retrieval task)."""
    linked: dict[str, str]
    batch: int
    notes: list[str]
    truncated: list[str]
    """The topic entities whose ego-graphs ``max_nodes`` cut (their reach, and any intersection, is partial)."""


class TopicEntity(TypedDict):
    name: str
    type: str


def _note_join(notes: list[str]) -> str:
    return "; ".join(notes) if notes else "ok"


# --------------------------------------------------------------------------------------------------------------
# Text module
# --------------------------------------------------------------------------------------------------------------
def _embed(texts: Sequence[str], embedder: Any, cache: EmbeddingCache | None = None) -> np.ndarray:
    """Unit-length embeddings of ``texts`` (rows of zeros stay zero), through ``cache`` when given."""
    encoded = cache.encode(texts, embedder) if cache is not None else resolve_embedder(embedder).encode(list(texts))
    vectors = np.asarray(encoded, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def rank_texts(question: str, texts: Sequence[str], embedder: Any = None, *, max_chars: int = 2000
               ) -> list[tuple[int, float]]:
    """The texts' indices ranked by vector similarity to the question (the VSS ranker), with cosine scores."""
    if not texts:
        return []
    vectors = _embed([question, *(t[:max_chars] for t in texts)], embedder)
    scores = vectors[1:] @ vectors[0]
    order = np.argsort(-scores, kind="stable")
    return [(int(i), round(float(scores[i]), 4)) for i in order]


def passages(text: str, size: int = 500) -> list[str]:
    """A page's text cut into passages of about ``size`` characters at paragraph, line or sentence ends."""
    parts = [p.strip() for p in re.split(r"\n\s*\n|\n(?=[#*\-|])", text) if p.strip()]
    out: list[str] = []
    for part in parts:
        while len(part) > size:
            cut = max(part.rfind(". ", 0, size), part.rfind("\n", 0, size))
            cut = cut + 1 if cut > size // 3 else size
            out.append(part[:cut].strip())
            part = part[cut:].strip()
        if out and len(out[-1]) + len(part) < size // 2:
            out[-1] += "\n" + part
        elif part:
            out.append(part)
    return out


def rank_pages(question: str, pages: Sequence[tuple[str, str]], embedder: Any = None, *, max_chars: int = 3000,
               size: int = 500, cache: EmbeddingCache | None = None) -> tuple[list[str], list[tuple[int, float]]]:
    """What the generator reads of each page, and the pages ranked by similarity to the question (VSS).

    A page (``(name, text)``) is cut into passages; a page's score is its best passage's cosine similarity to
    the question, and what is kept of it are its best passages, in page order, up to ``max_chars`` — the
    parts of a long page that speak to the question, not its navigation. All passages are embedded in one
    batch, each distinct passage once (result pages often repeat one another); with a ``cache``
    (:mod:`kgagents.tools.pgraph.embedding_cache`) only those it does not hold yet.
    """
    if not pages:
        return [], []
    cut = [[name.strip(), *passages(text, size)] if name.strip() else passages(text, size) or [""]
           for name, text in pages]
    flat = [p for chunks in cut for p in chunks]
    distinct = list(dict.fromkeys(flat))
    vectors = _embed([question, *distinct], embedder, cache)
    by_text = dict(zip(distinct, (vectors[1:] @ vectors[0]).tolist(), strict=True))
    scores = np.asarray([by_text[p] for p in flat], dtype=np.float32)
    kept: list[str] = []
    best: list[float] = []
    start = 0
    for chunks in cut:
        own = scores[start:start + len(chunks)]
        start += len(chunks)
        chosen: list[int] = []
        used = 0
        for i in np.argsort(-own, kind="stable"):
            if used + len(chunks[i]) > max_chars and chosen:
                continue
            chosen.append(int(i))
            used += len(chunks[i])
        kept.append("\n…\n".join(chunks[i] for i in sorted(chosen))[:max_chars])
        best.append(float(own.max()) if len(own) else 0.0)
    order = sorted(range(len(pages)), key=lambda i: -best[i])
    return kept, [(i, round(best[i], 4)) for i in order]


def page_batch(pages: Sequence[Mapping[str, Any]], order: Sequence[tuple[int, float]], batch: int, size: int,
               max_chars: int) -> Retrieval:
    """Batch ``batch`` (from 0) of the ranked pages."""
    chosen = list(order)[batch * size:(batch + 1) * size]
    notes = [] if chosen else [f"no pages left: the {len(order)} page(s) were all read in earlier batches"]
    refs = [Reference(id=str(pages[i].get("url") or pages[i].get("name") or i),
                      text=f"{pages[i].get('name', '')}\n{str(pages[i].get('text', ''))[:max_chars]}", score=s,
                      kind="page") for i, s in chosen]
    return Retrieval(module="text", references=refs, ranked_ids=[r["id"] for r in refs], paths=[], linked={},
                     batch=batch, notes=notes)


def document_retrieval(graph: StaticKG, question: str, k: int, *, types: Sequence[str] | None = None,
                       embedder: Any = None, max_chars: int = 2000, kind: str | None = None,
                       vector: Any = None) -> Retrieval:
    """Dense retrieval over the nodes' documents (the text module of a knowledge base with documents);
    ``kind`` and ``vector`` as :meth:`~kgagents.tools.pgraph.StaticKG.nearest_nodes` takes them."""
    hits = graph.nearest_nodes(question, k, field="text", types=types or None, embedder=embedder, kind=kind,
                               vector=vector)
    refs = [Reference(id=i, text=f"{graph.display_name(i)}: {graph.node_text(i, max_chars=max_chars)}", score=s,
                      kind="document") for i, s in hits]
    return Retrieval(module="text", references=refs, ranked_ids=[i for i, _ in hits], paths=[], linked={}, batch=0,
                     notes=[] if hits else ["no document matched"])


# --------------------------------------------------------------------------------------------------------------
# Graph module
# --------------------------------------------------------------------------------------------------------------
def link_entity(graph: StaticKG, entity: TopicEntity, embedder: Any = None, kind: str | None = None) -> str | None:
    """The node a topic entity names: an exact name (of its type, when it has one), else the nearest name."""
    types = [entity["type"]] if entity.get("type") in set(graph.stats().types) else None
    named = [n for n in graph.nodes_named(entity["name"]) if types is None or n.type in types]
    if named:
        return named[0].id
    if graph.has_node(entity["name"]):
        return entity["name"]
    near = graph.nearest_nodes(entity["name"], 1, types=types, embedder=embedder, kind=kind)
    return near[0][0] if near else None


def graph_retrieval(graph: StaticKG, question: str, entities: Sequence[TopicEntity], relations: Sequence[str], *,
                    output: Literal["paths", "documents"], k: int, radius: int = 2, max_nodes: int | None = None,
                    embedder: Any = None, max_chars: int = 2000, types: Sequence[str] | None = None,
                    kind: str | None = None, vector: Any = None, linker: Any = None) -> Retrieval:
    """Ego-graphs of the topic entities along the useful relations, their intersection, ranked references; the
    documents output ranks only the nodes of the candidate ``types`` (all when ``None``). ``max_nodes`` bounds
    each ego-graph (``None``: no bound); the cut ones are listed in ``truncated``. ``linker`` links entities
    whose name matches no node exactly (default ``embedder``)."""
    notes: list[str] = []
    known = set(graph.stats().relations)
    wanted = [r for r in dict.fromkeys(relations) if r in known]
    unknown = [r for r in relations if r not in known]
    if unknown:
        notes.append(f"relations not in the graph: {', '.join(unknown)}")
    if relations and not wanted:
        notes.append("none of the useful relations exists: every relation is followed")
    linked: dict[str, str] = {}
    for entity in entities:
        node_id = link_entity(graph, entity, embedder if linker is None else linker, kind)
        if node_id is None:
            notes.append(f"entity not found: {entity['name']}")
        else:
            linked[entity["name"]] = node_id
    if not linked:
        notes.append("no topic entity was found in the graph")
        return Retrieval(module="graph", references=[], ranked_ids=[], paths=[], linked=linked, batch=0, notes=notes)
    seeds = list(dict.fromkeys(linked.values()))
    egos = [graph.ego_graph([s], wanted or None, radius=radius, max_nodes=max_nodes) for s in seeds]
    cut = {seed for seed, ego in zip(seeds, egos, strict=True) if ego.truncated}
    truncated = [name for name, node in linked.items() if node in cut]
    for name in truncated:
        notes.append(f"the ego-graph of {name} was cut at {max_nodes} nodes (max_nodes)")
    if len(egos) > 1:
        candidates = graph.intersection(egos)
        if not candidates and truncated:
            notes.append(f"no intersection found within the cut ego-graphs of {', '.join(linked)}: the nodes the "
                         "cut left out may hold one")
        elif not candidates:
            notes.append(f"no intersection between the ego-graphs of {', '.join(linked)} "
                         f"({', '.join(str(len(e.reached())) for e in egos)} nodes reached)")
    else:
        candidates = egos[0].reached()
        if not candidates:
            notes.append(f"the ego-graph of {next(iter(linked))} is empty along these relations")
    if not candidates:
        return Retrieval(module="graph", references=[], ranked_ids=[], paths=[], linked=linked, batch=0, notes=notes,
                         truncated=truncated)
    if output == "documents":
        if types:
            wanted_types = set(types)
            reached = len(candidates)
            candidates = [c for c in candidates if graph.node_type(c) in wanted_types]
            if not candidates:
                notes.append(f"the {reached} node(s) reached include no candidate ({', '.join(types)})")
                return Retrieval(module="graph", references=[], ranked_ids=[], paths=[], linked=linked, batch=0,
                                 notes=notes, truncated=truncated)
        ranked = graph.nearest_nodes(question, max(k, 1), field="text", among=candidates, embedder=embedder,
                                     kind=kind, vector=vector)
        if len(ranked) < min(k, len(candidates)):
            notes.append(f"{min(k, len(candidates)) - len(ranked)} candidate(s) reached have no embedding")
        refs = [Reference(id=i, text=f"{graph.display_name(i)}: {graph.node_text(i, max_chars=max_chars)}",
                          score=s, kind="document") for i, s in ranked]
        top = [i for i, _ in ranked[:1]]
        paths = [graph.verbalise(egos[n].paths[t]) for t in top for n in range(len(egos)) if t in egos[n].paths]
        return Retrieval(module="graph", references=refs, ranked_ids=[i for i, _ in ranked], paths=paths,
                         linked=linked, batch=0, notes=notes, truncated=truncated)
    wanted_targets = set(candidates)
    texts = [graph.verbalise(e.paths[t]) for e in egos for t in e.reached() if t in wanted_targets]
    texts = list(dict.fromkeys(texts))
    order = rank_texts(question, texts, embedder)[:k]
    refs = [Reference(id=f"path-{i}", text=texts[i], score=s, kind="path") for i, s in order]
    return Retrieval(module="graph", references=refs, ranked_ids=[], paths=[r["text"] for r in refs], linked=linked,
                     batch=0, notes=notes, truncated=truncated)


def render_references(retrieval: Retrieval, *, max_chars: int = 12_000) -> str:
    """The references as the generator and the validator read them."""
    refs = retrieval.get("references") or []
    if not refs:
        return "(no reference: " + _note_join(retrieval.get("notes") or []) + ")"
    parts = []
    for n, ref in enumerate(refs, 1):
        parts.append(f"[{n}] {ref['text']}")
    text = "\n\n".join(parts)
    return text[:max_chars] + (f"\n[… {len(text) - max_chars} more characters cut]" if len(text) > max_chars else "")


def describe_retrieval(retrieval: Retrieval) -> str:
    """One paragraph for the commentor: the module, what was linked and reached, and every note."""
    module = retrieval.get("module", "none")
    refs = retrieval.get("references") or []
    lines = [f"module: {module}; {len(refs)} reference(s)"]
    if retrieval.get("linked"):
        lines.append("linked: " + ", ".join(f"{k} → {v}" for k, v in retrieval["linked"].items()))
    if module == "text" and retrieval.get("batch") is not None:
        lines.append(f"batch: {retrieval.get('batch', 0) + 1}")
    lines += [f"note: {n}" for n in retrieval.get("notes") or []]
    return "\n".join(lines)
