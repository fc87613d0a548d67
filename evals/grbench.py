"""GRBench (Graph-CoT's benchmark; paper 001, §5): datasets, the Rouge-L / GPT4Score scorer with the error taxonomy
of §7, the grounded workflows' adapters, and the paper's Table 1 layout.

- ``grbench``: one domain (``--domain`` / ``--split``: amazon, biomedical, dblp, goodreads, legal, maple_Biology,
  ...) over the user's GRBench folder (``--data``: the domain's folder with ``graph.json``; its ``data.json``
  questions if present, else the packaged copy of the questions). The graph is built into the graphs directory
  once, by the first item, and shared by every item of the run.
- ``grbench-fixture``: the GRBench-shaped fixture graphs that ship with kgagents (one-hop questions, real names;
  see ``evals/data/grbench/PROVENANCE.md``), for offline runs; ``grbench-multihop``: their multi-hop questions
  (2–3 hops, :mod:`kgagents.evals.grbench_multihop`).

Scores: Rouge-L as Graph-CoT's evaluation computes it (:func:`kgagents.evals.scorers.rouge_l`, the ``rouge-score``
package without stemming) and GPT4Score, an LLM judge with Graph-CoT's prompt. The judge is named apart from the run's
model: ``--grader-model``, by default the paper's judge (:data:`PAPER_JUDGE`, GPT-4o); ``--grader-model none``
turns it off. A judgement that fails (the judge's API, an unusable reply) is recorded as *not judged* — left out of
GPT4Score and counted — never as a wrong answer. A wrong answer is classified from the run's trace (§7): the gold
answer appeared in what the graph returned but was not returned (a number or a true/false answer must appear as a
value the graph returned, a text answer as words); else the run reached its step limit; else a wrong reasoning
step. Every question carries GRBench's difficulty (easy / medium / hard, per template: :func:`difficulty`), and
the report breaks the scores down by it (the paper's Figure 14).
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from kgagents.core.errors import KGAgentsError
from kgagents.core.jsonl import json_lines
from kgagents.core.usage import format_cost, sum_costs
from kgagents.evals.datasets import DatasetSpec, Item
from kgagents.evals.grbench_multihop import MANIFEST, graph_of, load_manifest
from kgagents.evals.runner import Adapter
from kgagents.evals.scorers import Score, register_scorer, rouge_l
from kgagents.nodes.kgot import KGoTContext
from kgagents.nodes.llm import LLMCaller

DATA_DIR = Path(__file__).parent / "data" / "grbench"
QUESTIONS_DIR = DATA_DIR / "questions"
FIXTURE_DIR = DATA_DIR / "fixture"
DOMAINS = ("amazon", "biomedical", "dblp", "goodreads", "legal", "maple_Biology", "maple_Chemistry",
           "maple_Materials_Science", "maple_Medicine", "maple_Physics")
HOW_TO = ("GRBench's graphs are downloaded from the Graph-CoT authors "
          "(see evals/data/grbench/questions/PROVENANCE.md): give --data the domain's folder (the one with graph.json) "
          "and --domain the domain.")
GPT4SCORE_SYSTEM = "You are a generative language model evaluator."
GPT4SCORE_PROMPT = (DATA_DIR / "gpt4score_prompt.txt")
#: The judge of GPT4Score when none is named: paper 001 §5 prompts GPT-4o (Graph-CoT's eval.py used gpt-4).
PAPER_JUDGE = "openai:gpt-4o"
DIFFICULTIES = ("easy", "medium", "hard")


class GRBenchDataError(KGAgentsError, ValueError):
    """GRBench files are missing or malformed; the message says what to give."""


# ----------------------------------------------------------------------------------------------------------
# Datasets
# ----------------------------------------------------------------------------------------------------------
def read_questions(path: Path) -> list[dict[str, Any]]:
    """GRBench's JSON-lines questions ``{"qid", "question", "answer"}``; malformed lines are errors."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GRBenchDataError(f"cannot read the GRBench questions {path}: {exc}") from exc
    rows = []
    for number, row in json_lines(lines, str(path), GRBenchDataError):
        if not isinstance(row, dict) or not {"question", "answer"} <= set(row):
            raise GRBenchDataError(f"{path}, line {number}: a question needs \"question\" and \"answer\"")
        rows.append(row)
    return rows


def _domain_of(path: Path, split: str) -> str:
    if split != "auto":
        return split
    parts = [p for p in (path.parent.name if path.is_file() else path.name, path.parent.name) if p]
    for candidate in (parts[0], f"maple_{parts[0]}"):
        if candidate in DOMAINS:
            return candidate
    raise GRBenchDataError(f"cannot tell the GRBench domain of {path}: give --domain ({', '.join(DOMAINS)})")


def _group(qid: str) -> str:
    """GRBench numbers its questions in blocks of ten per template."""
    return f"template {int(qid) // 10}" if str(qid).isdigit() else "–"


@lru_cache(maxsize=1)
def _difficulty_table() -> dict[str, dict[int, str]]:
    data = json.loads((DATA_DIR / "difficulty.json").read_text(encoding="utf-8"))
    return {domain: {block: level for level, blocks in levels.items() for block in blocks}
            for domain, levels in data.items() if isinstance(levels, dict)}


def difficulty(domain: str, qid: str | int) -> str | None:
    """GRBench's difficulty (easy / medium / hard) of a question, by its domain and template (``qid // 10``);
    ``None`` for an unknown domain or qid. The MAPLE domains share one table."""
    key = "maple" if str(domain).startswith("maple") else str(domain)
    return _difficulty_table().get(key, {}).get(int(qid) // 10) if str(qid).isdigit() else None


def load_grbench(path: Path, split: str) -> list[Any]:
    """One domain's questions over the user's GRBench folder (or ``graph.json``)."""
    folder = path.parent if path.is_file() else path
    graph = path if path.is_file() else folder / "graph.json"
    if not graph.is_file() and not (folder / "graph.json.gz").is_file():
        raise GRBenchDataError(f"{path}: no graph.json. {HOW_TO}")
    domain = _domain_of(path, split)
    questions = folder / "data.json"
    if not questions.is_file():
        questions = QUESTIONS_DIR / f"{domain}.jsonl"
    rows = read_questions(questions)
    return [Item(id=f"{domain}-{row.get('qid', i)}", question=str(row["question"]).strip(), gold=str(row["answer"]),
                 group=_group(str(row.get("qid", i))), inputs={"graph": str(graph if graph.is_file() else folder)},
                 meta={"domain": domain, "qid": str(row.get("qid", i)),
                       "difficulty": difficulty(domain, row.get("qid", i))}) for i, row in enumerate(rows)]


def fixture_questions(domain: str | None = None, folder: Path = FIXTURE_DIR) -> list[dict[str, Any]]:
    """The fixture's question manifest (each with its start node and gold hop), for one domain or all."""
    rows = [json.loads(line) for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    return [r for r in rows if domain in (None, "all", r["domain"])]


def fixture_graph(domain: str, folder: Path = FIXTURE_DIR) -> Path:
    """The folder of one domain's fixture graph (domains as the manifest names them, e.g. ``maple/Physics``)."""
    return folder / domain


def load_multihop(path: Path, split: str) -> list[Any]:
    """The multi-hop fixture's questions (``evals/grbench_multihop.py``), for one domain or all."""

    rows = [e for e in load_manifest(path / "multihop" / MANIFEST) if split in ("all", e["domain"])]
    if not rows:
        raise GRBenchDataError(f"the multi-hop fixture has no questions for {split!r}")
    return [Item(id=e["id"], question=e["question"], gold=e["answer"],
                 group=f"{e['domain']} {len(e['hops'])} hops", inputs={"graph": str(graph_of(e, path))},
                 meta={"domain": e["domain"], "hops": e["hops"], "hops_needed": e["hops_needed"],
                       "difficulty": "medium"}) for e in rows]


def load_fixture(path: Path, split: str) -> list[Any]:
    rows = fixture_questions(split, path)
    if not rows:
        raise GRBenchDataError(f"the fixture has no questions for {split!r}")
    return [Item(id=f"{r['domain']}-{r['qid']}", question=r["question"], gold=r["answer"],
                 group=f"{r['domain']} template {r['template']}",
                 inputs={"graph": str(fixture_graph(r["domain"], path))},
                 meta={"domain": r["domain"], "qid": r["qid"], "start": r["start"], "hop": r["hop"],
                       "difficulty": difficulty(r["domain"], r["qid"])}) for r in rows]


# ----------------------------------------------------------------------------------------------------------
# Scoring
# ----------------------------------------------------------------------------------------------------------
def gpt4score_prompt(question: str, prediction: str, truth: str) -> str:
    """Graph-CoT's GPT4Score prompt (``evals/data/grbench/gpt4score_prompt.txt``)."""
    template = GPT4SCORE_PROMPT.read_text(encoding="utf-8").rstrip("\n")
    return template.format(question=question, prediction=prediction, truth=truth)


def parse_judgement(reply: str) -> bool:
    """Yes (correct) or anything else (not correct), ignoring case, spaces and final punctuation."""
    return reply.strip().strip(".!\"'").strip().lower() == "yes"


def trace_text(state: Mapping[str, Any]) -> str:
    """What a run saw of the graph: the grounded workflows' observations, triples and attributes, a RAG
    baseline's retrieved context."""
    parts: list[str] = [str(state.get("context") or "")]
    for t in (state.get("thoughts") or {}).values():
        parts.append(str(t.get("observation") or ""))
        parts += [str(a.get("observation") or "") for a in t.get("actions") or []]
        parts += [" ".join(x) for x in t.get("triples") or []]
        parts += list(t.get("attributes") or [])
    return "\n".join(p for p in parts if p)


#: Where a value the graph returned stands in a trace: a graph function's "... is: <value>." (a feature, a
#: degree), an attribute's "<name> — <key>: <value>", a retrieved context's "<relation>: <a>; <b>".
_VALUE = re.compile(r"(?:\bis: |— [^:\n]+: |: )([^\n]*?)\.?$", re.MULTILINE)


def trace_values(state: Mapping[str, Any]) -> list[str]:
    """The values the graph returned to a run: feature values and degrees, attribute values, triples' ends, and
    the items of a retrieved context's lines."""
    values: list[str] = []
    for match in _VALUE.finditer(trace_text(state)):
        values += [v.strip() for v in re.split(r"[;,]", match.group(1)) if v.strip()]
    for t in (state.get("thoughts") or {}).values():
        values += [end for triple in t.get("triples") or [] for end in (triple[0], triple[-1])]
    return values


def _number(text: str) -> float | None:
    try:
        return float(str(text).strip().replace(",", ""))
    except ValueError:
        return None


_BOOLEANS = {"true": True, "yes": True, "false": False, "no": False}


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def answer_in_trace(gold: str, trace: str, values: Sequence[str] = ()) -> bool:
    """Whether the gold answer appeared in what the graph returned. A number must be one of the returned
    ``values`` (numerically: a count, a year, a price — not any digit in the trace); a true/false answer must be
    a returned boolean value; otherwise every comma-separated part of the gold answer occurs in the trace
    (compared as lower-case word tokens)."""
    number = _number(gold)
    if number is not None:
        return any(_number(v) == number for v in values)
    flag = _BOOLEANS.get(str(gold).strip().lower())
    if flag is not None:
        return any(_BOOLEANS.get(str(v).strip().lower()) is flag for v in values)
    haystack = f" {_norm(trace)} "
    parts = [_norm(p) for p in str(gold).split(",") if _norm(p)]
    return bool(parts) and all(f" {p} " in haystack for p in parts)


def error_type(correct: bool, gold: str, state: Mapping[str, Any]) -> str | None:
    """§7's taxonomy for a wrong answer (None for a right one)."""
    if correct:
        return None
    if answer_in_trace(gold, trace_text(state), trace_values(state)):
        return "answer found but not returned"
    if "step limit" in str(state.get("exit_reason") or ""):
        return "reached the step limit"
    return "wrong reasoning step"


class GRBenchScorer:
    """Rouge-L and GPT4Score per answer, the error type per wrong answer, and their averages."""

    name = "grbench"
    needs_model = False

    def __init__(self, model: Any = None, *, max_api_retries: int = 6, api_backoff_base_s: float = 1.0,
                 base_url: str | None = None) -> None:
        self.model = None if isinstance(model, str) and model.strip().lower() == "none" else model
        self.max_api_retries = max_api_retries
        self.api_backoff_base_s = api_backoff_base_s
        self.base_url = base_url
        """Where the judge's requests go (:func:`kgagents.evals.judges.judge_of`)."""

    async def _judge(self, question: str, prediction: str, truth: str) -> tuple[bool | None, Any, str | None]:
        """The judge's verdict (``None``: no judge, or the judgement failed), its usage, and why it failed."""
        if self.model is None:
            return None, {}, None

        ctx = KGoTContext(model=self.model, max_api_retries=self.max_api_retries,
                          api_backoff_base_s=self.api_backoff_base_s, temperature=0.0, base_url=self.base_url)
        llm = LLMCaller(ctx, "graph_executor")
        try:
            reply = await llm.text(gpt4score_prompt(question, prediction, truth), system=GPT4SCORE_SYSTEM)
        except Exception as exc:  # noqa: BLE001 - any failure of the judge leaves the answer not judged
            return None, llm.usage, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        return parse_judgement(reply), llm.usage, None

    async def score(self, item: Any, answer: Any) -> Score:
        return await self.score_run(item, answer, {})

    async def score_run(self, item: Any, answer: Any, state: dict[str, Any]) -> Score:
        prediction = "" if answer is None else str(answer)
        truth = str(item.gold)
        rouge = rouge_l(prediction, truth)["fmeasure"]
        judged, usage, failure = await self._judge(item.question, prediction, truth)
        correct = judged if judged is not None else rouge >= 0.5  # for the error type only
        details = {"rouge_l": round(rouge, 6), "gpt4score": None if judged is None else int(judged),
                   "error_type": error_type(bool(correct), truth, state),
                   "exit_reason": state.get("exit_reason"),
                   "difficulty": (getattr(item, "meta", None) or {}).get("difficulty")}
        if self.model is not None:
            details["judge"] = self.model if isinstance(self.model, str) else type(self.model).__name__
        grade = None if judged is None else ("YES" if judged else "NO")
        if failure is not None:
            details["judge_error"] = failure
            grade = "NOT_JUDGED"
        return Score(correct=judged, grade=grade, usage=usage, details=details)

    def score_failed(self, item: Any) -> Score:
        """A run that failed (no answer): scored as Graph-CoT's code scores an empty answer — Rouge-L 0 and, with a
        judge, judged "No" (GPT4Score 0; the judge is not asked: an empty prediction is never the answer)."""
        judge = self.model if isinstance(self.model, str) or self.model is None else type(self.model).__name__
        details: dict[str, Any] = {"rouge_l": 0.0, "gpt4score": None if judge is None else 0, "error_type": None,
                                   "exit_reason": None,
                                   "difficulty": (getattr(item, "meta", None) or {}).get("difficulty")}
        if judge is not None:
            details["judge"] = judge
        return Score(correct=False, grade=None if judge is None else "NO", details=details)

    def metrics(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Rouge-L and GPT4Score in percent (as the paper's tables; GPT4Score over the judged answers), how many
        answers were not judged, how many wrong answers of each type, and both scores per difficulty
        (``easy: rouge_l`` ...)."""
        out = _scores(records)
        for kind in ("answer found but not returned", "reached the step limit", "wrong reasoning step"):
            out[kind] = sum(1 for r in records if (r.get("details") or {}).get("error_type") == kind)
        out["failed runs"] = sum(1 for r in records if r.get("error"))
        for level in DIFFICULTIES:
            m = _scores([r for r in records if (r.get("details") or {}).get("difficulty") == level])
            if m["n"]:
                out.update({f"{level}: n": m["n"], f"{level}: rouge_l": m["rouge_l"],
                            f"{level}: gpt4score": m["gpt4score"]})
        return out


def _scores(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Rouge-L and GPT4Score (percent) of ``records``. A failed run counts 0 in both, as Graph-CoT's code scores
    its empty answer (judged "No"), whenever the evaluation had a judge: its records say so (``gpt4score`` 0), or,
    written before they did, another record was judged."""
    rouge = [float((r.get("details") or {}).get("rouge_l") or 0.0) for r in records]
    had_judge = any((r.get("details") or {}).get("gpt4score") is not None or (r.get("details") or {}).get("judge")
                    for r in records)
    judged: list[int] = []
    for r in records:
        verdict = (r.get("details") or {}).get("gpt4score")
        if r.get("error") and had_judge:
            judged.append(int(verdict or 0))
        elif verdict is not None:
            judged.append(int(verdict))
    not_judged = sum(1 for r in records if (r.get("details") or {}).get("judge_error"))
    return {"n": len(records), "rouge_l": 100 * statistics.fmean(rouge) if rouge else 0.0,
            "gpt4score": 100 * statistics.fmean(judged) if judged else None, "not judged": not_judged}


# ----------------------------------------------------------------------------------------------------------
# Table 1 (methods × domains)
# ----------------------------------------------------------------------------------------------------------
def method_label(manifest: Mapping[str, Any]) -> str:
    """The paper's row name of a result directory: the workflow and, for grounded runs, strategy × interaction
    × evaluator."""
    workflow = str(manifest.get("workflow", "?"))
    ctx = manifest.get("context") or {}
    model = ctx.get("model")
    if workflow == "grounded":
        strategy = {"cot": "CoT", "tot": "ToT", "got": "GoT"}.get(str(ctx.get("strategy", "cot")), "CoT")
        name = f"Graph-{strategy} {ctx.get('interaction', 'agent')}"
        if strategy != "CoT":
            name += f" ({ctx.get('evaluator', 'select')})"
    else:
        name = {"base": "Base (zero-shot)", "zeroshot": "Base (zero-shot, KGoT's prompt)", "text-rag": "Text-RAG",
                "graph-rag": "Graph-RAG"}.get(workflow, workflow)
    return f"{name}, {model}" if model else name


def _domain_of_run(rs: Any) -> str:
    """The domain of a result directory: its split, or (``auto``) the prefix of its item ids."""
    split = str(rs.manifest.get("split", "?"))
    if split not in ("auto", "all"):
        return split
    prefixes = sorted({str(r.get("id", "")).rsplit("-", 1)[0] for r in rs.records})
    return "+".join(prefixes) or split


def evaluation_settings(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What makes an evaluation the one it is, but its data (the report's columns): workflow, the model of every
    role, preset, every context value, grader and where it judged (``judge``), seed, runs and scorer, flat
    (``model[role]``, context values by name, ``context.seed`` for one named as a setting of the manifest). Two
    result directories are one report row only when these are equal."""
    flat: dict[str, Any] = {"workflow": manifest.get("workflow"), "preset": manifest.get("preset")}
    flat.update({f"model[{role}]": model for role, model in sorted((manifest.get("models") or {}).items())})
    own = {"grader": manifest.get("grader_model"), "judge": manifest.get("judge"), "seed": manifest.get("seed"),
           "runs": manifest.get("runs", 1), "scorer": manifest.get("scorer")}
    for name, value in sorted((manifest.get("context") or {}).items()):
        # a context value named as one of the manifest's own settings (the context's seed beside the
        # evaluation's) is kept apart from it: neither overwrites the other
        flat[f"context.{name}" if name in own or name in flat else str(name)] = value
    flat.update(own)
    return flat


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def method_rows(runsets: Sequence[Any]) -> list[tuple[str, list[Any], str]]:
    """The rows of Table 1 and Figure 14: ``(name, directories, column of each)``, one row per evaluation's
    settings (:func:`evaluation_settings`), whose domains are its columns. A directory the user labelled
    (``report --label``) is in the row of its label and settings, named by its label. Rows of one method name
    are named by the settings in which they differ (``[max_depth=1]``), or by their folders when none does (the
    same settings run twice on one domain: two rows, never one overwritten)."""
    several = len({str(rs.manifest.get("dataset", "")) for rs in runsets}) > 1
    rows: list[dict[str, Any]] = []
    for rs in runsets:
        given = getattr(rs, "given_label", None)
        key = (given, _value(evaluation_settings(rs.manifest)))
        column = _domain_of_run(rs) + (f" ({rs.manifest.get('dataset')})" if several else "")
        row = next((r for r in rows if r["key"] == key and column not in r["columns"]), None)
        if row is None:
            row = {"key": key, "given": given, "runsets": [], "columns": []}
            rows.append(row)
        row["runsets"].append(rs)
        row["columns"].append(column)
    names = [r["given"] or method_label(r["runsets"][0].manifest) for r in rows]
    for name in {n for n in names if names.count(n) > 1}:
        group = [i for i, n in enumerate(names) if n == name]
        flats = [evaluation_settings(rows[i]["runsets"][0].manifest) for i in group]
        keys = list(dict.fromkeys(k for flat in flats for k in flat))
        differing = [k for k in keys if len({_value(flat.get(k)) for flat in flats}) > 1]
        for i, flat in zip(group, flats, strict=True):
            what = ", ".join(f"{k}={'default' if flat.get(k) is None else flat.get(k)}" for k in differing)
            names[i] = f"{name} [{what or ', '.join(str(rs.path.name) for rs in rows[i]['runsets'])}]"
    return [(names[i], row["runsets"], row["columns"]) for i, row in enumerate(rows)]


def _grbench_runs(runsets: Sequence[Any]) -> list[Any]:
    return [rs for rs in runsets if str(rs.manifest.get("dataset", "")).startswith("grbench")]


def table1(runsets: Sequence[Any]) -> list[str]:
    """The paper's Table 1 layout: one row per evaluation's settings (:func:`method_rows`), one column per domain
    (Rouge-L, with GPT4Score where judged), and each row's cost and mean runtime per question."""
    grb = _grbench_runs(runsets)
    if not grb:
        return []
    scorer = GRBenchScorer()
    rows = method_rows(grb)
    domains = sorted({column for _, _, columns in rows for column in columns})
    header = ["method", *domains, "cost / question", "mean runtime (s)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for name, members, columns in rows:
        cells: dict[str, str] = {}
        for rs, column in zip(members, columns, strict=True):
            m = scorer.metrics(rs.records)
            cells[column] = f"{m['rouge_l']:.2f}" + (f" ({m['gpt4score']:.2f})" if m["gpt4score"] is not None else "")
        records = [r for rs in members for r in rs.records]
        total = sum_costs(r.get("cost_usd", 0.0) for r in records)
        cost = format_cost(None if total.unknown else total.known_usd / len(records)) if records else "–"
        wall = [float(r.get("wall_s") or 0.0) for r in records]
        mean = f"{statistics.fmean(wall):.1f}" if wall else "–"
        lines.append("| " + " | ".join([name, *(cells.get(d, "–") for d in domains), cost, mean]) + " |")
    return lines


def record_difficulty(record: Mapping[str, Any]) -> str | None:
    """A record's GRBench difficulty: its scorer's (``details.difficulty``), else, for a record written without
    one (a failed run before failed runs were scored), the difficulty of its id (``<domain>-<qid>``)."""
    details = record.get("details") or {}
    if "difficulty" in details:
        return details["difficulty"]
    domain, _, qid = str(record.get("id", "")).rpartition("-")
    return difficulty(domain, qid) if domain else None


def difficulty_table(runsets: Sequence[Any]) -> list[str]:
    """The paper's Figure 14 as a table: one row per evaluation's settings (the rows of :func:`table1`), Rouge-L
    (GPT4Score) on GRBench's easy, medium and hard questions (every domain of the row together); records whose
    difficulty is not known (:func:`record_difficulty`) in an ``unknown`` column, never left out."""
    rows = [(name, [r for rs in members for r in rs.records])
            for name, members, _ in method_rows(_grbench_runs(runsets))]
    if not any(record_difficulty(r) for _, records in rows for r in records):
        return []
    unknown = any(record_difficulty(r) not in DIFFICULTIES for _, records in rows for r in records)
    levels: list[str | None] = [*DIFFICULTIES, *([None] if unknown else [])]
    header = ["method", *DIFFICULTIES, *(["unknown"] if unknown else [])]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for name, records in rows:
        cells = []
        for level in levels:
            m = _scores([r for r in records if record_difficulty(r) == level
                         or (level is None and record_difficulty(r) not in DIFFICULTIES)])
            cells.append("–" if not m["n"] else f"{m['rouge_l']:.2f}" +
                         (f" ({m['gpt4score']:.2f})" if m["gpt4score"] is not None else "") + f" [n={m['n']}]")
        lines.append("| " + " | ".join([name, *cells]) + " |")
    return lines


# ----------------------------------------------------------------------------------------------------------
# Plugging in
# ----------------------------------------------------------------------------------------------------------
def _grounded_stats(state: dict[str, Any]) -> dict[str, Any]:
    thoughts = state.get("thoughts") or {}
    return {"iterations": int(state.get("depth") or 0),
            "tool_calls": sum(len(t.get("actions") or []) for t in thoughts.values())}


def given_answer(state: dict[str, Any]) -> Any:
    """The answer a grounded or retrieval run gave, as scored: empty when it gave none (Graph-CoT scores an empty
    answer), where ``final_answer`` would say "No solution found"."""
    return state["answer"] if "answer" in state else state.get("final_answer")


def register_datasets(register: Callable[[Any], None]) -> None:
    """Plug GRBench and its fixture into :mod:`kgagents.evals.datasets` and the scorer into the runner."""
    register(DatasetSpec(name="grbench", load=load_grbench, scorer="grbench", splits=("auto", *DOMAINS),
                         default_split="auto", group_label="Template", how_to_get=HOW_TO))
    fixture_domains = (sorted({r["domain"] for r in fixture_questions()})
                       if (FIXTURE_DIR / "questions.jsonl").is_file() else [])
    register(DatasetSpec(name="grbench-fixture", load=load_fixture, scorer="grbench",
                         splits=("all", *fixture_domains), default_split="all", group_label="Domain and template",
                         how_to_get="ships with kgagents", default_data=FIXTURE_DIR))
    register(DatasetSpec(name="grbench-multihop", load=load_multihop, scorer="grbench",
                         splits=("all", "biomedical", "dblp", "maple/Physics"), default_split="all",
                         group_label="Domain and hops", how_to_get="ships with kgagents", default_data=FIXTURE_DIR))
    register_scorer("grbench", lambda grader_model=None, **kw: GRBenchScorer(grader_model, **kw),
                    default_grader=PAPER_JUDGE)


def grounded_adapter() -> Adapter:
    """How the evaluation runner talks to the grounded workflow (named by its spec): the answer it gave, as
    scored, and its depth and steps."""
    return Adapter(to_answer=given_answer, stats=_grounded_stats)


def kg_rag_adapter() -> Adapter:
    """How the evaluation runner talks to the grounded workflow's baselines (base, text-rag, graph-rag)."""
    return Adapter(to_answer=given_answer)
