"""STaRK's released files read as they are: the questions of each official split (and the human-generated
set), from both layouts STaRK's loaders use, and its three knowledge bases imported with their own types,
relation names, display names, candidate types and retrieval documents."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from kgagents.evals.datasets import DatasetError, load_dataset
from kgagents.evals.stark import StarkDataError, load_stark
from kgagents.tools.pgraph import open_graph

MAG_PAPER = "All-optical tri-state arithmetic logic unit using terahertz optical asymmetric demultiplexers"


@pytest.mark.parametrize(("split", "ids"), [("test", ["0", "1"]), ("val", ["2"]), ("train", ["3", "4"]),
                                            ("test-0.1", ["0"]), ("all", ["0", "1", "2", "3", "4"])])
def test_mag_splits_from_the_index_files(stark_root, split, ids):
    dataset = load_dataset("stark-mag", stark_root, split=split)
    assert [i.id for i in dataset.items] == ids
    first = dataset.items[0]
    assert first.inputs == {"graph": str(stark_root / "skb" / "mag"), "question_id": ids[0]}
    assert first.meta["candidate_types"] == ["paper"] and first.meta["stark_dataset"] == "mag"


def test_split_order_follows_the_index_file_and_human_set(stark_root, tmp_path):
    root = tmp_path / "stark"
    shutil.copytree(stark_root / "qa", root / "qa")
    (root / "skb").mkdir()
    (root / "skb" / "prime").symlink_to(stark_root / "skb" / "prime")
    (root / "qa" / "prime" / "split" / "train.index").write_text("4\n3\n")
    assert [i.id for i in load_dataset("stark-prime", root, split="train").items] == ["4", "3"]
    human = load_dataset("stark-prime", root, split="human").items
    assert [(i.question, i.gold) for i in human] == [("drugs for strongyloidiasis", ["0", "7"])]
    (root / "qa" / "prime" / "split" / "val.index").unlink()
    with pytest.raises(StarkDataError, match=r"no split file .*val.index.*--split all"):
        load_dataset("stark-prime", root, split="val")
    (root / "qa" / "prime" / "split" / "test.index").write_text("1\n99\n")
    with pytest.raises(StarkDataError, match=r"test.index: query id\(s\) 99 are not in"):
        load_dataset("stark-prime", root, split="test")


def test_one_dataset_folder_as_load_qa_and_load_skb_write_it(stark_root, tmp_path):
    folder = tmp_path / "amazon"
    shutil.copytree(stark_root / "qa" / "amazon", folder)
    shutil.copytree(stark_root / "skb" / "amazon" / "processed", folder / "processed")
    items = load_stark(folder, "test", name="amazon")
    assert [i.id for i in items] == ["1"] and items[0].gold == ["0", "1", "2"]
    assert items[0].inputs["graph"] == str(folder / "processed")


def test_the_generic_layout_needs_split_files_or_all(tmp_path, stark_root):
    folder = tmp_path / "kb"
    shutil.copytree(stark_root / "skb" / "prime" / "processed", folder / "skb")
    (folder / "qa.jsonl").write_text('{"id": 1, "query": "q1", "answer_ids": [0]}\n'
                                     '{"id": 2, "query": "q2", "answer_ids": "[0, 7]"}\n')
    with pytest.raises(DatasetError, match=r"no split file .*test.index"):
        load_dataset("stark", folder)  # the old loader evaluated every question, train and val included
    assert [i.id for i in load_dataset("stark", folder, split="all").items] == ["1", "2"]
    (folder / "split").mkdir()
    (folder / "split" / "test.index").write_text("2\n")
    assert [i.id for i in load_dataset("stark", folder).items] == ["2"]


def test_a_snapshot_with_several_datasets_needs_the_name(stark_root):
    with pytest.raises(StarkDataError, match="say which with --dataset stark-mag, stark-amazon or stark-prime"):
        load_dataset("stark", stark_root)
    with pytest.raises(DatasetError, match=r"does not exist. give --data STaRK's files"):
        load_dataset("stark", stark_root / "nowhere")
    with pytest.raises(StarkDataError, match=r"qa has no nosuch/ .it holds amazon, mag, prime."):
        load_stark(stark_root, "test", name="nosuch")


# --------------------------------------------------------------------------------------------------------------
# The knowledge bases
# --------------------------------------------------------------------------------------------------------------
def test_mag_import_types_relations_names_and_documents(stark_root):
    graph = open_graph(str(stark_root / "skb" / "mag"))
    stats = graph.stats()
    assert stats.types == ["author", "institution", "field_of_study", "paper"]  # not "0".."3"
    assert set(stats.relations) == {"author___affiliated_with___institution", "paper___cites___paper",
                                    "paper___has_topic___field_of_study", "author___writes___paper"}
    assert graph.meta["stark"]["dataset"] == "mag" and graph.meta["stark"]["candidate_types"] == ["paper"]
    assert [(n.id, n.type, n.name) for n in map(graph.node, ("0", "3", "4", "7", "9"))] == [
        ("0", "author", "Arindam Biswas"), ("3", "author", "3"),
        ("4", "institution", "Netaji Subhash Engineering College"), ("7", "field_of_study", "Optical computing"),
        ("9", "paper", MAG_PAPER)]
    assert graph.nodes_named("Netaji Subhash Engineering College")[0].id == "4"
    assert open_graph(str(stark_root / "skb" / "mag" / "processed")) is graph  # the processed folder itself
    # STaRK's MagSKB.get_doc_info(add_rel=True, compact=True): fields, then the relations over the undirected
    # graph (cited and citing papers alike; each author with its institutions)
    assert graph.features("9")["text"] == (
        " paper title: All-optical tri-state arithmetic logic unit using terahertz optical asymmetric "
        "demultiplexers. abstract: We propose an all-optical TALU implementation for electronic circuits. "
        "publication date: 2012-05-01. venue: Optics Communications. relations: . paper cites paper: (\"A ternary "
        "optical ALU\", \"Optical logic revisited\"),. paper has_topic field_of_study: (Electronic circuit, "
        "Optical computing),. author writes paper: (Arindam Biswas (Netaji Subhash Engineering College), Sourav "
        "Roy (Netaji Subhash Engineering College, University of Calcutta)),")
    assert graph.features("3")["text"] == "author name: Unknown. "  # DisplayName -1, counts unknown
    assert graph.features("1")["text"] == "author name: Sourav Roy. author paper count: 12. "
    assert graph.features("6")["text"] == " field of study: Electronic circuit. field paper count: 90000. "
    assert graph.features("11")["text"].startswith(" paper title: Low-power CMOS adders. abstract: Adders for "
                                                   "low-power electronic circuits. relations:")  # no date (-1)


def test_amazon_import_with_its_brand_category_and_color_nodes(stark_root):
    graph = open_graph(str(stark_root / "skb" / "amazon"))  # processed/cache/brand-category-color is chosen
    stats = graph.stats()
    assert stats.types == ["product", "brand", "category", "color"]
    assert set(stats.relations) == {"also_buy", "also_view", "has_brand", "has_category", "has_color"}
    assert graph.meta["stark"]["candidate_types"] == ["product"]
    assert [graph.node(i).name for i in ("6", "7", "8", "9", "10")] == ["Lake", "Loon Outdoors", "fishing",
                                                                        "fly fishing", "black"]
    assert graph.features("6")["text"] == "brand name: Lake"
    text = graph.features("0")["text"]
    # AmazonSKB.get_doc_info(add_rel=True, compact=True): reviews by votes, the asin feature left out, the
    # products bought or viewed with it over the undirected graph (1 → 0 counts), its brand
    assert text.startswith("product: Lake Products THREE-in-One Knot Tying Tool Fly Fishing. brand: Lake. "
                           "dimensions: 4 x 1 x 0.5 inches. weight: 0.8 ounces. description: NEW & IMPROVED "
                           "Replaces the Two-in-One Knot Tying Tool still ties many")
    assert ("#5: Attachment loop to clip onto clothing. reviews: #2: summary: Works Great. text: \"Due to an "
            "injury") in text and "asin B000LAKE01" not in text
    assert text.endswith("relations: products also purchased: #1: EZ Tie Blood Knot Tying Tool. #2: BenchMaster "
                         "Pocket Guide Fly Fishing Fishing. #3: Anglers Accessories Gehrke's Gink. products also "
                         "viewed: #1: Loon Outdoors UV Knot Sense. brand: Lake. ")
    assert open_graph(str(stark_root / "skb" / "amazon" / "processed")) is graph  # the same build


def test_amazon_products_only_folder(stark_root, tmp_path):
    folder = tmp_path / "products"
    shutil.copytree(stark_root / "skb" / "amazon" / "processed", folder, ignore=shutil.ignore_patterns("cache"))
    graph = open_graph(str(folder))
    assert graph.stats().types == ["product"] and set(graph.stats().relations) == {"also_buy", "also_view"}
    assert graph.node("3").name == "Anglers Accessories Gehrke's Gink"


def test_prime_import(stark_root):
    graph = open_graph(str(stark_root / "skb" / "prime"))
    assert set(graph.stats().types) == {"drug", "gene/protein", "disease"}
    assert graph.meta["stark"]["dataset"] == "prime" and graph.meta["stark"]["candidate_types"] is None
    assert graph.node("0").name == "Ivermectin" and graph.node("1").type == "gene/protein"
    assert graph.features("1")["text"] == (
        "name: CYP3A4. type: gene/protein. source: NCBI. details: name (gene name): cytochrome P450 family 3 "
        "subfamily A member 4. alias (other gene names): ['CP33', 'CYP3A3']. genomic_pos (genomic position): "
        "{'chr': '7', 'start': 99756960}. summary (protein summary text): A liver enzyme. interpro (protein family "
        "and classification information): ['Cytochrome P450']. type_of_gene (gene types): protein-coding. generif "
        "(PubMed text): CYP3A4 metabolises drugs; a second note. relations: ppi: {gene/protein: (GABRB3),}. "
        "enzyme: {drug: (Ivermectin, Rifampin),}")


def test_a_pair_both_bought_and_viewed_is_bought_only_as_starks_skb_keeps_it(tmp_path):
    """STaRK's SKB makes the graph undirected with one relation per pair, the mean of its edges' relations
    rounded down (to_undirected(reduce="mean") then .long()): Amazon's pair that is both "also bought" and "also
    viewed" is "also bought" only, in the documents and in the imported graph."""
    from kgagents.evals.stark_fixture import AMAZON_PRODUCTS, _edge_arrays, _save
    from kgagents.tools.pgraph.stark import document, read_processed, starks_relations

    products = {i: dict(p) for i, p in enumerate(AMAZON_PRODUCTS[:3])}
    edges = [(0, 0, 1), (0, 1, 1), (2, 1, 1)]  # 0 bought and viewed with 1; 1 viewed with 2 (listed 2 → 1)
    folder = tmp_path / "amazon" / "processed"
    _save(folder, node_info=products, edge_type_dict={0: "also_buy", 1: "also_view"}, **_edge_arrays(edges))
    skb = read_processed(folder)
    assert list(zip(skb.heads.tolist(), skb.edge_types.tolist(), skb.tails.tolist(), strict=True)) == [
        (0, 0, 1), (2, 1, 1)]
    assert document(skb, 0).endswith("relations: products also purchased: #1: EZ Tie Blood Knot Tying Tool. ")
    assert "products also viewed: #1: BenchMaster" in document(skb, 1) and "purchased: #1: Lake" in document(skb, 1)
    graph = open_graph(str(folder))
    assert graph.neighbours("0", "also_buy") == ["1"] and graph.neighbours("0", "also_view") == []
    # a graph whose pairs already run both ways keeps every relation of a pair, as STaRK does
    both = [np.array(a) for a in ([0, 1, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1])]
    assert [a.tolist() for a in starks_relations(*both, 2)] == [b.tolist() for b in both]
    # a mean no edge has: the pair's first edge carries it
    mixed = starks_relations(np.array([0, 0]), np.array([1, 1]), np.array([0, 2]), 3)
    assert [a.tolist() for a in mixed] == [[0], [1], [1]]


def test_stark_as_downloaded_says_to_unzip_processed_zip(tmp_path, stark_root):
    """Hugging Face's snapshot holds skb/<name>/processed.zip; the import and the evaluation say to unzip it."""
    import zipfile

    from kgagents.tools.pgraph.model import GraphFormatError

    snapshot = tmp_path / "stark"
    shutil.copytree(stark_root / "qa" / "prime", snapshot / "qa" / "prime")
    skb = snapshot / "skb" / "prime"
    skb.mkdir(parents=True)
    with zipfile.ZipFile(skb / "processed.zip", "w") as archive:
        for path in (stark_root / "skb" / "prime" / "processed").iterdir():
            archive.write(path, f"processed/{path.name}")
    with pytest.raises(GraphFormatError, match=r"processed\.zip is STaRK's knowledge base as downloaded, still "
                                               r"zipped.*unzip processed\.zip"):
        open_graph(str(skb))
    items = load_dataset("stark-prime", str(snapshot), split="test").items
    with pytest.raises(GraphFormatError, match=r"cd .*skb/prime && unzip processed\.zip"):
        open_graph(items[0].inputs["graph"])
