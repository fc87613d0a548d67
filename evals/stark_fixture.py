"""Small STaRK datasets (MAG, Amazon, PrimeKG) in STaRK's released layout, for the tests and the benchmark.

    python -m kgagents.evals.stark_fixture OUT_DIR      writes OUT_DIR/qa/<name>/... and OUT_DIR/skb/<name>/...

The layout is the one of the Hugging Face dataset ``snap-stanford/stark`` that STaRK's loaders read:

- ``qa/<name>/stark_qa/stark_qa.csv``: id, query, answer_ids (a Python list as text);
- ``qa/<name>/stark_qa/stark_qa_human_generated_eval.csv``;
- ``qa/<name>/split/{train,val,test,test-0.1}.index``: query ids, one per line;
- ``skb/mag/processed/``: ``node_info.pkl``, ``node_types.pt``, ``edge_index.pt``, ``edge_types.pt`` (no type
  dictionaries: STaRK's MAG loader holds them);
- ``skb/amazon/processed/``: the products alone: ``node_info.pkl``, ``edge_index.pt``, ``edge_types.pt``,
  ``edge_type_dict.pkl``;
- ``skb/amazon/processed/cache/brand-category-color/``: the graph with brand, category and color nodes: the six
  files, type dictionaries included;
- ``skb/prime/processed/``: the six files.

Node records use the fields STaRK's processed records have and its ``get_doc_info`` reads: MAG ``type``,
``mag_id``, ``DisplayName``, ``PaperCount``, ``CitationCount`` (authors, institutions, fields of study; -1
when unknown) and ``title``, ``abstract``, ``Date``, ``OriginalVenue``, ``JournalDisplayName``, … (papers);
Amazon ``asin``, ``title``, ``brand``, ``description`` (a list), ``feature``, ``review`` (``summary``,
``reviewText``, ``vote``), ``qa``, ``details`` and ``<type>_name`` for the link nodes; PrimeKG ``id``,
``type``, ``name``, ``source``, ``details``. Node indices follow STaRK's order (MAG: authors, institutions,
fields, papers; Amazon: products, then brands, categories, colors).

Provenance. STaRK's repository (snap-stanford/stark, MIT; data CC-BY-4.0) holds no data files; its notebook
``load_dataset.ipynb`` @ ``b246b9490b1dc216892ce78303140014506932c1`` prints a few real records, copied here
in part: the Amazon question 1 ("Looking for a user-friendly fly fishing knot guide ...") with its three
answers' titles, the first answer's brand (Lake), description, five features, two reviews (their text cut
short) and the titles of some products bought or viewed with it; the PrimeKG question 1 ("What drugs target
the CYP3A4 enzyme and are used to treat strongyloidiasis?") with its answer Ivermectin (STaRK's node 15450,
renumbered 0), its source, the beginning of its description and its relations (enzyme CYP3A4; target GABRB3,
GLRA3; indication onchocerciasis, strongyloidiasis). Everything else — the MAG graph (after the paper's Figure
4: Netaji Subhash Engineering College and optical TALU implementations), the other questions, counts, reviews
and the nodes the relations need — is written for kgagents' tests and benchmark.
"""

from __future__ import annotations

import csv
import pickle
import sys
from pathlib import Path
from typing import Any

NOTEBOOK_AMAZON_QUERY = ("Looking for a user-friendly fly fishing knot guide with clear, easy-to-understand "
                         "illustrations. Ideally, it should be logically organised for easy learning and effective in "
                         "teaching dependable knot tying techniques. It would be a bonus if it complements the "
                         "Anglers Accessories Gehrke's Gink that I frequently use. Any recommendations?")
NOTEBOOK_PRIME_QUERY = "What drugs target the CYP3A4 enzyme and are used to treat strongyloidiasis?"
MAG_QUERY = ("Find papers by authors affiliated with Netaji Subhash Engineering College on optical TALU "
             "implementations in electronic circuits.")


# --------------------------------------------------------------------------------------------------------------
# MAG: 0-3 authors, 4-5 institutions, 6-8 fields of study, 9-13 papers
# --------------------------------------------------------------------------------------------------------------
def _mag_person(index: int, kind: str, name: Any, papers: int, citations: int) -> dict[str, Any]:
    return {"id": index, "mag_id": 2000000 + index, "DisplayName": name, "PaperCount": papers,
            "CitationCount": citations, "type": kind}


def _mag_paper(index: int, title: str, abstract: str, date: str, venue: Any = -1, journal: Any = -1) -> dict:
    return {"id": index, "mag_id": 3000000 + index, "title": title, "abstract": abstract, "Date": date,
            "OriginalVenue": venue, "JournalDisplayName": journal, "ConferenceSeriesDisplayName": -1,
            "ConferenceInstancesDisplayName": -1, "PaperRank": 20000 + index, "type": "paper"}


MAG_NODES = [
    _mag_person(0, "author", "Arindam Biswas", 41, 220),
    _mag_person(1, "author", "Sourav Roy", 12, -1),
    _mag_person(2, "author", "Maria Ortiz", 30, 510),
    _mag_person(3, "author", -1, -1, -1),
    _mag_person(4, "institution", "Netaji Subhash Engineering College", 310, 1200),
    _mag_person(5, "institution", "University of Calcutta", 25000, 180000),
    _mag_person(6, "field_of_study", "Electronic circuit", 90000, -1),
    _mag_person(7, "field_of_study", "Optical computing", 8000, 41000),
    _mag_person(8, "field_of_study", "Graph neural network", 5000, 30000),
    _mag_paper(9, "All-optical tri-state arithmetic logic unit using terahertz optical asymmetric demultiplexers",
               "We propose an all-optical TALU implementation for electronic circuits.\r\n", "2012-05-01",
               venue="Optics Communications"),
    _mag_paper(10, "A ternary optical ALU", "A ternary logic unit realised with optical switches.", "2009-01-01",
               journal="Applied Optics"),
    _mag_paper(11, "Low-power CMOS adders", "Adders for low-power electronic circuits.", "-1"),
    _mag_paper(12, "Graph neural networks for molecule design", "We design molecules with message passing.",
               "2020-02-02", venue="NeurIPS"),
    _mag_paper(13, "Optical logic revisited", "A survey of optical logic gates.", "2015-07-07"),
]
MAG_EDGES = [  # (head, relation id, tail) with STaRK's MAG relation ids
    (0, 0, 4), (1, 0, 4), (1, 0, 5), (2, 0, 5),
    (13, 1, 9), (10, 1, 9),
    (9, 2, 6), (9, 2, 7), (10, 2, 7), (11, 2, 6), (12, 2, 8), (13, 2, 7),
    (0, 3, 9), (1, 3, 9), (2, 3, 10), (1, 3, 11), (2, 3, 12), (3, 3, 13),
]
MAG_QA = [(0, MAG_QUERY, [9]),
          (1, "Which papers by Maria Ortiz design molecules with graph neural networks?", [12]),
          (2, "Find papers by Sourav Roy on low-power adders for electronic circuits.", [11]),
          (3, "Which papers cite the all-optical tri-state arithmetic logic unit paper?", [10, 13]),
          (4, "Find a paper on ternary optical arithmetic logic units published in Applied Optics.", [10])]
MAG_SPLITS = {"train": [3, 4], "val": [2], "test": [0, 1], "test-0.1": [0]}

# --------------------------------------------------------------------------------------------------------------
# Amazon: 0-5 products, 6-7 brands, 8-9 categories, 10 a color
# --------------------------------------------------------------------------------------------------------------
_LAKE_DESCRIPTION = ("NEW & IMPROVED - Replaces the Two-in-One Knot Tying Tool - still ties many over 14 different "
                     "knots, but now adds a magnetic hook threader; made of Delron and stainless steel; instruction "
                     "book included.")
_LAKE_FEATURES = ["Precision machined contact firmly grips any fishing line, without causing damage",
                  "Up and down spring action with stainless steel spring",
                  "The body is manufactured of strong, lightweight Acetel Delrin for years of reliable service",
                  "Stainless Steel Shaft, head and loop will not rust or corrode",
                  "Attachment loop to clip onto clothing"]
_LAKE_REVIEWS = [
    {"reviewerID": "A1", "summary": "It works", "reviewText": "I got this last night and decided to give it a try.",
     "vote": None, "overall": 5.0, "verified": True, "reviewTime": "06 1, 2015", "style": None},
    {"reviewerID": "A2", "summary": "Works Great",
     "reviewText": "Due to an injury, I have no finger dexterity in either hand. This tool allows me to tie the knot "
                   "in 15 seconds.", "vote": "1,204", "overall": 5.0, "verified": True, "reviewTime": "02 3, 2016",
     "style": None},
]


def _product(asin: str, title: str, brand: str | None = None, **fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"review": [], "qa": [], "asin": asin, "title": title,
                              "global_category": "Sports and Outdoors", "description": [], "feature": [],
                              "details": {}, **fields}
    if brand is not None:
        record["brand"] = brand
    return record


AMAZON_PRODUCTS = [
    _product("B000LAKE01", "Lake Products THREE-in-One Knot Tying Tool Fly Fishing", "Lake",
             description=[_LAKE_DESCRIPTION], feature=[*_LAKE_FEATURES, "asin B000LAKE01"], review=_LAKE_REVIEWS,
             qa=[{"questionType": "yesno", "answerType": "Y", "question": "Does it tie a blood knot?",
                  "answer": "Yes, it does.", "answerTime": "Jan 1, 2016"}],
             details={"product_dimensions": "4 x 1 x 0.5 inches ; 0.8 ounces"}, category=["fly fishing", "fishing"],
             color=["black"]),
    _product("B000EZTIE2", "EZ Tie Blood Knot Tying Tool", None, description=["Ties blood knots in seconds."],
             category=["fly fishing"]),
    _product("B000BENCH3", "BenchMaster Pocket Guide - Fly Fishing - Fishing", None,
             description=["A waterproof pocket guide with illustrated knots."], category=["fishing"]),
    _product("B000GINK04", "Anglers Accessories Gehrke's Gink", None, description=["Dry fly floatant."],
             category=["fly fishing"]),
    _product("B000LOON05", "Loon Outdoors UV Knot Sense", "Loon Outdoors",
             description=["UV-cured knot coating."], category=["fly fishing"], color=["black"]),
    _product("B000TENT06", "Two-person backpacking tent", None, description=["A light tent."]),
]
AMAZON_LINKS = [("brand", ["Lake", "Loon Outdoors"]), ("category", ["fishing", "fly fishing"]), ("color", ["black"])]
AMAZON_PRODUCT_EDGES = [(0, "also_buy", 2), (0, "also_buy", 3), (1, "also_buy", 0), (0, "also_view", 4),
                        (4, "also_view", 1)]
AMAZON_QA = [(1, NOTEBOOK_AMAZON_QUERY, [0, 1, 2]),
             (2, "Is there a UV-cured coating to protect fly fishing knots, by Loon Outdoors?", [4]),
             (3, "I need a light tent for two people on backpacking trips.", [5]),
             (4, "A floatant for dry flies that anglers use.", [3])]
AMAZON_SPLITS = {"train": [3, 4], "val": [2], "test": [1], "test-0.1": [1]}

# --------------------------------------------------------------------------------------------------------------
# PrimeKG: ten node types and eighteen relations as STaRK's PrimeKG loader lists them
# --------------------------------------------------------------------------------------------------------------
PRIME_TYPES = ["disease", "gene/protein", "molecular_function", "drug", "pathway", "anatomy", "effect/phenotype",
               "biological_process", "cellular_component", "exposure"]
PRIME_RELATIONS = ["ppi", "carrier", "enzyme", "target", "transporter", "contraindication", "indication",
                   "off-label use", "synergistic interaction", "associated with", "parent-child",
                   "phenotype absent", "phenotype present", "side effect", "interacts with", "linked to",
                   "expression present", "expression absent"]
_IVERMECTIN = {"description": "Ivermectin is a broad-spectrum anti-parasite medication.",
               "half_life": "16 hours (also reported at 22-28 hours)",
               "indication": "For the treatment of intestinal (i.e., nondisseminated) strongyloidiasis due to the "
                             "nematode parasite <i>Strongyloides stercoralis</i>.",
               "mechanism_of_action": "Ivermectin binds selectively and with high affinity to glutamate-gated "
                                      "chloride ion channels.", "drugbank_id": "DB00602", "_note": "hidden"}
PRIME_NODES: list[dict[str, Any]] = [
    {"id": "DB00602", "type": "drug", "name": "Ivermectin", "source": "DrugBank", "details": _IVERMECTIN},
    {"id": "1576", "type": "gene/protein", "name": "CYP3A4", "source": "NCBI",
     "details": {"name": "cytochrome P450 family 3 subfamily A member 4", "alias": ["CP33", "CYP3A3"],
                 "genomic_pos": [{"chr": "7", "start": 99756960}], "summary": "A liver enzyme.",
                 "interpro": {"desc": "Cytochrome P450", "id": "IPR001128"}, "type_of_gene": "protein-coding",
                 "generif": [{"text": "CYP3A4 metabolises drugs", "pubmed": 1}, {"text": "a second note", "pubmed": 2}],
                 "uniprot": "nan"}},
    {"id": "2562", "type": "gene/protein", "name": "GABRB3", "source": "NCBI"},
    {"id": "2743", "type": "gene/protein", "name": "GLRA3", "source": "NCBI"},
    {"id": "5404", "type": "disease", "name": "onchocerciasis", "source": "MONDO"},
    {"id": "5405", "type": "disease", "name": "strongyloidiasis", "source": "MONDO",
     "details": {"mondo_definition": "A roundworm infection.", "umls_description": ""}},
    {"id": "DB01045", "type": "drug", "name": "Rifampin", "source": "DrugBank",
     "details": {"description": "An antibiotic that induces CYP3A4."}},
    {"id": "DB00518", "type": "drug", "name": "Albendazole", "source": "DrugBank",
     "details": {"description": "An anthelmintic for roundworm infections."}},
    {"id": "5406", "type": "disease", "name": "tuberculosis", "source": "MONDO"},
]
PRIME_EDGES = [(0, "enzyme", 1), (0, "target", 2), (0, "target", 3), (0, "indication", 4), (0, "indication", 5),
               (6, "enzyme", 1), (6, "indication", 8), (7, "indication", 5), (1, "ppi", 2)]
PRIME_QA = [(1, NOTEBOOK_PRIME_QUERY, [0]),
            (2, "Which drugs are indicated for strongyloidiasis?", [0, 7]),
            (3, "Which antibiotic induces CYP3A4 and treats tuberculosis?", [6]),
            (4, "Which genes does Ivermectin target?", [2, 3])]
PRIME_SPLITS = {"train": [3, 4], "val": [2], "test": [1], "test-0.1": [1]}
HUMAN_QA = {"mag": [(0, "Papers from Netaji Subhash Engineering College on optical arithmetic logic units", [9])],
            "amazon": [(0, "a tool that ties fishing knots for me", [0, 1])],
            "prime": [(0, "drugs for strongyloidiasis", [0, 7])]}


# --------------------------------------------------------------------------------------------------------------
# Writing the files
# --------------------------------------------------------------------------------------------------------------
def _save(folder: Path, **files: Any) -> None:
    import torch  # STaRK's tensors: only when the files are written

    folder.mkdir(parents=True, exist_ok=True)
    for name, value in files.items():
        if isinstance(value, dict):
            (folder / f"{name}.pkl").write_bytes(pickle.dumps(value))
        else:
            torch.save(torch.tensor(value, dtype=torch.long), folder / f"{name}.pt")


def _questions(folder: Path, rows: list[tuple[int, str, list[int]]], splits: dict[str, list[int]] | None,
               human: list[tuple[int, str, list[int]]]) -> None:
    for name, records in (("stark_qa.csv", rows), ("stark_qa_human_generated_eval.csv", human)):
        path = folder / "stark_qa" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "query", "answer_ids"])
            for query_id, query, answers in records:
                writer.writerow([query_id, query, str(answers)])
    for split, ids in (splits or {}).items():
        path = folder / "split" / f"{split}.index"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(str(i) for i in ids) + "\n", encoding="utf-8")


def _edge_arrays(edges: list[tuple[int, int, int]]) -> dict[str, Any]:
    return {"edge_index": [[h for h, _, _ in edges], [t for _, _, t in edges]], "edge_types": [r for _, r, _ in edges]}


def write_mag(root: Path) -> None:
    types = {"author": 0, "institution": 1, "field_of_study": 2, "paper": 3}
    info = {n["id"]: dict(n) for n in MAG_NODES}
    _save(root / "skb" / "mag" / "processed", node_info=info, node_types=[types[n["type"]] for n in MAG_NODES],
          **_edge_arrays(MAG_EDGES))
    _questions(root / "qa" / "mag", MAG_QA, MAG_SPLITS, HUMAN_QA["mag"])


def write_amazon(root: Path) -> None:
    relations = {"also_buy": 0, "also_view": 1}
    products = {i: dict(p) for i, p in enumerate(AMAZON_PRODUCTS)}
    edges = [(h, relations[r], t) for h, r, t in AMAZON_PRODUCT_EDGES]
    processed = root / "skb" / "amazon" / "processed"
    _save(processed, node_info=products, edge_type_dict={0: "also_buy", 1: "also_view"}, **_edge_arrays(edges))
    info = dict(products)
    node_types = [0] * len(products)
    node_type_dict = {0: "product"}
    edge_type_dict = {0: "also_buy", 1: "also_view"}
    for offset, (link, values) in enumerate(AMAZON_LINKS, 1):  # STaRK's post-processing adds a node per value
        node_type_dict[offset] = link
        edge_type_dict[1 + offset] = f"has_{link}"
        for value in sorted(values):
            index = len(info)
            info[index] = {f"{link}_name": value}
            node_types.append(offset)
            for product, record in products.items():
                held = record.get(link)
                if held == value or (isinstance(held, list) and value in held):
                    edges.append((product, 1 + offset, index))
    _save(processed / "cache" / "brand-category-color", node_info=info, node_types=node_types,
          node_type_dict=node_type_dict, edge_type_dict=edge_type_dict, **_edge_arrays(edges))
    (root / "skb" / "amazon" / "category_list.json").write_text('["fishing", "fly fishing"]\n', encoding="utf-8")
    _questions(root / "qa" / "amazon", AMAZON_QA, AMAZON_SPLITS, HUMAN_QA["amazon"])


def write_prime(root: Path) -> None:
    info = {i: dict(n) for i, n in enumerate(PRIME_NODES)}
    edges = []
    for h, r, t in PRIME_EDGES:  # PrimeKG lists every edge in both directions
        edges += [(h, PRIME_RELATIONS.index(r), t), (t, PRIME_RELATIONS.index(r), h)]
    _save(root / "skb" / "prime" / "processed", node_info=info,
          node_types=[PRIME_TYPES.index(n["type"]) for n in PRIME_NODES], node_type_dict=dict(enumerate(PRIME_TYPES)),
          edge_type_dict=dict(enumerate(PRIME_RELATIONS)), **_edge_arrays(edges))
    _questions(root / "qa" / "prime", PRIME_QA, PRIME_SPLITS, HUMAN_QA["prime"])


def write_all(root: Path) -> Path:
    """The three datasets under ``root`` (STaRK's snapshot layout); returns ``root``."""
    write_mag(root)
    write_amazon(root)
    write_prime(root)
    return root


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m kgagents.evals.stark_fixture OUT_DIR")
    print(write_all(Path(sys.argv[1])))
