"""The batch benchmark of ARK-V1, grounded reasoning and Agent-G (``kgagents.evals.bench_batch --workflow``).

Each workflow runs on a dataset that ships with kgagents, through the evaluation runner and the real
``langchain-openai`` client, against :mod:`kgagents.evals.latency_server`: every model call waits ``latency``
seconds, and its reply is made from the schema the request carries (:func:`script`: one rule per decision that
routes the run, matched on the call's stage, which requests carry in the ``X-KGAgents-Stage`` header that this
benchmark turns on; every other call gets a schema-valid reply). The replies are chosen so that every run ends in
a bounded number of calls; they are not right answers, and the benchmark does not score them.

What it measures, side by side in one run:

- **single task**: one item's wall time against the *critical path* of its model calls. Every model call's
  start and end are recorded from the run itself (a LangChain callback, :class:`CallTrace`); the critical path
  is the longest chain of calls each of which started after the previous one ended (the most calls no two of
  which overlap in time, found greedily by earliest end): the fewest latency rounds the run could have taken
  with its own dependencies, each round ``latency`` seconds. Calls that overlap were not waiting for each
  other; calls that do not overlap may have (or the run failed to overlap them, which the ratio shows: a run
  that makes independent calls one after the other has a longer chain than it needs, so the ratio ``wall /
  critical path`` is a lower bound of what it loses). The run's speedup over its calls one at a time is the
  sum of the calls' durations over the wall time;
- **batch**: items per second at C items in flight, as a fraction of C times one item's rate alone (every item
  a copy of the dataset's first: the same work, over one static graph);
- **CPU per item by component** (``--profile C``, the KGoT benchmark's profile);
- **memory**: the peak resident memory of a process running C items at once over the workflow's static graph
  (one shared instance) against one running one item (``--memory C``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook

from kgagents.core.scripted import STAGE_HEADER_VARIABLE
from kgagents.evals import event_loop
from kgagents.evals.datasets import Dataset, load_dataset
from kgagents.evals.latency_server import LatencyServer
from kgagents.evals.profiling import cpu_shares, profile_markdown, profiled
from kgagents.evals.runner import EvalOptions, evaluate
from kgagents.evals.stark_fixture import write_all
from kgagents.evals.workers import processes_for
from kgagents.graphs.workflows import preset

#: The model name the benchmark asks the latency server for.
MODEL = "bench-model"


# ------------------------------------------------------------------------------------------------------------
# The trace of a run's model calls, and its critical path
# ------------------------------------------------------------------------------------------------------------
class CallTrace(BaseCallbackHandler):
    """Every chat-model call's start and end (``time.perf_counter``) and stage, as the calls happen; with
    ``tools``, every LangChain tool run's too (KGoT's tools wait like remote calls; the other workflows' graph
    functions answer at once and are left out)."""

    run_inline = True  # recorded on the loop that makes the call, at the moment it happens

    def __init__(self, tools: bool = False) -> None:
        self.open: dict[UUID, tuple[float, str]] = {}
        self.calls: list[tuple[float, float, str]] = []
        self.tools = tools

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: UUID, **kwargs: Any) -> None:
        if self.tools:
            self.open[run_id] = (time.perf_counter(), "tool")

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID, metadata: Any = None,
                            **kwargs: Any) -> None:
        self.open[run_id] = (time.perf_counter(), str((metadata or {}).get("kgagents_stage") or ""))

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._close(run_id)

    def _close(self, run_id: UUID) -> None:
        started = self.open.pop(run_id, None)
        if started is not None:
            self.calls.append((started[0], time.perf_counter(), started[1]))


_TRACE: ContextVar[CallTrace | None] = ContextVar("kgagents_bench_trace", default=None)
register_configure_hook(_TRACE, inheritable=True)


@contextlib.contextmanager
def traced(trace: CallTrace | None) -> Iterator[CallTrace | None]:
    """Record the calls of the runs started inside in ``trace`` (LangChain's configure hook)."""
    token = _TRACE.set(trace)
    try:
        yield trace
    finally:
        _TRACE.reset(token)


def critical_path(intervals: list[tuple[float, float]]) -> int:
    """The most intervals no two of which overlap: the longest chain of calls each started after the previous
    one ended (earliest end first, the greedy choice that is optimal for interval scheduling)."""
    rounds, last_end = 0, float("-inf")
    for start, end in sorted(intervals, key=lambda iv: iv[1]):
        if start >= last_end:
            rounds, last_end = rounds + 1, end
    return rounds


# ------------------------------------------------------------------------------------------------------------
# The workflows: dataset, preset and the replies that route their runs
# ------------------------------------------------------------------------------------------------------------
def _auto(when: str, **auto: Any) -> dict[str, Any]:
    return {"when": when, "times": 0, "auto": auto}


def _first_listed(tag: str) -> dict[str, Any]:
    """The first line of a prompt's ``<tag>`` block, as a one-element list."""
    return {"$prompt": rf"<{tag}>\n([^\n]+)", "$all": True, "$max": 1}


#: ARK-V1: the anchor the last "closest entities" hint names (the first attempt names none: one failed attempt
#: per step, as a model that misspells an entity makes), the first listed relation, the last step's first triple
#: key; step 1 continues, step 2 stops; then the final answer.
ARK_SCRIPT = [
    _auto(r"^\[stage: reasoning step \d+, (select anchor|back to anchor)",
          values={"anchor": {"$prompt": r'closest entities that are: "([^"]+)"', "$last": True}}),
    _auto(r"^\[stage: reasoning step \d+, select relation",
          values={"relation": {"$prompt": r"outgoing relation\(s\):\n- ([^\n]+)", "$last": True}}),
    _auto(r"^\[stage: reasoning step 1, reasoning",
          values={"triple_keys": {"$prompt": r"only from: ([^,\s(]+)", "$all": True, "$max": 1, "$last": True},
                  "continue_exploration": True}),
    _auto(r"^\[stage: reasoning step \d+, reasoning",
          values={"triple_keys": {"$prompt": r"only from: ([^,\s(]+)", "$all": True, "$max": 1, "$last": True},
                  "continue_exploration": False}),
]

#: Grounded reasoning: exploration follows the first listed relation to the first listed tail entity, and its
#: End? says yes once the chain has two thoughts; the agent calls a graph function at step 1 and Finish after.
GROUNDED_SCRIPT = [
    _auto(r"^\[stage: prune relations\]", values={"relations": _first_listed("relations")}),
    _auto(r"^\[stage: prune entities\]", values={"entities": _first_listed("tail_entities")}),
    _auto(r"^\[stage: search end\].*Thought 2:", values={"sufficient": True}),
    _auto(r"^\[stage: agent action, step 1,", tool="RetrieveNode", content="RetrieveNode[x]"),
    _auto(r"^\[stage: agent action", tool="Finish", content="Finish[x]"),
]

#: Agent-G: the validator rejects the first iteration's answer and accepts the second's.
AGENT_G_SCRIPT = [
    _auto(r"^\[stage: validator, iteration 1\]", content="no"),
    _auto(r"^\[stage: validator", content="yes"),
]


@dataclasses.dataclass
class WorkflowBench:
    """How one workflow is benchmarked: its dataset (``load`` gives it), preset, context values and script."""

    workflow: str
    dataset: str
    preset: str | None
    script: list[dict[str, Any]]
    values: dict[str, Any] = dataclasses.field(default_factory=dict)
    scorer: str | None = "gaia"
    """The scorer the runs are graded with: an exact one (the replies are no answers; an LLM grader would add its
    calls to the workflow's)."""
    graph: str | None = None
    """Another static graph for every item (``--graph``: a name or path, e.g. a large graph from
    :mod:`kgagents.evals.synthetic_kg`); ``None``: the dataset's own."""

    def load(self, root: Path) -> Dataset:
        """The dataset (STaRK's is written to ``root`` from the test fixture first), its items on ``graph``."""
        path = None
        if self.dataset.startswith("stark"):
            path = write_all(root / "stark")
        data = load_dataset(self.dataset, path)
        if self.scorer:
            data.scorer = self.scorer
        if self.graph is not None:
            if not all("graph" in item.inputs for item in data.items):
                raise ValueError(f"the {self.workflow} benchmark's items on {self.dataset} name no static graph "
                                 "to replace (--graph is for grounded on grbench-fixture and Agent-G on STaRK)")
            for item in data.items:
                item.inputs = {**item.inputs, "graph": self.graph}
        return data

    def context_values(self, base_url: str) -> dict[str, Any]:
        """The runs' context values: the preset's, the benchmark's, the latency server as the model."""

        return {**(preset(self.workflow, self.preset) if self.preset else {}), **self.values,
                "model": MODEL, "base_url": base_url}

    def with_values(self, values: dict[str, Any]) -> WorkflowBench:
        """The same benchmark with ``values`` over its context values (``--set``, a ``--vary`` variant)."""
        return dataclasses.replace(self, values={**self.values, **values}) if values else self


#: ``--workflow`` → ``--dataset`` → its benchmark. The papers' embedding models are downloads (or paid APIs):
#: the runs use the packaged all-MiniLM-L6-v2 (``embedding_model`` None), offline.
BENCHES: dict[str, dict[str, WorkflowBench]] = {
    "ark": {"cr-lt": WorkflowBench("ark", "cr-lt", None, ARK_SCRIPT, scorer=None)},
    "grounded": {"grbench-fixture": WorkflowBench("grounded", "grbench-fixture", "paper-tot-explore-score",
                                                  GROUNDED_SCRIPT, {"embedding_model": None})},
    "agent-g": {"crag": WorkflowBench("agent-g", "crag", "paper-crag", AGENT_G_SCRIPT, {"embedding_model": None}),
                "stark-prime": WorkflowBench("agent-g", "stark-prime", "paper-stark", AGENT_G_SCRIPT,
                                             {"embedding_model": None})},
}


def bench_for(workflow: str, dataset: str | None = None, preset: str | None = None) -> WorkflowBench:
    """The benchmark of ``workflow`` on ``dataset`` (default its first), with ``preset`` instead of its own."""
    if workflow not in BENCHES:
        raise ValueError(f"unknown workflow {workflow!r}: one of kgot, {', '.join(BENCHES)}")
    datasets = BENCHES[workflow]
    name = dataset or next(iter(datasets))
    if name not in datasets:
        raise ValueError(f"the {workflow} benchmark has no dataset {name!r}: one of {', '.join(datasets)}")
    bench = datasets[name]
    return dataclasses.replace(bench, preset=preset) if preset else bench


def setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` as a context value: JSON when it parses (numbers, true, null, lists), else the text."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"a setting is KEY=VALUE, not {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def variants(vary: str | None) -> list[dict[str, Any]]:
    """``KEY=V1,V2,...`` as one context-values dict per value (``None``: one variant, no values)."""
    if not vary:
        return [{}]
    key, raw = setting(vary)
    values = raw if isinstance(raw, list) else str(raw).split(",")
    return [dict([setting(f"{key}={v}" if isinstance(v, str) else f"{key}={json.dumps(v)}")]) for v in values]


def replicated(data: Dataset, n: int) -> Dataset:
    """``n`` items: the dataset's items in turn, each copy with an id of its own."""
    items = [dataclasses.replace(item, id=f"{item.id}#{i // len(data.items)}")
             for i, item in zip(range(n), _cycle(data.items), strict=False)]
    return dataclasses.replace(data, items=items)


def _cycle(items: list[Any]) -> Any:
    while True:
        yield from items


# ------------------------------------------------------------------------------------------------------------
# Measurements
# ------------------------------------------------------------------------------------------------------------
async def run_items(bench: WorkflowBench, base_url: str, data: Dataset, concurrency: int, out: Path,
                    trace: CallTrace | None = None, processes: int = 1) -> dict[str, Any]:
    """The items of ``data`` through the evaluation runner at ``concurrency`` (a fresh output folder), with their
    model calls recorded in ``trace`` (in this process), shared by ``processes`` worker processes when more than
    one; an item that fails is an error (the benchmark measures finished runs). ``cpu_s`` is this process's CPU
    time (with workers the items' CPU is theirs: ``None``)."""

    shutil.rmtree(out, ignore_errors=True)
    options = EvalOptions(workflow=bench.workflow, out_dir=out, concurrency=concurrency, progress=False,
                          context_values=bench.context_values(base_url), preset=bench.preset, processes=processes)
    cpu0, t0 = time.process_time(), time.perf_counter()
    with traced(trace):
        result = await evaluate(options, data)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    failed = [r for r in result.records if r.get("error")]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(result.records)} benchmark items failed: {failed[0]['error']}")
    calls = sum(u.get("calls", 0) for r in result.records for u in (r.get("usage") or {}).values())
    return {"items": len(data.items), "concurrency": concurrency, "processes": processes, "wall_s": wall,
            "cpu_s": cpu if processes == 1 else None,
            "calls_per_item": calls / max(1, len(data.items)),
            "item_wall_s": [r.get("wall_s") for r in result.records]}


async def single_task(bench: WorkflowBench, base_url: str, data: Dataset, root: Path, latency: float,
                      items: int) -> list[dict[str, Any]]:
    """The first ``items`` items one at a time, each traced: wall time, calls, the critical path (latency rounds)
    and the sum of the calls' durations (the same calls one at a time)."""
    rows: list[dict[str, Any]] = []
    for item in data.items[:items]:
        trace = CallTrace()
        one = dataclasses.replace(data, items=[item])
        run = await run_items(bench, base_url, one, 1, root / f"single-{len(rows)}", trace)
        intervals = [(start, end) for start, end, _ in trace.calls]
        rounds = critical_path(intervals)
        wall = run["item_wall_s"][0] or run["wall_s"]
        serial = sum(end - start for start, end in intervals)
        rows.append({"item": item.id, "wall_s": wall, "calls": len(intervals), "rounds": rounds,
                     "critical_path_s": rounds * latency, "wall_over_critical": wall / (rounds * latency)
                     if rounds and latency else None, "calls_one_at_a_time_s": serial,
                     "speedup": serial / wall if wall else None})
        print(f"single task {item.id}: {wall:.2f} s, {len(intervals)} calls in {rounds} rounds "
              f"(critical path {rounds * latency:.2f} s, ×{rows[-1]['wall_over_critical'] or 0:.2f}), "
              f"one at a time {serial:.2f} s", file=sys.stderr, flush=True)
    return rows


async def batch(bench: WorkflowBench, base_url: str, data: Dataset, root: Path, concurrencies: list[int],
                waves: int, sequential_items: int, processes: int | str = 1) -> dict[str, Any]:
    """Items per second at each C against one item at a time (in this process): ``efficiency = speedup / C``.
    Every item is a copy of the dataset's first (ids of their own), so that every run costs the same and all of
    them share one static graph. The C items of a run are shared by ``processes`` worker processes (a number,
    or ``auto``: :func:`kgagents.evals.workers.processes_for`)."""
    data = dataclasses.replace(data, items=data.items[:1])
    seq = await run_items(bench, base_url, replicated(data, sequential_items), 1, root / "sequential")
    per_item = seq["wall_s"] / seq["items"]
    rows = []
    for c in concurrencies:
        run = await run_items(bench, base_url, replicated(data, c * waves), c, root / f"c{c}",
                              processes=processes_for(processes, c))
        speedup = per_item * run["items"] / run["wall_s"]
        rows.append({k: v for k, v in run.items() if k != "item_wall_s"} |
                    {"items_per_s": run["items"] / run["wall_s"], "speedup": speedup, "efficiency": speedup / c})
        cpu = f"cpu {run['cpu_s']:.2f} s" if run["cpu_s"] is not None else f"{run['processes']} processes"
        print(f"C={c:3d}: {run['items']} items in {run['wall_s']:.2f} s, {run['items'] / run['wall_s']:.2f} "
              f"items/s = {speedup / c:.2f}·C ({cpu})", file=sys.stderr, flush=True)
    return {"sequential": {k: v for k, v in seq.items() if k != "item_wall_s"} | {"per_item_s": per_item},
            "rows": rows}


async def profile(bench: WorkflowBench, base_url: str, data: Dataset, root: Path, concurrency: int,
                  waves: int) -> dict[str, Any]:
    """One batch run under cProfile: CPU per item by component (the KGoT benchmark's attribution)."""

    n = concurrency * waves
    one = dataclasses.replace(data, items=data.items[:1])
    run, shares = await profiled(run_items(bench, base_url, replicated(one, n), concurrency, root / "profile"))
    return cpu_shares(shares, n, concurrency, run["cpu_s"])


def _rss_bytes() -> int:
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def memory_child(bench: WorkflowBench, base_url: str, concurrency: int) -> dict[str, Any]:
    """In a fresh process: one warm-up item (imports, the static graph, the embedder), then ``concurrency``
    items at once; the resident memory before them and its peak while they run (sampled every 5 ms)."""

    root = Path(tempfile.mkdtemp(prefix="kgagents-bench-mem-"))
    try:
        data = bench.load(root)
        await run_items(bench, base_url, replicated(data, 1), 1, root / "warm")
        before = peak = _rss_bytes()
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.005):
                peak = max(peak, _rss_bytes())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            await run_items(bench, base_url, replicated(data, concurrency), concurrency, root / "runs")
        finally:
            done.set()
            sampler.join()
        return {"concurrency": concurrency, "rss_before_mb": before / 2**20,
                "rss_peak_mb": max(peak, _rss_bytes()) / 2**20}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def memory(bench: WorkflowBench, base_url: str, concurrency: int) -> dict[str, Any]:
    """:func:`memory_child` at 1 and at ``concurrency``, each in a process of its own: their peaks' ratio."""

    rows = []
    for c in (1, concurrency):
        out = subprocess.run([sys.executable, "-m", "kgagents.evals.bench_workflows", "--memory-child",
                              bench.workflow, bench.dataset, bench.preset or "", str(c), base_url,
                              json.dumps(bench.values), bench.graph or ""],
                             capture_output=True, text=True, check=False,
                             cwd=Path(__file__).resolve().parent.parent, env={**os.environ})
        if out.returncode != 0:
            raise RuntimeError(f"the memory run at C={c} failed: {out.stderr[-2000:]}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    one, many = rows
    return {"one": one, "many": many, "ratio": many["rss_peak_mb"] / one["rss_peak_mb"],
            "added_ratio": (many["rss_peak_mb"] - many["rss_before_mb"]) /
            max(1e-9, one["rss_peak_mb"] - one["rss_before_mb"])}


async def run_workflow_benchmark(workflow: str, *, dataset: str | None = None, preset: str | None = None,
                                 latency: float = 0.2, concurrencies: list[int] | None = None, waves: int = 2,
                                 sequential_items: int = 4, single_items: int = 3, profile_c: int | None = None,
                                 memory_c: int | None = None, values: dict[str, Any] | None = None,
                                 vary: list[dict[str, Any]] | None = None,
                                 processes: int | str = 1, graph: str | None = None) -> dict[str, Any]:
    """Everything above for one workflow, in one run against one latency server (see the module docstring).

    ``values`` are context values of every run; ``vary`` lists variants (context values over those), each
    measured in turn — single task and batch — on the same server and warm process, so that their ratio comes
    from one run; the profile and the memory runs use the first. ``processes`` shares the batch runs' items
    between worker processes (the single task, the sequential baseline, the profile and the memory runs stay in
    one process). ``graph`` puts every item on another static graph (:attr:`WorkflowBench.graph`)."""

    bench = dataclasses.replace(bench_for(workflow, dataset, preset).with_values(values or {}), graph=graph)
    os.environ[STAGE_HEADER_VARIABLE] = "1"  # the server routes the runs by the calls' stages
    root = Path(tempfile.mkdtemp(prefix="kgagents-bench-"))
    try:
        data = bench.load(root)
        measured: list[dict[str, Any]] = []
        with LatencyServer(bench.script, latency, auto_fallback=True) as server, \
                LatencyServer(bench.script, 0.0, auto_fallback=True) as instant:
            await run_items(bench, instant.base_url, replicated(data, 2), 2, root / "warm")  # imports, graphs
            most = max(processes_for(processes, c) for c in concurrencies or [64])
            if most > 1:  # and the worker processes' fork server (its imports)
                await run_items(bench, instant.base_url, replicated(data, 2 * most), 2 * most, root / "warm-p",
                                processes=most)
            for n, extra in enumerate(vary or [{}]):
                load = os.getloadavg()
                if extra:
                    print(f"variant {json.dumps(extra)}", file=sys.stderr, flush=True)
                run = bench.with_values(extra)
                where = root / f"variant-{n}"
                single = await single_task(run, server.base_url, data, where, latency, single_items)
                rows = await batch(run, server.base_url, data, where, concurrencies or [1, 2, 4, 8, 16, 32, 64],
                                   waves, sequential_items, processes)
                measured.append({"values": extra, "single_task": single, "batch": rows,
                                 "load_avg": [load, os.getloadavg()]})
            first = bench.with_values(measured[0]["values"])
            prof = await profile(first, server.base_url, data, root, profile_c, waves) if profile_c else None
            mem = memory(first, server.base_url, memory_c) if memory_c else None
        return {"workflow": workflow, "dataset": bench.dataset, "graph": bench.graph, "preset": bench.preset,
                "latency_s": latency,
                "processes": processes,
                "values": values or {}, "single_task": measured[0]["single_task"], "batch": measured[0]["batch"],
                "variants": measured if vary else [], "load_avg": measured[0]["load_avg"], "profile": prof,
                "memory": mem,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                            "platform": platform.platform(), "load_avg": os.getloadavg()}}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def workflow_markdown(result: dict[str, Any]) -> str:
    """The tables of :func:`run_workflow_benchmark`."""

    latency = result["latency_s"]
    head = (f"Workflow `{result['workflow']}` on `{result['dataset']}`"
            + (f" (preset `{result['preset']}`)" if result["preset"] else "")
            + f", {latency * 1000:.0f} ms per model call, {result['machine']['cpus']} CPUs "
            f"(load average {result['machine']['load_avg'][0]:.1f} at the end).")
    lines = [head]
    if result.get("values"):
        lines += ["", "Context values of every run: " + ", ".join(f"`{k}={json.dumps(v)}`"
                                                              for k, v in result["values"].items()) + "."]
    for variant in result.get("variants") or [{"values": {}, "single_task": result["single_task"],
                                                "batch": result["batch"], "load_avg": result.get("load_avg")}]:
        if variant["values"]:
            lines += ["", "**" + ", ".join(f"`{k}={json.dumps(v)}`" for k, v in variant["values"].items()) + "**"]
        if variant.get("load_avg"):
            (start, _, _), (end, _, _) = variant["load_avg"]
            lines += ["", f"1-minute load average {start:.1f} before these runs, {end:.1f} after."]
        lines += _run_markdown(variant["single_task"], variant["batch"], latency)
    lines += profile_markdown(result.get("profile"))
    m = result.get("memory")
    if m:
        lines += ["", (f"Memory: one item {m['one']['rss_peak_mb']:.0f} MB peak, {m['many']['concurrency']} at once "
                       f"{m['many']['rss_peak_mb']:.0f} MB: ×{m['ratio']:.2f} (above the process before the runs: "
                       f"×{m['added_ratio']:.1f}).")]
    return "\n".join(lines)


def _run_markdown(single: list[dict[str, Any]], b: dict[str, Any], latency: float) -> list[str]:
    """The single-task and batch tables of one variant."""
    lines = ["", ("| single task | calls | critical path (rounds × latency) | wall | wall / critical path | "
                  "calls one at a time | speedup |"), "|---|---|---|---|---|---|---|"]
    for s in single:
        ratio = f"{s['wall_over_critical']:.2f}" if s["wall_over_critical"] else "–"
        lines.append(f"| `{s['item']}` | {s['calls']} | {s['rounds']} × {latency:g} s = {s['critical_path_s']:.2f} s "
                     f"| {s['wall_s']:.2f} s | {ratio} | {s['calls_one_at_a_time_s']:.2f} s | "
                     f"{s['speedup']:.2f} |")
    lines += ["", (f"Batch: one item at a time {b['sequential']['per_item_s']:.2f} s per item "
                   f"({b['sequential']['calls_per_item']:.1f} model requests per item)."), "",
              "| C | processes | items | wall s | CPU s (this process) | items / s | speedup / C |",
              "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['concurrency']} | {r.get('processes', 1)} | {r['items']} | {r['wall_s']:.2f} | "
              f"{'–' if r['cpu_s'] is None else format(r['cpu_s'], '.2f')} | {r['items_per_s']:.2f} | "
              f"{r['efficiency']:.2f} |" for r in b["rows"]]
    return lines


def _memory_child_main(argv: list[str]) -> int:


    workflow, dataset, preset, concurrency, base_url, values, graph = argv
    os.environ[STAGE_HEADER_VARIABLE] = "1"
    bench = dataclasses.replace(bench_for(workflow, dataset, preset or None), values=json.loads(values),
                                graph=graph or None)
    print(json.dumps(event_loop.run(memory_child(bench, base_url, int(concurrency)))))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] != ["--memory-child"]:
        raise SystemExit("run the benchmark as: python -m kgagents.evals.bench_batch --workflow ...")
    raise SystemExit(_memory_child_main(sys.argv[2:]))
