"""Benchmark (not a test): how much concurrency buys, with a chat model that answers after a fixed latency.

    python -m kgagents.evals.bench_batch [--latency 0.2] [--concurrency 1 2 4 8 16 32 64] [--processes 1|auto]
                                [--route enhance|direct] [--model-path http|lean|langchain]
                                [--samples one|separate] [--profile C] [--json FILE]
    python -m kgagents.evals.bench_batch --workflow ark|grounded|agent-g [--dataset D] [--preset P]
                                [--memory C] [--single-items N] ...   (kgagents.evals.bench_workflows)

Two measurements, both on the real KGoT graph:

- **batch speedup**: the evaluation runner (SQLite checkpoints, one thread per item) with C items at a time, in
  one process or shared by ``--processes N`` worker processes, against the same items one at a time in one
  process: ``speedup = C-concurrent throughput / sequential throughput``;
- **single-task speedup**: one task with its concurrent fan-outs (5 vote samples, tool calls, 3 parses) against
  the same graph run with ``max_concurrency=1`` (every LLM and tool call one after the other), with one request
  per sample as in the KGoT authors' runs (the paper's 2.30×), and with the samples of a decision in one request.

``--samples one`` (the default, ``KGoTContext.samples_in_one_request``) asks for the samples of one decision as the
``n`` choices of one request where the client is an OpenAI-compatible one (the ``http`` path); ``separate``
sends one request per sample. The in-process paths always make one call per sample.

The model answers every call after ``latency`` seconds, from a script. The ``http`` model path (the default) is
the one users run: the real ``langchain-openai`` client (built from a model string by ``kgagents.nodes.models``, as for
any OpenAI-compatible server) over HTTP to :mod:`kgagents.evals.latency_server`, which waits and answers in a process of
its own. The two in-process paths use :class:`LatencyChatModel` instead: ``lean`` answers structured-output and
tool-binding calls directly (no client, no chain: the graph's own cost), ``langchain`` goes through LangChain's
generic structured-output chain. The
``enhance`` route is one ENHANCE iteration (votes, merge, tool definition, two concurrent simulated tool calls,
two KG integrations) followed by a SOLVE iteration; ``direct`` is the shortest route (votes, direct solve,
need-for-math, parses).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from kgagents.core.scripted import ScriptedChatModel
from kgagents.core.serde import strict_serializer
from kgagents.evals import event_loop
from kgagents.evals.bench_workflows import (
    CallTrace,
    critical_path,
    run_workflow_benchmark,
    setting,
    traced,
    variants,
    workflow_markdown,
)
from kgagents.evals.datasets import Dataset, Item
from kgagents.evals.latency_server import LatencyServer
from kgagents.evals.profiling import cpu_shares, profile_markdown, profiled
from kgagents.evals.runner import EvalOptions, evaluate
from kgagents.evals.workers import processes_argument, processes_for
from kgagents.graphs.io import final_state
from kgagents.graphs.kgot import compile_graph
from kgagents.nodes.kgot import KGoTContext
from kgagents.tools.manager import register_tool, unregister_tool

# Phrases that identify KGoT's prompts (prompts/kgot.py)
VOTE = "Can you solve the initial problem"
MERGE = "<list_of_reasons>"
DEFINE_TOOLS = "information retriever"
WRITE = "<new_information>"
DIRECT = "Solve the initial problem using only the data"
NEED_MATH = "need_math"
PARSE = "formatter and extractor"
FIRST_ITERATION = "No tool calls have been made yet"
TOOL_NAME = "simulated_lookup"


class _LeanCall(Runnable):
    """What ``bind_tools`` / ``with_structured_output`` return on the lean path: one awaited sleep, one reply."""

    def __init__(self, model: LatencyChatModel, *, schema: Any = None, tools: list[dict[str, Any]] | None = None,
                 tool_choice: Any = None) -> None:
        self.model, self.schema, self.tools, self.tool_choice = model, schema, tools, tool_choice

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        return asyncio.run(self.ainvoke(input, config))

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        messages: list[BaseMessage] = list(input)
        await asyncio.sleep(self.model.latency)
        tools = self.tools
        if self.schema is not None:
            tools = [{"type": "function", "function": {"name": self.schema.__name__}}]
        message = cast(AIMessage, self.model._generate(messages, tools=tools,
                                                       tool_choice=self.tool_choice).generations[0].message)
        if self.schema is None:
            return message
        try:
            return {"raw": message, "parsed": self.schema.model_validate(message.tool_calls[0]["args"]),
                    "parsing_error": None}
        except Exception as exc:  # noqa: BLE001 - reported to the caller like LangChain's parser does
            return {"raw": message, "parsed": None, "parsing_error": exc}


class LatencyChatModel(ScriptedChatModel):
    """A scripted chat model that answers after ``latency`` seconds (an idealised remote API)."""

    latency: float = 0.2
    lean: bool = True

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                         **kwargs: Any) -> Any:
        await asyncio.sleep(self.latency)
        return self._generate(messages, stop=stop, **kwargs)

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, method: str | None = None,
                               **kwargs: Any):
        if not self.lean:
            return super().with_structured_output(schema, include_raw=include_raw, **kwargs)
        if not include_raw:
            raise ValueError("the lean path returns raw and parsed replies (include_raw=True)")
        return _LeanCall(self, schema=schema)

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any):
        if not self.lean:
            return super().bind_tools(tools, tool_choice=tool_choice, **kwargs)
        return _LeanCall(self, tools=[convert_to_openai_tool(t) for t in tools], tool_choice=tool_choice)

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> AIMessage:
        if not self.lean:
            return await super().ainvoke(input, config, **kwargs)
        return await _LeanCall(self).ainvoke(input)


def _step(when: str, *, unless: str | None = None, **reply: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"when": when, "times": 0, **reply}
    if unless:
        step["unless"] = unless
    return step


def script(route: str) -> list[dict[str, Any]]:
    """Scripted replies for every item (``times: 0``: unlimited)."""
    solve = [_step(DIRECT, structured={"solution": "42"}),
             _step(NEED_MATH, structured={"need_math": False, "reason": "none"}),
             _step(PARSE, structured={"final_answer": "42"})]
    if route == "direct":
        return [_step(VOTE, structured={"query_type": "RETRIEVE", "reason": "known"}), *solve]
    if route != "enhance":
        raise ValueError(f"unknown route {route!r}: enhance or direct")
    calls = [{"name": TOOL_NAME, "args": {"query": q}} for q in ("first fact", "second fact")]
    return [_step(f"^(?=.*{VOTE})(?=.*{FIRST_ITERATION})", structured={"query_type": "INSERT",
                                                                     "reason": "facts missing"}),
            _step(VOTE, unless=FIRST_ITERATION, structured={"query_type": "RETRIEVE", "reason": "known"}),
            _step(MERGE, structured={"missing_information": "two facts"}),
            _step(DEFINE_TOOLS, tool_calls=calls),
            _step(WRITE, structured={"code": ""}),  # nothing to write: no sandbox run, the latency alone
            *solve]


def register_simulated_tool(latency: float) -> None:
    """A tool that answers after ``latency`` seconds (registered for this process only)."""
    async def lookup(query: str) -> str:
        await asyncio.sleep(latency)
        return f"The answer to {query!r} is 42."

    register_tool(StructuredTool.from_function(coroutine=lookup, name=TOOL_NAME,
                                               description="Look a fact up (simulated, fixed latency)."))


#: The model paths (see the module docstring).
MODEL_PATHS = ("http", "lean", "langchain")
#: ``--samples``: the samples of one decision in one request (where the client takes ``n``), or one per sample.
SAMPLES = ("one", "separate")
#: The model name the ``http`` path asks the latency server for.
HTTP_MODEL = "bench-model"


def model_spec(model_path: str, route: str, latency: float, base_url: str | None = None) -> dict[str, Any]:
    """The context's model fields for ``model_path``: a model string and server, or a :class:`LatencyChatModel`."""
    if model_path == "http":
        if not base_url:
            raise ValueError("the http model path needs the latency server's base_url")
        return {"model": HTTP_MODEL, "base_url": base_url}
    if model_path not in MODEL_PATHS:
        raise ValueError(f"unknown model path {model_path!r}: one of {', '.join(MODEL_PATHS)}")
    return {"model": LatencyChatModel(steps=script(route), latency=latency, lean=model_path == "lean")}


def context_for(model: dict[str, Any], work_dir: Path) -> Any:
    return KGoTContext(**model, solve_mode="direct", tools=[TOOL_NAME], work_dir=str(work_dir), max_api_retries=0,
                       llm_timeout_s=60)


def items(n: int) -> Dataset:
    return Dataset(name="bench", split="bench", scorer="gaia",
                   items=[Item(id=f"b{i}", question=f"Benchmark task {i}: what is the answer?", gold="42")
                          for i in range(n)])


async def batch_time(n: int, concurrency: int, latency: float, route: str, model: dict[str, Any], root: Path,
                     processes: int = 1, server: LatencyServer | None = None) -> dict[str, Any]:
    """Wall time of ``n`` items at ``concurrency`` through the runner (fresh output directory).

    ``cpu_s`` is this process's CPU time and ``loop_cpu_s`` that of its event-loop thread (with one process:
    the Python of every item); with worker processes both are left out (the work is done elsewhere).
    ``server_cpu_s``: the latency server's CPU time (``http`` path).
    """
    out = root / f"c{concurrency}-n{n}-p{processes}"
    shutil.rmtree(out, ignore_errors=True)
    options = EvalOptions(workflow="kgot", out_dir=out, concurrency=concurrency, progress=False,
                          context=context_for(model, root / "work"), processes=processes,
                          worker_setup=functools.partial(register_simulated_tool, latency))
    server0 = server.cpu_s() if server is not None else 0.0
    cpu0, loop0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
    result = await evaluate(options, items(n))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    loop_cpu = time.thread_time() - loop0
    wrong = [r for r in result.records if not r["correct"]]
    if wrong:
        raise RuntimeError(f"benchmark items failed: {wrong[0].get('error') or wrong[0].get('answer')}")
    calls = sum(u.get("calls", 0) for r in result.records for u in (r.get("usage") or {}).values())
    local = processes == 1
    return {"items": n, "concurrency": concurrency, "processes": processes, "wall_s": wall,
            "cpu_s": cpu if local else None, "loop_cpu_s": loop_cpu if local else None, "calls_per_item": calls / n,
            "server_cpu_s": server.cpu_s() - server0 if server is not None else None}


async def single_task_time(route: str, model: dict[str, Any], root: Path, sequential: bool,
                           one_request: bool = False, trace: CallTrace | None = None) -> float:
    """One task's wall time (``sequential``: every call one after the other), its model and tool calls recorded
    in ``trace``."""
    graph = compile_graph(InMemorySaver(serde=strict_serializer()))
    config: RunnableConfig = {"configurable": {"thread_id": "single"}, "recursion_limit": 200}
    if sequential:
        config["max_concurrency"] = 1
    t0 = time.perf_counter()
    with traced(trace):
        state = await final_state(graph, {"question": "Benchmark task: what is the answer?"}, config,
                                  context=context_for({**model, "samples_in_one_request": one_request},
                                                      root / "work-single"))
    if state.get("final_answer") != "42":
        raise RuntimeError(f"the single task did not finish: {state.get('final_answer')!r}")
    return time.perf_counter() - t0










async def profile_batch(n: int, concurrency: int, latency: float, route: str, model: dict[str, Any],
                        root: Path) -> dict[str, Any]:
    """One in-process batch run under cProfile, timed with the process's CPU clock: its CPU per item by
    :data:`COMPONENTS` (profiling slows the run; the shares are what counts)."""
    row, shares = await profiled(batch_time(n, concurrency, latency, route, model, root))
    return cpu_shares(shares, n, concurrency, row["cpu_s"])






def _check_paths(model_paths: Sequence[str], samples: str) -> None:
    for model_path in model_paths:
        if model_path not in MODEL_PATHS:
            raise ValueError(f"unknown model path {model_path!r}: one of {', '.join(MODEL_PATHS)}")
    if samples not in SAMPLES:
        raise ValueError(f"unknown samples setting {samples!r}: one of {', '.join(SAMPLES)}")


async def compare_paths(latency: float, concurrencies: list[int], route: str, model_paths: Sequence[str],
                        sequential_items: int, waves: int, repeats: int,
                        samples: str = "one") -> dict[str, Any]:
    """Several model paths side by side in one run (one process each run): every path gets its own sequential
    baseline, and at each C every repetition runs the paths in turn, so that they share the machine's load as
    it comes. Each repetition's speedup is kept (the range is what a shared machine allows one to say)."""
    _check_paths(model_paths, samples)
    register_simulated_tool(latency)
    root = Path(tempfile.mkdtemp(prefix="kgagents-bench-"))
    server = LatencyServer(script(route), latency).start() if "http" in model_paths else None
    base_url = server.base_url if server else None
    one = {"samples_in_one_request": samples == "one"}
    try:
        per_item: dict[str, float] = {}
        models = {path: {**model_spec(path, route, latency, base_url), **one} for path in model_paths}
        for path in model_paths:
            await batch_time(2, 2, 0.0, route, {**model_spec(path, route, 0.0, base_url), **one}, root)
            seq = await batch_time(sequential_items, 1, latency, route, models[path], root, server=server)
            per_item[path] = seq["wall_s"] / sequential_items
        rows: dict[str, list[dict[str, Any]]] = {path: [] for path in model_paths}
        for c in concurrencies:
            runs: dict[str, list[dict[str, Any]]] = {path: [] for path in model_paths}
            for _ in range(repeats):
                for path in model_paths:
                    run = await batch_time(c * waves, c, latency, route, models[path], root, server=server)
                    run["efficiency"] = per_item[path] * run["items"] / run["wall_s"] / c
                    runs[path].append(run)
            for path in model_paths:
                effs = [r["efficiency"] for r in runs[path]]
                cpus = [r["loop_cpu_s"] for r in runs[path]]
                rows[path].append({"concurrency": c, "items": c * waves, "efficiency_all": effs,
                                   "loop_cpu_s_all": cpus, "wall_s_all": [r["wall_s"] for r in runs[path]]})
                print(f"C={c:3d} {path:10}: speedup/C {min(effs):.2f}–{max(effs):.2f}, loop cpu "
                      f"{min(cpus):.2f}–{max(cpus):.2f} s", file=sys.stderr, flush=True)
        return {"latency_s": latency, "route": route, "model_paths": list(model_paths), "samples": samples,
                "per_item_s": per_item, "batch": rows,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                            "platform": platform.platform(), "load_avg": os.getloadavg()}}
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
        unregister_tool(TOOL_NAME)


def compared_markdown(result: dict[str, Any]) -> str:
    """The table of :func:`compare_paths`: per C and path, the range of speedup / C and of loop CPU over the
    repetitions, and each path's throughput (median wall time of the C-concurrent runs) against the first
    path's."""
    paths = result["model_paths"]
    lines = [(f"Route `{result['route']}`, {result['latency_s'] * 1000:.0f} ms per call, samples "
              f"{result['samples']}, paths side by side ({', '.join(f'`{p}`' for p in paths)}), "
              f"{len(result['batch'][paths[0]][0]['efficiency_all'])} repetitions per C; sequential: "
              + ", ".join(f"`{p}` {result['per_item_s'][p]:.2f} s per item" for p in paths) + "."), "",
             "| C | path | speedup / C (range) | median | loop CPU s (range) | throughput / first path's |",
             "|---|---|---|---|---|---|"]
    for i, first in enumerate(result["batch"][paths[0]]):
        base = statistics.median(first["wall_s_all"])
        for path in paths:
            row = result["batch"][path][i]
            effs, cpus = row["efficiency_all"], row["loop_cpu_s_all"]
            lines.append(f"| {row['concurrency']} | `{path}` | {min(effs):.2f}–{max(effs):.2f} | "
                         f"{statistics.median(effs):.2f} | {min(cpus):.2f}–{max(cpus):.2f} | "
                         f"{base / statistics.median(row['wall_s_all']):.3f} |")
    return "\n".join(lines)


async def run_benchmark(latency: float, concurrencies: list[int], route: str, model_path: str,
                        sequential_items: int, waves: int, repeats: int, processes: int | str = 1,
                        profile_c: int | None = None, samples: str = "one") -> dict[str, Any]:
    _check_paths([model_path], samples)
    register_simulated_tool(latency)
    root = Path(tempfile.mkdtemp(prefix="kgagents-bench-"))
    server = LatencyServer(script(route), latency).start() if model_path == "http" else None
    try:
        one = {"samples_in_one_request": samples == "one"}
        model = {**model_spec(model_path, route, latency, server.base_url if server else None), **one}
        warm = {**model_spec(model_path, route, 0.0, server.base_url if server else None), **one}
        await batch_time(2, 2, 0.0, route, warm, root)  # warm-up: imports, first graph compile, connections
        most = max(processes_for(processes, c) for c in concurrencies)
        if most > 1:  # and the worker processes' fork server
            await batch_time(2 * most, 2 * most, 0.0, route, warm, root, most)
        seq = await batch_time(sequential_items, 1, latency, route, model, root, server=server)
        per_item = seq["wall_s"] / sequential_items
        rows = []
        for c in concurrencies:
            runs = [await batch_time(c * waves, c, latency, route, model, root, processes_for(processes, c), server)
                    for _ in range(repeats)]
            best = min(runs, key=lambda r: r["wall_s"])
            speedup = per_item * best["items"] / best["wall_s"]
            rows.append({**best, "speedup": speedup, "efficiency": speedup / c,
                         "wall_s_all": [round(r["wall_s"], 3) for r in runs]})
            cpu = f"loop cpu {best['loop_cpu_s']:5.2f} s" if best["loop_cpu_s"] is not None else \
                f"{best['processes']} processes"
            if best["server_cpu_s"] is not None:
                cpu += f", server cpu {best['server_cpu_s']:5.2f} s"
            print(f"C={c:3d}: {best['items']:4d} items in {best['wall_s']:6.2f} s ({cpu}) "
                  f"speedup {speedup:6.2f} = {speedup / c:.2f}·C", file=sys.stderr, flush=True)
        profile = await profile_batch(profile_c * waves, profile_c, latency, route, model, root) if profile_c else None
        single: dict[str, Any] = {}
        for one_request in (False, True):
            traces = [CallTrace(tools=True) for _ in range(repeats)]
            concurrent = [await single_task_time(route, model, root, False, one_request, t) for t in traces]
            serial = [await single_task_time(route, model, root, True, one_request) for _ in range(repeats)]
            fastest = min(range(repeats), key=lambda i: concurrent[i])
            rounds = critical_path([(start, end) for start, end, _ in traces[fastest].calls])
            times = {"concurrent_s": min(concurrent), "sequential_s": min(serial),
                     "speedup": min(serial) / min(concurrent), "rounds": rounds,
                     "critical_path_s": rounds * latency,
                     "wall_over_critical": min(concurrent) / (rounds * latency) if rounds and latency else None}
            if one_request:
                single["samples_in_one_request"] = times
            else:
                single.update(times)
            print(f"single task ({'samples in one request' if one_request else 'one request per sample'}): "
                  f"{times['sequential_s']:.2f} s sequential, {times['concurrent_s']:.2f} s concurrent, "
                  f"speedup {times['speedup']:.2f}; {rounds} rounds of calls (critical path "
                  f"{rounds * latency:.2f} s, ×{times['wall_over_critical'] or 0:.2f})", file=sys.stderr)
        return {"latency_s": latency, "route": route, "model_path": model_path, "processes": processes,
                "samples": samples,
                "sequential": {**seq, "per_item_s": per_item}, "batch": rows, "single_task": single,
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                            "platform": platform.platform(), "load_avg": os.getloadavg()},
                "calls_per_item": seq["calls_per_item"], "profile": profile}
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
        unregister_tool(TOOL_NAME)




def markdown(result: dict[str, Any]) -> str:
    head = (f"Route `{result['route']}`, model path `{result['model_path']}`, latency "
            f"{result['latency_s'] * 1000:.0f} ms per call, samples {result.get('samples', 'one')}: "
            f"{result['calls_per_item']:.0f} model calls per item, "
            f"{result['machine']['cpus']} CPUs, {result.get('processes', 1)} process(es); sequential: "
            f"{result['sequential']['per_item_s']:.2f} s per item.")
    lines = [head, "",
             "| C | items | wall s | loop CPU s | speedup | speedup / C |", "|---|---|---|---|---|---|"]
    for r in result["batch"]:
        cpu = f"{r['loop_cpu_s']:.2f}" if r.get("loop_cpu_s") is not None else "–"
        lines.append(f"| {r['concurrency']} | {r['items']} | {r['wall_s']:.2f} | {cpu} | "
                     f"{r['speedup']:.2f} | {r['efficiency']:.2f} |")
    lines += profile_markdown(result.get("profile"))
    s = result["single_task"]
    lines += ["", (f"Single task, one request per sample: {s['sequential_s']:.2f} s with `max_concurrency=1`, "
                   f"{s['concurrent_s']:.2f} s concurrent: speedup {s['speedup']:.2f} (the paper: 2.30)"
                   f"{_critical(s)}.")]
    one = s.get("samples_in_one_request")
    if one:
        lines += ["", (f"Single task, samples in one request: {one['sequential_s']:.2f} s with `max_concurrency=1`, "
                       f"{one['concurrent_s']:.2f} s concurrent: speedup {one['speedup']:.2f}{_critical(one)}.")]
    return "\n".join(lines)


def _critical(single: dict[str, Any]) -> str:
    """``; wall / critical path`` of a traced single task, when it was traced."""
    if not single.get("wall_over_critical"):
        return ""
    return (f"; its model and tool calls in {single['rounds']} rounds (critical path {single['critical_path_s']:.2f} s)"
            f": wall / critical path {single['wall_over_critical']:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kgagents.evals.bench_batch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workflow", choices=["kgot", "ark", "grounded", "agent-g"], default="kgot",
                        help="the workflow to measure (default kgot); the others: kgagents.evals.bench_workflows")
    parser.add_argument("--dataset", help="ark: cr-lt; grounded: grbench-fixture; agent-g: crag (default) or "
                                          "stark-prime")
    parser.add_argument("--preset", help="the workflow's preset (grounded default paper-tot-explore-score, "
                                         "agent-g paper-crag or paper-stark)")
    parser.add_argument("--single-items", type=int, default=3, help="items of the single-task trace (default 3)")
    parser.add_argument("--memory", type=int, metavar="C",
                        help="also the peak memory of C items at once against one (each in a process of its own)")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per model/tool call (default 0.2)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--processes", type=processes_argument, default=1,
                        help="worker processes that share the C items of a batch run (default 1: this one; "
                             "auto: one per 64 items in flight, at most one per CPU)")
    parser.add_argument("--route", choices=["enhance", "direct"], default="enhance")
    parser.add_argument("--model-path", choices=MODEL_PATHS, default=["http"], nargs="+",
                        help="http: langchain-openai over HTTP to a loopback server (default); lean, langchain: "
                             "an in-process simulated model. Several: side by side in one run (batch runs "
                             "only)")
    parser.add_argument("--samples", choices=SAMPLES, default="one",
                        help="one: the samples of a decision as the choices of one request where the client takes "
                             "n (default); separate: one request per sample")
    parser.add_argument("--sequential-items", type=int, default=4, help="items of the sequential baseline")
    parser.add_argument("--waves", type=int, default=2, help="items per run = waves × C (default 2)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per C; the fastest counts (default 1)")
    parser.add_argument("--profile", type=int, metavar="C",
                        help="also profile one in-process batch run at concurrency C: its CPU by component")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="values",
                        help="--workflow ark|grounded|agent-g: a context value of every run (JSON or text)")
    parser.add_argument("--vary", metavar="KEY=V1,V2",
                        help="--workflow ark|grounded|agent-g: measure the single task and the batch once per "
                             "value of a context field, in turn, in one run (e.g. embedding_cache=off,memory)")
    parser.add_argument("--graph", help="grounded, Agent-G on STaRK: every item on this static graph (a name or "
                                        "path, e.g. one written by kgagents.evals.synthetic_kg) for the memory runs")
    parser.add_argument("--json", help="also write the results as JSON to this file")
    args = parser.parse_args(argv)
    if args.workflow == "kgot" and (args.values or args.vary):
        parser.error("--set and --vary are for --workflow ark|grounded|agent-g")
    try:
        values = dict(setting(v) for v in args.values)
        vary = variants(args.vary) if args.vary else None
    except ValueError as exc:
        parser.error(str(exc))
    if args.workflow != "kgot":
        if args.model_path != ["http"]:
            parser.error(f"--workflow {args.workflow} runs through the http model path")
        measured = event_loop.run(run_workflow_benchmark(
            args.workflow, dataset=args.dataset, preset=args.preset, latency=args.latency,
            concurrencies=args.concurrency, waves=args.waves, sequential_items=args.sequential_items,
            single_items=args.single_items, profile_c=args.profile, memory_c=args.memory,
            values=values, vary=vary, processes=args.processes, graph=args.graph))
        print(workflow_markdown(measured))
        if args.json:
            Path(args.json).write_text(json.dumps(measured, indent=2) + "\n", encoding="utf-8")
        return 0
    if len(args.model_path) > 1:
        compared = event_loop.run(compare_paths(args.latency, args.concurrency, args.route, args.model_path,
                                                args.sequential_items, args.waves, args.repeats,
                                                args.samples))
        print(compared_markdown(compared))
        if args.json:
            Path(args.json).write_text(json.dumps(compared, indent=2) + "\n", encoding="utf-8")
        return 0
    result = event_loop.run(run_benchmark(args.latency, args.concurrency, args.route, args.model_path[0],
                                          args.sequential_items, args.waves, args.repeats, args.processes,
                                          args.profile, args.samples))
    print(markdown(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
