"""CR-LT-KGQA / CoLoTa's data: the questions, their subgraphs and gold reasoning paths, with every known defect of
the files handled and reported on the record it affects (:mod:`kgagents.evals.colota` runs ARK-V1 on them).

- :func:`load_cr_lt` — the 200 seed questions S1–S200 with their cached Wikidata subgraphs
  (``customized_dataset.jsonl``), joined with the CoLoTa seeds' gold triples, inference rules and reasoning
  steps;
- :func:`load_colota` — the CoLoTa QA (1,691) and claim-verification (1,650) files (no KG);
- :func:`load_cr_lt_kgqa` — CoLoTa's predecessor files with the old key names;
- :func:`resolve_gold_triples` — a question's gold triples as edges of its subgraph.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgagents.core.errors import KGAgentsError
from kgagents.core.jsonl import json_lines

log = logging.getLogger("kgagents.evals.colota")

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


def as_bool(value: Any) -> bool | None:
    """A gold answer as a boolean (``None``: no answer)."""
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
        answer = as_bool(record.get("answer"))
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
        answer = as_bool(record.get("answer"))
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
    return [record for _, record in json_lines(lines, str(path), CoLoTaDataError)]


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
        graph = _check_graph(record.get("graph"), f"{file.name} {rid}")
        entities = _clean_entities(record.get("q_entity"), issues)
        names = {e[0] for e in graph} | {e[1] for e in graph}
        for name in entities:
            if name not in names:
                issues.append(f"question entity {name!r} does not occur in the subgraph")
        answer = as_bool(record.get("a_entity"))
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


def _check_graph(graph: Any, where: str) -> list[Any]:
    """``graph`` once checked to be a non-empty list of ``[head, tail, {"relation": ...}]`` edges."""
    if not isinstance(graph, list) or not graph:
        raise CoLoTaDataError(f"{where}: the graph must be a non-empty list of edges")
    for i, edge in enumerate(graph):
        ok = (isinstance(edge, list) and len(edge) == 3 and isinstance(edge[0], str) and isinstance(edge[1], str)
              and isinstance(edge[2], dict) and isinstance(edge[2].get("relation"), str))
        if not ok:
            raise CoLoTaDataError(f"{where}: edge {i} is not [head, tail, {{\"relation\": ...}}]: {str(edge)[:200]}")
    return graph


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
