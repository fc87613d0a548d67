"""CR-LT-KGQA / CoLoTa: loaders, gold reasoning paths, the ARK-V1 paper's metrics, and the ARK-V1 evaluation.

Datasets (copied into ``evals/data/colota/``, see ``PROVENANCE.md`` there):

- :func:`load_cr_lt` — the 200 seed questions S1–S200 with their cached Wikidata subgraphs
  (``customized_dataset.jsonl``, the data ARK-V1 is evaluated on), joined with the CoLoTa seeds' gold triples,
  inference rules and reasoning steps;
- :func:`load_colota` — the CoLoTa QA (1,691) and claim-verification (1,650) files (no KG);
- :func:`load_cr_lt_kgqa` — CoLoTa's predecessor files with the old key names.

Every known defect of these files is handled and reported on the record it affects (``issues``):
null QIDs, question entities missing from a subgraph, repeated ids, an answer field holding text, entity names
with a stray ``", "`` prefix, generated records that copy a seed's triples, invalid JSON.

Metrics (paper §IV-B, :func:`colota_metrics`): answer rate, conditional accuracy and overall accuracy per run,
as mean ± standard deviation over the R runs, and the entropy-based reliability ``1 − H / log2 3`` per question,
averaged over the questions.

The data are read by :mod:`kgagents.evals.colota_data`, the metrics are :mod:`kgagents.evals.colota_metrics`;
this module gathers their names, registers the datasets, scorer and ARK-V1 adapter with the batch runner, and
runs the evaluation (:func:`evaluate_ark`): the ARK-V1 workflow over CR-LT through the batch runner
(:mod:`kgagents.evals.runner`): each (question, run) is a checkpointed thread, and a repeated call resumes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from kgagents.evals.colota_data import (
    COLOTA_FILES,
    CR_LT_KGQA_FILES,
    CR_LT_SUBGRAPHS,
    DATA_DIR,
    SEEDS,
    CoLoTaDataError,
    GoldTriple,
    KGQAQuestion,
    data_issues,
    load_colota,
    load_cr_lt,
    load_cr_lt_kgqa,
    resolve_gold_triples,
)
from kgagents.evals.colota_metrics import (
    ANSWERS,
    colota_metrics,
    format_metrics,
    normalise_answer,
    paper_protocol,
    paper_table,
    records_to_answers,
    reliability,
)
from kgagents.evals.datasets import Dataset, DatasetError, DatasetSpec, Item, register_dataset
from kgagents.evals.runner import Adapter, EvalOptions, default_input, evaluate
from kgagents.evals.scorers import Score, register_scorer
from kgagents.nodes.ark import ArkInput, has_graph

__all__ = ["ANSWERS", "COLOTA_FILES", "CR_LT_KGQA_FILES", "CR_LT_SUBGRAPHS", "DATA_DIR", "HOW_TO_GET", "SEEDS",
           "CoLoTaDataError", "CoLoTaScorer", "GoldTriple", "KGQAQuestion", "ark_answer_failed", "ark_input",
           "check_ark_dataset", "colota_metrics", "data_issues", "evaluate_ark", "format_metrics", "load_colota",
           "load_cr_lt", "load_cr_lt_kgqa", "normalise_answer", "paper_protocol", "paper_table",
           "records_to_answers", "register_datasets", "reliability", "resolve_gold_triples", "to_items"]


# ---------------------------------------------------------------------------------------------------------------
# Batch-runner plug-ins: datasets, scorer, ARK-V1 adapter
# ---------------------------------------------------------------------------------------------------------------
HOW_TO_GET = (f"The CoLoTa / CR-LT files ship with kgagents in {DATA_DIR} (pass that folder, or a folder holding "
              "the same files, as --data).")


def ark_input(question: KGQAQuestion) -> dict[str, Any]:
    """The ARK-V1 graph input of a CR-LT question: its subgraph by file and id (small checkpoints)."""
    if question.graph_file is None:
        raise CoLoTaDataError(f"{question.id}: no subgraph (only the CR-LT subgraph dataset has graphs)")
    return {"kg_file": question.graph_file, "kg_id": question.id, "question_type": "yes_no",
            "question_id": question.id}


def to_items(questions: Sequence[KGQAQuestion]) -> list[Any]:
    """The questions as the batch runner's items (gold = the boolean answer; group = first reasoning strategy)."""
    items = []
    for q in questions:
        inputs = ark_input(q) if q.graph_file else {}
        items.append(Item(id=q.id, question=q.question, gold=q.answer, inputs=inputs,
                          group=(q.reasoning_strategy or ["(none)"])[0],
                          meta={"subset": q.subset, "q_entity": q.q_entity, "gold_triples": q.gold_triples,
                                "issues": q.issues}))
    return items


class CoLoTaScorer:
    """True / False / None answers against the boolean gold; metrics as in the ARK-V1 paper."""

    name = "colota"
    needs_model = False

    async def score(self, item: Any, answer: Any) -> Any:
        given = normalise_answer(answer)
        if item.gold is None:
            return Score(correct=None, grade="NO_GOLD")
        if given is None:
            return Score(correct=False, grade="ABSTAINED")
        return Score(correct=given == item.gold, grade="CORRECT" if given == item.gold else "INCORRECT")

    def metrics(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """:func:`colota_metrics` over the runner's records; failed runs are counted apart and left out."""
        m = colota_metrics(*records_to_answers(records))
        finished = [r for r in records if not r.get("error")]
        correct = sum(1 for r in finished if r.get("correct") is True)
        flat: dict[str, Any] = {"n": len(records), "correct": correct,
                                "accuracy": correct / len(finished) if finished else None,
                                "questions": m["questions"], "runs": m["runs"], "failed_runs": m["failed_runs"]}
        for key in ("answer_rate", "conditional_accuracy", "overall_accuracy"):
            flat[key], flat[f"{key}_std"] = m[key]["mean"], m[key]["std"]
        flat["reliability"] = m["reliability"]
        return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in flat.items()}


def check_ark_dataset(dataset: Any) -> None:
    """Refuse a dataset whose questions come without their knowledge graph: ARK-V1 walks a given graph, so every
    run would fail (the CoLoTa question files hold no graph; CR-LT has the same 200 questions with theirs)."""
    missing = [item.id for item in dataset.items if not has_graph(cast(ArkInput, default_input(item)))]
    if missing:
        hint = " Use --dataset cr-lt: the same seed questions with their Wikidata subgraphs." if (
            dataset.name == "colota" and dataset.split == "qa") else ""
        raise DatasetError(f"ARK-V1 needs each question's knowledge graph, and {len(missing)} of the "
                           f"{len(dataset.items)} questions of {dataset.name!r} ({dataset.split}) have none "
                           f"(e.g. {', '.join(missing[:3])}).{hint}")


def _ark_answer(state: dict[str, Any]) -> Any:
    return state.get("answer")


def _ark_stats(state: dict[str, Any]) -> dict[str, Any]:
    return {"iterations": int(state.get("k") or 0), "tool_calls": 0}


def register_datasets(register: Callable[[Any], None]) -> None:
    """Plug CR-LT and CoLoTa into :mod:`kgagents.evals.datasets` and the CoLoTa scorer into the runner."""
    def cr_lt(path: Path, split: str) -> list[Any]:
        return to_items(load_cr_lt(path))

    def colota(path: Path, split: str) -> list[Any]:
        return to_items(load_colota(split, path))

    register(DatasetSpec(name="cr-lt", load=cr_lt, scorer="colota", splits=("qa",), default_split="qa",
                         group_label="Reasoning strategy", how_to_get=HOW_TO_GET,
                         protocols={"paper": paper_protocol()}))
    register(DatasetSpec(name="colota", load=colota, scorer="colota", splits=("qa", "cv"), default_split="qa",
                         group_label="Reasoning strategy", how_to_get=HOW_TO_GET))
    register_scorer("colota", lambda grader_model=None, **_: CoLoTaScorer())


def ark_answer_failed(state: Mapping[str, Any]) -> str | None:
    """Why an ARK-V1 run has no answer of the agent: its final-answer call failed for good (it is no
    abstention, so the metrics leave the run out), else None."""
    for failure in state.get("failures") or []:
        if failure.get("node") == "final_answer":
            error = str(failure.get("error"))[:300]
            return f"the final answer failed for good ({error}): a failed run, not an abstention"
    return None


# ---------------------------------------------------------------------------------------------------------------
# The ARK-V1 evaluation
# ---------------------------------------------------------------------------------------------------------------
async def evaluate_ark(*, out_dir: str | Path, runs: int = 1, temperature: float | None = None,
                       context_values: Mapping[str, Any] | None = None, context: Any = None,
                       data: str | Path | None = None, ids: Sequence[str] | None = None, limit: int | None = None,
                       concurrency: int = 1, progress: bool = True) -> dict[str, Any]:
    """ARK-V1 over the CR-LT subgraph questions, ``runs`` times each, with the paper's metrics.

    ``context_values`` are the ARK context's JSON values (``model``, ``c_max``, ...); ``temperature`` overrides
    theirs; ``context`` (a ready :class:`~kgagents.nodes.ark.ArkContext`, e.g. with a model instance) replaces them.
    Results, checkpoints and ``summary.json`` go to ``out_dir``; calling again with the same ``out_dir`` skips
    finished (question, run) pairs and resumes interrupted ones. Returns the metrics with the answers per run.
    """
    register_datasets(register_dataset)
    questions = load_cr_lt(data, ids=ids, limit=limit)
    if not questions:
        raise CoLoTaDataError("no questions selected")
    dataset = Dataset(name="cr-lt", split="qa", items=to_items(questions), scorer="colota",
                      group_label="Reasoning strategy")
    values = dict(context_values or {})
    if temperature is not None:
        values["temperature"] = temperature
        if dataclasses.is_dataclass(context) and not isinstance(context, type):
            context = dataclasses.replace(context, temperature=temperature)
    options = EvalOptions(workflow="ark", out_dir=Path(out_dir), runs=runs, context_values=values, context=context,
                          concurrency=concurrency, progress=progress)
    result = await evaluate(options, dataset)
    answers, gold, failed = records_to_answers(result.records)
    metrics = colota_metrics(answers, gold, failed)
    return {"metrics": metrics, "answers": answers, "gold": gold, "errors": result.metrics.get("errors", 0),
            "cost_usd": result.metrics.get("cost_usd", 0.0), "out_dir": str(result.out_dir),
            "data_issues": data_issues(questions)}


def ark_adapter() -> Adapter:
    """How the evaluation runner talks to ARK-V1 (named by its workflow spec, :data:`kgagents.graphs.ark.WORKFLOW`):
    its answer, its reasoning steps, the datasets it can run, and a final answer that failed for good."""
    return Adapter(to_answer=_ark_answer, stats=_ark_stats, check=check_ark_dataset, failed=ark_answer_failed)
