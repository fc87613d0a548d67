"""Dataset loaders: the layouts they read and the errors they give."""

from __future__ import annotations

import csv
import json

import pytest

from kgagents.evals.datasets import DATASETS, DatasetError, load_dataset


def gaia_tree(root, split="validation", *, attachment=True):
    folder = root / "2023" / split
    folder.mkdir(parents=True)
    rows = [
        {"task_id": "a1", "Question": "How many legs has a spider?", "Level": 1, "Final answer": "8",
         "file_name": "", "Annotator Metadata": {"Steps": "count"}},
        {"task_id": "b2", "Question": "Sum the column in the attached sheet.", "Level": "2", "Final answer": "12",
         "file_name": "b2.csv"},
        {"task_id": "c3", "Question": "Hard one", "Level": 3, "Final answer": "x, y", "file_name": None},
    ]
    (folder / "metadata.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    if attachment:
        (folder / "b2.csv").write_text("n\n5\n7\n")
    return folder


def test_gaia_from_the_hugging_face_layout(tmp_path):
    folder = gaia_tree(tmp_path)
    for path in (tmp_path, tmp_path / "2023", folder):  # repo root, year folder or split folder
        ds = load_dataset("gaia", path)
        assert ds.split == "validation" and ds.scorer == "gaia" and ds.group_label == "Level"
        assert [i.id for i in ds.items] == ["a1", "b2", "c3"]
        assert [i.group for i in ds.items] == ["Level 1", "Level 2", "Level 3"]
        b2 = ds.items[1]
        assert b2.gold == "12" and b2.attachments == [str((folder / "b2.csv").resolve())]
        assert ds.items[0].attachments == [] and ds.items[2].attachments == []
    assert [i.id for i in load_dataset("gaia", tmp_path, limit=2).items] == ["a1", "b2"]
    assert [i.id for i in load_dataset("gaia", tmp_path, ids=["c3"]).items] == ["c3"]


def test_gaia_errors_say_what_to_do(tmp_path):
    with pytest.raises(DatasetError, match=r"needs --data PATH.*gated"):
        load_dataset("gaia", None)
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset("gaia", tmp_path / "nope")
    with pytest.raises(DatasetError, match=r"no metadata.jsonl or metadata.parquet for split 'validation'"):
        load_dataset("gaia", tmp_path)
    gaia_tree(tmp_path / "noattach", attachment=False)
    with pytest.raises(DatasetError, match=r"attachment 'b2.csv' of task b2 is missing"):
        load_dataset("gaia", tmp_path / "noattach")
    with pytest.raises(DatasetError, match="has no split 'train'"):
        load_dataset("gaia", tmp_path, split="train")
    with pytest.raises(DatasetError, match="unknown dataset 'nope'"):
        load_dataset("nope", tmp_path)
    bad = tmp_path / "bad" / "2023" / "validation"
    bad.mkdir(parents=True)
    (bad / "metadata.jsonl").write_text('{"task_id": "x", "Question": "q"}\n{not json\n')
    with pytest.raises(DatasetError, match="line 2: not valid JSON"):
        load_dataset("gaia", tmp_path / "bad")


def test_gaia_test_split_without_public_answers(tmp_path):
    folder = tmp_path / "2023" / "test"
    folder.mkdir(parents=True)
    (folder / "metadata.jsonl").write_text(json.dumps({"task_id": "t", "Question": "q", "Level": 1,
                                                       "Final answer": "?", "file_name": ""}) + "\n")
    [item] = load_dataset("gaia", tmp_path, split="test").items
    assert item.gold == "?"


def simpleqa_csv(path, rows):
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["metadata", "problem", "answer"])
        w.writerows(rows)
    return path


def test_simpleqa_csv(tmp_path):
    meta = "{'topic': 'Science and technology', 'answer_type': 'Person', 'urls': ['https://example.org']}"
    path = simpleqa_csv(tmp_path / "simple_qa_test_set.csv", [
        [meta, "Who received the IEEE Frank Rosenblatt Award in 2010?", "Michio Sugeno"],
        ["{}", "Which city, with a comma, hosts it?", "Paris, France"],
    ])
    ds = load_dataset("simpleqa", path)
    assert ds.split == "test" and ds.scorer == "simpleqa" and ds.group_label == "Topic"
    first, second = ds.items
    assert (first.id, first.gold, first.group) == ("0", "Michio Sugeno", "Science and technology")
    assert first.meta["answer_type"] == "Person"
    assert second.question == "Which city, with a comma, hosts it?" and second.gold == "Paris, France"
    assert load_dataset("simpleqa", tmp_path).items[0].id == "0"  # a folder holding the CSV works too


def test_simpleqa_errors(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("question,answer\nq,a\n")
    with pytest.raises(DatasetError, match=r"lacks the column.*problem"):
        load_dataset("simpleqa", bad)
    with pytest.raises(DatasetError, match=r"no simple_qa_test_set.csv"):
        load_dataset("simpleqa", tmp_path)


@pytest.mark.slow
def test_a_seeded_sample_of_the_items(tmp_path):
    """The KGoT paper's 10 % of SimpleQA: 433 of its 4,326 questions, the same ones for the same seed, in order."""
    rows = [["{}", f"Question {i}?", f"answer {i}"] for i in range(4326)]
    path = simpleqa_csv(tmp_path / "simple_qa_test_set.csv", rows)
    sample = load_dataset("simpleqa", path, sample=0.1).items
    assert len(sample) == 433
    ids = [int(i.id) for i in sample]
    assert ids == sorted(ids) and len(set(ids)) == 433 and ids != list(range(433))
    assert [i.id for i in load_dataset("simpleqa", path, sample=0.1).items] == [i.id for i in sample]
    other = [i.id for i in load_dataset("simpleqa", path, sample=0.1, sample_seed=1).items]
    assert len(other) == 433 and other != [i.id for i in sample]
    assert len(load_dataset("simpleqa", path, sample=0.1, limit=5).items) == 5
    assert [i.id for i in load_dataset("simpleqa", path, sample=1.0).items] == [str(i) for i in range(4326)]
    for bad in (0, -0.1, 1.5):
        with pytest.raises(DatasetError, match="fraction"):
            load_dataset("simpleqa", path, sample=bad)


def test_registered_datasets():
    assert {"gaia", "simpleqa"} <= set(DATASETS)


@pytest.mark.slow
def test_gaia_from_a_parquet_metadata_file(tmp_path):
    """The same records as metadata.parquet: plain values come back (None for a missing file name, a dict for the
    annotator metadata), and the attachment is found next to it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "2023" / "validation"
    folder.mkdir(parents=True)
    rows = [
        {"task_id": "a1", "Question": "How many legs has a spider?", "Level": "1", "Final answer": "8",
         "file_name": "", "Annotator Metadata": {"Steps": "count", "Tools": "none"}},
        {"task_id": "b2", "Question": "Sum the column in the attached sheet.", "Level": "2", "Final answer": "12",
         "file_name": "b2.csv", "Annotator Metadata": None},
        {"task_id": "c3", "Question": "Hard one", "Level": "3", "Final answer": "x, y", "file_name": None,
         "Annotator Metadata": None},
    ]
    pq.write_table(pa.Table.from_pylist(rows), folder / "metadata.parquet")
    (folder / "b2.csv").write_text("n\n5\n7\n")
    ds = load_dataset("gaia", tmp_path)
    assert [(i.id, i.gold, i.group) for i in ds.items] == [("a1", "8", "Level 1"), ("b2", "12", "Level 2"),
                                                           ("c3", "x, y", "Level 3")]
    assert ds.items[1].attachments == [str((folder / "b2.csv").resolve())] and ds.items[2].attachments == []
    assert ds.items[0].meta == {"annotator": {"Steps": "count", "Tools": "none"}} and ds.items[1].meta == {}

    (folder / "metadata.parquet").write_bytes(b"PAR1 not really a parquet file")
    with pytest.raises(DatasetError, match=r"metadata.parquet is not a readable Parquet file"):
        load_dataset("gaia", tmp_path)
