"""STaRK-style retrieval (paper 004, §3.1, §4): the dataset of a semi-structured knowledge base and its questions,
and STaRK's ranking metrics (Hit@1, Hit@5, Recall@20, MRR).

``--data DIR``: a folder with the knowledge base (``DIR/skb/`` or ``DIR`` itself, in a layout
:func:`tools.pgraph.loaders.load_stark` reads: node and edge tables, or STaRK's processed files) and the questions
(``qa.jsonl`` / ``qa.csv`` / ``stark_qa.csv`` in ``DIR``): ``id``, ``query``, ``answer_ids`` (a list, or the text of
one as STaRK's CSV writes it). STaRK's files come from its authors' Hugging Face datasets (``snap-stanford/stark``).

The metrics are rank-based over the candidates, as STaRK's evaluator defines them, with strictly positive scores
for every ranked candidate (the facts in the project's scorer notes: recent torchmetrics ignore scores ≤ 0 for
recall and MRR): a gold candidate the run did not rank counts as ranked after every ranked one.
"""

from __future__ import annotations

import ast
import csv
import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evals.scorers import Score, hit_at_k, recall_at_k, reciprocal_rank

QA_FILES = ("qa.jsonl", "qa.csv", "stark_qa.csv", "questions.jsonl")
HOW_TO = ("give --data a folder with the knowledge base (skb/ or the folder itself: nodes.* + edges.*, or STaRK's "
          "processed files) and its questions (qa.jsonl or qa.csv: id, query, answer_ids); STaRK's data comes from "
          "the snap-stanford/stark datasets on Hugging Face")


class StarkDataError(ValueError):
    """The knowledge base or its questions are missing or malformed."""


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
        rows.append({"id": str(row.get("id", number)), "query": str(row["query"]).strip(),
                     "answer_ids": _answer_ids(row["answer_ids"], where)})
    return rows


def load_stark(path: Path, split: str) -> list[Any]:
    """The questions of a STaRK-style folder, each with the knowledge base as its graph."""
    from evals.datasets import Item

    folder = path if path.is_dir() else path.parent
    qa = path if path.is_file() else next((folder / n for n in QA_FILES if (folder / n).is_file()), None)
    if qa is None:
        raise StarkDataError(f"{folder}: no questions ({', '.join(QA_FILES)}). {HOW_TO}")
    skb = folder / "skb" if (folder / "skb").is_dir() else folder
    return [Item(id=row["id"], question=row["query"], gold=row["answer_ids"], group=split,
                 inputs={"graph": str(skb)}, meta={"answer_ids": row["answer_ids"]}) for row in read_qa(qa)]


def ranking_metrics(ranked: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    """Hit@1, Hit@5, Recall@20 and MRR of one ranked list against the gold ids.

    The ranked ids get strictly positive, decreasing scores and go through the score-based definitions
    (:func:`evals.scorers.hit_at_k` and the others); a gold id the run did not rank stays unretrieved: it counts in
    Recall's denominator and is never a hit.
    """
    ranked = list(dict.fromkeys(str(r) for r in ranked))
    golds = {str(g) for g in gold}
    if not golds:
        return {"hit@1": 0.0, "hit@5": 0.0, "recall@20": 0.0, "mrr": 0.0}
    scores = [float(len(ranked) - i) for i in range(len(ranked))]
    relevant = [r in golds for r in ranked]
    found = sum(relevant[:20]) if ranked else 0
    return {"hit@1": hit_at_k(scores, relevant, 1) if ranked else 0.0,
            "hit@5": hit_at_k(scores, relevant, 5) if ranked else 0.0,
            "recall@20": (recall_at_k(scores, relevant, 20) * sum(relevant) / len(golds)) if ranked and any(relevant)
            else found / len(golds),
            "mrr": reciprocal_rank(scores, relevant) if ranked else 0.0}


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
    """STaRK's metrics per question and their means; an item is correct when its first id is an answer."""

    name = "stark"
    needs_model = False

    async def score(self, item: Any, answer: Any) -> Score:
        return await self.score_run(item, answer, {})

    async def score_run(self, item: Any, answer: Any, state: dict[str, Any]) -> Score:
        metrics = ranking_metrics(ranked_of(answer, state), item.gold)
        return Score(correct=metrics["hit@1"] == 1.0, grade="HIT" if metrics["hit@1"] else "MISS",
                     details={k: round(v, 6) for k, v in metrics.items()})

    def metrics(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(records)}
        for key in ("hit@1", "hit@5", "recall@20", "mrr"):
            values = [float((r.get("details") or {}).get(key) or 0.0) for r in records]
            out[key] = statistics.fmean(values) if values else 0.0
        out["failed runs"] = sum(1 for r in records if r.get("error"))
        return out


def register_datasets(register: Callable[[Any], None]) -> None:
    """Plug the STaRK-style dataset and its scorer into the evaluation."""
    from evals.datasets import DatasetSpec
    from evals.scorers import register_scorer

    register(DatasetSpec(name="stark", load=load_stark, scorer="stark", splits=("test", "val", "train", "human"),
                         default_split="test", group_label="Split", how_to_get=HOW_TO,
                         context={"task": "retrieval"}))
    register_scorer("stark", lambda grader_model=None, **_: StarkScorer())
    from evals.runner import Adapter, register_adapter

    register_adapter("agent-g", Adapter(stats=lambda state: {"iterations": int(state.get("t") or 0),
                                                             "tool_calls": 0}))
