"""Per-domain prompt material of grounded reasoning for GRBench's graphs (paper 001 §5, Graph-CoT's benchmark):
a graph definition and few-shot examples for the agent (thought → action → observation) and for automatic graph
exploration (next thought from the triples so far), one set per domain.

Written for this project from each domain's schema (node types, features and neighbour types as GRBench's
``graph.json`` files have them). The examples' entities, ids and values are made up: they belong to no GRBench
question, so no evaluated question is shown to the model. Each domain's examples cover a feature lookup, a
neighbour list turned into names, a degree, and one two-hop question; the observations are written exactly as
:mod:`kgagents.tools.graph_functions` writes them, and the actions in Graph-CoT's text protocol (``Function[args]``).

``generic`` is for graphs that are not GRBench's: two academic examples and no definition (the definition is then
written from the graph's schema).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DOMAINS", "DomainPrompts", "domain_of_types"]


@dataclass(frozen=True)
class DomainPrompts:
    """What the prompts show for one domain."""

    definition: str
    agent_examples: str
    explore_examples: str


# --------------------------------------------------------------------------------------------------------------
# Academic: DBLP and MAPLE
# --------------------------------------------------------------------------------------------------------------
_DBLP_DEFINITION = """Node types: paper, author, venue.
- paper nodes: features title, abstract, keywords, lang, year; neighbour types author (the paper's authors), venue
  (where it appeared), reference (the papers it cites), cited_by (the papers that cite it).
- author nodes: features name, organization; neighbour type paper (the papers the author wrote).
- venue nodes: feature name; neighbour type paper (the papers it published)."""

_DBLP_AGENT = """Question: Which organization is the author of the paper "Sparse Probing of Temporal Knowledge Graphs" affiliated with?
Thought 1: The question starts from a paper. I need its node first.
Action 1: RetrieveNode[Sparse Probing of Temporal Knowledge Graphs]
Observation 1: The ID of this retrieval target node is 5f1c0a2e9b4d7c3a8e6f1b20.
Thought 2: The paper's author is one of its author neighbours.
Action 2: NeighbourCheck[5f1c0a2e9b4d7c3a8e6f1b20, author]
Observation 2: The author neighbors of 5f1c0a2e9b4d7c3a8e6f1b20 are: ["5e8d2c4f1a3b6e9d0c7f2a11"].
Thought 3: One author. Its organization is a feature of the author node.
Action 3: NodeFeature[5e8d2c4f1a3b6e9d0c7f2a11, organization]
Observation 3: The organization feature of 5e8d2c4f1a3b6e9d0c7f2a11 is: Dept. of Informatics, University of Lisbon, Portugal.
Thought 4: I know the organization.
Action 4: Finish[Dept. of Informatics, University of Lisbon, Portugal]

Question: How many papers cite the paper "Learning Routing Policies for Edge Caches"?
Thought 1: I need the node of the paper.
Action 1: RetrieveNode[Learning Routing Policies for Edge Caches]
Observation 1: The ID of this retrieval target node is 60a7e3b1c9d24f5e8a1b7c03.
Thought 2: Papers citing it are its cited_by neighbours; their number is the node's degree.
Action 2: NodeDegree[60a7e3b1c9d24f5e8a1b7c03, cited_by]
Observation 2: The cited_by neighbor node degree of 60a7e3b1c9d24f5e8a1b7c03 is: 12.
Thought 3: 12 papers cite it.
Action 3: Finish[12]

Question: In which venues has the author Priya Ramanathan published?
Thought 1: The question starts from an author. I need the author node.
Action 1: RetrieveNode[Priya Ramanathan]
Observation 1: The ID of this retrieval target node is 5d2b9f0e7c1a4e3b8d6c2f19.
Thought 2: Her papers are her paper neighbours; the venues are the venues of those papers.
Action 2: NeighbourCheck[5d2b9f0e7c1a4e3b8d6c2f19, paper]
Observation 2: The paper neighbors of 5d2b9f0e7c1a4e3b8d6c2f19 are: ["61c0e2a4b7d93f5a1e8c6b27", "62f4a1d8c3b05e7a9d2f1c48"].
Thought 3: I need the venue of each paper.
Action 3: NeighbourCheck[61c0e2a4b7d93f5a1e8c6b27, venue], NeighbourCheck[62f4a1d8c3b05e7a9d2f1c48, venue]
Observation 3.1: The venue neighbors of 61c0e2a4b7d93f5a1e8c6b27 are: ["pub_311"].
Observation 3.2: The venue neighbors of 62f4a1d8c3b05e7a9d2f1c48 are: ["pub_87"].
Thought 4: I need the names of the two venues.
Action 4: NodeFeature[pub_311, name], NodeFeature[pub_87, name]
Observation 4.1: The name feature of pub_311 is: IEEE Transactions on Mobile Computing.
Observation 4.2: The name feature of pub_87 is: INFOCOM.
Thought 5: She published in these two venues.
Action 5: Finish[IEEE Transactions on Mobile Computing, INFOCOM]"""

_ACADEMIC_EXPLORE = """Question: Which venue published the paper "Sparse Probing of Temporal Knowledge Graphs"?
Knowledge triples: (none yet)
Next thought: I need the paper "Sparse Probing of Temporal Knowledge Graphs" and its venue.

Question: Which venue published the paper "Sparse Probing of Temporal Knowledge Graphs"?
Knowledge triples: Sparse Probing of Temporal Knowledge Graphs -> venue -> Knowledge-Based Systems
Next thought: The paper appeared in Knowledge-Based Systems, so the answer is Knowledge-Based Systems.

Question: Who wrote papers together with Priya Ramanathan?
Knowledge triples: Priya Ramanathan -> paper -> Adaptive Beam Scheduling
Next thought: I know one of her papers, Adaptive Beam Scheduling; its other authors are her co-authors, so I need
the authors of Adaptive Beam Scheduling."""

_MAPLE_DEFINITION = """Node types: paper, author, venue.
- paper nodes: features title, abstract, year, label; neighbour types author (the paper's authors), venue (where it
  appeared), reference (the papers it cites), cited_by (the papers that cite it).
- author nodes: feature name; neighbour type paper (the papers the author wrote).
- venue nodes: feature name; neighbour type paper (the papers it published)."""

_MAPLE_AGENT = """Question: In which year was the paper "thermal drift of resonant sensors in vacuum" published?
Thought 1: I need the paper's node first.
Action 1: RetrieveNode[thermal drift of resonant sensors in vacuum]
Observation 1: The ID of this retrieval target node is 2871049315.
Thought 2: The year is a feature of the paper node.
Action 2: NodeFeature[2871049315, year]
Observation 2: The year feature of 2871049315 is: 2014.
Thought 3: It was published in 2014.
Action 3: Finish[2014]

Question: Who are the authors of "coherent transport in layered oxide films"?
Thought 1: I need the node of the paper.
Action 1: RetrieveNode[coherent transport in layered oxide films]
Observation 1: The ID of this retrieval target node is 3012957744.
Thought 2: Its authors are its author neighbours.
Action 2: NeighbourCheck[3012957744, author]
Observation 2: The author neighbors of 3012957744 are: ["2140338921", "2655019473"].
Thought 3: I need their names.
Action 3: NodeFeature[2140338921, name], NodeFeature[2655019473, name]
Observation 3.1: The name feature of 2140338921 is: Marta Kowalczyk.
Observation 3.2: The name feature of 2655019473 is: H. Osei.
Thought 4: These are the two authors.
Action 4: Finish[Marta Kowalczyk, H. Osei]

Question: How many papers has the author Marta Kowalczyk written?
Thought 1: I need the author node.
Action 1: RetrieveNode[Marta Kowalczyk]
Observation 1: The ID of this retrieval target node is 2140338921.
Thought 2: Her papers are her paper neighbours; their number is the degree.
Action 2: NodeDegree[2140338921, paper]
Observation 2: The paper neighbor node degree of 2140338921 is: 7.
Thought 3: She wrote 7 papers.
Action 3: Finish[7]"""

# --------------------------------------------------------------------------------------------------------------
# E-commerce: Amazon
# --------------------------------------------------------------------------------------------------------------
_AMAZON_DEFINITION = """Node types: item, brand.
- item nodes: features title, description, price, img, category; neighbour types brand (the item's brand),
  also_viewed_item, buy_after_viewing_item, also_bought_item, bought_together_item (other items, by how customers
  related them).
- brand nodes: feature name; neighbour type item (the brand's items)."""

_AMAZON_AGENT = """Question: What does the item "Trailhead 40L Waterproof Hiking Backpack, Slate Grey" cost?
Thought 1: I need the item's node.
Action 1: RetrieveNode[Trailhead 40L Waterproof Hiking Backpack, Slate Grey]
Observation 1: The ID of this retrieval target node is B07Q4K2M9T.
Thought 2: The price is a feature of the item.
Action 2: NodeFeature[B07Q4K2M9T, price]
Observation 2: The price feature of B07Q4K2M9T is: 54.99.
Thought 3: It costs 54.99.
Action 3: Finish[54.99]

Question: Which brand makes the item "Quiet Glide Ceramic Hair Dryer 1875W"?
Thought 1: I need the item's node.
Action 1: RetrieveNode[Quiet Glide Ceramic Hair Dryer 1875W]
Observation 1: The ID of this retrieval target node is B01M7XQ3ZA.
Thought 2: The brand is its brand neighbour.
Action 2: NeighbourCheck[B01M7XQ3ZA, brand]
Observation 2: The brand neighbors of B01M7XQ3ZA are: ["brand_4410"].
Thought 3: I need the brand's name.
Action 3: NodeFeature[brand_4410, name]
Observation 3: The name feature of brand_4410 is: Auralis.
Thought 4: The brand is Auralis.
Action 4: Finish[Auralis]

Question: How many items are usually bought together with "Auralis Diffuser Attachment"?
Thought 1: I need the item's node.
Action 1: RetrieveNode[Auralis Diffuser Attachment]
Observation 1: The ID of this retrieval target node is B00T2LK8RW.
Thought 2: Items bought together with it are its bought_together_item neighbours; I count them.
Action 2: NodeDegree[B00T2LK8RW, bought_together_item]
Observation 2: The bought_together_item neighbor node degree of B00T2LK8RW is: 3.
Thought 3: Three items.
Action 3: Finish[3]"""

_AMAZON_EXPLORE = """Question: Which brand makes the item "Quiet Glide Ceramic Hair Dryer 1875W"?
Knowledge triples: (none yet)
Next thought: I need the item "Quiet Glide Ceramic Hair Dryer 1875W" and its brand.

Question: Which brand makes the item "Quiet Glide Ceramic Hair Dryer 1875W"?
Knowledge triples: Quiet Glide Ceramic Hair Dryer 1875W -> brand -> Auralis
Next thought: The item's brand is Auralis, so the answer is Auralis."""

# --------------------------------------------------------------------------------------------------------------
# Literature: Goodreads
# --------------------------------------------------------------------------------------------------------------
_GOODREADS_DEFINITION = """Node types: book, author, publisher, series.
- book nodes: features title, description, format, num_pages, publication_year, language_code, country_code,
  is_ebook, url, popular_shelves, genres; neighbour types author, publisher, series (the book's), similar_books
  (other books).
- author nodes: feature name; neighbour type book (the books the author wrote).
- publisher nodes: feature name; neighbour type book (the books it published).
- series nodes: features title, description; neighbour type book (the books of the series)."""

_GOODREADS_AGENT = """Question: How many pages does the book "The Lantern Keeper's Daughter" have?
Thought 1: I need the book's node.
Action 1: RetrieveNode[The Lantern Keeper's Daughter]
Observation 1: The ID of this retrieval target node is book-20417365.
Thought 2: The page count is the num_pages feature.
Action 2: NodeFeature[book-20417365, num_pages]
Observation 2: The num_pages feature of book-20417365 is: 312.
Thought 3: It has 312 pages.
Action 3: Finish[312]

Question: Which other books did the author of "The Lantern Keeper's Daughter" write?
Thought 1: I need the book's node, then its author, then the author's books.
Action 1: RetrieveNode[The Lantern Keeper's Daughter]
Observation 1: The ID of this retrieval target node is book-20417365.
Thought 2: The author is its author neighbour.
Action 2: NeighbourCheck[book-20417365, author]
Observation 2: The author neighbors of book-20417365 are: ["4402918"].
Thought 3: The author's books are the author's book neighbours.
Action 3: NeighbourCheck[4402918, book]
Observation 3: The book neighbors of 4402918 are: ["book-20417365", "book-18830412"].
Thought 4: One other book; I need its title.
Action 4: NodeFeature[book-18830412, title]
Observation 4: The title feature of book-18830412 is: Salt on the Harbour Wall.
Thought 5: The other book is Salt on the Harbour Wall.
Action 5: Finish[Salt on the Harbour Wall]

Question: Is the book "Salt on the Harbour Wall" available as an eBook?
Thought 1: I need the book's node.
Action 1: RetrieveNode[Salt on the Harbour Wall]
Observation 1: The ID of this retrieval target node is book-18830412.
Thought 2: The is_ebook feature says so.
Action 2: NodeFeature[book-18830412, is_ebook]
Observation 2: The is_ebook feature of book-18830412 is: false.
Thought 3: It is not an eBook.
Action 3: Finish[false]"""

_GOODREADS_EXPLORE = """Question: Which company published "Salt on the Harbour Wall"?
Knowledge triples: (none yet)
Next thought: I need the book "Salt on the Harbour Wall" and its publisher.

Question: Which other books did the author of "The Lantern Keeper's Daughter" write?
Knowledge triples: The Lantern Keeper's Daughter -> author -> Edith Carrow
Next thought: The author is Edith Carrow; I need the books of Edith Carrow other than The Lantern Keeper's
Daughter."""

# --------------------------------------------------------------------------------------------------------------
# Healthcare: biomedical (Hetionet)
# --------------------------------------------------------------------------------------------------------------
_BIOMEDICAL_DEFINITION = """Node types: Anatomy, Biological_Process, Cellular_Component, Compound, Disease, Gene,
Molecular_Function, Pathway, Pharmacologic_Class, Side_Effect, Symptom. Every node has the feature name.
Neighbour types are named after the relation and listed at both of its ends:
- Anatomy and Gene: Anatomy-downregulates-Gene; Anatomy-expresses-Gene; Anatomy-upregulates-Gene
- Compound and Gene: Compound-binds-Gene; Compound-downregulates-Gene; Compound-upregulates-Gene
- Compound and others: Compound-causes-Side Effect; Compound-palliates-Disease; Compound-treats-Disease;
  Compound-resembles-Compound; Pharmacologic Class-includes-Compound
- Disease and Gene: Disease-associates-Gene; Disease-downregulates-Gene; Disease-upregulates-Gene
- Disease and others: Disease-localizes-Anatomy; Disease-presents-Symptom; Disease-resembles-Disease
- Gene and others: Gene-covaries-Gene; Gene-interacts-Gene; Gene-regulates-Gene; Gene-participates-Biological Process;
  Gene-participates-Cellular Component; Gene-participates-Molecular Function; Gene-participates-Pathway"""

_BIOMEDICAL_AGENT = """Question: Which symptoms does the disease chronic sinus inflammation present?
Thought 1: I need the disease node.
Action 1: RetrieveNode[chronic sinus inflammation]
Observation 1: The ID of this retrieval target node is DOID:40217.
Thought 2: Its symptoms are its Disease-presents-Symptom neighbours.
Action 2: NeighbourCheck[DOID:40217, Disease-presents-Symptom]
Observation 2: The Disease-presents-Symptom neighbors of DOID:40217 are: ["D004417", "D006261"].
Thought 3: I need the names of the two symptoms.
Action 3: NodeFeature[D004417, name], NodeFeature[D006261, name]
Observation 3.1: The name feature of D004417 is: Dyspnea.
Observation 3.2: The name feature of D006261 is: Headache.
Thought 4: The symptoms are Dyspnea and Headache.
Action 4: Finish[Dyspnea, Headache]

Question: How many compounds treat the disease chronic sinus inflammation?
Thought 1: I need the disease node.
Action 1: RetrieveNode[chronic sinus inflammation]
Observation 1: The ID of this retrieval target node is DOID:40217.
Thought 2: Compounds treating it are its Compound-treats-Disease neighbours; I count them.
Action 2: NodeDegree[DOID:40217, Compound-treats-Disease]
Observation 2: The Compound-treats-Disease neighbor node degree of DOID:40217 is: 4.
Thought 3: Four compounds treat it.
Action 3: Finish[4]

Question: Which side effects does the compound Velorazine cause?
Thought 1: I need the compound node.
Action 1: RetrieveNode[Velorazine]
Observation 1: The ID of this retrieval target node is DB09931.
Thought 2: Side effects are its Compound-causes-Side Effect neighbours.
Action 2: NeighbourCheck[DB09931, Compound-causes-Side Effect]
Observation 2: The Compound-causes-Side Effect neighbors of DB09931 are: ["C0015672"].
Thought 3: I need the side effect's name.
Action 3: NodeFeature[C0015672, name]
Observation 3: The name feature of C0015672 is: Fatigue.
Thought 4: It causes fatigue.
Action 4: Finish[Fatigue]"""

_BIOMEDICAL_EXPLORE = """Question: Which anatomy expresses the gene ZNF7314?
Knowledge triples: (none yet)
Next thought: I need the gene ZNF7314 and the anatomy linked to it by Anatomy-expresses-Gene.

Question: Which other diseases share a symptom with chronic sinus inflammation?
Knowledge triples: chronic sinus inflammation -> Disease-presents-Symptom -> Headache
Next thought: Headache is one of its symptoms; I need the other diseases that present Headache."""

# --------------------------------------------------------------------------------------------------------------
# Legal: CourtListener
# --------------------------------------------------------------------------------------------------------------
_LEGAL_DEFINITION = """Node types: opinion, opinion_cluster, docket, court.
- opinion nodes: feature plain_text; neighbour types reference (the opinions it cites), cited_by (the opinions that
  cite it), opinion_cluster (the cluster it belongs to).
- opinion_cluster nodes: features syllabus, judges, case_name, attorneys; neighbour types opinion (its opinions),
  docket (its docket).
- docket nodes: features pacer_case_id, case_name; neighbour types opinion_cluster (its clusters), court (the court
  that handled it).
- court nodes: features full_name, start_date, end_date, citation_string; neighbour type docket (its dockets)."""

_LEGAL_AGENT = """Question: When did the court "Territorial Court of the Northern Reach" start?
Thought 1: I need the court's node.
Action 1: RetrieveNode[Territorial Court of the Northern Reach]
Observation 1: The ID of this retrieval target node is nrterr.
Thought 2: The start date is a feature of the court.
Action 2: NodeFeature[nrterr, start_date]
Observation 2: The start_date feature of nrterr is: 1912-07-01.
Thought 3: It started on 1912-07-01.
Action 3: Finish[1912-07-01]

Question: Which court handled the case listed under the PACER docket number 508812.0?
Thought 1: I need the docket node with that PACER case id.
Action 1: RetrieveNode[508812.0]
Observation 1: The ID of this retrieval target node is 7730415.
Thought 2: The court is the docket's court neighbour.
Action 2: NeighbourCheck[7730415, court]
Observation 2: The court neighbors of 7730415 are: ["nrterr"].
Thought 3: I need the court's full name.
Action 3: NodeFeature[nrterr, full_name]
Observation 3: The full_name feature of nrterr is: Territorial Court of the Northern Reach.
Thought 4: That court handled it.
Action 4: Finish[Territorial Court of the Northern Reach]

Question: How many dockets has the court "Territorial Court of the Northern Reach" processed?
Thought 1: I need the court's node.
Action 1: RetrieveNode[Territorial Court of the Northern Reach]
Observation 1: The ID of this retrieval target node is nrterr.
Thought 2: Its dockets are its docket neighbours; I count them.
Action 2: NodeDegree[nrterr, docket]
Observation 2: The docket neighbor node degree of nrterr is: 41.
Thought 3: It processed 41 dockets.
Action 3: Finish[41]"""

_LEGAL_EXPLORE = """Question: Which court handled the case Harlow v. Brightwater Mills?
Knowledge triples: (none yet)
Next thought: I need the docket of Harlow v. Brightwater Mills and the court linked to it.

Question: Which court handled the case Harlow v. Brightwater Mills?
Knowledge triples: Harlow v. Brightwater Mills -> court -> Territorial Court of the Northern Reach
Next thought: The case was handled by the Territorial Court of the Northern Reach, so that is the answer."""

# --------------------------------------------------------------------------------------------------------------
# Graphs that are not GRBench's
# --------------------------------------------------------------------------------------------------------------
_GENERIC_AGENT = """Question: Who are the authors of the paper "Graph Reasoning at Scale"?
Thought 1: The question is about a paper node. I need to find it in the graph first.
Action 1: RetrieveNode[Graph Reasoning at Scale]
Observation 1: The ID of this retrieval target node is p_0131.
Thought 2: The authors of the paper are its author neighbours.
Action 2: NeighbourCheck[p_0131, author]
Observation 2: The author neighbors of p_0131 are: ["a_77", "a_12"].
Thought 3: I need the names of these two author nodes.
Action 3: NodeFeature[a_77, name], NodeFeature[a_12, name]
Observation 3.1: The name feature of a_77 is: Maria Ortiz.
Observation 3.2: The name feature of a_12 is: Ken Ito.
Thought 4: The authors are Maria Ortiz and Ken Ito.
Action 4: Finish[Maria Ortiz, Ken Ito]

Question: How many papers cite the paper "Sparse Attention Revisited"?
Thought 1: I need the paper node for "Sparse Attention Revisited".
Action 1: RetrieveNode[Sparse Attention Revisited]
Observation 1: The ID of this retrieval target node is p_2210.
Thought 2: Papers citing it are its cited_by neighbours; their number is the node degree.
Action 2: NodeDegree[p_2210, cited_by]
Observation 2: The cited_by neighbor node degree of p_2210 is: 14.
Thought 3: 14 papers cite it.
Action 3: Finish[14]"""

_GENERIC_EXPLORE = """Question: Which venue published the paper "Graph Reasoning at Scale"?
Knowledge triples: (none yet)
Next thought: I need to find the paper "Graph Reasoning at Scale" and follow its venue.

Question: Which venue published the paper "Graph Reasoning at Scale"?
Knowledge triples: Graph Reasoning at Scale -> venue -> KDD
Next thought: The paper "Graph Reasoning at Scale" was published at KDD, so the answer is KDD."""

#: Per domain (GRBench's, and ``generic``): the definition and examples the prompts show.
DOMAINS: dict[str, DomainPrompts] = {
    "dblp": DomainPrompts(_DBLP_DEFINITION, _DBLP_AGENT, _ACADEMIC_EXPLORE),
    "maple": DomainPrompts(_MAPLE_DEFINITION, _MAPLE_AGENT, _ACADEMIC_EXPLORE),
    "amazon": DomainPrompts(_AMAZON_DEFINITION, _AMAZON_AGENT, _AMAZON_EXPLORE),
    "goodreads": DomainPrompts(_GOODREADS_DEFINITION, _GOODREADS_AGENT, _GOODREADS_EXPLORE),
    "biomedical": DomainPrompts(_BIOMEDICAL_DEFINITION, _BIOMEDICAL_AGENT, _BIOMEDICAL_EXPLORE),
    "legal": DomainPrompts(_LEGAL_DEFINITION, _LEGAL_AGENT, _LEGAL_EXPLORE),
    "generic": DomainPrompts("", _GENERIC_AGENT, _GENERIC_EXPLORE),
}

_HETIONET = {"Anatomy", "Biological_Process", "Cellular_Component", "Compound", "Disease", "Gene", "Molecular_Function",
             "Pathway", "Pharmacologic_Class", "Side_Effect", "Symptom"}


def domain_of_types(type_features: dict[str, list[str]]) -> str:
    """The GRBench domain a graph's node types (and their features) show, else ``generic``: DBLP's authors have
    an organization and its papers keywords, MAPLE's papers a label."""
    types = set(type_features)
    if {"paper", "author", "venue"} <= types:
        paper, author = set(type_features["paper"]), set(type_features["author"])
        if "label" in paper:
            return "maple"
        return "dblp" if "organization" in author or {"keywords", "lang"} & paper else "maple"
    if {"item", "brand"} <= types:
        return "amazon"
    if "book" in types and types & {"author", "publisher", "series"}:
        return "goodreads"
    if len(types & _HETIONET) >= 3:
        return "biomedical"
    if {"opinion", "opinion_cluster", "docket", "court"} & types and "court" in types:
        return "legal"
    return "generic"
