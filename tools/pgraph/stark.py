"""STaRK's three semi-structured knowledge bases (Amazon, MAG, PrimeKG) read from their released processed
folders.

STaRK (snap-stanford/stark, its Hugging Face dataset ``snap-stanford/stark``) ships each SKB as a
``processed`` folder of pickles and tensors: ``node_info.pkl`` (node index → record), ``edge_index.pt`` (2 ×
E), ``edge_types.pt``, ``node_types.pt`` and, for some of them, ``node_type_dict.pkl`` /
``edge_type_dict.pkl``. What the folders hold differs by dataset, and what they leave out lives in STaRK's
loader classes:

=========  ==========================================================================================================
dataset    processed folder
=========  ==========================================================================================================
mag        ``skb/mag/processed``: no type dictionaries in the folder. STaRK's MAG loader names the node types
           ``0 author, 1 institution, 2 field_of_study, 3 paper`` and the relations ``0 author___affiliated_with___
           institution, 1 paper___cites___paper, 2 paper___has_topic___field_of_study, 3 author___writes___paper``
           (:data:`MAG_NODE_TYPES`, :data:`MAG_RELATIONS`); names are ``DisplayName`` (authors, institutions,
           fields of study) and ``title`` (papers); candidates are the papers
amazon     ``skb/amazon/processed/cache/brand-category-color``: the full graph, with both dictionaries (product,
           brand, category, color; also_buy, also_view, has_brand, has_category, has_color). The folder above it
           holds the products alone (no node types: every node is a product). Names are ``title`` (products) and
           ``brand_name`` / ``category_name`` / ``color_name``; candidates are the products
prime      ``skb/prime/processed``: both dictionaries; names are ``name``; every node is a candidate
=========  ==========================================================================================================

Each node's document is the text STaRK embeds for retrieval: its ``get_doc_info(add_rel=True, compact=True)``,
the folder ``doc`` of STaRK's released embeddings (``emb_generate.py`` names the other variants ``doc_no_rel``
and ``doc_no_compact``): the node's fields, then its relations (neighbours over the graph made undirected, by
relation in the dictionary's order, each relation's neighbours by index), then newlines folded into ". ".
:func:`document` writes it for one node, following STaRK's ``get_doc_info`` / ``get_rel_info`` of each
dataset.

Pickles can run code when read, so the ``.pkl`` files are read by :func:`kgagents.core.plain_pickle.load_plain`,
which admits only the plain data STaRK writes (dictionaries of strings, numbers and lists, NumPy scalars and
arrays) and refuses anything else by name; the ``.pt`` tensors with torch's ``weights_only`` loader, which admits
tensors and plain containers only.
"""

from __future__ import annotations

import math
import pickle
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgagents.core.plain_pickle import UnsafePickle, load_plain
from kgagents.tools.pgraph.model import GraphFormatError
from kgagents.tools.pgraph.vectors import model_id_of

MAG_NODE_TYPES = {0: "author", 1: "institution", 2: "field_of_study", 3: "paper"}
MAG_RELATIONS = {0: "author___affiliated_with___institution", 1: "paper___cites___paper",
                 2: "paper___has_topic___field_of_study", 3: "author___writes___paper"}
PRIME_NODE_TYPES = ("disease", "gene/protein", "molecular_function", "drug", "pathway", "anatomy",
                    "effect/phenotype", "biological_process", "cellular_component", "exposure")
AMAZON_LINK_TYPES = ("brand", "category", "color")
#: The folder of the Amazon graph with its brand, category and color nodes, under ``processed/``.
AMAZON_CACHE = Path("cache") / "-".join(AMAZON_LINK_TYPES)
#: The node types STaRK ranks (its ``candidate_types``); ``None``: every node.
CANDIDATE_TYPES: dict[str, list[str] | None] = {"mag": ["paper"], "amazon": ["product"], "prime": None}
DATASETS = tuple(CANDIDATE_TYPES)
#: How many reviews and Q&A entries an Amazon document lists (STaRK's ``max_entries``).
AMAZON_MAX_ENTRIES = 25
#: Gene/protein fields PrimeKG's documents explain in parentheses.
GENE_FIELDS = {"name": "gene name", "type_of_gene": "gene types", "alias": "other gene names",
               "other_names": "extended other gene names", "genomic_pos": "genomic position",
               "generif": "PubMed text", "interpro": "protein family and classification information",
               "summary": "protein summary text"}
#: What the graph's manifest records of how the documents were written.
DOCUMENT_VARIANT = "STaRK get_doc_info(add_rel=True, compact=True): the text of its released doc embeddings"


# ----------------------------------------------------------------------------------------------------------
# Finding and reading a processed folder
# ----------------------------------------------------------------------------------------------------------
def find_processed(path: Path) -> Path | None:
    """The folder that holds a STaRK SKB's ``node_info.pkl``: ``path`` itself, its ``processed/``, and for
    Amazon the ``cache/brand-category-color`` folder with the brand, category and color nodes (preferred: the
    graph STaRK's loader builds); ``None`` when there is none."""
    for base in (path, path / "processed"):
        if (base / AMAZON_CACHE / "node_info.pkl").is_file():
            return base / AMAZON_CACHE
        if (base / "node_info.pkl").is_file():
            return base
    return None


#: STaRK's SKB of a dataset as its Hugging Face dataset holds it: ``skb/<name>/processed.zip``.
PROCESSED_ZIP = "processed.zip"


def zipped_processed(path: Path) -> Path | None:
    """STaRK's zipped SKB (``processed.zip``, as downloaded) in ``path`` when there is no processed folder;
    ``None`` otherwise."""
    zipped = path / PROCESSED_ZIP
    return zipped if find_processed(path) is None and zipped.is_file() else None


def still_zipped(zipped: Path) -> GraphFormatError:
    """The error for an SKB that is still in its ``processed.zip``: it says how to unzip it where it is (what
    STaRK's ``load_skb`` does), so that its ``processed/`` folder is read."""
    return GraphFormatError(f"{zipped} is STaRK's knowledge base as downloaded, still zipped, and kgagents reads "
                            f"the processed folder it holds: unzip it where it is first (`cd {zipped.parent} && "
                            f"unzip {PROCESSED_ZIP}`, which writes {zipped.parent / 'processed'}/, as STaRK's "
                            "load_skb does), then give the same path again")


def starks_relations(heads: np.ndarray, tails: np.ndarray, types: np.ndarray,
                     count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges as STaRK's SKB keeps them. STaRK makes a graph that is not undirected undirected with one
    edge per pair of nodes whose relation is the mean of the relations of the pair's edges, rounded down
    (``to_undirected(..., reduce="mean")`` then ``.long()``): Amazon's pair that is both "also bought" (0) and
    "also viewed" (1) is "also bought" only. A graph whose edges already run both ways (as a multiset, as
    STaRK checks) is kept as it is. The edges returned are the folder's, in its order and directions, less those
    whose relation the pair does not keep (a pair none of whose edges has the kept relation keeps its first
    edge, with that relation)."""
    if not len(heads):
        return heads, tails, types
    if np.array_equal(np.sort(heads * count + tails), np.sort(tails * count + heads)):
        # STaRK's is_undirected (torch_geometric's): the edge list equals its flip as a multiset, duplicates
        # counted (a pair listed twice one way and once the other is not undirected): nothing is merged
        return heads, tails, types
    pair = np.minimum(heads, tails) * count + np.maximum(heads, tails)
    _, first, inverse = np.unique(pair, return_index=True, return_inverse=True)
    sums = np.bincount(inverse, weights=types).astype(np.int64)
    kept = sums // np.bincount(inverse)  # relations are whole numbers from 0: the mean rounded down
    keep = types == kept[inverse]
    has = np.zeros(len(kept), dtype=bool)
    has[inverse[keep]] = True
    types = types.copy()
    types[first[~has]] = kept[~has]
    keep[first[~has]] = True
    return heads[keep], tails[keep], types[keep]


@dataclass
class ProcessedSKB:
    """The arrays and dictionaries of one processed folder, with the dataset it was recognised as."""

    folder: Path
    dataset: str
    """``mag``, ``amazon``, ``prime``, or ``""`` for a folder of this layout that is none of them."""
    node_info: dict[int, dict[str, Any]]
    node_types: np.ndarray
    node_type_dict: dict[int, str]
    heads: np.ndarray
    tails: np.ndarray
    edge_types: np.ndarray
    edge_type_dict: dict[int, str]
    _neighbours: Neighbours | None = field(default=None, repr=False)

    @property
    def count(self) -> int:
        return len(self.node_info)

    def type_of(self, index: int) -> str:
        return self.node_type_dict.get(int(self.node_types[index]), str(int(self.node_types[index])))

    @property
    def neighbours(self) -> Neighbours:
        if self._neighbours is None:
            self._neighbours = Neighbours(self.heads, self.tails, self.edge_types, self.count)
        return self._neighbours

    @property
    def candidate_types(self) -> list[str] | None:
        return CANDIDATE_TYPES.get(self.dataset)


def _pickle(path: Path) -> Any:
    """The plain data of one of STaRK's ``.pkl`` files; a pickle that asks for anything else is refused unread."""
    try:
        return load_plain(path)
    except UnsafePickle as exc:
        raise GraphFormatError(f"cannot read {exc}") from exc
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError) as exc:
        raise GraphFormatError(f"cannot read {path}: {exc}") from exc


_REFUSED_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


def _torch_error(path: Path, exc: Exception) -> GraphFormatError:
    """A clear error for a file torch's weights-only loader could not read: the global a crafted file asked for,
    else torch's message."""
    refused = _REFUSED_GLOBAL.search(str(exc)) if isinstance(exc, pickle.UnpicklingError) else None
    if refused:
        return GraphFormatError(f"cannot read {path}: it asks to load {refused.group(1)}, which is not a tensor or "
                                "plain data: refused, since loading it could run code")
    return GraphFormatError(f"cannot read {path}: {exc}")


def _tensor(path: Path) -> np.ndarray:
    try:
        import torch  # torch: seconds to import, only where tensors are read
    except ImportError as exc:  # pragma: no cover - torch comes with sentence-transformers
        raise GraphFormatError("STaRK's processed files need torch") from exc
    try:
        return np.asarray(torch.load(path, weights_only=True).numpy())
    except Exception as exc:  # any torch error: the file is not a tensor
        raise _torch_error(path, exc) from exc


def read_processed(path: Path, dataset: str | None = None) -> ProcessedSKB:
    """A STaRK processed folder (see :func:`find_processed`), its dataset recognised from its records unless
    ``dataset`` says it; a folder that lacks a file it needs is a clear error naming the file."""
    folder = find_processed(path)
    zipped = zipped_processed(path)
    if zipped is not None:
        raise still_zipped(zipped)
    if folder is None:
        raise GraphFormatError(f"{path}: no node_info.pkl (STaRK's processed folder: skb/<name>/processed)")
    node_info = _pickle(folder / "node_info.pkl")
    if not isinstance(node_info, Mapping) or not node_info:
        raise GraphFormatError(f"{folder / 'node_info.pkl'}: expected a dict from node index to its record")
    node_info = {int(k): (dict(v) if isinstance(v, Mapping) else {}) for k, v in node_info.items()}
    if sorted(node_info) != list(range(len(node_info))):
        raise GraphFormatError(f"{folder / 'node_info.pkl'}: node indices must run from 0 to {len(node_info) - 1}")
    if not (folder / "edge_index.pt").is_file():
        raise GraphFormatError(f"cannot read {folder / 'edge_index.pt'}: no such file")
    edge_index = _tensor(folder / "edge_index.pt")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise GraphFormatError(f"{folder / 'edge_index.pt'}: expected a 2 × E tensor, got shape {edge_index.shape}")
    edges = edge_index.shape[1]
    edge_types = _tensor(folder / "edge_types.pt").astype(np.int64) if (folder / "edge_types.pt").is_file() \
        else np.zeros(edges, dtype=np.int64)
    if len(edge_types) != edges:
        raise GraphFormatError(f"{folder / 'edge_types.pt'}: {len(edge_types)} types for {edges} edges")
    node_types = _tensor(folder / "node_types.pt").astype(np.int64) if (folder / "node_types.pt").is_file() \
        else None
    node_type_dict = _pickle(folder / "node_type_dict.pkl") if (folder / "node_type_dict.pkl").is_file() else None
    edge_type_dict = _pickle(folder / "edge_type_dict.pkl") if (folder / "edge_type_dict.pkl").is_file() else None
    dataset = dataset or detect_dataset(node_info, node_type_dict, edge_type_dict)
    if dataset not in ("", *DATASETS):
        raise GraphFormatError(f"unknown STaRK dataset {dataset!r}; known: {', '.join(DATASETS)}")
    if node_types is None:  # Amazon's products-only folder: every node is a product
        node_types = np.zeros(len(node_info), dtype=np.int64)
        node_type_dict = node_type_dict or ({0: "product"} if dataset == "amazon" else {})
    if len(node_types) != len(node_info):
        raise GraphFormatError(f"{folder / 'node_types.pt'}: {len(node_types)} types for {len(node_info)} nodes")
    if node_type_dict is None:
        node_type_dict = dict(MAG_NODE_TYPES) if dataset == "mag" else {}
    if edge_type_dict is None:
        edge_type_dict = dict(MAG_RELATIONS) if dataset == "mag" else {}
    heads, tails = edge_index[0].astype(np.int64), edge_index[1].astype(np.int64)
    if edges and (min(heads.min(), tails.min()) < 0 or max(heads.max(), tails.max()) >= len(node_info)):
        raise GraphFormatError(f"{folder / 'edge_index.pt'}: an edge names a node outside 0..{len(node_info) - 1}")
    heads, tails, edge_types = starks_relations(heads, tails, edge_types, len(node_info))
    if dataset == "prime":
        node_info = {k: clean_record(v) for k, v in node_info.items()}
    return ProcessedSKB(folder=folder, dataset=dataset, node_info=node_info, node_types=node_types,
                        node_type_dict={int(k): str(v) for k, v in node_type_dict.items()}, heads=heads, tails=tails,
                        edge_types=edge_types, edge_type_dict={int(k): str(v) for k, v in edge_type_dict.items()})


def detect_dataset(node_info: Mapping[int, Mapping[str, Any]], node_type_dict: Mapping[int, str] | None,
                   edge_type_dict: Mapping[int, str] | None) -> str:
    """Which STaRK SKB the records are: MAG's records carry ``mag_id`` and a ``type`` among its four, Amazon's
    products an ``asin`` (its link nodes only ``<type>_name``), PrimeKG's a ``source`` and a type among its
    ten; ``""`` for none of them."""
    sample = [node_info[i] for i in list(node_info)[:1000]]
    types = {str(r.get("type")) for r in sample if r.get("type") is not None}
    relations = set((edge_type_dict or {}).values())
    if "paper___cites___paper" in relations or (
            types and types <= set(MAG_NODE_TYPES.values()) and any("mag_id" in r for r in sample)):
        return "mag"
    if "also_buy" in relations or any("asin" in r for r in sample):
        return "amazon"
    if types and types <= set(PRIME_NODE_TYPES) and any("source" in r for r in sample):
        return "prime"
    if node_type_dict and set(node_type_dict.values()) <= set(PRIME_NODE_TYPES):
        return "prime"
    return ""


def clean_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record without the values STaRK's ``clean_dict`` drops (those whose text is ``''`` or ``'nan'``), at
    every depth (PrimeKG's loader cleans its records so)."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, Mapping):
            out[key] = clean_record(value)
        elif str(value) not in ("", "nan"):
            out[key] = value
    return out


class Neighbours:
    """Each node's neighbours per relation over the graph made undirected (STaRK's SKB adds every edge's
    reverse, of the same relation, and looks neighbours up in a sparse matrix: sorted, each once)."""

    def __init__(self, heads: np.ndarray, tails: np.ndarray, relations: np.ndarray, count: int) -> None:
        src = np.concatenate([heads, tails])
        dst = np.concatenate([tails, heads])
        rel = np.concatenate([relations, relations])
        key = np.unique((rel.astype(np.int64) * count + src) * count + dst) if len(src) else np.zeros(0, np.int64)
        self.count = count
        self.run_key, self.dst = np.divmod(key, count)  # run key: relation * count + node

    def of(self, node: int, relation: int) -> list[int]:
        """The neighbours of ``node`` along ``relation`` (a relation id), by index."""
        run = relation * self.count + node
        start, end = np.searchsorted(self.run_key, [run, run + 1])
        return [int(x) for x in self.dst[start:end]]


# ----------------------------------------------------------------------------------------------------------
# Names and documents
# ----------------------------------------------------------------------------------------------------------
def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def display_name(skb: ProcessedSKB, index: int) -> str:
    """A node's name as its dataset keeps it (see the module docstring); its index when it has none."""
    info = skb.node_info[index]
    node_type = skb.type_of(index)
    keys: Sequence[str]
    if skb.dataset == "mag":
        keys = ("title",) if node_type == "paper" else ("DisplayName",)
    elif skb.dataset == "amazon":
        keys = ("title",) if node_type == "product" else (f"{node_type}_name",)
    else:
        keys = ("name", "title")
    for key in keys:
        value = info.get(key)
        if _present(value) and str(value).strip() and str(value) != "-1":
            return str(value).strip()
    return str(index)


def compact_text(text: str) -> str:
    """STaRK's compaction of a document: newlines become ". ", ``"- "`` goes, runs of spaces become one."""
    text = text.replace("\n", ". ").replace("\r", "")
    text = text.replace("- ", "")
    text = text.replace(": .", ":").replace(":.", ":")
    text = re.sub(r"\s{2,}", " ", text)
    return text.replace(".. ", ". ")


def document(skb: ProcessedSKB, index: int, *, add_rel: bool = True, compact: bool = True) -> str:
    """The node's document as STaRK's ``get_doc_info(index, add_rel, compact)`` of its dataset writes it."""
    writer = _WRITERS.get(skb.dataset)
    if writer is None:
        return _generic_document(skb, index)
    return writer(skb, index, add_rel, compact)


def _generic_document(skb: ProcessedSKB, index: int) -> str:
    info = skb.node_info[index]
    lines = [f"- {k}: {v}" for k, v in info.items() if _present(v) and v not in ("", [], {})]
    return "\n".join(lines)


def _attr(info: Mapping[str, Any], key: str) -> Any:
    """A record's field as STaRK's node objects give it (missing: ``-1``, MAG's mark of an unknown value)."""
    value = info.get(key, -1)
    return -1 if not _present(value) else value


def _mag_document(skb: ProcessedSKB, index: int, add_rel: bool, compact: bool) -> str:
    info = skb.node_info[index]
    node_type = skb.type_of(index)
    if node_type == "paper":
        abstract = str(_attr(info, "abstract")).replace("\r", "").rstrip("\n")
        doc = f" - paper title: {_attr(info, 'title')}\n - abstract: {abstract}\n"
        if str(_attr(info, "Date")) != "-1":
            doc += f" - publication date: {_attr(info, 'Date')}\n"
        for key, label in (("OriginalVenue", "venue"), ("JournalDisplayName", "journal"),
                           ("ConferenceSeriesDisplayName", "conference"),
                           ("ConferenceInstancesDisplayName", "conference")):
            if str(_attr(info, key)) != "-1":
                doc += f" - {label}: {_attr(info, key)}\n"
                break
        if add_rel:
            doc += _mag_relations(skb, index)
    else:
        label, prefix = {"author": ("author", "- author name: "), "field_of_study": ("field", " - field of study: "),
                         "institution": ("institution", " - institution: ")}.get(node_type, (node_type, " - name: "))
        doc = f"{prefix}{_attr(info, 'DisplayName')}\n"
        if _attr(info, "PaperCount") != -1:
            doc += f"- {label} paper count: {_attr(info, 'PaperCount')}\n"
        if _attr(info, "CitationCount") != -1:
            doc += f"- {label} citation count: {_attr(info, 'CitationCount')}\n"
        doc = doc.replace("-1", "Unknown")
    return compact_text(doc) if compact else doc


def _mag_relations(skb: ProcessedSKB, index: int) -> str:
    affiliated = next((k for k, v in skb.edge_type_dict.items() if v == "author___affiliated_with___institution"), None)
    doc = ""
    for relation, name in skb.edge_type_dict.items():
        ends = skb.neighbours.of(index, relation)
        if not ends:
            continue
        doc += f"\n{name.replace('___', ' ')}: "
        shown = []
        for other in ends:
            other_type, info = skb.type_of(other), skb.node_info[other]
            if other_type == "paper":
                shown.append(f'"{_attr(info, "title")}"')
            elif str(_attr(info, "DisplayName")) == "-1":
                continue
            elif other_type == "author":
                places = [] if affiliated is None else skb.neighbours.of(other, affiliated)
                names = [str(_attr(skb.node_info[p], "DisplayName")) for p in places
                         if str(_attr(skb.node_info[p], "DisplayName")) != "-1"]
                shown.append(f"{_attr(info, 'DisplayName')} ({', '.join(names)})" if names
                             else f"{_attr(info, 'DisplayName')}")
            else:
                shown.append(f"{_attr(info, 'DisplayName')}")
        doc += "(" + ", ".join(shown) + "),"
    return "- relations:\n" + doc if doc else ""


def _vote(review: Mapping[str, Any]) -> int:
    vote = review.get("vote")
    if not _present(vote):
        return 0
    return int(str(vote).replace(",", ""))


def _amazon_document(skb: ProcessedSKB, index: int, add_rel: bool, compact: bool) -> str:
    info = skb.node_info[index]
    node_type = skb.type_of(index)
    if node_type in AMAZON_LINK_TYPES:
        return f"{node_type} name: {info.get(f'{node_type}_name')}"
    doc = f"- product: {info.get('title')}\n"
    if "brand" in info:
        doc += f"- brand: {info['brand']}\n"
    details = info.get("details")
    dimensions = details.get("product_dimensions") if isinstance(details, Mapping) else None
    if isinstance(dimensions, str) and len(dimensions.split(" ; ")) == 2:
        size, weight = dimensions.split(" ; ")
        doc += f"- dimensions: {size}\n- weight: {weight}\n"
    description = info.get("description")
    if _present(description) and description:
        text = " ".join(description).strip(" ")
        if text:
            doc += f"- description: {text}\n"
    features = info.get("feature")
    feature_text = ""
    if _present(features) and features:
        feature_text = "- features: \n" + "".join(f"#{n + 1}: {f}\n" for n, f in enumerate(features)
                                                  if f and "asin" not in f.lower())
    reviews = info.get("review")
    review_text = ""
    if _present(reviews) and reviews:
        review_text = "- reviews: \n"
        ranks = np.argsort(-np.array([_vote(r) for r in reviews]))  # STaRK's order: most votes first
        for shown, which in enumerate(ranks):
            review = reviews[int(which)]
            review_text += f'#{int(which) + 1}:\nsummary: {review.get("summary")}\ntext: "{review.get("reviewText")}"\n'
            if shown > AMAZON_MAX_ENTRIES:
                break
    questions = info.get("qa")
    qa_text = ""
    if _present(questions) and questions:
        qa_text = "- Q&A: \n"
        for n, qa in enumerate(questions):
            qa_text += f'#{n + 1}:\nquestion: "{qa.get("question")}"\nanswer: "{qa.get("answer")}"\n'
            if n > AMAZON_MAX_ENTRIES:
                break
    doc += feature_text + review_text + qa_text
    if add_rel:
        doc += _amazon_relations(skb, index)
    return compact_text(doc) if compact else doc


def _amazon_relations(skb: ProcessedSKB, index: int) -> str:
    ids = {v: k for k, v in skb.edge_type_dict.items()}

    def ends(name: str) -> list[int]:
        return skb.neighbours.of(index, ids[name]) if name in ids else []

    def titles(nodes: list[int]) -> str:
        return "".join(f"#{n + 1}: {skb.node_info[i].get('title')}\n" for n, i in enumerate(nodes))

    doc = ""
    bought, viewed, brands = ends("also_buy"), ends("also_view"), ends("has_brand")
    if bought:
        doc += f"  products also purchased: \n{titles(bought)}"
    if viewed:
        doc += f"  products also viewed: \n{titles(viewed)}"
    if brands:
        doc += f"  brand: {skb.node_info[brands[0]].get('brand_name')}\n"
    return "- relations:\n" + doc if doc else ""


def _prime_document(skb: ProcessedSKB, index: int, add_rel: bool, compact: bool) -> str:
    info = skb.node_info[index]
    doc = f"- name: {info.get('name')}\n- type: {info.get('type')}\n- source: {info.get('source')}\n"
    lines = []
    details = info.get("details")
    for key, value in (details.items() if isinstance(details, Mapping) else ()):
        if str(value) in ("", "nan") or key.startswith("_") or "_id" in key:
            continue
        if info.get("type") == "gene/protein" and key in GENE_FIELDS:
            if "interpro" in key:
                value = [v["desc"] for v in ([value] if isinstance(value, Mapping) else value)]
            if "generif" in key:
                value = " ".join("; ".join(v["text"] for v in value).split(" ")[:50000])
            if "genomic_pos" in key and isinstance(value, list):
                value = value[0]
            lines.append(f"  - {key} ({GENE_FIELDS[key]}): {value}\n")
        else:
            lines.append(f"  - {key}: {value}\n")
    if lines:
        doc += "- details:\n" + "".join(lines)
    if add_rel:
        doc += _prime_relations(skb, index)
    return compact_text(doc) if compact else doc


def _prime_relations(skb: ProcessedSKB, index: int) -> str:
    doc = ""
    for relation, name in skb.edge_type_dict.items():
        ends = skb.neighbours.of(index, relation)
        if not ends:
            continue
        doc += f"\n  {name.replace(' ', '_')}: " + "{"
        types = [int(skb.node_types[e]) for e in ends]
        for node_type in set(types):  # STaRK groups the neighbours by type in a set's order
            names = [str(skb.node_info[e].get("name")) for e, t in zip(ends, types, strict=True) if t == node_type]
            doc += f"{skb.node_type_dict.get(node_type, node_type)}: (" + ", ".join(names) + "),"
        doc += "}"
    return "- relations:" + doc if doc else ""


_WRITERS: dict[str, Callable[[ProcessedSKB, int, bool, bool], str]] = {
    "mag": _mag_document, "amazon": _amazon_document, "prime": _prime_document}


# ----------------------------------------------------------------------------------------------------------
# Into the store
# ----------------------------------------------------------------------------------------------------------
def _feature_value(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _feature_value(v) for k, v in value.items() if _present(v)}
    if isinstance(value, (list, tuple)):
        return [_feature_value(v) for v in value]
    return value


def load_processed(builder: Any, path: Path, *, dataset: str | None = None,
                   progress: Callable[[int], None] | None = None) -> ProcessedSKB:
    """Stream a STaRK processed folder into a :class:`~kgagents.tools.pgraph.build.GraphBuilder`: nodes by index with
    their dataset's types, names and documents (feature ``text``) and their records' fields as features; edges
    with their relation names, as the folder lists them less those STaRK merges (:func:`starks_relations`). The
    dataset, its candidate types and the document variant go to the graph's ``meta``."""
    skb = read_processed(path, dataset)
    for index in range(skb.count):
        info = skb.node_info[index]
        features = {str(k): _feature_value(v) for k, v in info.items()
                    if _present(v) and not (isinstance(v, (str, list, dict)) and len(v) == 0)}
        features["text"] = document(skb, index)
        builder.add_node(str(index), type=skb.type_of(index), name=display_name(skb, index), features=features)
        if progress is not None and index % 100_000 == 0:
            progress(index)
    names = skb.edge_type_dict
    for h, t, r in zip(skb.heads.tolist(), skb.tails.tolist(), skb.edge_types.tolist(), strict=True):
        builder.add_edge(str(h), names.get(int(r), str(r)), str(t))
    builder.meta["stark"] = {"dataset": skb.dataset, "candidate_types": skb.candidate_types,
                             "document": DOCUMENT_VARIANT, "folder": str(skb.folder)}
    return skb


# ----------------------------------------------------------------------------------------------------------
# STaRK's released embeddings
# ----------------------------------------------------------------------------------------------------------
class StarkEmbeddings:
    """STaRK's precomputed embeddings of one dataset and model, in the layout its ``emb_download.py`` writes:
    ``emb/<dataset>/<model>/doc/candidate_emb_dict.pt`` (candidate node index → its document's embedding) and
    ``query/query_emb_dict.pt`` (query id → the question's embedding; ``query_human_generated_eval/`` for the
    human-generated questions). The released ones are text-embedding-ada-002's.

    :meth:`install` keeps the document embeddings as the graph's exact ``text`` index for the model, so that
    no document is embedded again; :meth:`query_vector` gives a question's embedding by its query id
    (``human:<id>`` for a human-generated question), ``None`` when it has none (the question's text is then
    embedded by the model). """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.doc = self.folder / "doc" / "candidate_emb_dict.pt"
        if not self.doc.is_file():
            raise GraphFormatError(f"{self.folder}: no doc/candidate_emb_dict.pt (STaRK's embeddings of a dataset and "
                                   "model: emb/<dataset>/<model>/, as its emb_download.py writes them)")
        self.model = self.folder.name
        self._queries: dict[str, dict[str, np.ndarray]] = {}
        self._lock = threading.Lock()
        self._installs: dict[tuple[str, str, str], threading.Lock] = {}
        self._installs_lock = threading.Lock()

    @property
    def model_name(self) -> str:
        """The embedder that embeds what the files lack (OpenAI's models as ``openai:<model>``)."""
        return f"openai:{self.model}" if self.model.startswith("text-embedding") else self.model

    @staticmethod
    def _load(path: Path) -> dict[int, np.ndarray]:
        try:
            import torch  # torch: seconds to import, only where tensors are read

            data = torch.load(path, weights_only=True, map_location="cpu")
        except Exception as exc:  # any torch error: not STaRK's file
            raise _torch_error(path, exc) from exc
        if not isinstance(data, Mapping):
            raise GraphFormatError(f"{path}: expected a dict from index to embedding")
        return {int(k): np.asarray(v.float().numpy() if hasattr(v, "float") else v, dtype=np.float32).reshape(-1)
                for k, v in data.items()}

    def install(self, graph: Any, embedder: Any, *, kind: str = "flat") -> None:
        """Put the document embeddings into ``graph``'s ``text`` index for ``embedder``'s model id (once: a
        saved index is found again by later runs and processes).

        Single-flight per (graph, model, kind): the items of an evaluation that start together all ask for the
        index before it exists; the first loads the file (gigabytes on MAG) and builds the index while the
        others wait for it and then find it built, so a process loads and builds it once."""
        model_id = model_id_of(embedder)
        if model_id is None:
            raise ValueError("STaRK's embeddings need an embedder with a model id (a name)")
        if graph.indexes.installed("text", model_id, kind):
            return
        with self._install_lock(install_key(graph, model_id, kind)):
            if graph.indexes.installed("text", model_id, kind):  # built by the item this one waited for
                return
            self._build(graph, embedder, model_id, kind)

    def _install_lock(self, key: tuple[str, str, str]) -> threading.Lock:
        with self._installs_lock:
            return self._installs.setdefault(key, threading.Lock())

    def _build(self, graph: Any, embedder: Any, model_id: str, kind: str) -> None:
        vectors = self._load(self.doc)
        rows, matrix, missing = [], [], 0
        for node, vector in vectors.items():
            row = graph.index_of(str(node))
            if row is None:
                missing += 1
                continue
            rows.append(row)
            matrix.append(vector)
        if not rows:
            raise GraphFormatError(f"{self.doc}: none of its {len(vectors)} node indices is in the graph {graph.name}")
        if missing:
            raise GraphFormatError(f"{self.doc}: {missing} of its node indices are not in the graph {graph.name}: "
                                   "the embeddings are of another knowledge base")
        graph.indexes.install("text", model_id, np.asarray(rows, dtype=np.int64), np.stack(matrix), embedder=embedder,
                              kind=kind)

    def query_vector(self, question_id: str | None) -> np.ndarray | None:
        """A question's precomputed embedding, by its query id; ``None`` when the files have none for it."""
        if question_id is None:
            return None
        text = str(question_id)
        human = text.startswith("human:")
        folder = "query_human_generated_eval" if human else "query"
        key = text.removeprefix("human:")
        if not key.lstrip("-").isdigit():
            return None
        with self._lock:
            if folder not in self._queries:
                path = self.folder / folder / "query_emb_dict.pt"
                self._queries[folder] = {str(k): v for k, v in self._load(path).items()} if path.is_file() else {}
            return self._queries[folder].get(str(int(key)))


def install_key(graph: Any, model_id: str, kind: str) -> tuple[str, str, str]:
    """Which index an install builds: the graph's index folder (its instance when it has none), the model and
    the kind."""
    directory = getattr(graph.indexes, "directory", None)
    where = str(Path(directory).resolve()) if directory is not None else f"instance {id(graph.indexes)}"
    return where, model_id, kind


_embeddings: dict[str, StarkEmbeddings] = {}
_embeddings_lock = threading.Lock()


def stark_embeddings(folder: str | Path) -> StarkEmbeddings:
    """The process's reader of one embeddings folder (read-only data, like a graph: its query embeddings are
    loaded once and shared by the runs that name the folder)."""
    key = str(Path(folder).resolve())
    with _embeddings_lock:
        if key not in _embeddings:
            _embeddings[key] = StarkEmbeddings(folder)
        return _embeddings[key]
