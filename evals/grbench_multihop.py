"""Multi-hop GRBench-shaped questions (2–3 hops) over the fixture graphs, derived from GRBench's own templates.

Run ``python -m kgagents.evals.grbench_multihop`` to write them, ``--check`` to verify the committed files.

The one-hop fixture (:mod:`kgagents.evals.grbench_fixture`) holds the facts GRBench's one-hop questions state. This
module adds what GRBench's *multi-hop* question templates state, and derives questions whose gold answer is a path
through the graph:

- **Academic, real questions** (DBLP and MAPLE Physics): "Who is the author of both "P1" and "P2"?" (DBLP
  template 4, MAPLE template 3) states that the answer wrote both papers: the author and the two papers are added
  (both directions, as GRBench lists them), and the question's gold path is paper → author → paper (the author of
  P1 whose papers include P2). "Who collaborates with author A to write paper "P"?" (DBLP template 3, MAPLE
  template 2) states the paper's authors: A and the answer's names; its gold path is author → paper → author (A's
  paper, then its other authors). The question and answer are GRBench's, verbatim; such a question is kept only
  where its path gives its answer exactly (A has that one paper in the graph). Both name an entity one hop from
  the answer (P1; P), so a one-hop search answers them.
- **Academic, rewritten questions**: the same facts asked from one entity two hops from the answer: "Which other
  papers did the authors of the paper "P1" write?" (paper → author → paper) and "Who has co-authored a paper with
  A?" (author → paper → author), their answers written from the path; one is kept only where no answer node is a
  neighbour of the entity it names.
- **Biomedical, template questions** on the one-hop fixture graph as it is (Hetionet lists every edge type at both
  ends, so diseases share symptoms and genes share anatomy): GRBench's template 26 "How many diseases have the
  same symptom with X?" and template 25 "How many genes have the same biological process with X?" (the template
  text of Graph-CoT's notebook, counts: disease → symptom → disease), two-hop lists composed from the anatomy
  templates 4–6 (gene → anatomy → gene), and three-hop lists composed from templates 1 and 26 (disease → symptom
  → disease → symptom).

A question's path is ``hops`` (edge types followed from ``start``); the nodes reached form breadth-first levels,
each without the nodes of earlier levels (as graph exploration's visited set). The answer is the ``answer_at``
level — only its nodes with a ``reaches`` node among their next hop's neighbours, when given — as names joined
with ``", "`` in edge order, or (``count``) how many. :func:`gold_answer` follows it on any
:class:`~kgagents.tools.pgraph.model.StaticKG`. ``named`` lists the nodes the question names, and ``hops_needed``
(:func:`hops_needed`) is how far, over edges of any type, the farthest answer node is from the nearest of them:
a question with ``hops_needed`` 1 is answered by one hop from an entity it names, whatever its path's length.

Literature (Goodreads) is absent: its multi-hop questions ("books by the same author as X") never name the
author in between, so no path of named facts can be added for them.

Output (committed under ``evals/data/grbench/fixture/multihop/``): ``dblp/graph.json`` and
``maple/Physics/graph.json`` (the one-hop fixture graph of the domain plus the multi-hop facts) and
``questions.jsonl``, one line per question: ``{id, domain, graph, source, kind, question, answer, entity, named,
start, hops, answer_at, reaches, count, target_feature, hops_needed}`` (``graph`` relative to the fixture folder;
``source`` the GRBench domain, qid or template the question comes from; ``kind`` ``question`` for a GRBench question
verbatim, ``rewritten`` for its facts asked from one of its entities, ``template`` for a template's text on
fixture entities, ``composed`` for two templates joined).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kgagents.evals import grbench_fixture as fixture
from kgagents.evals.grbench_fixture import (
    FIXTURE_DIR,
    QUESTIONS_DIR,
    FixtureError,
    build_domain,
    load_questions,
    split_answer,
)

OUT = FIXTURE_DIR / "multihop"
MANIFEST = "questions.jsonl"
ACADEMIC = {"dblp": {"both": 4, "with": 3}, "maple/Physics": {"both": 3, "with": 2}}
PRESENTS, PARTICIPATES = "Disease-presents-Symptom", "Gene-participates-Biological Process"
ANATOMY = {"Anatomy-expresses-Gene": "express", "Anatomy-upregulates-Gene": "upregulate",
           "Anatomy-downregulates-Gene": "downregulate"}
#: The author a co-author question names: after "author"/"with"/"does", up to where the sentence goes on.
_WITH = re.compile(r"(?:with (?:author )?|does )(?P<a>.+?)(?: at | in | from | to | co-write| on the paper)")


# ----------------------------------------------------------------------------------------------------------
# Following a path
# ----------------------------------------------------------------------------------------------------------
def levels_of(graph: Any, entry: Mapping[str, Any]) -> list[list[str]]:
    """The breadth-first levels of an entry's path: the start, then each hop's new nodes in edge order."""
    levels = [[entry["start"]]]
    seen = {entry["start"]}
    for relation in entry["hops"]:
        reached = []
        for node in levels[-1]:
            for end in graph.neighbours(node, relation, "out"):
                if end not in seen:
                    seen.add(end)
                    reached.append(end)
        levels.append(reached)
    return levels


def answer_nodes(graph: Any, entry: Mapping[str, Any]) -> list[str]:
    """The nodes an entry's answer names (see the module docstring)."""
    at = entry["answer_at"]
    nodes = levels_of(graph, entry)[at]
    if entry.get("reaches"):
        nodes = [n for n in nodes if entry["reaches"] in graph.neighbours(n, entry["hops"][at], "out")]
    return nodes


def hops_needed(graph: Any, entry: Mapping[str, Any]) -> int:
    """The fewest hops, over edges of any type, that reach every node of an entry's answer from the entities its
    question names (``named``): 1 when each is a neighbour of a named entity, so that a one-hop search would do."""
    distance = {node: 0 for node in entry["named"]}
    frontier = list(distance)
    while frontier:
        following = []
        for node in frontier:
            for end in graph.neighbours(node, None, "both"):
                if end not in distance:
                    distance[end] = distance[node] + 1
                    following.append(end)
        frontier = following
    nodes = answer_nodes(graph, entry)
    if any(n not in distance for n in nodes):
        raise FixtureError(f"{entry['id']}: an answer node cannot be reached from {entry['named']}")
    return max((distance[n] for n in nodes), default=0)


def gold_answer(graph: Any, entry: Mapping[str, Any]) -> str:
    """Follow an entry's path on a :class:`~kgagents.tools.pgraph.model.StaticKG` and write its answer."""
    nodes = answer_nodes(graph, entry)
    if entry.get("count"):
        return str(len(nodes))
    return ", ".join(str(graph.feature(n, entry.get("target_feature") or "name")) for n in nodes)


# ----------------------------------------------------------------------------------------------------------
# Deriving
# ----------------------------------------------------------------------------------------------------------
def _link(graph: Any, paper: str, author: str) -> None:
    """A paper-author edge in both directions, as GRBench lists it (once)."""
    for node_type, node, key, other in (("paper", paper, "author", author), ("author", author, "paper", paper)):
        neighbours = graph.record(node_type, node)["neighbors"].setdefault(key, [])
        if other not in neighbours:
            neighbours.append(other)


def _academic(domain: str, questions_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The domain's one-hop fixture graph plus the facts of its "both" and "collaborates with" templates, and
    their questions."""
    graph, _ = build_domain(domain, questions_dir)
    blocks = ACADEMIC[domain]
    both, with_ = [], []
    for record in load_questions(domain, questions_dir):
        block = int(record["qid"]) // 10
        question, answer = str(record["question"]), str(record["answer"])
        titles = re.findall(r'"(.+?)"', question)
        if block == blocks["both"]:
            if len(titles) != 2:
                raise FixtureError(f"{domain} qid {record['qid']}: expected two quoted titles in {question!r}")
            papers = [graph.node("paper", "title", t.rstrip("?") if t.endswith("?") else t) for t in titles]
            author = graph.node("author", "name", answer)
            for paper in papers:
                _link(graph, paper, author)
            both.append((record, papers, author))
        elif block == blocks["with"]:
            match = _WITH.search(question)
            if not match or len(titles) != 1:
                raise FixtureError(f"{domain} qid {record['qid']}: cannot read the author and paper of {question!r}")
            paper = graph.node("paper", "title", titles[0])
            names = [match.group("a"), *split_answer(domain, answer)]
            authors = [graph.node("author", "name", name, occurrence) for occurrence, name in
                       ((names[:i].count(n), n) for i, n in enumerate(names))]
            for author in authors:
                _link(graph, paper, author)
            with_.append((record, paper, authors[0], match.group("a")))
    store = graph.as_json()
    view = _JsonGraph(store)
    source_dir = f"multihop/{domain}"
    entries = []
    for record, papers, _author in both:
        entries.append(_entry(domain, source_dir, record, "question", titles_of(store, papers[0]), papers[0],
                              ["author", "paper"], 1, named=papers, reaches=papers[1]))
    for record, paper, author, name in with_:
        if view.neighbours(author, "paper") != [paper]:
            continue  # the author has another paper in the graph: the path would not give the answer alone
        entries.append(_entry(domain, source_dir, record, "question", name, author, ["paper", "author"], 2,
                              named=[author, paper]))
    entries = [e for e in entries if gold_answer(view, e) == e["answer"]]
    # the same facts asked from one entity two hops from the answer (GRBench's questions name one a hop away)
    rewritten = []
    for record, papers, _author in both:
        title = titles_of(store, papers[0])
        rewritten.append(_entry(domain, source_dir, record, "rewritten", title, papers[0], ["author", "paper"], 2,
                                question=f'Which other papers did the authors of the paper "{title}" write?',
                                target_feature="title"))
    for record, _paper, author, name in with_:
        rewritten.append(_entry(domain, source_dir, record, "rewritten", name, author, ["paper", "author"], 2,
                                question=f"Who has co-authored a paper with {name}?"))
    for entry in rewritten:
        entry["answer"] = gold_answer(view, entry)
    entries += [e for e in rewritten if e["answer"] and hops_needed(view, e) >= 2]
    for entry in entries:
        entry["hops_needed"] = hops_needed(view, entry)
    return store, entries


def titles_of(store: Mapping[str, Any], paper: str) -> str:
    return str(store["paper_nodes"][paper]["features"]["title"])


def _entry(domain: str, graph: str, record: Mapping[str, Any], kind: str, entity: str, start: str,
           hops: list[str], answer_at: int, *, named: list[str] | None = None, reaches: str | None = None,
           count: bool = False, question: str | None = None, target_feature: str = "name") -> dict[str, Any]:
    """An academic entry: GRBench's question and answer (``question`` for a rewritten one, its answer written
    later from the path)."""
    suffix = "-2hop" if kind == "rewritten" else ""
    return {"id": f"{domain.replace('/', '_')}-mh-{record['qid']}{suffix}", "domain": domain, "graph": graph,
            "source": {"domain": domain, "qid": str(record["qid"]), "template": int(record["qid"]) // 10},
            "kind": kind, "question": question or str(record["question"]),
            "answer": "" if question else str(record["answer"]), "entity": entity, "named": named or [start],
            "start": start, "hops": hops, "answer_at": answer_at, "reaches": reaches, "count": count,
            "target_feature": target_feature}


class _JsonGraph:
    """Just enough of a :class:`~kgagents.tools.pgraph.model.StaticKG` over GRBench's JSON to follow paths."""

    def __init__(self, store: Mapping[str, Any]) -> None:
        self.nodes = {node_id: node for nodes in store.values() for node_id, node in nodes.items()}

    def neighbours(self, node_id: str, relation: str | None, direction: str = "out") -> list[str]:
        """The node's neighbours of one relation, or of every relation (``None``)."""
        lists = self.nodes[node_id]["neighbors"]
        return [n for key in ([relation] if relation else lists) for n in lists.get(key, [])]

    def feature(self, node_id: str, key: str) -> Any:
        return self.nodes[node_id]["features"].get(key)


def _biomedical(questions_dir: Path) -> list[dict[str, Any]]:
    """Template and composed questions over the biomedical one-hop fixture graph, as it is."""
    graph, _ = build_domain("biomedical", questions_dir)
    store = graph.as_json()
    view = _JsonGraph(store)
    named = {node_id: str(node["features"]["name"]) for nodes in store.values() for node_id, node in nodes.items()}
    entries: list[dict[str, Any]] = []

    def add(kind: str, source: dict[str, Any], key: str, question: str, start: str, hops: list[str],
            answer_at: int, count: bool) -> None:
        entry = {"id": f"biomedical-mh-{key}", "domain": "biomedical", "graph": "biomedical", "source": source,
                 "kind": kind, "question": question, "answer": "", "entity": named[start], "named": [start],
                 "start": start, "hops": hops, "answer_at": answer_at, "reaches": None, "count": count,
                 "target_feature": "name"}
        entry["answer"] = gold_answer(view, entry)
        entry["hops_needed"] = hops_needed(view, entry)
        if entry["answer"] not in ("", "0"):
            entries.append(entry)

    diseases = sorted(store["Disease_nodes"], key=lambda d: named[d])
    genes = sorted(store["Gene_nodes"], key=lambda g: named[g])
    for i, disease in enumerate(diseases):
        add("template", {"domain": "biomedical", "template": 26}, f"t26-{i}",
            f"How many diseases have the same symptom with {named[disease]}?", disease, [PRESENTS, PRESENTS], 2,
            True)
    for i, gene in enumerate(genes):
        add("template", {"domain": "biomedical", "template": 25}, f"t25-{i}",
            f"How many genes have the same biological process with {named[gene]}?", gene,
            [PARTICIPATES, PARTICIPATES], 2, True)
    for relation, verb in ANATOMY.items():
        block = 4 + list(ANATOMY).index(relation)
        candidates = [g for g in genes if view.neighbours(g, relation)]
        picked = sorted(candidates, key=lambda g: (len(answer_nodes(view, _path(g, relation))), named[g]))
        for j, gene in enumerate([g for g in picked if answer_nodes(view, _path(g, relation))][:2]):
            add("composed", {"domain": "biomedical", "templates": [block, block]}, f"t{block}x2-{j}",
                f"Which other genes can the anatomy that can {verb} the gene {named[gene]} {verb}?", gene,
                [relation, relation], 2, False)
    three = [d for d in diseases if len(answer_nodes(view, _path(d, PRESENTS, 3)))]
    for j, disease in enumerate(three[:3]):
        add("composed", {"domain": "biomedical", "templates": [26, 1]}, f"t26x1-{j}",
            f"What other symptoms do the diseases that have the same symptom with {named[disease]} present?",
            disease, [PRESENTS, PRESENTS, PRESENTS], 3, False)
    return entries


def _path(start: str, relation: str, hops: int = 2) -> dict[str, Any]:
    return {"start": start, "hops": [relation] * hops, "answer_at": hops}


def derive(questions_dir: Path = QUESTIONS_DIR) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The multi-hop graphs (by domain) and questions."""
    graphs: dict[str, dict[str, Any]] = {}
    manifest: list[dict[str, Any]] = []
    for domain in ACADEMIC:
        graphs[domain], entries = _academic(domain, questions_dir)
        manifest += entries
    manifest += _biomedical(questions_dir)
    return graphs, manifest


def stale(out: Path = OUT, questions_dir: Path = QUESTIONS_DIR) -> list[str]:
    """The files under ``out`` that differ from a fresh derivation (missing ones included)."""
    return fixture.stale(out, questions_dir, derive)


def load_manifest(path: Path = OUT / MANIFEST) -> list[dict[str, Any]]:
    """The multi-hop questions."""
    return fixture.load_manifest(path)


def graph_of(entry: Mapping[str, Any], root: Path = FIXTURE_DIR) -> Path:
    """The folder of the graph an entry's path runs on."""
    return root / entry["graph"]


def main(argv: Sequence[str] | None = None) -> int:
    def per_hops(entries: list[dict[str, Any]]) -> str:
        hops: dict[int, int] = {}
        for entry in entries:
            hops[entry["hops_needed"]] = hops.get(entry["hops_needed"], 0) + 1
        return ", ".join(f"{n} need {h} hop{'s' * (h > 1)}" for h, n in sorted(hops.items())) + " from what they name"

    return fixture.run_cli(argv, prog="python -m kgagents.evals.grbench_multihop", doc=__doc__, out=OUT,
                           derivation=derive,
                           describe=per_hops)


if __name__ == "__main__":
    sys.exit(main())
