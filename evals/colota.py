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

The evaluation (:func:`evaluate_ark`) runs the ARK-V1 workflow over CR-LT through the batch runner
(:mod:`kgagents.evals.runner`): each (question, run) is a checkpointed thread, and a repeated call resumes.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgagents.core.errors import KGAgentsError

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data" / "colota"
CR_LT_SUBGRAPHS = "customized_dataset.jsonl"
COLOTA_FILES = {"qa": "CoLoTa_qa.json", "cv": "CoLoTa_cv.json"}
CR_LT_KGQA_FILES = {"qa": "CR-LT-QA.json", "cv": "CR-LT-ClaimVerification.json"}
#: Seed records per subset: the later CoLoTa records are generated variants that copy a seed's triples.
SEEDS = {"qa": 200, "cv": 150}
ANSWERS = (True, False, None)


class CoLoTaDataError(KGAgentsError, ValueError):
    """A CoLoTa / CR-LT file cannot be used; the message names the file and the problem."""


@dataclass
class KGQAQuestion:
    """One CoLoTa / CR-LT question (or claim) with what the dataset says about it."""

    id: str
    question: str
    answer: bool | None
    """The gold answer; ``None`` only where the source has no usable answer (see ``issues``)."""
    subset: str = "qa"
    """``qa`` (questions) or ``cv`` (claims to verify)."""
    q_entity: dict[str, str | None] = field(default_factory=dict)
    graph: list[Any] | None = None
    """The question's subgraph in ARK-V1 format (CR-LT subgraphs only)."""
    graph_file: str | None = None
    """The file the subgraph comes from (with ``id`` as its record id)."""
    gold_triples: list[str] = field(default_factory=list)
    inference_rule: str = ""
    reasoning_steps: list[dict[str, Any]] = field(default_factory=list)
    reasoning_strategy: list[str] = field(default_factory=list)
    issues: list[str] = field(default_factory=list)
    """Data defects found in this record and how they were handled."""


@dataclass(frozen=True)
class GoldTriple:
    """A gold triple string resolved against a subgraph (``head``/``relation``/``tail`` None if it is not there)."""

    raw: str
    head: str | None
    relation: str | None
    tail: str | None

    @property
    def found(self) -> bool:
        return self.tail is not None


# ---------------------------------------------------------------------------------------------------------------
# Reading files
# ---------------------------------------------------------------------------------------------------------------
def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CoLoTaDataError(f"cannot read {path}: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        hint = ""
        if path.name.startswith("CR-LT-QA"):
            hint = (" (the newest upstream CR-LT-QA.json misses a comma in S33; use the version at commit "
                    "e659cd9c4c10 of D3Mlab/cr-lt-kgqa, as packaged in evals/data/colota)")
        raise CoLoTaDataError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
                              f"{hint}") from exc


def _resolve(path: str | Path | None, default: str) -> Path:
    if path is None:
        return DATA_DIR / default
    path = Path(path).expanduser()
    return path / default if path.is_dir() else path


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
        return value.strip().lower() == "true"
    return None


def _clean_entities(raw: Any, issues: list[str]) -> dict[str, str | None]:
    entities: dict[str, str | None] = {}
    for name, qid in (raw or {}).items():
        clean = str(name)
        if clean.startswith(", "):
            clean = clean[2:].strip()
            issues.append(f"entity name {name!r} starts with ', ': read as {clean!r}")
        if qid is None:
            issues.append(f"entity {clean!r} has no QID (null in the source)")
        entities[clean] = qid
    return entities


# ---------------------------------------------------------------------------------------------------------------
# CoLoTa
# ---------------------------------------------------------------------------------------------------------------
def load_colota(kind: str = "qa", path: str | Path | None = None, *, seeds_only: bool = True,
                fill_answers: bool = True) -> list[KGQAQuestion]:
    """CoLoTa questions (``kind="qa"``) or claims (``"cv"``) from ``CoLoTa_qa.json`` / ``CoLoTa_cv.json``.

    ``seeds_only`` keeps the 200 QA / 150 CV seeds (later records are generated variants whose gold triples are
    copied from a seed and do not mention their entities). A repeated id gets a ``#2`` suffix. An answer that is
    not a boolean is taken from the CR-LT subgraph dataset when ``fill_answers`` (S39), else left ``None``.
    """
    if kind not in COLOTA_FILES:
        raise CoLoTaDataError(f"CoLoTa has the subsets 'qa' and 'cv', not {kind!r}")
    file = _resolve(path, COLOTA_FILES[kind])
    data = _read_json(file)
    if not isinstance(data, list):
        raise CoLoTaDataError(f"{file}: expected a list of records")
    fallback: dict[str, bool] = {}
    if fill_answers and kind == "qa":
        for subgraphs in (file.parent / CR_LT_SUBGRAPHS, DATA_DIR / CR_LT_SUBGRAPHS):
            if subgraphs.is_file():
                fallback = {str(r.get("id")): r["a_entity"] for r in _read_jsonl(subgraphs)
                            if isinstance(r.get("a_entity"), bool)}
                break
    seen: Counter[str] = Counter()
    out: list[KGQAQuestion] = []
    for n, record in enumerate(data):
        if seeds_only and n >= SEEDS[kind]:
            break
        issues: list[str] = []
        rid = str(record.get("id", f"#{n}"))
        seen[rid] += 1
        if seen[rid] > 1:
            new = f"{rid}#{seen[rid]}"
            issues.append(f"id {rid!r} repeats an earlier record: renamed {new!r}")
            rid = new
        answer = _as_bool(record.get("answer"))
        if answer is None:
            raw = str(record.get("answer"))[:80]
            if rid in fallback:
                answer = fallback[rid]
                issues.append(f"answer field is not a boolean ({raw!r}): took {answer} from {CR_LT_SUBGRAPHS}")
            else:
                issues.append(f"answer field is not a boolean ({raw!r}): no gold answer")
        if n >= SEEDS[kind]:
            issues.append("generated record: its gold triples are copied from a seed question")
        out.append(KGQAQuestion(
            id=rid, question=str(record.get("query", "")), answer=answer, subset=kind,
            q_entity=_clean_entities(record.get("kg_entities"), issues),
            gold_triples=[str(t) for t in record.get("kg_triples") or []],
            inference_rule=str(record.get("inference_rule", "")),
            reasoning_steps=list(record.get("reasoning_steps") or []),
            reasoning_strategy=list(record.get("reasoning_strategy") or []), issues=issues))
    _log_issues(file, out)
    return out


def load_cr_lt_kgqa(kind: str = "qa", path: str | Path | None = None) -> list[KGQAQuestion]:
    """The CR-LT-KGQA files (``CR-LT-QA.json`` / ``CR-LT-ClaimVerification.json``, old key names)."""
    if kind not in CR_LT_KGQA_FILES:
        raise CoLoTaDataError(f"CR-LT-KGQA has the subsets 'qa' and 'cv', not {kind!r}")
    file = _resolve(path, CR_LT_KGQA_FILES[kind])
    data = _read_json(file)
    out: list[KGQAQuestion] = []
    for n, record in enumerate(data):
        issues: list[str] = []
        rid = str(record.get("id", f"#{n}"))
        answer = _as_bool(record.get("answer"))
        if answer is None:
            issues.append(f"answer field is not a boolean ({str(record.get('answer'))[:80]!r}): no gold answer")
        triples = record.get("KG Triples") or ""
        if isinstance(triples, str):
            triples = [t.strip() for t in re.split(r"(?:^|,\s*)\d+-\s*", triples) if t.strip()]
        steps = [{"step": s.get("Step") or s.get("step", ""),
                  "evidence": s.get("facts used in this step", s.get("evidence"))}
                 for s in record.get("Reasoning Steps") or []]
        out.append(KGQAQuestion(
            id=rid, question=str(record.get("query", "")), answer=answer, subset=kind,
            q_entity=_clean_entities(record.get("KG Entities"), issues), gold_triples=[str(t) for t in triples],
            inference_rule=str(record.get("Inference Rule", "")), reasoning_steps=steps,
            reasoning_strategy=list(record.get("Reasoning Strategy") or []), issues=issues))
    _log_issues(file, out)
    return out


# ---------------------------------------------------------------------------------------------------------------
# CR-LT subgraphs
# ---------------------------------------------------------------------------------------------------------------
def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CoLoTaDataError(f"cannot read {path}: {exc}") from exc
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise CoLoTaDataError(f"{path}, line {n}: not valid JSON: {exc.msg}") from exc
    return records


def load_cr_lt(path: str | Path | None = None, *, ids: Sequence[str] | None = None, limit: int | None = None,
               with_gold: bool = True) -> list[KGQAQuestion]:
    """The 200 CR-LT questions with their subgraphs (``customized_dataset.jsonl``), in file order.

    ``with_gold`` adds the CoLoTa seeds' gold triples, inference rule, reasoning steps and strategies. Every
    subgraph is checked: a malformed edge is an error naming the question; a question entity that is absent
    from its graph, or a null QID, is reported in ``issues``.
    """
    file = _resolve(path, CR_LT_SUBGRAPHS)
    records = _read_jsonl(file)
    gold: dict[str, KGQAQuestion] = {}
    if with_gold:
        colota_dir = file.parent if (file.parent / COLOTA_FILES["qa"]).is_file() else None
        gold = {q.id: q for q in load_colota("qa", colota_dir, seeds_only=True, fill_answers=False)}
    wanted = {str(i) for i in ids} if ids else None
    out: list[KGQAQuestion] = []
    for record in records:
        rid = str(record.get("id"))
        if wanted is not None and rid not in wanted:
            continue
        issues: list[str] = []
        graph = record.get("graph")
        _check_graph(graph, f"{file.name} {rid}")
        entities = _clean_entities(record.get("q_entity"), issues)
        names = {e[0] for e in graph} | {e[1] for e in graph}
        for name in entities:
            if name not in names:
                issues.append(f"question entity {name!r} does not occur in the subgraph")
        answer = _as_bool(record.get("a_entity"))
        if answer is None:
            issues.append(f"a_entity is not a boolean ({record.get('a_entity')!r}): no gold answer")
        seed = gold.get(rid)
        out.append(KGQAQuestion(
            id=rid, question=str(record.get("question", "")), answer=answer, subset="qa", q_entity=entities,
            graph=graph, graph_file=str(file), gold_triples=list(seed.gold_triples) if seed else [],
            inference_rule=seed.inference_rule if seed else "",
            reasoning_steps=list(seed.reasoning_steps) if seed else [],
            reasoning_strategy=list(seed.reasoning_strategy) if seed else [], issues=issues))
        if limit is not None and len(out) >= limit:
            break
    if wanted is not None:
        missing = sorted(wanted - {q.id for q in out})
        if missing and limit is None:
            raise CoLoTaDataError(f"{file}: no question with id {', '.join(missing)}")
    _log_issues(file, out)
    return out


def _check_graph(graph: Any, where: str) -> None:
    if not isinstance(graph, list) or not graph:
        raise CoLoTaDataError(f"{where}: the graph must be a non-empty list of edges")
    for i, edge in enumerate(graph):
        ok = (isinstance(edge, list) and len(edge) == 3 and isinstance(edge[0], str) and isinstance(edge[1], str)
              and isinstance(edge[2], dict) and isinstance(edge[2].get("relation"), str))
        if not ok:
            raise CoLoTaDataError(f"{where}: edge {i} is not [head, tail, {{\"relation\": ...}}]: {str(edge)[:200]}")


def _log_issues(file: Path, questions: list[KGQAQuestion]) -> None:
    noted = [q for q in questions if q.issues]
    if noted:
        log.info("%s: %d record(s) with data notes, e.g. %s: %s", file.name, len(noted), noted[0].id,
                 noted[0].issues[0])


def data_issues(questions: Sequence[KGQAQuestion]) -> list[str]:
    """Every data note as ``"<id>: <note>"`` (for reports)."""
    return [f"{q.id}: {note}" for q in questions for note in q.issues]


# ---------------------------------------------------------------------------------------------------------------
# Gold reasoning paths
# ---------------------------------------------------------------------------------------------------------------
def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


_MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"), 1)}


def _value(text: str) -> str:
    """A tail value in a comparable form: Wikidata times and quantities as the gold strings write them.

    ``+1970-10-18T00:00:00Z`` and ``18 October 1970`` both become ``1970-10-18`` (``+2002-00-00T…`` and ``2002``:
    ``2002``); ``+59449`` and ``59,449`` become ``59449``; a gold tail's ``{qualifier, value}`` notes are dropped.
    """
    t = _norm(text.split("{")[0]).strip(" ,")
    m = re.fullmatch(r"\+?(-?\d{1,4})-(\d\d)-(\d\d)t00:00:00z", t)
    if m:
        year, month, day = m.groups()
        return "-".join([str(int(year))] + [p for p in (month, day) if p != "00"])
    m = re.fullmatch(r"(\d{1,2}) ([a-z]+),? (\d{1,4})", t) or re.fullmatch(r"([a-z]+) (\d{1,2}), (\d{1,4})", t)
    if m:
        a, b, year = m.groups()
        day, month = (a, b) if a.isdigit() else (b, a)
        if month in _MONTHS:
            return f"{int(year)}-{_MONTHS[month]:02d}-{int(day):02d}"
    m = re.fullmatch(r"\+?(-?[\d,]*\d(?:\.\d+)?)((?: \S+)*)", t)
    if m:
        return m.group(1).replace(",", "") + m.group(2)
    return t


def resolve_gold_triples(question: KGQAQuestion, graph: Sequence[Any] | None = None) -> list[GoldTriple]:
    """Each gold triple string ``"(head, relation, tail)"`` matched to an edge of the subgraph.

    Names may contain commas ("59,449"), so the string is split where the graph's own head and relation names
    end: the longest head that starts it, then the longest of that head's relations, then a tail of that
    (head, relation) equal to the rest, ignoring case and repeated spaces, else equal as a value (dates and
    quantities in Wikidata's notation, see :func:`_value`). Unmatched triples keep ``None``.
    """
    graph = graph if graph is not None else question.graph or []
    out: dict[str, dict[str, list[str]]] = {}
    for head, tail, props in graph:
        out.setdefault(head, {}).setdefault(props["relation"], []).append(tail)
    heads = sorted(out, key=len, reverse=True)
    resolved = []
    for raw in question.gold_triples:
        text = re.sub(r"^\s*\d+-\s*", "", raw).strip().lstrip("(").strip()
        if text.endswith(")") and text.count(")") > text.count("("):
            text = text[:-1].strip()
        found = GoldTriple(raw, None, None, None)
        for head in heads:
            if not _norm(text).startswith(_norm(head) + ","):
                continue
            rest = text[len(head):].lstrip(" ,")
            for relation in sorted(out[head], key=len, reverse=True):
                if not _norm(rest).startswith(_norm(relation) + ","):
                    continue
                tail_text = rest[len(relation):].lstrip(" ,")
                tails = ([t for t in out[head][relation] if _norm(t) == _norm(tail_text)]
                         or [t for t in out[head][relation] if _value(t) == _value(tail_text)])
                if tails:
                    found = GoldTriple(raw, head, relation, tails[0])
                    break
            if found.found:
                break
        resolved.append(found)
    return resolved


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

    ``legs`` holds each :class:`~kgagents.evals.datasets.ProtocolLeg` with its result records; failed runs are left out
    of the metrics and counted below the table.
    """
    from kgagents.evals.report import _table

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
    from kgagents.evals.datasets import Protocol, ProtocolLeg

    return Protocol(legs=(ProtocolLeg(0.7, 30), ProtocolLeg(0.0, 1)), table=paper_table, seed=42,
                    description="ARK-V1's Table III: T = 0.7 × 30 runs and T = 0 × 1 run")


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
    from kgagents.evals.datasets import Item

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
        from kgagents.evals.scorers import Score

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
        gold[qid] = _as_bool(r.get("gold"))
        if not r.get("error"):
            answers[qid][run] = r.get("answer")
            finished.setdefault(qid, set()).add(run)
    failed = {qid: set(range(runs)) - finished.get(qid, set()) for qid in answers}
    return answers, gold, {qid: lost for qid, lost in failed.items() if lost}


def check_ark_dataset(dataset: Any) -> None:
    """Refuse a dataset whose questions come without their knowledge graph: ARK-V1 walks a given graph, so every
    run would fail (the CoLoTa question files hold no graph; CR-LT has the same 200 questions with theirs)."""
    from kgagents.evals.datasets import DatasetError
    from kgagents.evals.runner import default_input
    from kgagents.nodes.ark import has_graph

    missing = [item.id for item in dataset.items if not has_graph(default_input(item))]
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
    """Plug CR-LT and CoLoTa into :mod:`kgagents.evals.datasets`, the CoLoTa scorer and the ARK-V1 adapter into the
    runner."""
    from kgagents.evals.datasets import DatasetSpec
    from kgagents.evals.runner import Adapter, register_adapter
    from kgagents.evals.scorers import register_scorer

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
    register_adapter("ark", Adapter(to_answer=_ark_answer, stats=_ark_stats, check=check_ark_dataset,
                                    failed=ark_answer_failed))


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
    import dataclasses

    from kgagents.evals.datasets import Dataset, register_dataset
    from kgagents.evals.runner import EvalOptions, evaluate

    register_datasets(register_dataset)
    questions = load_cr_lt(data, ids=ids, limit=limit)
    if not questions:
        raise CoLoTaDataError("no questions selected")
    dataset = Dataset(name="cr-lt", split="qa", items=to_items(questions), scorer="colota",
                      group_label="Reasoning strategy")
    values = dict(context_values or {})
    if temperature is not None:
        values["temperature"] = temperature
        if context is not None and dataclasses.is_dataclass(context):
            context = dataclasses.replace(context, temperature=temperature)
    options = EvalOptions(workflow="ark", out_dir=Path(out_dir), runs=runs, context_values=values, context=context,
                          concurrency=concurrency, progress=progress)
    result = await evaluate(options, dataset)
    answers, gold, failed = records_to_answers(result.records)
    metrics = colota_metrics(answers, gold, failed)
    return {"metrics": metrics, "answers": answers, "gold": gold, "errors": result.metrics.get("errors", 0),
            "cost_usd": result.metrics.get("cost_usd", 0.0), "out_dir": str(result.out_dir),
            "data_issues": data_issues(questions)}
