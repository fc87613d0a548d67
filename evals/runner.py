"""The batch runner: any workflow over a dataset, concurrently, resumably, with cost and runtime per item.

Output directory::

    manifest.json        what was evaluated (workflow, dataset, split, runs, context values)
    results.jsonl        one JSON line per finished (item, run): the source of truth for "finished"
    checkpoints.sqlite   every (item, run) is its own checkpointed thread ``{dataset}-{item id}-run{r}``
    work/<thread>/       each item's own work directory (tool files, sandbox)

Running the same evaluation again skips every (item, run) with a line in ``results.jsonl``, resumes the
others from their checkpoints (``graph.ainvoke(None, config, context=...)``: no LLM call that finished is paid
for again) and starts the rest. A failing item writes a line with its ``error`` and never stops the batch;
``retry_failed`` runs such items again from their checkpoints.

Workflows plug in through an :class:`Adapter` (item -> graph input, final state -> answer and statistics);
the default fits every workflow whose input is ``{"question", "attachments"}`` and whose state has
``final_answer``, ``usage``, ``iteration`` and ``tool_calls``. A workflow that answers with several variants
(KGoT fusion) names their answers too: each is scored like the answer, so that the report can show the paper's
*ideal* fusion (a task counts as solved when any variant solved it, KGoT §5.1) beside the live combiner.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from kgagents.core import replay
from kgagents.core.checkpointer import name_checkpointer, open_checkpointer
from kgagents.core.config import ROLES, get_settings
from kgagents.core.endpoint_change import address_change, same_but_address
from kgagents.core.errors import KGAgentsError
from kgagents.core.nofollow import open_for_append, own_folder, refuse_link, write_file
from kgagents.core.redact import scrub, scrub_text
from kgagents.core.retry import error_text
from kgagents.core.runs import check_work_dir, is_finished
from kgagents.core.serde import CheckpointRefused
from kgagents.core.usage import Usage, format_cost, merge_usage, sum_costs, total_cost, total_tokens
from kgagents.evals import event_loop
from kgagents.evals.datasets import Dataset, Item, dataset_context, load_plugins
from kgagents.evals.event_loop import batch_collector
from kgagents.evals.judges import LLM_GRADED_SCORERS, Judge, judge_of
from kgagents.evals.options import CHECKPOINTS_FILE as CHECKPOINTS_FILE  # re-exported: the results folder's file
from kgagents.evals.options import EvalOptions
from kgagents.evals.processes import run_in_processes
from kgagents.evals.scorers import DEFAULT_GRADERS, Score, ScorerLike, fusion_metrics, make_scorer
from kgagents.graphs import registry
from kgagents.graphs.workflows import load_workflow, make_context
from kgagents.nodes.budget import budget_reached
from kgagents.nodes.llm import FATAL_ERRORS
from kgagents.nodes.runtime import gather_bounded
from kgagents.nodes.state import every_call_failed, failure_summary

RESULTS_FILE = "results.jsonl"
MANIFEST_FILE = "manifest.json"


# ----------------------------------------------------------------------------------------------------------------
# Workflow adapters
# ----------------------------------------------------------------------------------------------------------------


def default_input(item: Item) -> dict[str, Any]:
    """``{"question", "attachments"}`` plus the item's extra inputs."""
    return {"question": item.question, "attachments": list(item.attachments), **item.inputs}


def default_answer(state: dict[str, Any]) -> Any:
    return state.get("final_answer")


def default_stats(state: dict[str, Any]) -> dict[str, Any]:
    """Iterations and tool calls of a run (0 for workflows that have neither)."""
    return {"iterations": int(state.get("iteration") or 0), "tool_calls": len(state.get("tool_calls") or [])}


@dataclass(frozen=True)
class Adapter:
    """How the runner talks to one workflow."""

    to_input: Callable[[Item], dict[str, Any]] = default_input
    to_answer: Callable[[dict[str, Any]], Any] = default_answer
    stats: Callable[[dict[str, Any]], dict[str, Any]] = default_stats
    variant_answers: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """The answer of every variant of a run that combines several (fusion), by variant name; each is scored."""
    check: Callable[[Dataset], None] | None = None
    """Refuses a dataset the workflow cannot run (raises :class:`~kgagents.evals.datasets.DatasetError` saying why),
    before anything is written or paid for."""
    failed: Callable[[dict[str, Any]], str | None] | None = None
    """Why a run that ended has no answer of the agent (e.g. ARK-V1's final answer failed for good), or None:
    such a run is recorded with that ``error`` — a failed run, not an answer (an abstention, a wrong one)."""
    check_options: Callable[[Dataset, EvalOptions], None] | None = None
    """Like :attr:`check`, given the evaluation's options too (its context values, its runs): e.g. the KGoT
    paper's RAG baselines refuse the items that the KGoT evaluation they read did not finish."""


def fusion_variant_answers(state: dict[str, Any]) -> dict[str, Any]:
    """The answer of every variant of a fusion run (its ``results``), in the order of its ``variants``."""
    order = {v: i for i, v in enumerate(state.get("variants") or [])}
    results = sorted(state.get("results") or [], key=lambda r: order.get(r["variant"], len(order)))
    return {r["variant"]: r.get("final_answer") for r in results}


def fusion_stats(state: dict[str, Any]) -> dict[str, Any]:
    """Iterations of a fusion run: those of all its variants together."""
    return {"iterations": sum(int(r.get("iterations") or 0) for r in state.get("results") or []), "tool_calls": 0}


def fusion_adapter() -> Adapter:
    """How the runner talks to fusion (named by its workflow spec): every variant's answer is scored too."""
    return Adapter(stats=fusion_stats, variant_answers=fusion_variant_answers)


#: Adapters given by :func:`register_adapter` (a workflow defined outside the registry, a test), which take the
#: place of the one a workflow's spec names (:attr:`kgagents.graphs.spec.Workflow.adapter`).
ADAPTERS: dict[str, Adapter] = {}


def register_adapter(workflow: str, adapter: Adapter) -> None:
    """Give the runner another adapter for ``workflow`` than the one its spec names."""
    ADAPTERS[workflow] = adapter


def adapter_for(workflow: str) -> Adapter:
    """The workflow's adapter: a registered one, else the one its spec names, else the default ``Adapter()``."""
    if workflow in ADAPTERS:
        return ADAPTERS[workflow]
    if workflow in registry.SPECS:
        factory = registry.adapter_of(workflow)
        if factory is not None:
            return factory()
    return Adapter()


def check_dataset(workflow: str, dataset: Dataset, options: EvalOptions | None = None) -> None:
    """Refuse ``dataset`` when ``workflow`` cannot run it (its adapter's :attr:`Adapter.check`, and
    :attr:`Adapter.check_options` when the evaluation's ``options`` are given)."""
    load_plugins()
    adapter = adapter_for(workflow)
    if adapter.check is not None:
        adapter.check(dataset)
    if adapter.check_options is not None and options is not None:
        adapter.check_options(dataset, options)


# ----------------------------------------------------------------------------------------------------------------
# Results on disk
# ----------------------------------------------------------------------------------------------------------------


def thread_id_for(dataset: str, item_id: str, run: int) -> str:
    """The deterministic thread id of one (item, run); a resumed evaluation finds its checkpoints by it."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(item_id))
    return f"{dataset}-{safe}-run{run}"


def read_results(out_dir: str | Path) -> list[dict[str, Any]]:
    """Every record of ``results.jsonl``, the last one per (id, run) winning; a torn last line is skipped."""
    path = Path(out_dir) / RESULTS_FILE
    if not path.is_file():
        return []
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut short by a killed process: that item simply runs again
        latest[(str(record.get("id")), int(record.get("run", 0)))] = record
    return list(latest.values())


def read_manifest(out_dir: str | Path) -> dict[str, Any] | None:
    path = Path(out_dir) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    return str(value)


#: What makes two evaluations the same one: a results directory refuses a run that differs in any of them.
SETTINGS = ("workflow", "dataset", "split", "models", "preset", "context", "grader_model", "seed", "scorer")
#: The settings that only say how the answers are scored: another value is a re-scoring (``eval --rescore``).
SCORING_SETTINGS = ("grader_model", "scorer")


def _check_manifest(out_dir: Path, manifest: dict[str, Any], dataset: Dataset | None = None) -> None:
    """A results directory holds one evaluation: refuse a run with another workflow, dataset, split, model per
    role, preset, context values, grader or seed (its results would be reported as this one's, and the
    finished items skipped), and items whose question or gold answer changed since they were evaluated. Where
    the model is served may change (:func:`moved_settings`): the same model at another address is the same
    evaluation, and the move is kept in the manifest's ``changes``."""
    old = read_manifest(out_dir)
    if old is not None:
        old = scrub(old)  # one written before manifests left credentials out compares as one written now
        differing = [key for key in SETTINGS if key in old and old.get(key) != manifest.get(key)]
        moved = moved_settings(old, manifest, differing)
        differing = [key for key in differing if key not in moved]
        differences = [f"{key}: {old.get(key)!r} there, {manifest.get(key)!r} now" for key in differing]
        if differences:
            rescoring = (f"; to score its answers with another scorer or grader: kgagents eval ... --rescore "
                         f"{out_dir}") if set(differing) <= set(SCORING_SETTINGS) else ""
            models = ("; another model makes it another evaluation (its finished items were answered by the "
                      "first): only where the model is served (--base-url, KGAGENTS_BASE_URL) may change when an "
                      "evaluation is resumed") if {"models", "context"} & set(differing) else ""
            raise ValueError(f"{out_dir} holds another evaluation ({'; '.join(differences)}); its results "
                             "would be taken for this run's. Use another --out directory (or delete that "
                             f"one){rescoring}{models}")
        changes = [c for c in old.get("changes") or [] if isinstance(c, dict)]
        if moved:
            change = moved_address(old, manifest)
            changes.append({"at": time.time(), **change})
            said = "; ".join(f"{name} {before} -> {after}" for name, (before, after) in change.items())
            print(f"kgagents: the evaluation in {out_dir} goes on with its model at another address: {said} "
                  f"(recorded in {out_dir / MANIFEST_FILE})", file=sys.stderr)
        manifest = {**old, **manifest, "created": old.get("created", manifest.get("created"))}
        if changes:
            manifest["changes"] = changes
    if dataset is not None:
        _check_items(out_dir, dataset)
    write_file(out_dir / MANIFEST_FILE, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


#: The settings of a manifest that hold where the model is served beside what the evaluation is.
ADDRESSED_SETTINGS = ("models", "context")


def moved_settings(old: dict[str, Any], new: dict[str, Any], differing: list[str]) -> list[str]:
    """The ``differing`` settings of two manifests that differ only in where the model is served
    (:func:`kgagents.core.endpoint_change.same_but_address`)."""
    return [key for key in differing if key in ADDRESSED_SETTINGS
            and same_but_address(old.get(key), new.get(key), models=key == "models")]


def moved_address(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[Any]]:
    """``name -> [before, after]`` of the address that changed between two manifests: the one the models were
    reached at (the context's, else the configuration's), else the context's own."""
    for key in ADDRESSED_SETTINGS:
        before, after = old.get(key), new.get(key)
        if isinstance(before, dict) and isinstance(after, dict):
            change = address_change(before, after)
            if change:
                return {name: [first, second] for name, (first, second) in change.items()}
    return {}


#: Item inputs that name data on disk (the graph an item is asked over: GRBench's ``graph.json`` or folder, STaRK's
#: SKB): an item's fingerprint has their contents (:func:`contents_fingerprint`), never their path, so that the same
#: data in another folder (another checkout, another machine) is the same item and changed data is another.
DATA_INPUTS = ("graph",)

_contents: dict[tuple[str, int, int], str] = {}


def contents_fingerprint(path: str) -> str:
    """``sha256:<hex>`` of a file's bytes, or of a folder's regular files (their paths relative to it and their
    bytes, in name order; links are not followed); ``path`` itself when it names neither (a URL, a missing path).
    Kept per process, by path, size and modification time (a graph is read once per evaluation)."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return path
    key = (os.path.abspath(path), info.st_size, info.st_mtime_ns)
    if key in _contents:
        return _contents[key]
    digest = hashlib.sha256()
    if os.path.isdir(path):
        for root, folders, files in os.walk(path):
            folders.sort()
            for name in sorted(files):
                file = os.path.join(root, name)
                if os.path.islink(file) or not os.path.isfile(file):
                    continue
                digest.update(os.path.relpath(file, path).replace(os.sep, "/").encode("utf-8") + b"\0")
                digest.update(_file_digest(file) + b"\0")
    elif os.path.isfile(path):
        digest.update(_file_digest(path))
    else:
        return path
    _contents[key] = f"sha256:{digest.hexdigest()}"
    return _contents[key]


def _file_digest(path: str) -> bytes:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").digest()


def item_fingerprint(item: Item) -> str:
    """A short hash of what is asked and what counts as right: the item's id, question, gold answer and inputs
    (those of :data:`DATA_INPUTS` by their contents)."""
    inputs = {key: contents_fingerprint(value) if key in DATA_INPUTS and isinstance(value, str) else value
              for key, value in item.inputs.items()}
    return _fingerprint(item, inputs)


def path_item_fingerprint(item: Item) -> str:
    """The fingerprint results written before :data:`DATA_INPUTS` were read by their contents have: the data's path
    as given. Such a folder resumes (and re-scores) over the data at that same path."""
    return _fingerprint(item, item.inputs)


def _fingerprint(item: Item, inputs: dict[str, Any]) -> str:
    data = json.dumps([item.id, item.question, _jsonable(item.gold), _jsonable(inputs)], sort_keys=True,
                      ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:16]


def same_item(item: Item, recorded: str) -> bool:
    """Whether a record's item fingerprint ``recorded`` is ``item``'s: its contents' one, or the path's one of a
    folder written before (:func:`path_item_fingerprint`)."""
    return recorded in (item_fingerprint(item), path_item_fingerprint(item))


def data_fingerprint(dataset: Dataset) -> str:
    """A short hash of every item of the evaluation (see :func:`item_fingerprint`)."""
    joined = "\n".join(sorted(f"{item.id}\t{item_fingerprint(item)}" for item in dataset.items))
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16]


def _check_items(out_dir: Path, dataset: Dataset) -> None:
    """Refuse items whose question, gold answer or inputs differ from those the directory's results were
    for."""
    now = {item.id: item for item in dataset.items}
    changed = sorted({str(r["id"]) for r in read_results(out_dir)
                      if r.get("item") and str(r["id"]) in now and not same_item(now[str(r["id"])], r["item"])})
    if changed:
        more = " ..." if len(changed) > 5 else ""
        raise ValueError(f"{out_dir} holds results for other versions of {len(changed)} item(s) "
                         f"({', '.join(changed[:5])}{more}): the dataset changed since; use another --out "
                         "directory")


# ----------------------------------------------------------------------------------------------------------------
# The evaluation
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class EvalResult:
    """What :func:`evaluate` returns: every record of the directory and what this call did."""

    out_dir: Path
    records: list[dict[str, Any]]
    metrics: dict[str, Any]
    ran: int = 0
    skipped: int = 0
    failed: int = 0
    resumed: int = 0
    budget_stop: str | None = None
    """Set when this call reached the evaluation's budget: which budget, how much."""
    budget_skipped: int = 0
    """The items (runs) this call did not start because the budget was reached."""
    fatal: str | None = None
    """The first error of this call's items that no item can get past (a model that cannot be used: a rejected
    key, an unknown model, an address that never answered); ``kgagents eval`` then exits non-zero."""


class _Progress:
    """A tqdm bar with running accuracy and cost (ETA comes with tqdm)."""

    def __init__(self, total: int, enabled: bool, desc: str) -> None:
        self.correct = 0
        self.scored = 0
        self.costs: list[float | None] = []
        self.bar = None
        if enabled and total:
            self.bar = tqdm(total=total, desc=desc, unit="item", file=sys.stderr, dynamic_ncols=True)

    def update(self, record: dict[str, Any]) -> None:
        if record.get("correct") is not None:
            self.scored += 1
            self.correct += bool(record["correct"])
        self.costs += [record.get("cost_usd", 0.0), record.get("grader_cost_usd", 0.0)]
        if self.bar is not None:
            acc = f"{self.correct / self.scored:.1%}" if self.scored else "-"
            cost = format_cost(sum_costs(self.costs), unit="cost")
            self.bar.set_postfix_str(f"acc {acc} ({self.correct}/{self.scored}) cost {cost}", refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def workflow_defaults(module: Any, dataset_name: str) -> dict[str, Any]:
    """The dataset's context values (:func:`kgagents.evals.datasets.dataset_context`) that the workflow's context
    has."""
    values = dataset_context(dataset_name)
    if not values:
        return {}
    schema = module.build().context_schema
    known = {f.name for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else set()
    return {k: v for k, v in values.items() if k in known}


def with_defaults(context: Any, defaults: dict[str, Any]) -> Any:
    """A ready context with the dataset's values for the fields its maker left at their defaults."""
    if not defaults or not dataclasses.is_dataclass(context) or isinstance(context, type):
        return context
    fields = {f.name: f for f in dataclasses.fields(context)}
    changes = {}
    for name, value in defaults.items():
        spec = fields.get(name)
        if spec is None:
            continue
        default = spec.default
        if default is dataclasses.MISSING and spec.default_factory is not dataclasses.MISSING:
            default = spec.default_factory()
        if getattr(context, name) == default:
            changes[name] = value
    return dataclasses.replace(context, **changes) if changes else context


class ItemRunner:
    """Runs (item, run) pairs of one evaluation on one checkpointer; shared by the local and the Dask runner."""

    def __init__(self, options: EvalOptions, dataset_name: str, scorer: ScorerLike) -> None:
        load_plugins()
        self.options = options
        self.dataset_name = dataset_name
        self.scorer = scorer
        self.module = load_workflow(options.workflow)
        self.adapter = adapter_for(options.workflow)
        defaults = workflow_defaults(self.module, dataset_name)
        self.base_context = with_defaults(options.context, defaults) if options.context is not None else \
            make_context(self.module, {**defaults, **options.context_values})
        # the evaluation's options are its caller's choice, in every worker process too
        name_checkpointer(options.checkpointer)
        name_checkpointer(getattr(self.base_context, "kgot_checkpointer", None))
        self.graph: Any = None

    def context_for(self, thread_id: str, run: int) -> Any:
        """The run's context: a work directory of the item's own when the context has none, and run ``run``'s
        seed (``options.seed + run``) when the evaluation has a seed."""
        ctx = self.base_context
        if not dataclasses.is_dataclass(ctx) or isinstance(ctx, type):
            return ctx
        names = {f.name for f in dataclasses.fields(ctx)}
        changes: dict[str, Any] = {}
        if "work_dir" in names and not getattr(ctx, "work_dir", None):
            changes["work_dir"] = str(item_work_dir(self.options.out_dir, thread_id))
        if "seed" in names and self.options.seed is not None:
            changes["seed"] = self.options.seed + run
        return dataclasses.replace(ctx, **changes) if changes else ctx

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[ItemRunner]:
        if not self.options.checkpointer:
            refuse_link(self.options.checkpointer_url, "the evaluation's checkpoints")
        async with open_checkpointer(self.options.checkpointer_url) as saver:
            self.graph = self.module.compile_graph(saver)
            try:
                yield self
            finally:
                self.graph = None

    async def run(self, item: Item, run: int) -> dict[str, Any]:
        """Run (or resume, or just re-score) one item; never raises except on cancellation."""
        thread_id = thread_id_for(self.dataset_name, item.id, run)
        ctx = self.context_for(thread_id, run)
        limit = getattr(ctx, "recursion_limit", 200)
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id}, "recursion_limit": limit}
        started = time.perf_counter()
        node_s: dict[str, float] = {}
        error: str | None = None
        fatal = False
        resumed = False
        state: dict[str, Any] = {}
        try:
            snapshot = await self.graph.aget_state(config)
            has_checkpoint = snapshot.created_at is not None
            problem = stored_input_problem(snapshot.values, self.adapter.to_input(item)) if has_checkpoint else None
            if problem:
                raise StoredInputChanged(f"{thread_id} is not resumed from {self.options.checkpointer_url}: "
                                         f"{problem}")
            if has_checkpoint and is_finished(snapshot):
                state = dict(snapshot.values)  # the graph had finished; only the line was missing
            else:
                resumed = has_checkpoint
                graph_input = None if has_checkpoint else self.adapter.to_input(item)
                with replay.run_place(item.id, run):  # its calls are recorded and replayed as this run's
                    await self._stream(graph_input, config, ctx, node_s)
                state = dict((await self.graph.aget_state(config)).values)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing item never stops the batch (see EvalResult.fatal)
            error = f"{type(exc).__name__}: {scrub_text(error_text(exc))}"  # no key a server echoed
            fatal = isinstance(exc, (*FATAL_ERRORS, CheckpointRefused))  # a refused checkpoint: see core/serde.py
            try:
                state = dict((await self.graph.aget_state(config)).values)
            except Exception:  # noqa: BLE001
                state = {}
        failures = failure_summary(state.get("failures"))
        if error is None and every_call_failed(state):
            kinds = ", ".join(f"{n} {kind}" for kind, n in failures["kinds"].items())
            error = f"every model call failed for good ({kinds}); the run's answer is not scored"
        if error is None and self.adapter.failed is not None:
            error = self.adapter.failed(state)
        answer = None if error else self.adapter.to_answer(state)
        score = failed_score(self.scorer, item) if error else Score(correct=None)
        variants: dict[str, dict[str, Any]] = {}
        if error is None:
            try:
                score_run = getattr(self.scorer, "score_run", None)
                score = await (score_run(item, answer, state) if score_run else self.scorer.score(item, answer))
                variants = await self._score_variants(item, answer, score, state)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                error = f"scoring failed: {type(exc).__name__}: {exc}"
                score = Score(correct=None)
        record = self._record(item, run, thread_id, state, answer, score, error, resumed,
                              time.perf_counter() - started, node_s)
        record["failures"] = failures
        if fatal:
            record["fatal"] = True  # the configuration is at fault, not the item (EvalResult.fatal)
        if self.adapter.variant_answers is not None:
            for graded in variants.values():
                record["grader_usage"] = merge_usage(record["grader_usage"], graded.pop("usage"))
            record["grader_cost_usd"] = total_cost(record["grader_usage"])
            record["variants"] = variants
        return record

    async def _score_variants(self, item: Item, answer: Any, score: Score, state: dict[str, Any]
                              ) -> dict[str, dict[str, Any]]:
        """Every variant's answer graded like the answer (an answer graded once per item: the same text is not
        graded again, so an LLM grader is not paid twice for it)."""
        if self.adapter.variant_answers is None:
            return {}
        graded: dict[str, Score] = {str(answer): dataclasses.replace(score, usage={})}
        out: dict[str, dict[str, Any]] = {}
        for name, variant_answer in self.adapter.variant_answers(state).items():
            key = str(variant_answer)
            if key not in graded:
                graded[key] = await self.scorer.score(item, variant_answer)
                usage = graded[key].usage
            else:
                usage = {}
            out[name] = {"answer": _jsonable(variant_answer), "correct": graded[key].correct,
                         "grade": graded[key].grade, "usage": usage}
        return out

    async def _stream(self, graph_input: Any, config: dict[str, Any], ctx: Any, node_s: dict[str, float]) -> None:
        """Run the graph, timing each node task (``stream_mode="tasks"``)."""
        starts: dict[str, tuple[str, float]] = {}
        # "async" durability (LangGraph's default, said here on purpose): a superstep's checkpoint and each task's
        # writes are saved while the run goes on and the run's end waits for them; "exit" would save nothing
        # before the end, so nothing could be resumed.
        async for event in self.graph.astream(graph_input, config, context=ctx, stream_mode="tasks",
                                              durability="async"):
            if not isinstance(event, dict) or "id" not in event:
                continue
            now = time.perf_counter()
            if "triggers" in event:
                starts[event["id"]] = (event.get("name", "?"), now)
            elif event["id"] in starts:
                name, t0 = starts.pop(event["id"])
                node_s[name] = node_s.get(name, 0.0) + (now - t0)

    def _record(self, item: Item, run: int, thread_id: str, state: dict[str, Any], answer: Any, score: Score,
                error: str | None, resumed: bool, wall_s: float, node_s: dict[str, float]) -> dict[str, Any]:
        usage: Usage = merge_usage({}, state.get("usage") or {})
        try:
            stats = self.adapter.stats(state)
        except Exception:  # noqa: BLE001
            stats = {}
        return {
            "id": item.id,
            "item": item_fingerprint(item),
            "run": run,
            "thread_id": thread_id,
            "workflow": self.options.workflow,
            "dataset": self.dataset_name,
            "group": item.group,
            "question": item.question,
            "gold": _jsonable(item.gold),
            "answer": _jsonable(answer),
            "correct": score.correct,
            "grade": score.grade,
            "usage": usage,
            "tokens": total_tokens(usage),
            "cost_usd": total_cost(usage),
            "details": _jsonable(getattr(score, "details", {}) or {}),
            "grader_usage": score.usage,
            "grader_cost_usd": total_cost(score.usage),
            "wall_s": round(wall_s, 4),
            "node_s": {k: round(v, 4) for k, v in sorted(node_s.items())},
            "iterations": stats.get("iterations", 0),
            "tool_calls": stats.get("tool_calls", 0),
            "error": error,
            "budget_stop": state.get("budget_stop"),
            "resumed": resumed,
            "finished_at": time.time(),
        }


#: The inputs whose values are paths or names of things a run may open: a checkpoint being resumed must hold the
#: item's own (a results folder's checkpoints may be someone else's, and a stored path would widen what the file
#: tools may read or which graph the run opens).
PATH_INPUTS = ("attachments", "graph", "kg_file", "pages", "kgot_thread")


class StoredInputChanged(KGAgentsError, ValueError):
    """A checkpoint names other inputs (attachments, a graph) than the item it is resumed for."""


def stored_input_problem(stored: Any, given: Any) -> str | None:
    """Why a checkpoint's ``stored`` state may not be resumed for an item whose graph input is ``given`` (``None``:
    it may): an attachment the item does not have, another graph, file, pages or KGoT thread than the item's."""
    if not isinstance(stored, dict) or not isinstance(given, dict):
        return None
    attachments = stored.get("attachments") or []
    if isinstance(attachments, list):
        extra = [str(a) for a in attachments if a not in (given.get("attachments") or [])]
        if extra:
            return (f"its checkpoint attaches {', '.join(repr(a[:200]) for a in extra[:3])}, which the item does not "
                    "(the dataset changed, or the checkpoints are someone else's)")
    for name in PATH_INPUTS[1:]:
        if name in stored and stored.get(name) != given.get(name):
            return (f"its checkpoint's {name} is {str(stored.get(name))[:200]!r}, the item's "
                    f"{str(given.get(name))[:200]!r} (the dataset changed, or the checkpoints are someone else's)")
    return None


def pending_work(dataset: Dataset, runs: int, done: Iterable[dict[str, Any]], retry_failed: bool
                 ) -> tuple[list[tuple[Item, int]], int]:
    """The (item, run) pairs still to do, and how many are skipped as finished."""
    finished = {(str(r["id"]), int(r.get("run", 0))) for r in done if retry_failed is False or not r.get("error")}
    todo = [(item, run) for run in range(runs) for item in dataset.items if (item.id, run) not in finished]
    return todo, runs * len(dataset.items) - len(todo)


def make_manifest(options: EvalOptions, dataset: Dataset) -> dict[str, Any]:
    """What was evaluated, with what (the settings that make it this evaluation: :data:`SETTINGS`); without the
    credentials of any URL in them (:func:`kgagents.core.redact.scrub`: a manifest is shared with the results)."""
    return scrub({"workflow": options.workflow, "dataset": dataset.name, "split": dataset.split, "runs": options.runs,
            "seed": options.seed, "items": len(dataset.items), "scorer": dataset.scorer,
            "group_label": dataset.group_label, "models": role_models(options), "preset": options.preset,
            "context": _jsonable(options.context_values if options.context is None else _context_summary(options)),
            "grader_model": _jsonable(_model_name(options.grader_model)), "data": data_fingerprint(dataset),
            "judge": _judge_name(options, dataset.scorer),
            "created": time.time()})


def _judge_name(options: EvalOptions, scorer: str) -> str | None:
    """The judge a manifest names (its model and where it sends), ``None`` for a scorer without one."""
    judge = evaluation_judge(options, scorer)
    return None if judge is None else judge.name


def role_models(options: EvalOptions) -> dict[str, Any]:
    """The model of every role, as given (a ``provider:model`` string, a model instance's name) or as the
    environment configures it (``KGAGENTS_MODEL`` and the role variables), with the OpenAI-compatible server's
    URL where one is set."""
    settings = get_settings()
    ctx, values = options.context, options.context_values
    models: dict[str, Any] = {}
    for role in getattr(ctx, "ROLES", None) or ROLES:
        given = ctx.model_for(role) if hasattr(ctx, "model_for") else (
            values.get(f"{role}_model") or values.get("model"))
        models[role] = _model_name(given) if given is not None else settings.model_for(role)
    base_url = getattr(ctx, "base_url", None) if ctx is not None else values.get("base_url")
    if base_url or settings.base_url:
        models["base_url"] = base_url or settings.base_url
    return _jsonable(models)


def _model_name(model: Any) -> Any:
    if model is None or isinstance(model, str):
        return model
    return getattr(model, "model_name", None) or type(model).__name__


def _context_summary(options: EvalOptions) -> dict[str, Any]:
    ctx = options.context
    if dataclasses.is_dataclass(ctx):
        return {f.name: _model_name(getattr(ctx, f.name)) if "model" in f.name else getattr(ctx, f.name)
                for f in dataclasses.fields(ctx) if getattr(ctx, f.name) != f.default}
    return {"context": repr(ctx)}


def failed_score(scorer: ScorerLike, item: Item) -> Score:
    """The score of a run that failed: the scorer's own (``score_failed``: e.g. GRBench scores an empty answer, as
    its paper's code does), else not correct."""
    score_failed = getattr(scorer, "score_failed", None)
    return score_failed(item) if score_failed is not None else Score(correct=False)


def evaluation_judge(options: EvalOptions, scorer: str) -> Judge | None:
    """The LLM grader of the evaluation ``options`` describes, scored by ``scorer`` (:mod:`kgagents.evals.judges`;
    ``None`` when the scorer has none): the one setting the start line, the start checks, the estimate and the
    scorer use."""
    if options.judge is not None:
        return options.judge if scorer in LLM_GRADED_SCORERS else None
    ctx, values = options.context, options.context_values
    run_model = getattr(ctx, "model", None) if ctx is not None else values.get("model")
    run_base_url = getattr(ctx, "base_url", None) if ctx is not None else values.get("base_url")
    return judge_of(scorer, options.grader_model, run_model, run_base_url=run_base_url,
                    grader_base_url=options.grader_base_url)


def build_scorer(options: EvalOptions, dataset: Dataset) -> ScorerLike:
    """The dataset's scorer, with the evaluation's judge (:func:`evaluation_judge`) where it has an LLM grader."""
    load_plugins()
    judge = evaluation_judge(options, dataset.scorer)
    if judge is None:  # an exact scorer, or one registered outside the LLM-graded ones: the grader as given
        grader = options.grader_model or DEFAULT_GRADERS.get(dataset.scorer)
        return make_scorer(dataset.scorer, grader_model=grader)
    extra = {} if judge.base_url is None else {"base_url": judge.base_url}
    return make_scorer(dataset.scorer, grader_model="none" if judge.model is None else judge.model, **extra)


def item_runner(options: EvalOptions, dataset_name: str, scorer_name: str) -> ItemRunner:
    """The item runner of a worker process (:mod:`kgagents.evals.processes`): ``options``' workflow on items of
    ``dataset_name``, scored by the scorer named ``scorer_name``."""
    scorer = build_scorer(options, Dataset(name=dataset_name, split="", items=[], scorer=scorer_name))
    return ItemRunner(options, dataset_name, scorer)


def cost_totals(records: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The records' ``key`` cost in total: ``None`` when some item's cost is unknown (a model without a price),
    then also its known part (``<key>_known``) and how many items are unknown (``<key>_unknown_items``)."""
    total = sum_costs(r.get(key, 0.0) for r in records)
    if not total.unknown:
        return {key: total.usd}
    return {key: None, f"{key}_known": total.known_usd, f"{key}_unknown_items": total.unknown}


def summarize(records: list[dict[str, Any]], scorer: ScorerLike) -> dict[str, Any]:
    """Metrics of the whole evaluation (the scorer's) with cost and time."""
    metrics = dict(scorer.metrics(records))
    metrics.update(cost_totals(records, "cost_usd"))
    metrics.update(cost_totals(records, "grader_cost_usd"))
    metrics["errors"] = sum(1 for r in records if r.get("error"))
    metrics["degraded"] = sum(1 for r in records
                              if not r.get("error") and (r.get("failures") or {}).get("count"))
    metrics.update(fusion_metrics(records))
    return metrics


async def evaluate(options: EvalOptions, dataset: Dataset) -> EvalResult:
    """Run ``options.workflow`` over ``dataset``, ``options.concurrency`` items at a time, in this process or
    shared by ``options.processes`` worker processes."""
    check_dataset(options.workflow, dataset, options)
    out_dir = options.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    _check_manifest(out_dir, make_manifest(options, dataset), dataset)
    scorer = build_scorer(options, dataset)
    todo, skipped = pending_work(dataset, options.runs, read_results(out_dir), options.retry_failed)
    progress = _Progress(len(todo), options.progress, f"{options.workflow} on {dataset.name}")
    counts = {"ran": 0, "failed": 0, "resumed": 0}
    runner = ItemRunner(options, dataset.name, scorer)
    queue: asyncio.Queue[tuple[Item, int]] = asyncio.Queue()
    for pair in todo:
        queue.put_nowait(pair)

    fatal: list[str] = []  # faults of the configuration that items met (a model that cannot be used)
    spent: Usage = {}  # what this call's items cost, runs and graders (the evaluation's budget)
    budget_stop: list[str] = []

    with open_for_append(out_dir / RESULTS_FILE, "the evaluation's results") as sink:
        def write(record: dict[str, Any]) -> None:
            if record.pop("fatal", False):
                fatal.append(str(record.get("error")))
            sink.write(json.dumps(record, ensure_ascii=False) + "\n")
            sink.flush()
            counts["ran"] += 1
            counts["failed"] += bool(record.get("error"))
            counts["resumed"] += bool(record.get("resumed"))
            progress.update(record)
            spent.update(merge_usage(merge_usage(spent, record.get("usage")), record.get("grader_usage")))

        async def worker() -> None:
            while True:
                if not budget_stop and (reason := budget_reached(spent, options)):
                    budget_stop.append(reason)
                if budget_stop or fatal:
                    # the budget is spent, or an item met a fault no item can get past (a model that cannot be
                    # used): no item starts (the queue keeps what is left, for the same command once fixed)
                    return
                try:
                    item, run = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                write(await runner.run(item, run))

        try:
            if options.processes > 1:
                await run_in_processes(options, dataset, todo, write, item_runner)
            else:
                async with runner.opened():
                    with batch_collector():
                        await gather_bounded(None, [worker() for _ in range(min(options.concurrency, len(todo)))])
        finally:
            progress.close()
    records = read_results(out_dir)
    result = EvalResult(out_dir=out_dir, records=records, metrics=summarize(records, scorer), skipped=skipped,
                        fatal=fatal[0] if fatal else None, budget_stop=budget_stop[0] if budget_stop else None,
                        budget_skipped=queue.qsize() if budget_stop else 0, **counts)
    write_summary(out_dir, result.metrics)
    return result


def write_summary(out_dir: Path, metrics: dict[str, Any]) -> None:
    write_file(out_dir / "summary.json", json.dumps(metrics, indent=2) + "\n")


def item_work_dir(out_dir: Path, thread_id: str) -> Path:
    """The work folder of an item's run: ``out_dir/work/<thread>``, made as real folders of the results folder (a
    link there, which a results folder from someone else may carry, is refused rather than followed: it would make
    the folder it points at the sandbox's writable folder and a root of the file tools; so would one of the folders
    derived from it: :func:`kgagents.core.runs.check_work_dir`). Absolute, never resolved through links."""
    base = Path(os.path.abspath(out_dir))
    own_folder(base / "work", "the items' work folders")
    return check_work_dir(own_folder(base / "work" / thread_id, "an item's work folder"))


def run_evaluation(options: EvalOptions, dataset: Dataset) -> EvalResult:
    """Synchronous wrapper of :func:`evaluate`."""
    return event_loop.run(evaluate(options, dataset))
