"""Scorers that reproduce the benchmarks' reference scorers, plus the runner's per-dataset scorer objects.

- GAIA: :func:`question_scorer`, the leaderboard's strict rule (numbers as floats after stripping ``$ % ,``;
  a ground truth with ``,`` or ``;`` is a list compared element by element; otherwise whitespace and ASCII
  punctuation removed, lower case). No lenient "close call" is counted as correct.
- SimpleQA: the LLM grader with the official template (``evals/data/simpleqa_grader_template.txt``), the
  official parsing rule (first ``A``/``B``/``C`` anywhere in the reply; none means ``NOT_ATTEMPTED``) and the
  metrics of the reference implementation (:func:`simpleqa_metrics`).
- Graph-CoT's Rouge-L (:func:`rouge_l`, by the ``rouge-score`` package as Graph-CoT's evaluation) and STaRK's
  rank-based retrieval metrics (:func:`hit_at_k`, :func:`recall_at_k`, :func:`reciprocal_rank`), for the datasets
  that use them.
- CoLoTa / CR-LT-KGQA metrics live with their loader in :mod:`kgagents.evals.colota`.

A runner scorer (:class:`ScorerLike`; :class:`Scorer` is a base with the defaults) grades one item (``score``)
and aggregates a list of result records (``metrics``); :data:`SCORERS` maps a dataset's scorer name to a factory.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Protocol

from kgagents.core.extras import require
from kgagents.core.usage import Usage
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.llm import LLMCaller

# ----------------------------------------------------------------------------------------------------------------
# GAIA
# ----------------------------------------------------------------------------------------------------------------


def _is_float(text: Any) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def normalize_number_str(number_str: str) -> float:
    """A number after removing ``$``, ``%`` and ``,``; anything unparseable becomes ``inf`` (never equal)."""
    for char in ("$", "%", ","):
        number_str = number_str.replace(char, "")
    try:
        return float(number_str)
    except ValueError:
        return float("inf")


def split_string(text: str, separators: Sequence[str] = (",", ";")) -> list[str]:
    """Split on every separator character (the GAIA list rule: ``,`` and ``;``)."""
    return re.split("[" + re.escape("".join(separators)) + "]", text)


def normalize_str(text: str, remove_punct: bool = True) -> str:
    """Remove all whitespace, lower-case, and (by default) remove ASCII punctuation."""
    no_spaces = re.sub(r"\s", "", text).lower()
    if remove_punct:
        return no_spaces.translate(str.maketrans("", "", string.punctuation))
    return no_spaces


def question_scorer(model_answer: str | None, ground_truth: str) -> bool:
    """GAIA's exact-match rule: True when ``model_answer`` matches ``ground_truth``."""
    if model_answer is None:
        model_answer = "None"
    model_answer = str(model_answer)
    ground_truth = str(ground_truth)
    if _is_float(ground_truth):
        return normalize_number_str(model_answer) == float(ground_truth)
    if any(sep in ground_truth for sep in (",", ";")):
        gt_elems = split_string(ground_truth)
        ma_elems = split_string(model_answer)
        if len(gt_elems) != len(ma_elems):
            return False
        for ma_elem, gt_elem in zip(ma_elems, gt_elems, strict=True):
            if _is_float(gt_elem):
                if normalize_number_str(ma_elem) != float(gt_elem):
                    return False
            elif normalize_str(ma_elem, remove_punct=False) != normalize_str(gt_elem, remove_punct=False):
                return False
        return True
    return normalize_str(model_answer) == normalize_str(ground_truth)


# ----------------------------------------------------------------------------------------------------------------
# SimpleQA
# ----------------------------------------------------------------------------------------------------------------

CHOICE_LETTERS = ("A", "B", "C")
CHOICE_STRINGS = ("CORRECT", "INCORRECT", "NOT_ATTEMPTED")
LETTER_TO_GRADE = dict(zip(CHOICE_LETTERS, CHOICE_STRINGS, strict=True))


@lru_cache(maxsize=1)
def simpleqa_grader_template() -> str:
    """The official SimpleQA grader template (placeholders ``question``, ``target``, ``predicted_answer``)."""
    text = (resources.files("evals") / "data" / "simpleqa_grader_template.txt").read_text(encoding="utf-8")
    return text.strip()


def simpleqa_grader_prompt(question: str, target: str, predicted_answer: str) -> str:
    """The grader prompt for one answer, exactly as the reference formats it."""
    return simpleqa_grader_template().format(question=question, target=target, predicted_answer=predicted_answer)


def parse_simpleqa_grade(reply: str) -> str:
    """The grade letter by the reference rule: the first ``A``, ``B`` or ``C`` anywhere; none means ``C``.

    Note the rule's quirk, kept on purpose: a reply spelled out as "CORRECT" yields ``C`` (not attempted),
    which is why the template asks for the letter alone.
    """
    match = re.search(r"(A|B|C)", reply or "")
    return match.group(0) if match else "C"


def simpleqa_metrics(grades: Iterable[str]) -> dict[str, float]:
    """SimpleQA's aggregate metrics from grades (letters ``A/B/C`` or ``CORRECT/INCORRECT/NOT_ATTEMPTED``).

    ``correct``, ``incorrect`` and ``not_attempted`` are fractions of all items;
    ``correct_given_attempted = correct / (correct + incorrect)``; ``f_score`` is the harmonic mean of
    ``correct`` and ``correct_given_attempted``.
    """
    names = [LETTER_TO_GRADE.get(g, g) for g in grades]
    n = len(names)
    counts = Counter(names)
    if n == 0:
        return {"n": 0, "correct": 0.0, "incorrect": 0.0, "not_attempted": 0.0, "given_attempted": 0.0,
                "correct_given_attempted": 0.0, "f_score": 0.0}
    correct = counts["CORRECT"] / n
    incorrect = counts["INCORRECT"] / n
    not_attempted = counts["NOT_ATTEMPTED"] / n
    attempted = correct + incorrect
    given = correct / attempted if attempted > 0 else 0.0
    f_score = 2 * given * correct / (given + correct) if (given + correct) > 0 else 0.0
    return {"n": n, "correct": correct, "incorrect": incorrect, "not_attempted": not_attempted,
            "given_attempted": attempted, "correct_given_attempted": given, "f_score": f_score}


# ----------------------------------------------------------------------------------------------------------------
# Rouge-L (Graph-CoT) and rank-based retrieval metrics (STaRK)
# ----------------------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _rouge_l_scorer() -> Any:
    rouge_scorer = require("rouge_score.rouge_scorer", "Graph-CoT's Rouge-L")
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def rouge_l(prediction: str, target: str) -> dict[str, float]:
    """Rouge-L of one answer as Graph-CoT's evaluation computes it: the ``rouge-score`` package (which
    ``evaluate``'s ``rouge`` metric wraps) with ``use_stemmer=False`` — lower-cased ``[a-z0-9]+`` tokens, the
    precision, recall and F-measure of their longest common subsequence (0 when either side has no token)."""
    score = _rouge_l_scorer().score(str(target), str(prediction))["rougeL"]
    return {"precision": score.precision, "recall": score.recall, "fmeasure": score.fmeasure}


def _ranked(scores: Sequence[float]) -> list[int]:
    """Indices by descending score (stable: earlier candidates first on ties)."""
    return sorted(range(len(scores)), key=lambda i: -scores[i])


def hit_at_k(scores: Sequence[float], relevant: Sequence[bool | int], k: int) -> float:
    """1 if any relevant candidate is among the top ``k`` by score, else 0."""
    return float(any(relevant[i] for i in _ranked(scores)[:k]))


def recall_at_k(scores: Sequence[float], relevant: Sequence[bool | int], k: int) -> float:
    """Relevant candidates among the top ``k`` / all relevant candidates (0 when none is relevant)."""
    total = sum(bool(r) for r in relevant)
    if total == 0:
        return 0.0
    return sum(bool(relevant[i]) for i in _ranked(scores)[:k]) / total


def precision_at_k(scores: Sequence[float], relevant: Sequence[bool | int], k: int) -> float:
    """Relevant candidates among the top ``k`` / ``k``."""
    return sum(bool(relevant[i]) for i in _ranked(scores)[:k]) / k


def reciprocal_rank(scores: Sequence[float], relevant: Sequence[bool | int]) -> float:
    """1 / rank of the first relevant candidate (0 when none is relevant)."""
    for rank, i in enumerate(_ranked(scores), start=1):
        if relevant[i]:
            return 1.0 / rank
    return 0.0


# ----------------------------------------------------------------------------------------------------------------
# Runner scorers
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class Score:
    """The grade of one answer. ``correct`` is None when the item cannot be scored (no gold answer)."""

    correct: bool | None
    grade: str | None = None
    usage: Usage = field(default_factory=dict)
    """Token usage of the grading itself (an LLM grader), kept apart from the workflow's usage."""
    details: dict[str, Any] = field(default_factory=dict)
    """Per-item metrics beyond correct/incorrect (e.g. Rouge-L, an error type), written with the result."""


class ScorerLike(Protocol):
    """What the runner asks of a scorer; a scorer that reads the run's trace also has ``score_run`` (as
    :class:`Scorer`), which the runner calls instead of ``score`` when it is there."""

    async def score(self, item: Any, answer: Any) -> Score: ...

    def metrics(self, records: Sequence[dict[str, Any]]) -> Mapping[str, Any]: ...


class Scorer:
    """Grades one item's answer and aggregates result records (dicts as the runner writes them)."""

    name = "exact"
    needs_model = False

    async def score(self, item: Any, answer: Any) -> Score:  # pragma: no cover - interface
        raise NotImplementedError

    async def score_run(self, item: Any, answer: Any, state: dict[str, Any]) -> Score:
        """Grade a finished run; scorers that read the run's trace (not only its answer) override this."""
        return await self.score(item, answer)

    def metrics(self, records: Sequence[dict[str, Any]]) -> dict[str, float]:
        """Accuracy over every record (errors count as wrong) and over the records that could be scored."""
        n = len(records)
        correct = sum(1 for r in records if r.get("correct") is True)
        return {"n": n, "correct": correct, "accuracy": correct / n if n else 0.0}


class GaiaScorer(Scorer):
    """GAIA's strict ``question_scorer``; items without a public answer (the test split's ``?``) score None."""

    name = "gaia"

    async def score(self, item: Any, answer: Any) -> Score:
        gold = item.gold
        if gold is None or str(gold).strip() in {"", "?"}:
            return Score(correct=None, grade="NO_GOLD")
        ok = question_scorer(None if answer is None else str(answer), str(gold))
        return Score(correct=ok, grade="CORRECT" if ok else "INCORRECT")


class SimpleQAScorer(Scorer):
    """The SimpleQA LLM grader. ``model`` is a chat-model instance or a ``provider:model`` string."""

    name = "simpleqa"
    needs_model = True

    def __init__(self, model: Any = None, *, max_api_retries: int = 6, api_backoff_base_s: float = 1.0,
                 base_url: str | None = None) -> None:
        self.model = model
        self.max_api_retries = max_api_retries
        self.api_backoff_base_s = api_backoff_base_s
        self.base_url = base_url
        """Where the grader's requests go (:func:`kgagents.evals.judges.judge_of`)."""

    async def score(self, item: Any, answer: Any) -> Score:
        predicted = "" if answer is None else str(answer)
        prompt = simpleqa_grader_prompt(item.question, str(item.gold), predicted)
        ctx = KGoTContext(model=self.model, max_api_retries=self.max_api_retries,
                          api_backoff_base_s=self.api_backoff_base_s, temperature=0.0, base_url=self.base_url)
        llm = LLMCaller(ctx, "graph_executor")
        letter = parse_simpleqa_grade(await llm.text(prompt))
        grade = LETTER_TO_GRADE[letter]
        return Score(correct=grade == "CORRECT", grade=grade, usage=llm.usage)

    def metrics(self, records: Sequence[dict[str, Any]]) -> dict[str, float]:
        # An item whose run failed was not attempted by the workflow: it counts as NOT_ATTEMPTED.
        return simpleqa_metrics([r.get("grade") or "NOT_ATTEMPTED" for r in records])


# ----------------------------------------------------------------------------------------------------------------
# Ideal fusion (KGoT paper §5.1, Figures 3 and 13, Table 1)
# ----------------------------------------------------------------------------------------------------------------


def ideal_correct(record: dict[str, Any], variants: Iterable[str] | None = None) -> bool:
    """Whether the ideal fusion of ``variants`` (default: all the record's) solved the item: any of them did.

    The KGoT paper's fusion rows count a task as solved when one of the fused variants solved it; the live
    combiner's own answer is the record's ``correct``. An item without variant scores (a failed run) is unsolved.
    """
    graded = record.get("variants") or {}
    names = graded if variants is None else [v for v in variants if v in graded]
    return any(graded[v].get("correct") is True for v in names)


def fusion_metrics(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Ideal-fusion accuracy and each variant's own accuracy, over all records (none for a run without variants)."""
    if not any(r.get("variants") for r in records):
        return {}
    n = len(records)
    names = list(dict.fromkeys(v for r in records for v in r.get("variants") or {}))
    solved = sum(ideal_correct(r) for r in records)
    per_variant = {}
    for name in names:
        correct = sum(1 for r in records if ((r.get("variants") or {}).get(name) or {}).get("correct") is True)
        per_variant[name] = {"correct": correct, "accuracy": correct / n}
    return {"ideal_fusion_correct": solved, "ideal_fusion_accuracy": solved / n, "variants": per_variant}


ScorerFactory = Callable[..., ScorerLike]

#: scorer name (a dataset's ``scorer``) -> factory taking ``grader_model=`` (ignored by exact scorers)
SCORERS: dict[str, ScorerFactory] = {
    "gaia": lambda grader_model=None, **_: GaiaScorer(),
    "simpleqa": lambda grader_model=None, **kw: SimpleQAScorer(grader_model, **kw),
}


#: scorer name -> the grader model its benchmark's paper used, for runs that name none (else the run's model)
DEFAULT_GRADERS: dict[str, str] = {}


def register_scorer(name: str, factory: ScorerFactory, *, default_grader: str | None = None) -> None:
    """Add a scorer for a dataset (e.g. the CoLoTa metrics), with the grader model it uses when none is named."""
    SCORERS[name] = factory
    if default_grader is not None:
        DEFAULT_GRADERS[name] = default_grader


def make_scorer(name: str, grader_model: Any = None, **kwargs: Any) -> ScorerLike:
    if name not in SCORERS:
        raise ValueError(f"unknown scorer {name!r}; available: {', '.join(sorted(SCORERS))}")
    return SCORERS[name](grader_model=grader_model, **kwargs)


def mean(values: Iterable[float]) -> float:
    vals = list(values)
    return math.fsum(vals) / len(vals) if vals else 0.0
