"""The ARK-V1 paper's metrics on CR-LT (§IV-B) and its Table III: answer rate, conditional and overall accuracy
per run as mean ± standard deviation over the runs, and the entropy-based reliability ``1 − H / log2 3`` per
question, averaged (:mod:`kgagents.evals.colota` runs the evaluation).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kgagents.evals.colota_data import as_bool
from kgagents.evals.datasets import Protocol, ProtocolLeg
from kgagents.evals.report import _table

ANSWERS = (True, False, None)


# ---------------------------------------------------------------------------------------------------------------
# Metrics (paper §IV-B)
# ---------------------------------------------------------------------------------------------------------------
def normalise_answer(value: Any) -> bool | None:
    """An answer as True / False / None: booleans as they are, ``"true"``/``"yes"``… as True, anything else None."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        words = re.findall(r"[a-z]+", value.lower())
        if words and words[0] in {"true", "yes", "correct"}:
            return True
        if words and words[0] in {"false", "no", "incorrect"}:
            return False
    return None


def reliability(answers: Sequence[Any]) -> float:
    """``1 − H / log2 3`` for one question's answers over its runs (H: Shannon entropy over True/False/None)."""
    if not answers:
        return float("nan")
    counts = Counter(normalise_answer(a) for a in answers)
    n = len(answers)
    entropy = -math.fsum((c / n) * math.log2(c / n) for c in counts.values() if c)
    return 1.0 - entropy / math.log2(len(ANSWERS))


def _mean_std(values: list[float]) -> dict[str, Any]:
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return {"mean": float("nan"), "std": float("nan"), "per_run": values}
    mean = math.fsum(finite) / len(finite)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in finite) / (len(finite) - 1)) if len(finite) > 1 else 0.0
    return {"mean": mean, "std": std, "per_run": values}


def colota_metrics(answers: Mapping[str, Sequence[Any]], gold: Mapping[str, bool | None],
                   failed: Mapping[str, Collection[int]] | None = None) -> dict[str, Any]:
    """The ARK-V1 paper's metrics for answers ``{question id: [answer of run 1, run 2, …]}``.

    Per run: answer rate = answered / all, conditional accuracy = correct / answered, overall accuracy =
    correct / all (an abstention, ``None``, counts as answered by no one and wrong overall); each is reported as
    mean ± sample standard deviation over the runs (``std`` 0 for one run). Reliability: ``1 − H / log2 3`` per
    question over its runs, averaged over the questions. Questions without a gold answer are left out and
    listed; every question needs the same number of runs.

    ``failed`` names the runs that ended without an answer of the agent (``{question id: {run index, ...}}``:
    an API that kept failing, a crash). They are no abstention, so they are left out of every metric: run ``r``
    is scored over the questions whose run ``r`` finished, a question's reliability over its finished runs. The
    result counts and lists them (``failed_runs``, ``failed``).
    """
    scored = {qid: list(runs) for qid, runs in answers.items() if gold.get(qid) is not None}
    skipped = sorted(qid for qid in answers if gold.get(qid) is None)
    lengths = {len(v) for v in scored.values()}
    if len(lengths) > 1:
        raise ValueError(f"every question needs the same number of runs, got {sorted(lengths)}")
    runs = lengths.pop() if lengths else 0
    lost = {qid: set((failed or {}).get(qid, ())) for qid in scored}
    rate, cond, overall = [], [], []
    for r in range(runs):
        given = {qid: normalise_answer(v[r]) for qid, v in scored.items() if r not in lost[qid]}
        answered = [qid for qid, a in given.items() if a is not None]
        correct = sum(1 for qid in answered if given[qid] == gold[qid])
        rate.append(len(answered) / len(given) if given else float("nan"))
        cond.append(correct / len(answered) if answered else float("nan"))
        overall.append(correct / len(given) if given else float("nan"))
    per_question = {qid: reliability([a for r, a in enumerate(v) if r not in lost[qid]]) for qid, v in scored.items()}
    rel = [v for v in per_question.values() if not math.isnan(v)]
    failures = sorted((qid, r) for qid, runs_lost in lost.items() for r in runs_lost if r < runs)
    return {
        "questions": len(scored),
        "runs": runs,
        "answer_rate": _mean_std(rate),
        "conditional_accuracy": _mean_std(cond),
        "overall_accuracy": _mean_std(overall),
        "reliability": math.fsum(rel) / len(rel) if rel else float("nan"),
        "reliability_per_question": per_question,
        "failed_runs": len(failures),
        "failed": [f"{qid} run {r}" for qid, r in failures],
        "skipped_no_gold": skipped,
    }


def _percent(metric: Mapping[str, Any], runs: int) -> str:
    """A metric's mean (± std over several runs) in percent, as Table III prints it."""
    if math.isnan(metric["mean"]):
        return "n/a"
    return f"{100 * metric['mean']:.2f} ± {100 * metric['std']:.2f}" if runs > 1 else f"{100 * metric['mean']:.2f}"


def _failure_note(metrics: Mapping[str, Any]) -> str | None:
    """How many runs failed and were left out of the metrics (None when none did)."""
    if not metrics.get("failed_runs"):
        return None
    shown = metrics["failed"][:10]
    more = f", … ({len(metrics['failed']) - len(shown)} more)" if len(metrics["failed"]) > len(shown) else ""
    total = metrics["questions"] * metrics["runs"]
    return (f"failed runs, left out of the metrics: {metrics['failed_runs']} of {total} "
            f"({', '.join(shown)}{more})")


def format_metrics(metrics: Mapping[str, Any]) -> str:
    """The metrics as the paper's Table III row, with the failed runs left out of them."""
    runs = metrics["runs"]
    reliability_text = "n/a" if math.isnan(metrics["reliability"]) else f"{metrics['reliability']:.2f}"
    lines = [f"questions: {metrics['questions']}, runs: {runs}",
             f"answer rate %:          {_percent(metrics['answer_rate'], runs)}",
             f"conditional accuracy %: {_percent(metrics['conditional_accuracy'], runs)}",
             f"overall accuracy %:     {_percent(metrics['overall_accuracy'], runs)}",
             f"reliability:            {reliability_text}"]
    note = _failure_note(metrics)
    if note:
        lines.append(note)
    if metrics.get("skipped_no_gold"):
        lines.append(f"left out (no gold answer): {', '.join(metrics['skipped_no_gold'])}")
    return "\n".join(lines)


def paper_table(label: str, legs: Sequence[tuple[Any, Sequence[Mapping[str, Any]]]]) -> str:
    """The results of the ARK-V1 paper's protocol laid out as its Table III: one row for the model, per leg
    (temperature × runs) answer rate, conditional and overall accuracy, and reliability for legs of several runs.

    ``legs`` holds each :class:`~kgagents.evals.datasets.ProtocolLeg` with its result records; failed runs are left
    out of
    the metrics and counted below the table.
    """
    header, cells, notes = ["Model"], [label], []
    for leg, records in legs:
        m = colota_metrics(*records_to_answers(records))
        title = f"T = {leg.temperature:g}; {leg.runs} runs" if leg.runs > 1 else f"T = {leg.temperature:g}; single run"
        names = ["answer rate %", "conditional accuracy %", "overall accuracy %"]
        keys = ["answer_rate", "conditional_accuracy", "overall_accuracy"]
        header += [f"{title}: {name}" for name in names]
        cells += [_percent(m[key], m["runs"]) for key in keys]
        if leg.runs > 1:
            header.append(f"{title}: reliability")
            cells.append("n/a" if math.isnan(m["reliability"]) else f"{m['reliability']:.2f}")
        note = _failure_note(m)
        notes.append(f"- {title}: {m['questions']} questions" + (f"; {note}" if note else ""))
    explained = ("Several runs: mean ± sample standard deviation over the runs; reliability 1 − H / log2 3 per "
                 "question (H: entropy of its True / False / None answers), averaged.")
    return "\n".join([*_table(header, [cells]), "", explained, *notes])


def paper_protocol() -> Any:
    """ARK-V1's protocol (§V, Table III): temperature 0.7 with 30 runs, and temperature 0 with one run; run r
    gets the seed 42 + r where the provider takes a seed (42: the seed of the authors' experiment script)."""
    return Protocol(legs=(ProtocolLeg(0.7, 30), ProtocolLeg(0.0, 1)), table=paper_table, seed=42,
                    description="ARK-V1's Table III: T = 0.7 × 30 runs and T = 0 × 1 run")


def records_to_answers(records: Sequence[Mapping[str, Any]]
                       ) -> tuple[dict[str, list[Any]], dict[str, Any], dict[str, set[int]]]:
    """``{id: [answer per run]}``, ``{id: gold}`` and ``{id: {failed run, ...}}`` from result records.

    A run whose record has an ``error``, or that has no record, failed: its answer is ``None`` in the list and
    its index is in the third mapping, so that :func:`colota_metrics` leaves it out rather than count an
    abstention.
    """
    runs = 1 + max((int(r.get("run", 0)) for r in records), default=-1)
    answers: dict[str, list[Any]] = {}
    gold: dict[str, Any] = {}
    finished: dict[str, set[int]] = {}
    for r in records:
        qid, run = str(r["id"]), int(r.get("run", 0))
        answers.setdefault(qid, [None] * runs)
        gold[qid] = as_bool(r.get("gold"))
        if not r.get("error"):
            answers[qid][run] = r.get("answer")
            finished.setdefault(qid, set()).add(run)
    failed = {qid: set(range(runs)) - finished.get(qid, set()) for qid in answers}
    return answers, gold, {qid: lost for qid, lost in failed.items() if lost}
