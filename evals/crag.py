"""CRAG (Meta's Comprehensive RAG benchmark; Agent-G paper 004, §3.2, §4): the dataset and CRAG's local
evaluation.

- ``crag``: CRAG's questions with their pre-fetched web pages. By default the 10-question sample that ships
  with kgagents (``evals/data/crag/dev_data.jsonl.bz2``, CC BY-NC 4.0: see its ``PROVENANCE.md``); ``--data``
  takes CRAG's files: ``crag_task_1_and_2_dev_v4.jsonl.bz2`` (or any ``.jsonl`` / ``.jsonl.bz2`` /
  ``.jsonl.gz``), a Task 3 archive (``.tar.bz2`` merged from its parts, read for the JSON-lines files inside),
  or a folder of such files. ``--split``: ``all`` (default), ``validation`` (CRAG's split 0) or ``test``
  (split 1). Each item gives the workflow ``question``, ``query_time`` and ``pages`` (``{name, url, snippet,
  html}``), and the context ``task="generation"`` (Agent-G's CRAG mode); its group is the domain.
- The scorer ``crag`` (the default) is CRAG's local evaluation (``local_evaluation.py``): a prediction
  containing "i don't know" is *missing*; otherwise, for each ground truth: an exact lower-case match is
  *accurate*; "invalid" in both the prediction and the ground truth is accurate, in
  only one of them not (false-premise questions, whose answer is "invalid question"); else the LLM judge with
  CRAG's instructions and its 35 in-context examples (:mod:`kgagents.prompts.crag_judge`) answers JSON ``{"score":
  0|1}`` (read as CRAG reads it: ``"score": N`` in the last ``{...}`` of the reply; anything else is
  incorrect); a score of 1 is accurate. Every other prediction is a *hallucination*. Metrics: ``accuracy``,
  ``hallucination``, ``missing`` (fractions of n) and ``score = (2·accurate + missing)/n − 1`` (= accuracy −
  hallucination); a run that failed counts as missing (it gave no answer) and is counted in ``failed runs``.
  The judge is the evaluation's grader model (``--grader-model``, default the run's model; CRAG's script uses
  gpt-4-0125-preview). The ground truth is the record's ``answer`` alone, which is what CRAG's script loads
  (``load_data_in_batches`` reads ``answer``, not ``alt_ans``; its loop over ground truths then walks the
  characters of that one string, which is read here as the one ground truth it is meant to be).
  ``crag-alternatives`` grades against the answer and then each alternative answer (``alt_ans``) in turn.
- The scorer ``agent-g-paper`` is the Agent-G paper's evaluator (§4, appendix A.1.2): an LLM reads the
  question, the true answer and the predicted answer and says in one word whether the prediction is
  *accurate*, *incorrect* or *missing* — no rule before it, one true answer (the record's ``answer``), its
  first such word taken (a reply with none is incorrect). The paper's judge is Claude 3 Sonnet: give it as
  ``--grader-model`` (e.g. ``anthropic:claude-3-sonnet-20240229``). Same metrics; incorrect is a
  hallucination.

Both CRAG scorers also grade the answer a run had after each iteration when the run records them (``curve``:
Agent-G with ``iteration_metrics``), each distinct answer once: the paper's Figure 5 from one run.

Not reproduced: CRAG cuts predictions to 75 Llama-2 tokens before grading; this scorer grades them whole.
"""

from __future__ import annotations

import ast
import bz2
import gzip
import io
import json
import lzma
import re
import tarfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from kgagents.core.jsonl import json_lines
from kgagents.evals.datasets import DatasetError, DatasetSpec, Item
from kgagents.evals.scorers import Score, register_scorer
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.llm import LLMCaller
from kgagents.prompts import agent_g as P
from kgagents.prompts.crag_judge import judge_system, judge_user

DATA_DIR = Path(__file__).parent / "data" / "crag"
SAMPLE = DATA_DIR / "dev_data.jsonl.bz2"
JUDGE_EXAMPLES = DATA_DIR / "crag_judge_incontext_examples.json"
SPLITS = {"all": None, "validation": 0, "test": 1}
HOW_TO = ("CRAG's data comes from https://github.com/facebookresearch/CRAG "
          "(data/crag_task_1_and_2_dev_v4.jsonl.bz2; Task 3: cat crag_task_3_dev_v4.tar.bz2.part* > "
          "crag_task_3_dev_v4.tar.bz2); give --data the file or a folder of such files. Without --data, the "
          "10-question sample that ships with kgagents is used.")
IDK = "i don't know"
ACCURATE, MISSING, HALLUCINATION = "ACCURATE", "MISSING", "HALLUCINATION"
JUDGE_ROLE = "graph_executor"


class CragDataError(DatasetError):
    """CRAG's files are missing or malformed; the message names the file and the line."""


# ----------------------------------------------------------------------------------------------------------
# Reading CRAG's files
# ----------------------------------------------------------------------------------------------------------
def _lines(raw: IO[bytes], name: str) -> Iterator[str]:
    """The lines of a JSON-lines stream, decompressed by the name's suffix (``.bz2``, ``.gz``, ``.xz``)."""
    openers: dict[str, Callable[..., IO[str]]] = {".bz2": bz2.open, ".gz": gzip.open, ".xz": lzma.open}
    opener = openers.get(Path(name).suffix)
    with opener(raw, "rt", encoding="utf-8") if opener else io.TextIOWrapper(raw, encoding="utf-8") as text:
        yield from text


def _records_of(source: IO[bytes], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        for number, record in json_lines(_lines(source, where), f"crag: {where}", CragDataError, objects=True):
            yield f"{where}, line {number}", record
    except (OSError, EOFError, UnicodeDecodeError, lzma.LZMAError) as exc:
        raise CragDataError(f"crag: cannot read {where}: {type(exc).__name__}: {exc}") from exc


def _is_records_file(name: str) -> bool:
    return re.search(r"\.jsonl(\.(bz2|gz|xz))?$", name) is not None


def iter_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, record)`` for every record of a CRAG file, archive or folder (``where``: file and line)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if _is_records_file(p.name) or ".tar" in p.name)
        if not files:
            raise CragDataError(f"crag: {path} holds no .jsonl(.bz2) file or .tar archive. {HOW_TO}")
        for file in files:
            yield from iter_records(file)
        return
    if ".tar" in path.name:
        try:
            with tarfile.open(path) as archive:
                members = [m for m in archive.getmembers() if m.isfile() and _is_records_file(m.name)]
                if not members:
                    raise CragDataError(f"crag: the archive {path} holds no .jsonl(.bz2) file. {HOW_TO}")
                for member in members:
                    handle = archive.extractfile(member)
                    if handle is not None:
                        yield from _records_of(handle, f"{path}:{member.name}")
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise CragDataError(f"crag: {path} is not a readable tar archive ({type(exc).__name__}: {exc}); "
                                "merge every part first") from exc
        return
    try:
        with path.open("rb") as raw:
            yield from _records_of(raw, str(path))
    except OSError as exc:
        raise CragDataError(f"crag: cannot open {path}: {exc}") from exc


def _answers(value: Any, where: str) -> list[str]:
    """Alternative answers: a list, or a list written as text (the sample writes ``"[]"``)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            for parse in (json.loads, ast.literal_eval):
                try:
                    return _answers(parse(text), where)
                except (ValueError, SyntaxError):
                    continue
            raise CragDataError(f"crag: {where}: alternative answers are not a list: {text[:80]!r}")
        return [text]
    if isinstance(value, list):
        return [str(v) for v in value if str(v).strip()]
    raise CragDataError(f"crag: {where}: alternative answers must be a list, not {type(value).__name__}")


def _pages(value: Any, where: str) -> list[dict[str, str]]:
    if value in (None, ""):
        return []
    if not isinstance(value, list) or not all(isinstance(p, dict) for p in value):
        raise CragDataError(f"crag: {where}: search_results must be a list of pages")
    fields = {"name": "page_name", "url": "page_url", "snippet": "page_snippet", "html": "page_result"}
    return [{ours: str(page.get(theirs) or "") for ours, theirs in fields.items()} for page in value]


def item_of(record: Mapping[str, Any], where: str) -> Item:
    """One CRAG record as an item: inputs ``query_time`` and ``pages``; gold the answer, the alternative
    answers
    in ``meta``; grouped by domain."""
    missing = [k for k in ("query", "answer") if k not in record]
    if missing:
        raise CragDataError(f"crag: {where}: a record needs {' and '.join(missing)}")
    question = str(record["query"]).strip()
    if not question:
        raise CragDataError(f"crag: {where}: the query is empty")
    alternatives = _answers(record.get("alternative_answers", record.get("alt_ans")), where)
    labels = ("question_type", "static_or_dynamic", "split", "popularity")
    meta = {"alternative_answers": alternatives, **{k: record[k] for k in labels if k in record}}
    return Item(id=str(record.get("interaction_id") or where.rsplit("line ", 1)[-1]), question=question,
                gold=str(record["answer"]), group=str(record.get("domain") or "?"),
                inputs={"query_time": str(record.get("query_time") or ""),
                        "pages": _pages(record.get("search_results"), where)}, meta=meta)


def load_crag(path: Path, split: str) -> list[Item]:
    """CRAG's items of ``split`` (``all``, ``validation``, ``test``) from a file, archive or folder."""
    wanted = SPLITS[split]
    items = []
    for where, record in iter_records(path):
        if wanted is not None and str(record.get("split")) != str(wanted):
            continue
        items.append(item_of(record, where))
    return items


# ----------------------------------------------------------------------------------------------------------
# CRAG's local evaluation
# ----------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=4)
def judge_examples(path: Path = JUDGE_EXAMPLES) -> tuple[dict[str, Any], ...]:
    """CRAG's 35 in-context examples of the judge (``{question, ground_truth, prediction, expected_score,
    explanation}``)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CragDataError(f"crag: cannot read the judge's examples {path}: {exc}") from exc
    examples = data.get("examples") if isinstance(data, dict) else data
    if not isinstance(examples, list) or not examples:
        raise CragDataError(f"crag: {path} has no \"examples\" list")
    return tuple(examples)


def parse_judge_reply(reply: str) -> int | None:
    """The judge's score as CRAG reads it: ``"score": N`` in the last ``{...}`` of the reply (without nested
    braces); None (incorrect) when there is none or N is neither 0 nor 1."""
    blocks = re.findall(r"{([^}]*)}", reply or "")
    if not blocks:
        return None
    match = re.search(r'"score"\s*:\s*(\d+)', blocks[-1])
    if match is None:
        return None
    score = int(match.group(1))
    return score if score in (0, 1) else None


def ground_truths(item: Any, alternatives: bool = False) -> list[str]:
    """The answer, then (``alternatives``) the alternative answers."""
    others = (getattr(item, "meta", None) or {}).get("alternative_answers") or [] if alternatives else []
    return [str(item.gold), *[str(a) for a in others]]


Judge = Callable[[str, str, str], Any]
"""``await judge(question, ground_truth, prediction)`` → the judge's reply text."""


async def crag_grade(question: str, truths: Sequence[str], prediction: str, judge: Judge
                     ) -> tuple[str, dict[str, Any]]:
    """One prediction's grade (``ACCURATE``, ``MISSING`` or ``HALLUCINATION``) by CRAG's rules, with what
    decided it: ``rule`` (``i don't know``, ``exact match``, ``invalid question``, ``judge``) and the judge's
    replies."""
    predicted = prediction.strip()
    low = predicted.lower()
    if IDK in low:
        return MISSING, {"rule": IDK}
    details: dict[str, Any] = {"rule": "judge", "judge": []}

    def decided(rule: str, truth: str) -> dict[str, Any]:
        asked = {"judge": details["judge"]} if details["judge"] else {}
        return {"rule": rule, "ground_truth": truth, **asked}

    for truth in truths:
        truth_low = truth.strip().lower()
        if low == truth_low:
            return ACCURATE, decided("exact match", truth)
        invalid_prediction, invalid_truth = "invalid" in low, "invalid" in truth_low
        if invalid_prediction and invalid_truth:
            return ACCURATE, decided("invalid question", truth)
        if invalid_prediction or invalid_truth:
            details["rule"] = "invalid question"
            continue
        reply = str(await judge(question, truth, predicted))
        score = parse_judge_reply(reply)
        details["judge"].append({"ground_truth": truth, "reply": reply[:500], "score": score})
        if score == 1:
            return ACCURATE, decided("judge", truth)
    return HALLUCINATION, details


def crag_metrics(grades: Sequence[str]) -> dict[str, Any]:
    """CRAG's metrics of a list of grades: fractions of all n, and ``score`` = accuracy − hallucination."""
    n = len(grades)
    accurate = sum(1 for g in grades if g == ACCURATE)
    missing = sum(1 for g in grades if g == MISSING)
    hallucinated = n - accurate - missing
    if n == 0:
        return {"n": 0, "accuracy": 0.0, "hallucination": 0.0, "missing": 0.0, "score": 0.0, "n_correct": 0,
                "n_miss": 0, "n_hallucination": 0}
    return {"n": n, "accuracy": accurate / n, "hallucination": hallucinated / n, "missing": missing / n,
            "score": (2 * accurate + missing) / n - 1, "n_correct": accurate, "n_miss": missing,
            "n_hallucination": hallucinated}


def _model_label(model: Any) -> str:
    if model is None or isinstance(model, str):
        return str(model or "the run's model")
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__)


class _Graded:
    """What the CRAG scorers share: the judge's model resolved like any run's, a grade per answer, the
    per-iteration curve, and CRAG's metrics."""

    name = ""
    needs_model = True

    def __init__(self, model: Any = None, *, max_api_retries: int = 6, api_backoff_base_s: float = 1.0,
                 base_url: str | None = None) -> None:
        self.model = model
        self.max_api_retries = max_api_retries
        self.api_backoff_base_s = api_backoff_base_s
        self.base_url = base_url
        """Where the judge's requests go (:func:`kgagents.evals.judges.judge_of`)."""

    def _caller(self) -> Any:
        ctx = KGoTContext(model=self.model, max_api_retries=self.max_api_retries,
                          api_backoff_base_s=self.api_backoff_base_s, temperature=0.0, base_url=self.base_url)
        return LLMCaller(ctx, JUDGE_ROLE)

    async def grade(self, item: Any, prediction: str, llm: Any) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    async def score(self, item: Any, answer: Any) -> Score:
        return await self.score_run(item, answer, {})

    async def score_run(self, item: Any, answer: Any, state: Mapping[str, Any]) -> Score:
        llm = self._caller()
        graded: dict[str, tuple[str, dict[str, Any]]] = {}

        async def grade_once(prediction: Any) -> tuple[str, dict[str, Any]]:
            text = "" if prediction is None else str(prediction)
            if text not in graded:
                graded[text] = await self.grade(item, text, llm)
            return graded[text]

        grade, details = await grade_once(answer)
        details = {**details, "judge model": _model_label(self.model)}
        curve = state.get("curve") if isinstance(state, Mapping) else None
        if curve:
            details["curve"] = [(await grade_once(a))[0] for a in curve]
        return Score(correct=grade == ACCURATE, grade=grade, usage=llm.usage, details=details)

    def metrics(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """CRAG's metrics (and per iteration with curves); a failed run (no grade) counts as missing, and as a
        failed run."""
        out: dict[str, Any] = crag_metrics([r.get("grade") or MISSING for r in records])
        curves = [(r.get("details") or {}).get("curve") or [] for r in records]
        for t in range(max((len(c) for c in curves), default=0)):
            at = crag_metrics([(c[min(t, len(c) - 1)] if c else (r.get("grade") or MISSING))
                               for c, r in zip(curves, records, strict=True)])
            out.update({f"{key} t={t + 1}": at[key] for key in ("accuracy", "hallucination", "missing", "score")})
        judges = sorted({str((r.get("details") or {}).get("judge model")) for r in records
                         if (r.get("details") or {}).get("judge model")})
        out["judge model"] = ", ".join(judges) or _model_label(self.model)
        out["failed runs"] = sum(1 for r in records if r.get("error"))
        return out


class CragScorer(_Graded):
    """CRAG's local evaluation with an LLM judge (``model``: a chat model or a ``provider:model`` string); the
    answer alone is the ground truth, or the answer and then its alternatives (``alternatives``)."""

    def __init__(self, model: Any = None, *, alternatives: bool = False, max_api_retries: int = 6,
                 api_backoff_base_s: float = 1.0, examples: Path = JUDGE_EXAMPLES, base_url: str | None = None) -> None:
        super().__init__(model, max_api_retries=max_api_retries, api_backoff_base_s=api_backoff_base_s,
                         base_url=base_url)
        self.alternatives = alternatives
        self.name = "crag-alternatives" if alternatives else "crag"
        self.system = judge_system(judge_examples(examples))

    async def grade(self, item: Any, prediction: str, llm: Any) -> tuple[str, dict[str, Any]]:
        async def judge(question: str, truth: str, predicted: str) -> str:
            return await llm.text(judge_user(question, truth, predicted), system=self.system)

        return await crag_grade(item.question, ground_truths(item, self.alternatives), prediction, judge)


_PAPER_WORD = re.compile(r"(?<![a-z])(accurate|incorrect|missing)(?![a-z])")
PAPER_GRADES = {"accurate": ACCURATE, "incorrect": HALLUCINATION, "missing": MISSING}


def parse_paper_judgement(reply: str) -> str | None:
    """The first of accurate / incorrect / missing in the evaluator's reply (``None``: none of them)."""
    match = _PAPER_WORD.search((reply or "").lower())
    return match.group(1) if match else None


class AgentGPaperScorer(_Graded):
    """The Agent-G paper's evaluator (see the module docstring): the LLM's one-word judgement, nothing else."""

    name = "agent-g-paper"

    async def grade(self, item: Any, prediction: str, llm: Any) -> tuple[str, dict[str, Any]]:
        reply = str(await llm.text(P.render(P.EVALUATOR, question=item.question, answer=str(item.gold),
                                            prediction=prediction)))
        word = parse_paper_judgement(reply)
        grade = PAPER_GRADES.get(word or "", HALLUCINATION)
        return grade, {"rule": "agent-g evaluator", "judgement": word, "reply": reply[:500]}


def register_datasets(register: Callable[[Any], None]) -> None:
    """Plug CRAG (its sample by default) and CRAG's local evaluation into the evaluation."""

    register(DatasetSpec(name="crag", load=load_crag, scorer="crag", splits=tuple(SPLITS),
                         default_split="all", group_label="Domain", how_to_get=HOW_TO, default_data=SAMPLE,
                         context={"task": "generation"}))
    register_scorer("crag", lambda grader_model=None, **kw: CragScorer(grader_model, **kw))
    register_scorer("crag-alternatives",
                    lambda grader_model=None, **kw: CragScorer(grader_model, alternatives=True, **kw))
    register_scorer("agent-g-paper", lambda grader_model=None, **kw: AgentGPaperScorer(grader_model, **kw))
