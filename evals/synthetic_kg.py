"""A seeded generator of large heterogeneous graphs in GRBench's ``graph.json`` layout (for benchmarks).

    python -m kgagents.evals.synthetic_kg OUT_DIR --nodes 100000 --edges 1000000 [--seed 0]

The graph is an academic domain shaped like GRBench's DBLP/MAPLE graphs: ``paper``, ``author``, ``keyword`` and
``venue`` nodes; papers link to their authors, keywords, one venue and the papers they cite. Every link is
listed at both of its ends, as GRBench does (``paper → author`` under the paper's ``author`` neighbours,
``author → paper`` under the author's ``paper`` neighbours), so a graph of ``E`` edges has ``E / 2`` links and
the compact store built from it has ``E`` edges.

Degrees are heavy-tailed: each node draws a Pareto weight, and the two ends of every link are drawn in
proportion to those weights (a configuration model), so out- and in-degrees follow power laws (Lotka's law for
authors' productivity, a few papers that collect most citations, a few huge venues and keywords); parallel
links and self-citations are dropped. Strings have realistic lengths: titles of 60-100 characters, author names
of about 15, venue names of 30-60, abstracts of 300-900 characters on 30 % of the papers, an organisation on
half of the authors, a year on every paper; words come from a seeded vocabulary of made-up words drawn with
Zipf frequencies (no real text is used).

The file is written node by node (a 40 M-edge graph never sits in memory as Python objects: the links are
NumPy arrays, about 16 bytes per edge); the same seed gives the same bytes. :func:`generate` also samples, while
writing, the nodes a benchmark queries (ids, one relation each, names), so the benchmark never has to read the
graph back.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

#: Node types: (type, id prefix, share of the nodes). Venues are few; the rest of the nodes are keywords.
NODE_TYPES = (("paper", "p", 0.50), ("author", "a", 0.40), ("keyword", "k", 0.098), ("venue", "v", 0.002))


@dataclass(frozen=True)
class LinkType:
    """Links between two node types, listed under ``relation`` at the head and ``reverse`` at the tail.

    ``head_alpha`` and ``tail_alpha`` are the Pareto tail indices of the ends' weights (smaller: heavier tail);
    ``share`` is this type's share of the links left once every paper has its venue.
    """

    head: str
    relation: str
    tail: str
    reverse: str
    share: float
    head_alpha: float
    tail_alpha: float


LINK_TYPES = (
    LinkType("paper", "author", "author", "paper", 0.40, head_alpha=2.5, tail_alpha=1.5),
    LinkType("paper", "reference", "paper", "cited_by", 0.45, head_alpha=2.5, tail_alpha=1.3),
    LinkType("paper", "keyword", "keyword", "paper", 0.15, head_alpha=3.0, tail_alpha=1.1),
)
#: Every paper appears in exactly one venue; venue sizes follow a power law of this tail index.
VENUE = LinkType("paper", "venue", "venue", "paper", 0.0, head_alpha=0.0, tail_alpha=1.2)
ABSTRACT_SHARE = 0.3
ORGANISATION_SHARE = 0.5
#: Fewer nodes than this leave some types empty.
MIN_NODES = 100


@dataclass
class SyntheticGraph:
    """What :func:`generate` wrote and sampled."""

    path: str
    seed: int
    nodes: int
    edges: int
    """Adjacency entries (both ends of every link): the edge count of the compact store built from the file."""
    bytes: int
    seconds: float
    node_types: dict[str, int]
    relations: dict[str, int]
    """Edges per relation name (a relation name may join several type pairs: ``paper`` from authors, venues...)."""
    degree: dict[str, float]
    """Degree (edges listed at a node) over all nodes: median, mean, p99, max."""
    lookups: list[tuple[str, str]] = field(default_factory=list)
    """Sampled (node id, relation) pairs: uniform over nodes with an edge, one of the node's relations."""
    seeds: list[str] = field(default_factory=list)
    """Sampled node ids for ego-graphs (uniform over nodes with an edge)."""
    names: list[tuple[str, str]] = field(default_factory=list)
    """Sampled (node id, name) pairs for nearest-name searches."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------------------------------------
# Strings
# ----------------------------------------------------------------------------------------------------------
_ONSETS = ("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "br", "ch", "cl",
           "dr", "gr", "pl", "pr", "sh", "st", "th", "tr")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "io", "ou")
_CODAS = ("", "", "", "n", "r", "s", "l", "m", "t", "nd", "st", "x")
#: How often a made-up word has 1, 2, 3 or 4 syllables.
_SYLLABLES = {1: 0.3, 2: 0.4, 3: 0.2, 4: 0.1}


class Words:
    """A seeded vocabulary of pronounceable made-up words, drawn with Zipf frequencies."""

    def __init__(self, rng: random.Random, size: int, *, min_syllables: int = 1, max_syllables: int = 4) -> None:
        words: dict[str, None] = {}
        lengths = range(min_syllables, max_syllables + 1)
        while len(words) < size:
            syllables = rng.choices(lengths, weights=[_SYLLABLES.get(n, 0.1) for n in lengths])[0]
            word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)) + rng.choice(_CODAS)
            words.setdefault(word)
        self.words = sorted(words, key=len)  # short words are the frequent ones (Zipf's law of abbreviation)
        weights = 1.0 / np.arange(1, size + 1)
        self._cumulative = list(np.cumsum(weights / weights.sum()))
        self._rng = rng

    def draw(self, k: int) -> list[str]:
        return self._rng.choices(self.words, cum_weights=self._cumulative, k=k)

    def text(self, low: int, high: int, *, capital: bool = True) -> str:
        """Words up to a length drawn in ``[low, high]`` characters (cut at a word boundary)."""
        target = self._rng.randint(low, high)
        words: list[str] = []
        size = -1
        while size < target:
            for word in self.draw(8):
                words.append(word)
                size += 1 + len(word)
                if size >= target:
                    break
        text = " ".join(words)
        if len(text) > high:
            cut = text.rfind(" ", 0, high + 1)
            text = text[:cut] if cut >= low else text[:high]
        return text[:1].upper() + text[1:] if capital else text


class _Strings:
    """The names and features of the generated nodes."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.vocabulary = Words(rng, 20_000)
        self.first_names = [w.title() for w in Words(rng, 3_000, min_syllables=2, max_syllables=3).words]
        self.last_names = Words(rng, 40_000, min_syllables=2, max_syllables=4)

    def title(self) -> str:
        return self.vocabulary.text(60, 100)

    def abstract(self) -> str:
        target = self.rng.randint(300, 900)
        sentences: list[str] = []
        size = 0
        while size < target:
            sentence = self.vocabulary.text(40, 160) + "."
            sentences.append(sentence)
            size += len(sentence) + 1
        return " ".join(sentences)[:target].rstrip() + "."

    def person(self) -> str:
        return f"{self.rng.choice(self.first_names)} {self.last_names.draw(1)[0].title()}"

    def organisation(self) -> str:
        kind = self.rng.choice(("University of", "Institute of", "Laboratory for", "Center for"))
        return f"{kind} {self.vocabulary.text(8, 30).title()}"

    def venue(self) -> str:
        kind = self.rng.choice(("Proceedings of the Conference on", "Journal of", "Transactions on",
                                "International Symposium on", "Workshop on"))
        return f"{kind} {self.vocabulary.text(12, 36).title()}"

    def keyword(self) -> str:
        return " ".join(self.rng.choices(self.vocabulary.words, k=self.rng.randint(1, 3)))


# ----------------------------------------------------------------------------------------------------------
# Links
# ----------------------------------------------------------------------------------------------------------
def _weights(rng: np.random.Generator, n: int, alpha: float) -> np.ndarray:
    """Pareto weights (scale 1, tail index ``alpha``), normalised to probabilities."""
    w = rng.pareto(alpha, n) + 1.0
    return w / w.sum()


def _draw(rng: np.random.Generator, p: np.ndarray, size: int) -> np.ndarray:
    """``size`` indices drawn with probabilities ``p`` (inverse CDF: fast for millions of draws)."""
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), len(p) - 1)


def _sample_links(rng: np.random.Generator, link: LinkType, heads: int, tails: int, count: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``count`` distinct (head, tail) pairs with power-law ends; fewer when the types cannot hold that many."""
    if count <= 0 or heads == 0 or tails == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ph, pt = _weights(rng, heads, link.head_alpha), _weights(rng, tails, link.tail_alpha)
    same = link.head == link.tail
    keys = np.zeros(0, np.int64)
    for _ in range(8):  # top up after dropping parallel links and self-links; hubs make a few rounds necessary
        missing = count - len(keys)
        if missing <= 0:
            break
        draw = int(missing * 1.1) + 16
        h, t = _draw(rng, ph, draw), _draw(rng, pt, draw)
        if same:
            h, t = h[h != t], t[h != t]
        keys = np.unique(np.concatenate([keys, h.astype(np.int64) * tails + t]))
    if len(keys) > count:
        keys = rng.choice(keys, size=count, replace=False)
    keys = rng.permutation(keys)  # the order in which a node lists its neighbours: random
    return keys // tails, keys % tails


@dataclass
class _Adjacency:
    """One relation listed at nodes of one type: CSR over the nodes' local indices."""

    relation: str
    other_prefix: str
    ptr: np.ndarray
    ends: np.ndarray

    @classmethod
    def of(cls, relation: str, other_prefix: str, nodes: int, at: np.ndarray, other: np.ndarray) -> _Adjacency:
        order = np.argsort(at, kind="stable")
        ptr = np.concatenate([[0], np.cumsum(np.bincount(at, minlength=nodes))]).astype(np.int64)
        return cls(relation, other_prefix, ptr, other[order].astype(np.int32))

    def ids(self, node: int) -> list[str]:
        prefix = self.other_prefix
        return [prefix + str(j) for j in self.ends[self.ptr[node]:self.ptr[node + 1]].tolist()]


def _counts(nodes: int) -> dict[str, int]:
    counts = {t: max(1, int(nodes * share)) for t, _, share in NODE_TYPES}
    counts["keyword"] = nodes - sum(c for t, c in counts.items() if t != "keyword")
    return counts


def _plan(rng: np.random.Generator, counts: dict[str, int], links: int) -> dict[str, list[_Adjacency]]:
    """The adjacency lists of every node type, in the order a node lists its relations."""
    prefix = {t: p for t, p, _ in NODE_TYPES}
    sampled: list[tuple[LinkType, np.ndarray, np.ndarray]] = []
    venue_links = min(counts["paper"], links)
    papers = rng.permutation(counts["paper"])[:venue_links]
    sampled.append((VENUE, papers, _draw(rng, _weights(rng, counts["venue"], VENUE.tail_alpha), venue_links)))
    rest = links - venue_links
    for link in LINK_TYPES:
        h, t = _sample_links(rng, link, counts[link.head], counts[link.tail], round(rest * link.share))
        sampled.append((link, h, t))
    order = {"paper": ["author", "venue", "keyword", "reference", "cited_by"]}
    plan: dict[str, list[_Adjacency]] = {t: [] for t in counts}
    for link, h, t in sampled:
        plan[link.head].append(_Adjacency.of(link.relation, prefix[link.tail], counts[link.head], h, t))
        plan[link.tail].append(_Adjacency.of(link.reverse, prefix[link.head], counts[link.tail], t, h))
    for node_type, rank in order.items():
        plan[node_type].sort(key=lambda a: rank.index(a.relation))
    return plan


# ----------------------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------------------
def _features(strings: _Strings, node_type: str, rng: random.Random) -> dict[str, Any]:
    if node_type == "paper":
        features: dict[str, Any] = {"title": strings.title(), "year": rng.randint(1970, 2024)}
        if rng.random() < ABSTRACT_SHARE:
            features["abstract"] = strings.abstract()
        return features
    if node_type == "author":
        features = {"name": strings.person()}
        if rng.random() < ORGANISATION_SHARE:
            features["organization"] = strings.organisation()
        return features
    if node_type == "venue":
        return {"name": strings.venue()}
    return {"name": strings.keyword()}


def _node_records(plan: dict[str, list[_Adjacency]], counts: dict[str, int], strings: _Strings,
                  rng: random.Random) -> Iterator[tuple[str, str, int, dict[str, Any], dict[str, list[str]]]]:
    prefix = {t: p for t, p, _ in NODE_TYPES}
    for node_type, _, _ in NODE_TYPES:
        for index in range(counts[node_type]):
            features = _features(strings, node_type, rng)
            neighbours = {a.relation: ids for a in plan[node_type] if (ids := a.ids(index))}
            yield node_type, prefix[node_type] + str(index), index, features, neighbours


def _write(out: TextIO, records: Iterator[tuple[str, str, int, dict[str, Any], dict[str, list[str]]]],
           on_node: Any) -> None:
    dumps = json.dumps
    current = None
    buffer: list[str] = []
    out.write("{")
    for node_type, node_id, _index, features, neighbours in records:
        if node_type != current:
            buffer.append(("}, " if current is not None else "") + dumps(f"{node_type}_nodes") + ": {")
            first = True
            current = node_type
        buffer.append(("" if first else ", ") + dumps(node_id) + ": "
                      + dumps({"features": features, "neighbors": neighbours}, ensure_ascii=False))
        first = False
        on_node(node_id, features, neighbours)
        if len(buffer) >= 4096:
            out.write("".join(buffer))
            buffer.clear()
    buffer.append("}}\n" if current is not None else "}\n")
    out.write("".join(buffer))


def generate(directory: str | Path, *, nodes: int, edges: int, seed: int = 0, samples: int = 20_000,
             progress: bool = False) -> SyntheticGraph:
    """Write ``directory/graph.json`` (about ``nodes`` nodes and ``edges`` edges) and sample nodes to query.

    ``samples`` nodes with at least one edge are sampled uniformly (at most one per node) for lookups and
    ego-graphs, and as many for names.
    """
    if nodes < MIN_NODES:
        raise ValueError(f"a synthetic graph needs at least {MIN_NODES} nodes, got {nodes}")
    if edges < 2 or edges % 2:
        raise ValueError(f"the edge count must be even and positive (every link is listed at both ends), got {edges}")
    started = time.monotonic()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "graph.json"
    np_rng = np.random.default_rng(seed)
    rng = random.Random(seed)
    counts = _counts(nodes)
    plan = _plan(np_rng, counts, edges // 2)

    degree = np.zeros(nodes, dtype=np.int64)
    offset = 0
    relations: dict[str, int] = {}
    for node_type, _, _ in NODE_TYPES:
        for adjacency in plan[node_type]:
            degree[offset:offset + counts[node_type]] += np.diff(adjacency.ptr)
            relations[adjacency.relation] = relations.get(adjacency.relation, 0) + len(adjacency.ends)
        offset += counts[node_type]
    with_edges = np.flatnonzero(degree > 0)
    picked = np_rng.choice(with_edges, size=min(samples, len(with_edges)), replace=False)
    wanted = np.zeros(nodes, dtype=bool)
    wanted[picked] = True
    named = np.zeros(nodes, dtype=bool)
    named[np_rng.choice(nodes, size=min(samples, nodes), replace=False)] = True
    result = SyntheticGraph(path=str(path), seed=seed, nodes=nodes, edges=int(degree.sum()), bytes=0, seconds=0.0,
                            node_types=counts, relations=relations,
                            degree={"median": float(np.median(degree)), "mean": float(degree.mean()),
                                    "p99": float(np.percentile(degree, 99)), "max": int(degree.max())})
    position = [0]
    pick = random.Random(seed + 1)

    def on_node(node_id: str, features: dict[str, Any], neighbours: dict[str, list[str]]) -> None:
        index = position[0]
        position[0] += 1
        if wanted[index]:
            result.lookups.append((node_id, pick.choice(list(neighbours))))
            result.seeds.append(node_id)
        if named[index]:
            result.names.append((node_id, features.get("name") or features["title"]))
        if progress and index % 500_000 == 0:
            print(f"  wrote {index:,} of {nodes:,} nodes", file=sys.stderr, flush=True)

    with open(path, "w", encoding="utf-8", buffering=1 << 22) as out:
        _write(out, _node_records(plan, counts, _Strings(rng), rng), on_node)
    # the samples in a random order (they were collected in file order)
    pick.shuffle(result.lookups)
    pick.shuffle(result.seeds)
    pick.shuffle(result.names)
    result.bytes = path.stat().st_size
    result.seconds = round(time.monotonic() - started, 3)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgagents.evals.synthetic_kg", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the folder to write graph.json (and meta.json) into")
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=1_000_000, help="adjacency entries (even: 2 per link)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    graph = generate(args.out, nodes=args.nodes, edges=args.edges, seed=args.seed, samples=0, progress=True)
    meta = {k: v for k, v in graph.as_dict().items() if k not in ("lookups", "seeds", "names")}
    (Path(args.out) / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
