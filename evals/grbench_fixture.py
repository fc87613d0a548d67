"""A GRBench-shaped fixture graph derived from GRBench's one-hop questions.

Run ``python -m kgagents.evals.grbench_fixture`` to write it, ``--check`` to verify the committed files.

GRBench (Graph-CoT) ships its questions openly but its graphs (``graph.json`` per domain, several GB) only by
download. For tests and small demos this module derives, from the questions alone, one small graph per domain
in GRBench's exact format::

    {"<type>_nodes": {node_id: {"features": {key: value}, "neighbors": {edge_type: [node_ids]}}}}

Every question of a *one-hop template* (a block of ten qids, ``qid // 10``, whose answer is one fact of the
graph) becomes graph content: the entity the question names becomes a node (its name or title feature), and
the gold answer becomes either the neighbours reached by one edge type (authors, venue, brand, side effects,
…), listed in both directions as GRBench does, or one feature of the node (organization, price, page count,
…). A multi-item answer is split on ``", "`` except inside the names in :data:`KEEP_TOGETHER` (GO terms, MeSH
symptoms and Goodreads genres whose own names hold ``", "``), so that joining the reached nodes' names with
``", "`` in edge order gives the gold answer back exactly. Equal names of one type in one domain are one node
(e.g. the anatomy "brain"), except repeats inside one answer.

Node ids imitate GRBench's id shapes (24-hex DBLP ids, ``pub_N`` venues, ``book-N`` Goodreads books,
``brand_N`` Amazon brands, Hetionet identifiers such as ``DB01234`` or ``GO:0001234``, …) but are derived from
a hash of the domain, type and name: they are not the real ids, and the fixture is not the real GRBench graph
— only the facts the questions state are in it (no abstracts, citations, co-purchases, …).

The output (committed under ``evals/data/grbench/fixture/``):

- ``<domain>/graph.json`` for ``amazon``, ``biomedical``, ``dblp``, ``goodreads`` and ``maple/Physics``
  (the folder layout of GRBench's ``processed_data``);
- ``questions.jsonl``: one line per derived question ``{domain, qid, template, question, answer, entity,
  start, hop}`` where ``start`` is the id of the node the question names and ``hop`` is either
  ``{"relation": edge_type, "target_feature": feature}`` (follow the edges, read that feature of each node
  reached, join with ``", "``) or ``{"feature": key}`` (read the start node's feature; a list is joined with
  ``", "``, a number written as Python writes it). :func:`gold_answer` follows a hop on any
  :class:`~kgagents.tools.pgraph.model.StaticKG`.

The derivation is deterministic (no randomness; ids are hashes, counters for ``pub_N``/``brand_N``).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kgagents.core.errors import KGAgentsError
from kgagents.core.jsonl import json_lines

DATA_DIR = Path(__file__).resolve().parent / "data" / "grbench"
QUESTIONS_DIR = DATA_DIR / "questions"
FIXTURE_DIR = DATA_DIR / "fixture"
MANIFEST = "questions.jsonl"

#: Answer items whose own names hold ``", "`` (an answer is the items' names joined with ``", "``).
KEEP_TOGETHER: dict[str, tuple[str, ...]] = {
    "biomedical": (
        # MeSH symptom headings (inverted names)
        "Purpura, Thrombocytopenic, Idiopathic", "Purpura, Schoenlein-Henoch", "Jaundice, Obstructive",
        "Urinary Incontinence, Stress", "Pain, Intractable", "Abdomen, Acute",
        # Gene Ontology molecular functions
        "hydrolase activity, acting on ester bonds",
        "oxidoreductase activity, acting on the CH-OH group of donors, NAD or NADP as acceptor",
        "oxidoreductase activity, acting on CH-OH group of donors",
        "transcription factor activity, protein binding",
        "transcription factor activity, transcription factor binding",
        "transferase activity, transferring phosphorus-containing groups",
        "phosphotransferase activity, alcohol group as acceptor",
    ),
    # an author written "Last, Initials" (DBLP's multi-hop co-author answers, see evals/grbench_multihop.py)
    "dblp": ("Jorgl, H.P.",),
    # the genre labels of the UCSD Goodreads dataset that GRBench's genres come from
    "goodreads": ("fantasy, paranormal", "history, historical fiction, biography", "comics, graphic",
                  "mystery, thriller, crime"),
}

#: At most this many items per answer where the template said so (Graph-CoT's biomedical one-hop questions).
MAX_ITEMS = {"biomedical": 5}


@dataclass(frozen=True)
class Domain:
    """A GRBench domain: its node types in file order, how ids look, the neighbour lists every node has."""

    name: str
    types: tuple[str, ...]
    ids: Mapping[str, str]
    """Per node type, an id pattern: ``{hexN}`` (``{HEXN}``) N lower (upper) case hex digits, ``{dN}`` N
    decimal digits, ``{iN}`` a number below 10**N without leading zeros, ``{n}`` a counter of the type's
    nodes."""
    neighbour_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Neighbour lists GRBench writes for every node of a type (empty when the fixture knows none)."""
    type_feature: bool = False
    """Whether every node has a ``node_type`` feature (Hetionet, i.e. biomedical)."""


BIOMEDICAL_TYPES = ("Anatomy", "Biological_Process", "Cellular_Component", "Compound", "Disease", "Gene",
                    "Molecular_Function", "Pathway", "Pharmacologic_Class", "Side_Effect", "Symptom")
PAPER_KEYS = ("author", "venue", "reference", "cited_by")
DOMAINS: dict[str, Domain] = {d.name: d for d in (
    Domain("amazon", ("item", "brand"), {"item": "B0{HEX8}", "brand": "brand_{n}"},
           {"item": ("also_viewed_item", "buy_after_viewing_item", "also_bought_item", "bought_together_item",
                     "brand")}),
    Domain("biomedical", BIOMEDICAL_TYPES,
           {"Anatomy": "UBERON:{d7}", "Biological_Process": "GO:{d7}", "Compound": "DB{d5}",
            "Disease": "DOID:{i5}", "Gene": "{i6}", "Molecular_Function": "GO:{d7}", "Side_Effect": "C{d7}",
            "Symptom": "D{d6}"},
           type_feature=True),
    Domain("dblp", ("paper", "author", "venue"),
           {"paper": "{hex24}", "author": "{hex24}", "venue": "pub_{n}"},
           {"paper": PAPER_KEYS}),
    Domain("goodreads", ("book", "author", "publisher", "series"),
           {"book": "book-{d8}", "author": "{i7}", "publisher": "pub_{n}", "series": "{i6}"},
           {"book": ("author", "publisher", "series", "similar_books")}),
    Domain("maple/Physics", ("paper", "author", "venue"),
           {"paper": "{i10}", "author": "{i9}", "venue": "{i7}"},
           {"paper": PAPER_KEYS}),
)}

Value = Literal["text", "list", "one_item_list", "number"]


@dataclass(frozen=True)
class Template:
    """One block of ten GRBench questions (qids ``10*block`` … ``10*block+9``) and the fact each one asks."""

    domain: str
    block: int
    start_type: str
    start_feature: str
    """The feature that names the start node (``title``, ``name``)."""
    patterns: tuple[str, ...]
    """Regular expressions, tried in order, whose group ``e`` is the entity the question names; a question
    with a double-quoted title needs none (the quoted text is taken)."""
    relation: str | None = None
    back: str | None = None
    """The neighbour list of the reached node that points back (GRBench lists both directions)."""
    target_type: str | None = None
    target_feature: str = "name"
    single: bool = False
    """The answer is one node's name (never split)."""
    feature: str | None = None
    value: Value = "text"
    quoted_question_mark: bool = False
    """The template wrote ``"{title}?"``: the ``?`` inside the quotes is not part of the title."""


_BOOK = "the book (?P<e>.+)"
_GENE = (r"\bgene (?P<e>[A-Z0-9][A-Za-z0-9.-]*)", r"\b[Tt]he (?P<e>[A-Z0-9][A-Za-z0-9.-]*) gene\b")  # symbols


def _paper_hop(domain: str, block: int, relation: Literal["author", "venue"]) -> Template:
    """DBLP/MAPLE: from a paper (its double-quoted title) to its authors, or to its one venue."""
    return Template(domain, block, "paper", "title", (), relation=relation, back="paper", target_type=relation,
                    single=relation == "venue", quoted_question_mark=relation == "author")


def _hetionet(block: int, start_type: str, patterns: tuple[str, ...], edge_type: str,
              target_type: str) -> Template:
    """A biomedical one-hop template: Hetionet lists an edge type under the same name at both ends."""
    return Template("biomedical", block, start_type, "name", patterns, relation=edge_type, back=edge_type,
                    target_type=target_type)


TEMPLATES: tuple[Template, ...] = (
    # --- DBLP -----------------------------------------------------------------------------------------------
    _paper_hop("dblp", 0, "author"),
    Template("dblp", 1, "author", "name", (
        r"researcher (?P<e>.+?) (?:affiliated with|belong to|associated with)\?$",
        r"of the researcher (?P<e>.+)\?$",
    ), feature="organization"),
    _paper_hop("dblp", 2, "venue"),
    # --- MAPLE (Physics) ------------------------------------------------------------------------------------
    _paper_hop("maple/Physics", 0, "author"),
    _paper_hop("maple/Physics", 1, "venue"),
    # --- Goodreads ------------------------------------------------------------------------------------------
    Template("goodreads", 0, "book", "title", (
        rf"(?:penned|authors of) {_BOOK}\?$",
    ), relation="author", back="book", target_type="author"),
    Template("goodreads", 1, "book", "title", (
        rf"publisher (?:of|for) {_BOOK}\?$",
        r"^(?:The book )?(?P<e>.+) is published by which company\?$",
    ), relation="publisher", back="book", target_type="publisher", single=True),
    Template("goodreads", 2, "book", "title", (
        rf"put {_BOOK} on\?$",
        rf"put {_BOOK}\? On which shelves\?$",
        rf"(?:place|placing|designated for) {_BOOK}\?$",
    ), feature="popular_shelves", value="list"),
    Template("goodreads", 3, "book", "title", (
        rf"What genre does {_BOOK} belong to\?$",
        rf"genre.* of {_BOOK}\?$",
    ), feature="genres", value="list"),
    Template("goodreads", 4, "book", "title", (
        rf"includes {_BOOK}\?$",
        rf"is {_BOOK} included\?$",
        r"^The book (?P<e>.+) is part of which series\?$",
        rf"series does {_BOOK} belong to\?$",
    ), relation="series", back="book", target_type="series", target_feature="title"),
    Template("goodreads", 5, "book", "title", (
        rf"publication year of {_BOOK}\?$",
        r"the book (?P<e>.+?) (?:put into print|first published|published|make its first publication)\?$",
    ), feature="publication_year"),
    Template("goodreads", 6, "book", "title", (
        r"the book (?P<e>.+?)(?: have)?\?$",
    ), feature="num_pages"),
    Template("goodreads", 7, "book", "title", (
        r"^Does the book (?P<e>.+) come in an eBook format\?$",
        r"^Can the book (?P<e>.+) be accessed as an eBook\?$",
        r"^Is (?:the book )?(?P<e>.+) (?:available as an eBook version|an eBook)\?$",
    ), feature="is_ebook"),
    Template("goodreads", 8, "book", "title", (
        r"language in which the book (?P<e>.+) is written\?$",
        r"^The book (?P<e>.+) is written in what language\?$",
        r"language is the book (?P<e>.+) (?:composed|authored|written in)\?$",
    ), feature="language_code"),
    # --- Amazon ---------------------------------------------------------------------------------------------
    Template("amazon", 0, "item", "title", (
        r"What brand does the item (?P<e>.+) belong to\?$",
        r"brand of (?:the item |item )?(?P<e>.+)\?$",
    ), relation="brand", back="item", target_type="brand", single=True),
    Template("amazon", 1, "item", "title", (
        r"category of item (?P<e>.+)\?$",
        r"classification does the item (?P<e>.+) have\?$",
        r"Under which category is the item (?P<e>.+) classified\?$",
        r"In which category does the item (?P<e>.+) fall\?$",
    ), feature="category", value="one_item_list"),
    Template("amazon", 2, "item", "title", (
        r"How much does the item (?P<e>.+) cost\?$",
        r"cost of (?P<e>.+)\?$",
        r"price of (?:item )?(?P<e>.+)\?$",
    ), feature="price", value="number"),
    # --- Biomedical (Hetionet) ------------------------------------------------------------------------------
    _hetionet(0, "Compound", (r"side effects of (?:using compound |the compound |compound )?(?P<e>.+)\?$",),
              "Compound-causes-Side Effect", "Side_Effect"),
    _hetionet(1, "Disease", (r"symptoms of (?:the disease )?(?P<e>.+?)(?: are)?[?.]$",
                             r"if I have (?P<e>.+)\?$"), "Disease-presents-Symptom", "Symptom"),
    _hetionet(2, "Gene", _GENE, "Gene-participates-Biological Process", "Biological_Process"),
    _hetionet(3, "Gene", _GENE, "Gene-participates-Molecular Function", "Molecular_Function"),
    _hetionet(4, "Gene", _GENE, "Anatomy-downregulates-Gene", "Anatomy"),
    _hetionet(5, "Gene", _GENE, "Anatomy-expresses-Gene", "Anatomy"),
    _hetionet(6, "Gene", _GENE, "Anatomy-upregulates-Gene", "Anatomy"),
)


class FixtureError(KGAgentsError, ValueError):
    """A question cannot be turned into graph content; the message names it."""


# ----------------------------------------------------------------------------------------------------------
# Reading the questions
# ----------------------------------------------------------------------------------------------------------
def questions_file(domain: str, directory: Path = QUESTIONS_DIR) -> Path:
    """GRBench's questions of a domain (``maple/Physics`` → ``maple_Physics.jsonl``)."""
    return directory / f"{domain.replace('/', '_')}.jsonl"


def load_questions(domain: str, directory: Path = QUESTIONS_DIR) -> list[dict[str, Any]]:
    """The ``{"qid", "question", "answer"}`` records of a domain, in file order."""
    path = questions_file(domain, directory)
    return [record for _, record in json_lines(path.read_text(encoding="utf-8").splitlines(), str(path),
                                               FixtureError)]


def entity_of(template: Template, question: str) -> str:
    """The entity a question names: its double-quoted title, else group ``e`` of the first pattern that
    matches."""
    quoted = re.search(r'"(.+)"', question)
    if quoted and not template.patterns:
        text = quoted.group(1)
        return text[:-1] if template.quoted_question_mark and text.endswith("?") else text
    for pattern in template.patterns:
        match = re.search(pattern, question.strip())
        if match:
            return match.group("e")
    raise FixtureError(f"{template.domain} template {template.block}: cannot find the entity in {question!r}")


def split_answer(domain: str, answer: str) -> list[str]:
    """The items of an answer: split on ``", "``, keeping the names of :data:`KEEP_TOGETHER` whole."""
    parts = answer.split(", ")
    known = sorted((name.split(", ") for name in KEEP_TOGETHER.get(domain, ())), key=len, reverse=True)
    items: list[str] = []
    i = 0
    while i < len(parts):
        whole = next((name for name in known if len(name) > 1 and parts[i:i + len(name)] == name), None)
        items.append(", ".join(whole) if whole else parts[i])
        i += len(whole) if whole else 1
    limit = MAX_ITEMS.get(domain)
    if limit is not None and len(items) > limit:
        raise FixtureError(f"{domain}: {answer!r} splits into {len(items)} items, more than the template's "
                           f"{limit}: a name holding ', ' is missing from KEEP_TOGETHER")
    return items


def feature_value(template: Template, answer: str) -> Any:
    """The feature value a GRBench graph holds for an answer (the inverse of :func:`answer_text`)."""
    if template.value == "list":
        return split_answer(template.domain, answer)
    if template.value == "one_item_list":
        return [answer]
    if template.value == "number":
        number = float(answer)
        if answer_text(number) != answer:
            raise FixtureError(f"{template.domain}: the number {answer!r} would not be written back the same")
        return number
    return answer


def answer_text(value: Any) -> str:
    """An answer written from a feature value the way GRBench's templates wrote it."""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return value if isinstance(value, str) else str(value)


# ----------------------------------------------------------------------------------------------------------
# Building the graphs
# ----------------------------------------------------------------------------------------------------------
def _id_part(match: re.Match[str], digest: str, counter: int) -> str:
    """One placeholder of an id pattern (see :attr:`Domain.ids`) filled from a hex digest or a counter."""
    kind, size = match.group(1), int(match.group(2) or 0)
    if kind == "n":
        return str(counter)
    if kind in ("hex", "HEX"):
        return digest[:size] if kind == "hex" else digest[:size].upper()
    number = int(digest, 16)
    if kind == "i":
        return str(10 ** (size - 1) + number % (9 * 10 ** (size - 1)))
    return str(number % 10 ** size).zfill(size)


class _Graph:
    """One domain's fixture graph being built: nodes by type in creation order, ids unique across types."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self.nodes: dict[str, dict[str, dict[str, Any]]] = {t: {} for t in domain.types}
        self.by_name: dict[tuple[str, str, int], str] = {}
        self.counters: dict[str, int] = {}
        self.used: set[str] = set()

    def _new_id(self, node_type: str, name: str, occurrence: int) -> str:
        pattern = self.domain.ids[node_type]
        counter = self.counters.get(node_type, 0)
        for salt in range(100):
            key = f"{self.domain.name}|{node_type}|{name}|{occurrence}|{salt}".encode()
            digest = hashlib.sha256(key).hexdigest()
            node_id = re.sub(r"\{(hex|HEX|d|i|n)(\d*)\}", functools.partial(_id_part, digest=digest, counter=counter),
                             pattern)
            if node_id not in self.used:
                self.used.add(node_id)
                self.counters[node_type] = counter + 1
                return node_id
        raise FixtureError(f"no free id for {node_type} {name!r}")  # pragma: no cover - 100 hash collisions

    def node(self, node_type: str, name_feature: str, name: str, occurrence: int = 0) -> str:
        """The id of the node of this type and name (created with its name feature when new)."""
        key = (node_type, name, occurrence)
        if key not in self.by_name:
            node_id = self._new_id(node_type, name, occurrence)
            features: dict[str, Any] = {name_feature: name}
            if self.domain.type_feature:
                features["node_type"] = node_type
            neighbours: dict[str, list[str]] = {k: [] for k in self.domain.neighbour_keys.get(node_type, ())}
            self.nodes[node_type][node_id] = {"features": features, "neighbors": neighbours}
            self.by_name[key] = node_id
        return self.by_name[key]

    def record(self, node_type: str, node_id: str) -> dict[str, Any]:
        return self.nodes[node_type][node_id]

    def as_json(self) -> dict[str, Any]:
        return {f"{t}_nodes": nodes for t, nodes in self.nodes.items()}


def _apply(graph: _Graph, template: Template, record: Mapping[str, Any]) -> dict[str, Any]:
    """Add one question's fact to the graph; returns its manifest entry."""
    question, answer = str(record["question"]), str(record["answer"])
    entity = entity_of(template, question)
    start = graph.node(template.start_type, template.start_feature, entity)
    node = graph.record(template.start_type, start)
    where = f"{template.domain} qid {record['qid']}"
    if template.feature:
        value = feature_value(template, answer)
        if node["features"].get(template.feature, value) != value:
            raise FixtureError(f"{where}: {entity!r} already has another {template.feature}")
        node["features"][template.feature] = value
        hop: dict[str, str] = {"feature": template.feature}
    else:
        assert template.relation and template.back and template.target_type
        if node["neighbors"].get(template.relation):
            raise FixtureError(f"{where}: {entity!r} already has {template.relation} neighbours")
        names = [answer] if template.single else split_answer(template.domain, answer)
        seen: dict[str, int] = {}
        targets = []
        for name in names:
            occurrence = seen.get(name, 0)
            seen[name] = occurrence + 1
            targets.append(graph.node(template.target_type, template.target_feature, name, occurrence))
        node["neighbors"].setdefault(template.relation, []).extend(targets)
        for target in targets:
            back = graph.record(template.target_type, target)["neighbors"]
            back.setdefault(template.back, []).append(start)
        hop = {"relation": template.relation, "target_feature": template.target_feature}
    return {"domain": template.domain, "qid": record["qid"], "template": template.block, "question": question,
            "answer": answer, "entity": entity, "start": start, "hop": hop}


def build_domain(name: str, questions_dir: Path = QUESTIONS_DIR) -> tuple[_Graph, list[dict[str, Any]]]:
    """One domain's fixture graph (still open for more facts, see :mod:`kgagents.evals.grbench_multihop`) and its
    manifest entries."""
    templates = {t.block: t for t in TEMPLATES if t.domain == name}
    graph = _Graph(DOMAINS[name])
    manifest = []
    for record in load_questions(name, questions_dir):
        template = templates.get(int(record["qid"]) // 10)
        if template is not None:
            manifest.append(_apply(graph, template, record))
    return graph, manifest


def derive(questions_dir: Path = QUESTIONS_DIR) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The fixture graphs (by domain) and the manifest entries, from GRBench's question files."""
    graphs: dict[str, dict[str, Any]] = {}
    manifest: list[dict[str, Any]] = []
    for name in DOMAINS:
        graph, entries = build_domain(name, questions_dir)
        graphs[name] = graph.as_json()
        manifest += entries
    return graphs, manifest


def render(graphs: Mapping[str, Any], manifest: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The files to write (path relative to the fixture folder → text); graphs as GRBench wrote them
    (indent 4, ASCII escapes)."""
    files = {f"{name}/graph.json": json.dumps(graph, indent=4) + "\n" for name, graph in graphs.items()}
    files[MANIFEST] = "".join(json.dumps(entry, ensure_ascii=False) + "\n" for entry in manifest)
    return files


Derivation = Callable[[Path], tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]]


def write(out: Path = FIXTURE_DIR, questions_dir: Path = QUESTIONS_DIR, derivation: Derivation | None = None
          ) -> dict[str, str]:
    """Derive and write the fixture (or another ``derivation``'s graphs and manifest) into ``out``; returns what
    was written."""
    files = render(*(derivation or derive)(questions_dir))
    for relative, text in files.items():
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return files


def stale(out: Path = FIXTURE_DIR, questions_dir: Path = QUESTIONS_DIR, derivation: Derivation | None = None
          ) -> list[str]:
    """The fixture files under ``out`` that differ from a fresh derivation (missing ones included)."""
    files = render(*(derivation or derive)(questions_dir))
    return [r for r, text in files.items()
            if not (out / r).is_file() or (out / r).read_text(encoding="utf-8") != text]


# ----------------------------------------------------------------------------------------------------------
# Using the fixture
# ----------------------------------------------------------------------------------------------------------
def load_manifest(path: Path = FIXTURE_DIR / MANIFEST) -> list[dict[str, Any]]:
    """The derived questions with their start node and gold hop."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def graph_path(domain: str, root: Path = FIXTURE_DIR) -> Path:
    """The folder of a domain's ``graph.json`` under ``root`` (the fixture, or a GRBench download)."""
    return root / domain


def gold_answer(graph: Any, entry: Mapping[str, Any]) -> str:
    """Follow an entry's gold hop on a :class:`~kgagents.tools.pgraph.model.StaticKG` and write the answer as GRBench's
    templates did."""
    hop = entry["hop"]
    if "feature" in hop:
        return answer_text(graph.feature(entry["start"], hop["feature"]))
    ends: Iterable[str] = graph.neighbours(entry["start"], hop["relation"], "out")
    return ", ".join(str(graph.feature(end, hop["target_feature"])) for end in ends)


def run_cli(argv: Sequence[str] | None, *, prog: str, doc: str | None, out: Path, derivation: Derivation,
            describe: Callable[[list[dict[str, Any]]], str]) -> int:
    """The command line of a fixture derivation: write it (``--out``), or ``--check`` the committed files."""
    parser = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n")[0])
    parser.add_argument("--questions", type=Path, default=QUESTIONS_DIR,
                        help="GRBench question files (*.jsonl)")
    parser.add_argument("--out", type=Path, default=out, help="where the fixture goes")
    parser.add_argument("--check", action="store_true", help="only report whether the files are up to date")
    args = parser.parse_args(argv)
    if args.check:
        outdated = stale(args.out, args.questions, derivation)
        for relative in outdated:
            print(f"out of date: {args.out / relative}")
        return 1 if outdated else 0
    files = write(args.out, args.questions, derivation)
    entries = load_manifest(args.out / MANIFEST)
    size = sum(len(text.encode("utf-8")) for text in files.values())
    print(f"wrote {len(files)} files ({size:,} bytes) to {args.out}: {len(entries)} questions ({describe(entries)})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    def per_domain(entries: list[dict[str, Any]]) -> str:
        counts: dict[str, int] = {}
        for entry in entries:
            counts[entry["domain"]] = counts.get(entry["domain"], 0) + 1
        return ", ".join(f"{d} {n}" for d, n in counts.items())

    return run_cli(argv, prog="python -m kgagents.evals.grbench_fixture", doc=__doc__, out=FIXTURE_DIR,
                   derivation=derive,
                   describe=per_domain)


if __name__ == "__main__":
    sys.exit(main())
