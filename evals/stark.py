"""STaRK (paper 004, §3.1, §4, Table 4): its questions in their released layout with the official splits, its
semi-structured knowledge bases, and its ranking metrics exactly as its evaluator computes them.

**Data.** ``--dataset stark-mag|stark-amazon|stark-prime --data DIR`` reads STaRK's released files
(Hugging Face dataset ``snap-stanford/stark``) as they are, in either of the layouts STaRK's own loaders use:

- a snapshot of the dataset: ``DIR/qa/<name>/stark_qa/stark_qa.csv`` (and
  ``stark_qa_human_generated_eval.csv``), ``DIR/qa/<name>/split/{train,val,test,test-0.1}.index``,
  ``DIR/skb/<name>/processed/`` (the SKB);
- one dataset's folder, as ``load_qa(name, root)`` and ``load_skb(name, root)`` write it under
  ``root/<name>``: ``DIR/stark_qa/``, ``DIR/split/`` and ``DIR/processed/`` (or ``DIR/skb/``).

``--split`` is ``test`` (default), ``val``, ``train``, ``test-0.1`` (STaRK's 10% sample of the test split) —
the query ids of ``split/<split>.index``, in that file's order — or ``human`` (every question of the
human-generated set). The generic ``--dataset stark`` also reads a plain folder: a knowledge base (``skb/`` or
the folder itself: node and edge tables, or a processed folder) and ``qa.jsonl`` / ``qa.csv`` (``id, query,
answer_ids``); without split files, ``--split all`` evaluates every question and any other split is an error.

**Candidates.** STaRK ranks only its candidate nodes: MAG's papers, Amazon's products, every PrimeKG node.
Each item carries its dataset's candidate types; Agent-G's two retrieval modules rank only them, and the
scorer scores over them.

**Metrics** (:func:`ranking_metrics`): STaRK's ``Evaluator`` turns a run's ranking into a score per ranked id,
gives every candidate the run did not rank the score ``min − 1`` (below the lowest ranked one), keeps the
candidates, and computes torchmetrics' retrieval functions over the whole candidate set — so a short ranking
still gets Hit@5 and MRR from the candidates after it, in the order torch's sort puts those ties. This module
does the same with torch's own ``argsort`` (Hit@k, Recall@k) and ``topk`` (MRR), the calls torchmetrics makes,
so ties fall where they fall in STaRK (the two calls break them differently: an unranked answer can be within
the first 20 for Recall@20 and far down for MRR). A ranking gets the scores ``n, n−1, …, 1`` (only their order
matters, below). Where torchmetrics' versions differ, the scorer ``stark`` follows torchmetrics before 1.7.4
(what STaRK's published numbers and the paper's were computed with, in 2024: every candidate counts);
``stark-torchmetrics-1.7.4`` follows 1.7.4 and later (the change came in 1.7.4 and 1.8.0), where Recall and MRR
ignore the relevant candidates scored ≤ 0 — with STaRK's ``min − 1`` for the unranked ones and the scores
above, an unranked answer then never counts for them (Hit@k is unchanged).
``tests/agent_g/data/stark_metric_vectors.json`` holds cases computed by STaRK's ``Evaluator`` under
torchmetrics 1.4.2, 1.7.3, 1.7.4 and 1.8.2 (the script that made them is beside it).
"""

from __future__ import annotations

import ast
import asyncio
import csv
import json
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from kgagents.evals.datasets import DatasetError, DatasetSpec, Item
from kgagents.evals.scorers import Score, register_scorer
from kgagents.tools.pgraph import open_graph

QA_FILES = ("qa.jsonl", "qa.csv", "stark_qa.csv", "questions.jsonl")
QA_CSV = "stark_qa.csv"
HUMAN_CSV = "stark_qa_human_generated_eval.csv"
SPLITS = ("test", "val", "train", "test-0.1", "human", "all")
NAMES = ("mag", "amazon", "prime")
#: STaRK's candidate node types per dataset (its SKB classes' ``candidate_types``); ``None``: every node.
CANDIDATE_TYPES: dict[str, list[str] | None] = {"mag": ["paper"], "amazon": ["product"], "prime": None}
METRICS = ("hit@1", "hit@5", "recall@20", "mrr")
#: torchmetrics' two behaviours: before 1.7.4 every relevant candidate counts; from 1.7.4 on (the change came
#: in 1.7.4 and 1.8.0) Recall and MRR ignore the relevant candidates scored ≤ 0.
TORCHMETRICS_BEHAVIOURS = ("<1.7.4", ">=1.7.4")
HOW_TO = ("give --data STaRK's files as they are released (the Hugging Face dataset snap-stanford/stark): a "
          "snapshot folder with qa/<name>/{stark_qa,split} and skb/<name>/processed, or one dataset's folder with "
          "stark_qa/, split/ and processed/; for --dataset stark also a folder with skb/ and qa.jsonl or qa.csv "
          "(id, query, answer_ids)")


class StarkDataError(DatasetError):
    """The knowledge base or its questions are missing or malformed."""


# ----------------------------------------------------------------------------------------------------------
# Questions, splits and the layout of STaRK's files
# ----------------------------------------------------------------------------------------------------------
def _answer_ids(value: Any, where: str) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(int(value))]
    if isinstance(value, str):
        try:
            parsed = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError) as exc:
            raise StarkDataError(f"{where}: answer_ids must be a list of ids, got {value[:80]!r}") from exc
        return _answer_ids(parsed, where)
    raise StarkDataError(f"{where}: answer_ids must be a list of ids, got {value!r}")


def read_qa(path: Path) -> list[dict[str, Any]]:
    """The questions ``{id, query, answer_ids}`` of a JSON-lines or CSV file."""
    rows: list[dict[str, Any]] = []
    try:
        if path.suffix == ".csv":
            with path.open(encoding="utf-8", newline="") as f:
                raw = list(enumerate(csv.DictReader(f), 2))
        else:
            raw = [(n, json.loads(line)) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                   if line.strip()]
    except (OSError, UnicodeDecodeError, ValueError, csv.Error) as exc:
        raise StarkDataError(f"cannot read the questions {path}: {exc}") from exc
    for number, row in raw:
        where = f"{path}, line {number}"
        if not isinstance(row, dict) or not row.get("query") or "answer_ids" not in row:
            raise StarkDataError(f"{where}: a question needs query and answer_ids")
        rows.append({"id": str(row.get("id", number)).strip(), "query": str(row["query"]).strip(),
                     "answer_ids": _answer_ids(row["answer_ids"], where)})
    return rows


def read_split(path: Path) -> list[str]:
    """The query ids of a STaRK split file (one per line), in its order."""
    try:
        lines = path.read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError) as exc:
        raise StarkDataError(f"cannot read the split {path}: {exc}") from exc
    for line in lines:
        if not line.lstrip("-").isdigit():
            raise StarkDataError(f"{path}: a split file lists query ids, one per line; got {line[:40]!r}")
    return [str(int(line)) for line in lines]


@dataclass(frozen=True)
class Layout:
    """Where one dataset's questions, split files and knowledge base are."""

    questions: Path
    human: Path | None
    splits: Path | None
    skb: Path


def _skb_of(folder: Path) -> Path | None:
    for candidate in (folder / "processed", folder / "skb", folder):
        if candidate.is_dir() and ((candidate / "node_info.pkl").is_file() or (candidate / "processed").is_dir()
                                   or (candidate / "processed.zip").is_file()
                                   or (candidate / "cache").is_dir()
                                   or any(p.name.startswith("nodes.") for p in candidate.iterdir())):
            return candidate
    return None


def find_layout(path: Path, name: str | None) -> Layout:
    """The layout of ``path`` for the dataset ``name`` (``None``: the generic loader; see the module docstring)."""
    if path.is_file():
        skb = _skb_of(path.parent)
        if skb is None:
            raise StarkDataError(f"{path.parent}: no knowledge base beside the questions. {HOW_TO}")
        return Layout(path, None, path.parent / "split" if (path.parent / "split").is_dir() else None, skb)
    if (path / "qa").is_dir():  # a snapshot of STaRK's dataset
        names = sorted(p.name for p in (path / "qa").iterdir() if p.is_dir())
        if name is None:
            if len(names) != 1:
                raise StarkDataError(f"{path}/qa holds {', '.join(names) or 'no dataset'}: say which with --dataset "
                                     "stark-mag, stark-amazon or stark-prime")
            name = names[0]
        qa = path / "qa" / name
        if not qa.is_dir():
            raise StarkDataError(f"{path}/qa has no {name}/ (it holds {', '.join(names) or 'nothing'}). {HOW_TO}")
        skb = path / "skb" / name
        if not skb.is_dir():
            raise StarkDataError(f"{path}/skb/{name} is missing: STaRK's SKB (skb/{name}/processed). {HOW_TO}")
        return Layout(qa / "stark_qa" / QA_CSV, qa / "stark_qa" / HUMAN_CSV, qa / "split", skb)
    if (path / "stark_qa").is_dir():  # one dataset's folder, as load_qa(name, root) / load_skb(name, root) write it
        skb = _skb_of(path)
        if skb is None or skb == path:
            raise StarkDataError(f"{path}: no knowledge base (processed/ or skb/) beside stark_qa/. {HOW_TO}")
        return Layout(path / "stark_qa" / QA_CSV, path / "stark_qa" / HUMAN_CSV, path / "split", skb)
    questions = next((path / n for n in QA_FILES if (path / n).is_file()), None)
    if questions is None:
        raise StarkDataError(f"{path}: no questions (qa/<name>/stark_qa, stark_qa/, or {', '.join(QA_FILES)}). "
                             f"{HOW_TO}")
    skb = _skb_of(path)
    if skb is None:
        raise StarkDataError(f"{path}: no knowledge base (skb/, processed/ or node and edge tables). {HOW_TO}")
    return Layout(questions, None, path / "split" if (path / "split").is_dir() else None, skb)


def split_questions(layout: Layout, split: str) -> list[dict[str, Any]]:
    """The questions of ``split``: the query ids of ``split/<split>.index`` in its order, every question of
    the human-generated set, or every question (``all``)."""
    if split == "human":
        if layout.human is None or not layout.human.is_file():
            raise StarkDataError(f"no human-generated questions ({HUMAN_CSV} beside {layout.questions.name})")
        return read_qa(layout.human)
    if not layout.questions.is_file():
        raise StarkDataError(f"no questions: {layout.questions} is missing. {HOW_TO}")
    rows = read_qa(layout.questions)
    if split == "all":
        return rows
    index = None if layout.splits is None else layout.splits / f"{split}.index"
    if index is None or not index.is_file():
        where = index or layout.questions.parent / "split" / f"{split}.index"
        raise StarkDataError(f"no split file {where}: STaRK's splits are qa/<name>/split/<split>.index; give "
                             "--split all to evaluate every question")
    by_id = {r["id"]: r for r in rows}
    ids = read_split(index)
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise StarkDataError(f"{index}: query id(s) {', '.join(missing[:5])} are not in {layout.questions}")
    return [by_id[i] for i in ids]


def load_stark(path: Path, split: str, name: str | None = None) -> list[Any]:
    """The questions of one split of a STaRK dataset, each with the knowledge base as its graph, its query id
    (STaRK's precomputed query embeddings are keyed by it) and its dataset's candidate types."""
    layout = find_layout(path, name)
    rows = split_questions(layout, split)
    meta: dict[str, Any] = {}
    if name is not None:
        meta = {"stark_dataset": name, "candidate_types": CANDIDATE_TYPES[name]}
    prefix = "human:" if split == "human" else ""  # the human-generated questions have ids of their own
    return [Item(id=row["id"], question=row["query"], gold=row["answer_ids"], group=split,
                 inputs={"graph": str(layout.skb), "question_id": prefix + row["id"]},
                 meta={"answer_ids": row["answer_ids"], **meta}) for row in rows]


# ----------------------------------------------------------------------------------------------------------
# STaRK's evaluator
# ----------------------------------------------------------------------------------------------------------
def _id_key(node_id: str) -> tuple[int, int, str]:
    """STaRK's candidate order: node indices ascending (ids that are not integers after them, as text)."""
    text = str(node_id)
    return (0, int(text), "") if text.lstrip("-").isdigit() else (1, 0, text)


class Candidates:
    """A candidate set in STaRK's order (ascending node index), with each id's position."""

    def __init__(self, ids: Sequence[str]) -> None:
        self.ids = sorted(dict.fromkeys(str(i) for i in ids), key=_id_key)
        self.position = {node_id: n for n, node_id in enumerate(self.ids)}

    def __len__(self) -> int:
        return len(self.ids)


def rank_scores(ranked: Sequence[str]) -> list[float]:
    """The scores a ranking of ``n`` ids stands for: ``n, n−1, …, 1`` (strictly positive, decreasing)."""
    return [float(len(ranked) - i) for i in range(len(ranked))]


def ranking_metrics(ranked: Sequence[str], gold: Sequence[str], candidates: Candidates | Sequence[str] | None = None,
                    *, scores: Sequence[float] | None = None, torchmetrics: str = "<1.7.4") -> dict[str, float]:
    """Hit@1, Hit@5, Recall@20 and MRR of a ranking as STaRK's ``Evaluator.evaluate`` computes them.

    ``ranked`` (best first; a repeated id counts at its first place) stands for the prediction dict ``{id:
    score}`` with ``scores`` (default :func:`rank_scores`); every candidate not in it scores ``min(scores) −
    1``; ids outside ``candidates`` are dropped, as gold ids outside it are (STaRK indexes both by the
    candidates). ``candidates`` default to the ranked and gold ids. An empty ranking scores 0 (STaRK's
    evaluator cannot take one). ``torchmetrics``: ``"<1.7.4"`` (every relevant candidate counts) or
    ``">=1.7.4"`` (Recall and MRR drop the relevant candidates scored ≤ 0), see the module docstring. """
    import torch  # torch: seconds to import, only where tensors are read

    if torchmetrics not in TORCHMETRICS_BEHAVIOURS:
        raise ValueError(f"torchmetrics behaviour must be one of {', '.join(TORCHMETRICS_BEHAVIOURS)}")
    zero = dict.fromkeys(METRICS, 0.0)
    order: dict[str, float] = {}
    given = list(scores) if scores is not None else rank_scores(list(dict.fromkeys(str(r) for r in ranked)))
    if scores is not None and len(given) != len(ranked):
        raise ValueError(f"{len(given)} scores for {len(ranked)} ranked ids")
    if scores is None:
        ranked = list(dict.fromkeys(str(r) for r in ranked))
    for node_id, score in zip((str(r) for r in ranked), given, strict=True):
        order.setdefault(node_id, float(score))
    if not order:
        return zero
    if not isinstance(candidates, Candidates):
        candidates = Candidates(list(candidates) if candidates is not None else [*order, *map(str, gold)])
    pred = torch.tensor(list(order.values()), dtype=torch.float32)
    all_pred = torch.full((len(candidates),), float(pred.min() - 1), dtype=torch.float32)
    for node_id, score in order.items():
        position = candidates.position.get(node_id)
        if position is not None:
            all_pred[position] = score
    target = torch.zeros(len(candidates), dtype=torch.long)
    for node_id in gold:
        position = candidates.position.get(str(node_id))
        if position is not None:
            target[position] = 1
    if not len(candidates) or not int(target.sum()):
        return zero
    order_desc = torch.argsort(all_pred, dim=-1, descending=True)  # hit rate and recall sort so
    counted = torch.where(all_pred > 0, target, torch.zeros_like(target)) if torchmetrics == ">=1.7.4" else target
    out = {"hit@1": float(target[order_desc][:1].sum() > 0), "hit@5": float(target[order_desc][:5].sum() > 0),
           "recall@20": float(counted[order_desc][:20].sum()) / float(target.sum())}
    top = counted[all_pred.topk(len(candidates), sorted=True, dim=-1)[1]]  # reciprocal rank sorts so
    found = torch.nonzero(top).view(-1)
    out["mrr"] = 1.0 / (float(found[0]) + 1.0) if len(found) else 0.0
    return out


def ranked_of(answer: Any, state: Mapping[str, Any]) -> list[str]:
    """A run's ranking: the state's ``ranked_ids``, else the answer (a JSON list, or one id)."""
    if state.get("ranked_ids") is not None:
        return [str(r) for r in state["ranked_ids"]]
    if isinstance(answer, list):
        return [str(a) for a in answer]
    if isinstance(answer, str) and answer.strip().startswith("["):
        try:
            return [str(a) for a in json.loads(answer)]
        except ValueError:
            return []
    return [str(answer)] if answer else []


class StarkScorer:
    """STaRK's metrics per question over its candidate set, and their means; an item is correct when its first
    id is an answer (Hit@1). A run that records its output after each iteration (``curve``: Agent-G with
    ``iteration_metrics``) also gets the metrics it would have had with T = 1, 2, … (the paper's Figure 5)."""

    needs_model = False

    def __init__(self, torchmetrics: str = "<1.7.4") -> None:
        if torchmetrics not in TORCHMETRICS_BEHAVIOURS:
            raise ValueError(f"torchmetrics behaviour must be one of {', '.join(TORCHMETRICS_BEHAVIOURS)}")
        self.torchmetrics = torchmetrics
        self.name = "stark" if torchmetrics == "<1.7.4" else "stark-torchmetrics-1.7.4"
        self._candidates: dict[tuple[str, tuple[str, ...] | None], Candidates] = {}
        self._lock = threading.Lock()

    def candidates_of(self, item: Any) -> Candidates | None:
        """The item's candidate set: the nodes of its knowledge base of its dataset's candidate types (those
        the item names, else those the knowledge base records); ``None`` without a knowledge base."""
        graph_ref = (getattr(item, "inputs", None) or {}).get("graph")
        if not graph_ref:
            return None

        graph = open_graph(graph_ref)
        meta = getattr(item, "meta", None) or {}
        types = meta["candidate_types"] if "candidate_types" in meta else \
            (graph.meta.get("stark") or {}).get("candidate_types")
        key = (graph.ref.get("fingerprint", str(graph_ref)), tuple(types) if types else None)
        with self._lock:
            found = self._candidates.get(key)
        if found is None:
            found = Candidates(candidate_ids(graph, types))
            with self._lock:
                self._candidates[key] = found
        return found

    async def score(self, item: Any, answer: Any) -> Score:
        return await self.score_run(item, answer, {})

    async def score_run(self, item: Any, answer: Any, state: dict[str, Any]) -> Score:
        candidates = await asyncio.to_thread(self.candidates_of, item)
        metrics = ranking_metrics(ranked_of(answer, state), item.gold, candidates, torchmetrics=self.torchmetrics)
        details: dict[str, Any] = {k: round(v, 6) for k, v in metrics.items()}
        if state.get("truncated_egos"):  # a cap on ego-graphs (max_nodes) cut this item's retrieval
            details["truncated_egos"] = len(state["truncated_egos"])
        curve = state.get("curve")
        if curve:
            details["curve"] = [{k: round(v, 6) for k, v in ranking_metrics(
                [str(r) for r in (ranking if isinstance(ranking, list) else [])], item.gold, candidates,
                torchmetrics=self.torchmetrics).items()} for ranking in curve]
        return Score(correct=metrics["hit@1"] == 1.0, grade="HIT" if metrics["hit@1"] else "MISS", details=details)

    def metrics(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(records)}
        for key in METRICS:
            values = [float((r.get("details") or {}).get(key) or 0.0) for r in records]
            out[key] = statistics.fmean(values) if values else 0.0
        out.update(curve_means(records, METRICS))
        out["items with cut ego-graphs"] = sum(1 for r in records if (r.get("details") or {}).get("truncated_egos"))
        out["failed runs"] = sum(1 for r in records if r.get("error"))
        return out


def curve_means(records: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[str, float]:
    """Per-iteration means ``"<key> t=<t>"`` of the records' ``details["curve"]`` (a record whose run stopped
    earlier keeps its last value); empty when no record has a curve."""
    curves = [(r.get("details") or {}).get("curve") or [] for r in records]
    length = max((len(c) for c in curves), default=0)
    if not length:
        return {}
    out: dict[str, float] = {}
    for t in range(length):
        for key in keys:
            values = [float((c[min(t, len(c) - 1)] if c else {}).get(key) or 0.0) for c in curves]
            out[f"{key} t={t + 1}"] = statistics.fmean(values)
    return out


def candidate_ids(graph: Any, types: Sequence[str] | None) -> list[str]:
    """The ids of the graph's nodes of ``types`` (every node when ``None``)."""
    if hasattr(graph, "type_mask") and hasattr(graph, "id_of"):
        rows = np.flatnonzero(graph.type_mask(types)) if types else np.arange(graph.node_count)
        return [graph.id_of(int(i)) for i in rows]
    wanted = set(types or [])
    return [n.id for n in graph.iter_nodes() if not wanted or n.type in wanted]


def register_datasets(register: Callable[[Any], None]) -> None:
    """Plug the STaRK datasets (generic and the three released ones) and their scorers into the evaluation."""

    register(DatasetSpec(name="stark", load=load_stark, scorer="stark", splits=SPLITS, default_split="test",
                         group_label="Split", how_to_get=HOW_TO, context={"task": "retrieval"}))
    for name in NAMES:
        register(DatasetSpec(name=f"stark-{name}", load=partial(load_stark, name=name), scorer="stark",
                             splits=SPLITS, default_split="test", group_label="Split", how_to_get=HOW_TO,
                             context={"task": "retrieval", "candidate_types": CANDIDATE_TYPES[name]}))
    register_scorer("stark", lambda grader_model=None, **_: StarkScorer("<1.7.4"))
    register_scorer("stark-torchmetrics-1.7.4", lambda grader_model=None, **_: StarkScorer(">=1.7.4"))
