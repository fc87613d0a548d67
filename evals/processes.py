"""The batch runner over several processes of one machine (``kgagents eval --processes N``).

One process runs every item's Python (LangGraph's supersteps, checkpoint serialisation, the nodes) on one core:
with many items in flight and fast models it becomes the limit. ``processes=N`` starts N worker processes that
share the work: each takes (item, run) pairs from one queue as it has room (its share of ``concurrency``: C
items in flight in all) and runs them with the same :class:`~kgagents.evals.runner.ItemRunner` as one process would, on
the same SQLite checkpoint file (WAL mode lets the processes write to it one commit at a time). This process
stays the only writer of ``results.jsonl``, so resuming works as with one process; a worker that dies loses
only the model calls it had in flight.

Workers start from a fork server that has imported the runner and the workflow once (``spawn`` where there is
no fork server), so a start costs a fraction of a second after the first; they take this process's sandbox
probe (:func:`kgagents.tools.sandbox.isolation_probe`) instead of running bubblewrap to probe it again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import multiprocessing
import os
import pickle
import queue
import socket
import threading
import traceback
from collections.abc import Callable
from typing import Any

from kgagents.core.checkpointer import open_checkpointer
from kgagents.evals import event_loop
from kgagents.evals.datasets import Dataset, Item
from kgagents.evals.event_loop import batch_collector
from kgagents.evals.options import EvalOptions, RunsItems
from kgagents.evals.workers import shares
from kgagents.graphs.registry import get as get_workflow
from kgagents.graphs.registry import module_of
from kgagents.tools.sandbox import adopt_isolation_probe, isolation_probe

#: Makes a worker's item runner from the options, the dataset's name and its scorer's name (the runner's
#: :func:`~kgagents.evals.runner.item_runner`, a module-level function: workers get it by reference).
RunnerFactory = Callable[[EvalOptions, str, str], RunsItems]

#: How long the coordinator waits for a message before it checks that the workers are alive.
POLL_S = 1.0


#: Chat-model providers of model strings and the modules their clients live in.
_PROVIDER_MODULES = {"openai": "langchain_openai", "anthropic": "langchain_anthropic", "ollama": "langchain_ollama"}


def provider_modules(options: EvalOptions) -> list[str]:
    """The client modules of the models the workers build from model strings (the fork server imports them once,
    instead of every worker: langchain-openai alone takes half a second of CPU)."""
    ctx = options.context
    given = {f.name: getattr(ctx, f.name, None) for f in dataclasses.fields(ctx)} if dataclasses.is_dataclass(ctx) \
        else options.context_values
    modules = set()
    for key, value in given.items():
        if key != "model" and not key.endswith("_model"):
            continue
        if isinstance(value, str) and value and not value.startswith("scripted:"):
            provider, _, name = value.partition(":")
            module = _PROVIDER_MODULES.get(provider if name else "openai")
            if module is not None and importlib.util.find_spec(module) is not None:
                modules.add(module)
    if "langchain_openai" in modules:
        modules.update(("kgagents.nodes.http_client", "kgagents.nodes.openai_chat"))
    return sorted(modules)


def workflow_modules(workflow: str) -> list[str]:
    """The slow imports the workflow's spec names (``preload``: the embedding stack), those installed: the fork
    server imports them once instead of every worker (sentence-transformers alone is seconds of CPU)."""
    return [m for m in get_workflow(workflow).preload if importlib.util.find_spec(m) is not None]


def _context() -> Any:
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method)


def _check_picklable(options: EvalOptions) -> None:
    try:
        pickle.dumps(options)
    except Exception as exc:  # any pickling failure means the same here
        raise ValueError("running an evaluation in several processes sends its options to each of them: give the "
                         "context as plain values (context_values) or as an object that can be pickled "
                         f"({type(exc).__name__}: {exc})") from exc


async def run_in_processes(options: EvalOptions, dataset: Dataset, todo: list[tuple[Item, int]],
                           write: Callable[[dict[str, Any]], None], make_runner: RunnerFactory) -> None:
    """Run ``todo`` in ``options.processes`` worker processes; ``write`` gets every record, in this process.
    Each worker runs its items with the item runner ``make_runner`` makes.

    Raises :class:`RuntimeError` at the end when a worker failed to start or died with items in flight (their
    records are missing; running the evaluation again resumes them from their checkpoints).
    """
    if not todo:
        return
    _check_picklable(options)
    if not options.checkpointer_url.startswith(("postgres://", "postgresql://")):
        async with open_checkpointer(options.checkpointer_url):
            pass  # the tables exist before the workers open the file together
    ctx = _context()
    if ctx.get_start_method() == "forkserver":
        ctx.set_forkserver_preload(["kgagents.evals.runner", module_of(options.workflow),
                                    *provider_modules(options), *workflow_modules(options.workflow)])
    jobs = ctx.Queue()
    results = ctx.Queue()
    sizes = shares(options.concurrency, min(options.processes, len(todo)))
    for pair in todo:
        jobs.put(pair)
    for _ in sizes:
        jobs.put(None)  # one end mark per worker
    probe = await asyncio.to_thread(isolation_probe)  # probed once here, not once per worker
    procs = [ctx.Process(target=_worker, args=(make_runner, options, dataset.name, dataset.scorer, size, jobs, results,
                                               probe),
                         name=f"kgagents-eval-{i}", daemon=True) for i, size in enumerate(sizes)]
    for proc in procs:
        proc.start()
    loop = asyncio.get_running_loop()
    running: dict[int | None, set[tuple[str, int]]] = {p.pid: set() for p in procs}
    alive = set(running)
    problems: list[str] = []
    try:
        while alive:
            try:
                kind, pid, payload = await loop.run_in_executor(None, results.get, True, POLL_S)
            except queue.Empty:
                for proc in procs:
                    if proc.pid in alive and not proc.is_alive():
                        alive.discard(proc.pid)
                        problems.append(_lost(proc.pid, proc.exitcode, running[proc.pid]))
                continue
            if kind == "start":
                running[pid].add(payload)
            elif kind == "record":
                running[pid].discard((str(payload["id"]), int(payload["run"])))
                write(payload)
            elif kind == "fatal":
                problems.append(f"worker process {pid} failed:\n{payload}")
            elif kind == "exit":
                alive.discard(pid)
    finally:
        for proc in procs:
            proc.join(timeout=5 if not alive else 0)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        for q in (jobs, results):
            q.cancel_join_thread()  # pairs nobody took (workers that died) must not keep this process alive
            q.close()
    if problems:
        raise RuntimeError("\n".join(problems))


def _lost(pid: int | None, code: int | None, pairs: set[tuple[str, int]]) -> str:
    if not pairs:
        return f"worker process {pid} exited with code {code} before it reported anything"
    what = ", ".join(f"{item_id} (run {run})" for item_id, run in sorted(pairs))
    return (f"worker process {pid} exited with code {code} while running {what}; run the evaluation again to "
            "resume them from their checkpoints")


def _worker(make_runner: RunnerFactory, options: EvalOptions, dataset_name: str, scorer_name: str, concurrency: int,
            jobs: Any,
            results: Any, probe: Any = None) -> None:
    """A worker process: run pairs from ``jobs``, ``concurrency`` at a time, until its end mark."""
    pid = os.getpid()
    try:
        if probe is not None:
            adopt_isolation_probe(probe)
        if options.worker_setup is not None:
            options.worker_setup()
        event_loop.run(_serve(make_runner(options, dataset_name, scorer_name), concurrency, jobs, results))
    except BaseException:  # noqa: BLE001 - reported to the coordinator, which raises it
        results.put(("fatal", pid, traceback.format_exc()))
    finally:
        results.put(("exit", pid, None))


async def _serve(runner: RunsItems, concurrency: int, jobs: Any, results: Any) -> None:
    pid = os.getpid()
    loop = asyncio.get_running_loop()
    local: asyncio.Queue[tuple[Item, int] | None] = asyncio.Queue()
    room = threading.Semaphore(concurrency)  # take a pair only when there is room for it: the others balance

    def feed() -> None:
        while True:
            room.acquire()
            pair = jobs.get()
            loop.call_soon_threadsafe(local.put_nowait, pair)
            if pair is None:
                return

    async def work() -> None:
        while True:
            pair = await local.get()
            if pair is None:
                local.put_nowait(None)  # the end mark, for this process's other workers
                return
            item, run = pair
            results.put(("start", pid, (item.id, run)))
            record = await runner.run(item, run)
            record["worker"] = f"{socket.gethostname()}:{pid}"
            results.put(("record", pid, record))
            room.release()

    async with runner.opened():
        feeder = threading.Thread(target=feed, name="kgagents-eval-feed", daemon=True)
        feeder.start()
        with batch_collector():
            await asyncio.gather(*(work() for _ in range(concurrency)))
