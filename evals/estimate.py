"""What an evaluation will cost before it runs: ``kgagents eval ... --estimate``.

The estimate counts the item runs still to do (a resumed evaluation's finished items cost nothing) and prices them
at the models this evaluation would use. It comes from one of two sources, and says which:

- **recorded runs**: the results of earlier evaluations of the same workflow (``results.jsonl`` beside their
  ``manifest.json``: the evaluation's own folder, the folders beside it, and any given with ``--estimate-from``).
  Their mean calls and input/output tokens per item run are carried over, by role, to this evaluation's models,
  preferring runs with the same dataset and settings, then the same dataset, then any;
- **the call structure** (:mod:`kgagents.evals.call_structures`) when no run was recorded: the workflow's prompts'
  sizes times its calls on an assumed typical path, and the most its limits allow.

An LLM-graded scorer's grader calls are estimated the same way (one call per item run from structure).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgagents.core.usage import cost_of, price_for
from kgagents.evals.call_structures import CHARS_PER_TOKEN, CallStructure, structure_of, tokens
from kgagents.evals.datasets import Dataset
from kgagents.evals.runner import EvalOptions, make_manifest, pending_work, read_manifest, read_results
from kgagents.graphs import registry

__all__ = ["Estimate", "Tally", "estimate", "estimate_rescore", "format_estimate", "recorded_folders"]

#: A grader's prompt, without the question, gold and answer (an assumed size: the scorers' templates vary).
GRADER_PROMPT_TOKENS = 600


@dataclass
class Tally:
    """Calls and tokens, per item run (a mean) or in total."""

    calls: float = 0.0
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    cost_usd: float | None = 0.0
    """``None``: some model has no price."""
    unpriced: set[str] = field(default_factory=set)

    def add(self, model: str | None, calls: float, input_tokens: float, output_tokens: float) -> None:
        self.calls += calls
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        cost = None if model is None or price_for(_bare(model)) is None else cost_of(
            _bare(model), round(input_tokens), round(output_tokens))
        if cost is None:
            self.unpriced.add(model or "(no model: give --model or set KGAGENTS_MODEL)")
            self.cost_usd = None
        elif self.cost_usd is not None:
            self.cost_usd += cost

    def times(self, n: int) -> Tally:
        return Tally(self.calls * n, self.input_tokens * n, self.output_tokens * n,
                     None if self.cost_usd is None else self.cost_usd * n, set(self.unpriced))


@dataclass
class Estimate:
    """The expected cost of the item runs an evaluation has still to do."""

    workflow: str
    dataset: str
    todo: int
    """Item runs still to do."""
    done: int
    """Item runs already finished (skipped when the evaluation resumes)."""
    source: str
    """``recorded`` or ``structure`` (or ``none``: neither is available)."""
    basis: str
    """Where the numbers come from, in words."""
    per_item: Tally
    expected: Tally
    at_most: Tally | None = None
    """From structure: the most the context's limits allow (``None``: from recorded runs)."""
    unbounded: list[str] = field(default_factory=list)
    """From structure: the stages whose calls the limits do not bound (left out of :attr:`at_most`)."""
    grader: Tally | None = None
    """The grader's calls in total (an LLM-graded scorer), ``None`` for a scorer that calls no model."""
    grader_model: str | None = None
    """The grader they are priced at (its model string)."""
    assumptions: list[str] = field(default_factory=list)


def _bare(model: str) -> str:
    """``provider:model`` -> ``model`` (the price table's key)."""
    return model.partition(":")[2] if ":" in model and not model.startswith(("http:", "https:")) else model


def recorded_folders(out_dir: Path, extra: Sequence[Path] = ()) -> list[Path]:
    """Results folders that may hold recorded runs: ``out_dir``, the folders beside it, and ``extra`` (folders, or
    folders of folders)."""
    seen: dict[Path, None] = {}
    for root in [out_dir, *extra]:
        for folder in [root, *(sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else [])]:
            if (folder / "manifest.json").is_file():
                seen[folder.resolve()] = None
    if out_dir.parent.is_dir():
        for folder in sorted(out_dir.parent.iterdir()):
            if folder.is_dir() and (folder / "manifest.json").is_file():
                seen[folder.resolve()] = None
    return list(seen)


def _records(folders: Iterable[Path], workflow: str, manifest: dict[str, Any]
             ) -> tuple[str, list[tuple[dict[str, Any], dict[str, Any]]], list[Path]]:
    """The closest recorded runs of ``workflow``: (how close, [(record, its manifest)], their folders)."""
    tiers: dict[str, list[tuple[dict[str, Any], dict[str, Any], Path]]] = {"same settings": [], "same dataset": [],
                                                                          "other datasets": []}
    for folder in folders:
        old = read_manifest(folder)
        if not old or old.get("workflow") != workflow:
            continue
        same_dataset = old.get("dataset") == manifest["dataset"]
        same_settings = same_dataset and all(old.get(k) == manifest.get(k) for k in ("preset", "context"))
        tier = "same settings" if same_settings else "same dataset" if same_dataset else "other datasets"
        tiers[tier] += [(r, old, folder) for r in read_results(folder)
                        if not r.get("error") and (r.get("usage") or r.get("grader_usage"))]
    for tier, found in tiers.items():
        if found:
            return tier, [(r, m) for r, m, _ in found], sorted({f for _, _, f in found})
    return "", [], []


def _model_of_usage(name: str, recorded_models: dict[str, Any], current: dict[str, Any]) -> str:
    """The model that would make, in this evaluation, the calls a recorded run made with ``name`` (as the API
    reported it, perhaps a dated release such as ``gpt-4o-mini-2024-07-18``): the current model of the role that
    used it then (the same model when no role matches)."""
    matches = [(len(_bare(model)), role) for role, model in recorded_models.items()
               if isinstance(model, str) and isinstance(current.get(role), str)
               and (name == _bare(model) or name.startswith(_bare(model) + "-"))]
    return str(current[max(matches)[1]]) if matches else name  # the longest name that fits: gpt-4o-mini, not gpt-4o


def _mean_tally(rows: list[tuple[dict[str, Any], dict[str, Any]]], key: str, current: dict[str, Any]) -> Tally:
    """The mean per item run of the records' ``key`` usage (``usage``: the run's; ``grader_usage``: its
    grader's), priced at the current models (``current``: role -> model; the grader's role is ``grader``)."""
    tally = Tally()
    by_model: dict[str, list[float]] = {}
    for record, manifest in rows:
        roles = (manifest.get("models") or {}) if key == "usage" else {"grader": manifest.get("grader_model")}
        for name, entry in (record.get(key) or {}).items():
            model = _model_of_usage(name, roles, current)
            sums = by_model.setdefault(model, [0.0, 0.0, 0.0])
            sums[0] += entry.get("calls", 0)
            sums[1] += entry.get("input_tokens", 0)
            sums[2] += entry.get("output_tokens", 0)
    for model, (calls, inp, out) in by_model.items():
        tally.add(model, calls / len(rows), inp / len(rows), out / len(rows))
    return tally


def _structure_tally(structure: CallStructure, question_chars: float, model: str | None, *,
                     bound: bool) -> Tally:
    """The calls of one item run on the expected path, or at most (``bound``; calls the limits do not bound are
    left out: :attr:`Estimate.unbounded` names them)."""
    tally = Tally()
    for call in structure.calls:
        n = call.at_most if bound else call.expected
        if n is not None:
            tally.add(model, n, n * call.input_tokens(question_chars), n * call.output_tokens * call.choices)
    return tally


def _grader_from_structure(dataset: Dataset, grader: str | None, todo: int) -> Tally:
    gold = statistics.fmean(len(str(item.gold)) for item in dataset.items) if dataset.items else 0.0
    question = statistics.fmean(len(item.question) for item in dataset.items) if dataset.items else 0.0
    tally = Tally()
    tally.add(grader, 1, GRADER_PROMPT_TOKENS + tokens(question + gold + 200), 20)
    return tally.times(todo)


def estimate(options: EvalOptions, dataset: Dataset, *, grader: str | None = None,
             recorded: Sequence[Path] = ()) -> Estimate:
    """The estimate of the item runs of the evaluation ``options`` describes still to do (see the module's doc),
    priced at its models (its manifest's). ``grader`` is the LLM grader's model when the scorer has one;
    ``recorded`` are more folders (or folders of folders) of earlier evaluations."""
    workflow, out_dir = options.workflow, options.out_dir
    manifest = make_manifest(options, dataset)
    todo_pairs, done = pending_work(dataset, options.runs, read_results(out_dir), options.retry_failed)
    todo = len(todo_pairs)
    models = manifest.get("models") or {}
    tier, rows, folders = _records(recorded_folders(out_dir, recorded), workflow, manifest)
    common: dict[str, Any] = {"workflow": workflow, "dataset": dataset.name, "todo": todo, "done": done,
                              "grader_model": grader}
    grading = grader is not None
    if rows:
        per_item = _mean_tally(rows, "usage", models)
        graded = [(r, m) for r, m in rows if r.get("grader_usage")]
        grader_tally = None
        if grading:
            grader_tally = (_mean_tally(graded, "grader_usage", {"grader": grader}).times(todo) if graded
                            else _grader_from_structure(dataset, grader, todo))
        where = ", ".join(str(f) for f in folders[:3]) + (f" and {len(folders) - 3} more" if len(folders) > 3 else "")
        return Estimate(**common, source="recorded", per_item=per_item, expected=per_item.times(todo),
                        grader=grader_tally,
                        basis=f"the mean of {len(rows)} recorded item run(s) of {workflow} ({tier}) in {where}")
    context = options.context or registry.get(workflow).make_context(options.context_values)
    structure = structure_of(workflow, context)
    if structure is None:
        return Estimate(**common, source="none", per_item=Tally(), expected=Tally(),
                        basis=f"no recorded runs of {workflow} and no call structure declared for it: evaluate a "
                              "few items first (--limit 3); the estimate then comes from them")
    question_chars = statistics.fmean(len(item.question) for item in dataset.items) if dataset.items else 0.0
    model = _structure_model(models)
    per_item = _structure_tally(structure, question_chars, model, bound=False)
    bound = _structure_tally(structure, question_chars, model, bound=True)
    return Estimate(**common, source="structure", per_item=per_item, expected=per_item.times(todo),
                    at_most=bound.times(todo), unbounded=[c.stage for c in structure.calls if c.at_most is None],
                    grader=_grader_from_structure(dataset, grader, todo) if grading else None,
                    assumptions=structure.assumptions,
                    basis=f"{workflow}'s call structure and its prompts' sizes (no recorded runs of it: "
                          f"{len(structure.calls)} kinds of call, {CHARS_PER_TOKEN} characters per token)")


def estimate_rescore(source: Path, out_dir: Path, workflow: str, dataset: Dataset, *,
                     grader: str | None) -> Estimate:
    """The expected cost of re-scoring the answers in ``source`` into ``out_dir`` (``eval --rescore --estimate``):
    no workflow runs; an LLM-graded scorer's judge (``grader``'s model) is asked once per stored answer not yet
    re-scored (a failed run is judged "No" without a call), with the question, gold and answer in its prompt."""
    done = {(str(r["id"]), int(r.get("run", 0))) for r in read_results(out_dir)}
    records = read_results(source)
    todo = [r for r in records if (str(r["id"]), int(r.get("run", 0))) not in done]
    answers = [r for r in todo if not r.get("error")]
    tally = None
    if grader is not None:
        tally = Tally()
        for record in answers:
            text = f"{record.get('question') or ''}{record.get('gold') or ''}{record.get('answer') or ''}"
            tally.add(grader, 1, GRADER_PROMPT_TOKENS + tokens(len(text)), 20)
    return Estimate(workflow=workflow, dataset=dataset.name, todo=len(todo), done=len(records) - len(todo),
                    source="recorded", per_item=Tally(), expected=Tally(), grader=tally, grader_model=grader,
                    basis=f"the {len(records)} stored answer(s) in {source} ({len(answers)} to judge; re-scoring "
                          "runs no workflow)")


def _structure_model(models: dict[str, Any]) -> str | None:
    """The model a structure's calls are priced at: the workflow's main role's (the first; the roles share one
    model unless told otherwise)."""
    return next((m for role, m in models.items() if role != "base_url" and isinstance(m, str)), None)


def _count(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:,.1f}"


def _line(label: str, tally: Tally) -> str:
    cost = "cost unknown" if tally.cost_usd is None else f"${tally.cost_usd:,.4f}"
    return (f"{label}: {_count(tally.calls)} calls, {_count(tally.input_tokens)} input + "
            f"{_count(tally.output_tokens)} output tokens, {cost}")


def format_estimate(est: Estimate) -> str:
    """The estimate as the CLI prints it."""
    lines = [f"estimate for {est.workflow} on {est.dataset}: {est.todo} item run(s) to do"
             + (f" ({est.done} finished, skipped)" if est.done else ""),
             f"from {est.basis}"]
    if est.source == "none":
        return "\n".join(lines)
    lines += [_line("per item run", est.per_item), _line("expected", est.expected)]
    if est.at_most is not None:
        lines.append(_line("at most", est.at_most) + (
            f" (not counting {', '.join(est.unbounded)}: the settings do not bound them)" if est.unbounded else ""))
    lines += [f"assumed: {a}" for a in est.assumptions]
    if est.grader is not None:
        lines.append(_line(f"grader ({est.grader_model})" if est.grader_model else "grader", est.grader))
    unpriced = sorted(set().union(*(t.unpriced for t in (est.expected, est.grader) if t is not None)))
    if unpriced:
        lines.append(f"unpriced: {', '.join(unpriced)} (prices: KGAGENTS_PRICES_FILE, see docs/evals.md)")
    return "\n".join(lines)
