"""The batch runner over several processes or machines, with Dask distributed.

Each (item, run) is one Dask task. A task opens the shared checkpointer, runs (or resumes) its item's thread with
the same :class:`~kgagents.evals.runner.ItemRunner` as the local runner and returns the item's record; the client is the
only writer of ``results.jsonl``, so resuming works exactly as locally: finished items are skipped, unfinished
ones resume from their checkpoints.

The shared checkpointer is, by default, the SQLite file in the output directory, which every worker opens (SQLite
in WAL mode serialises the writers): right for several processes on one machine, or machines that share a local
disk. Across machines use a PostgreSQL checkpointer (``checkpointer="postgresql://..."``): SQLite's file locks
are not reliable on network file systems.

Every worker runs up to ``threads_per_worker`` items at once (one event loop per thread); the workers need the
project installed and the model configuration (environment or ``context_values``) of the client.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
from pathlib import Path
from typing import Any

from kgagents.core.extras import require
from kgagents.core.nofollow import open_for_append
from kgagents.evals.datasets import Dataset, Item
from kgagents.evals.runner import (
    RESULTS_FILE,
    EvalOptions,
    EvalResult,
    ItemRunner,
    _check_manifest,
    _Progress,
    build_scorer,
    check_dataset,
    make_manifest,
    pending_work,
    read_results,
    summarize,
    write_summary,
)


def run_pair(options: EvalOptions, dataset_name: str, scorer_name: str, item: Item, run: int) -> dict[str, Any]:
    """One Dask task: run one (item, run) on the shared checkpointer and return its record."""
    dataset = Dataset(name=dataset_name, split="", items=[item], scorer=scorer_name)
    scorer = build_scorer(options, dataset)

    async def go() -> dict[str, Any]:
        runner = ItemRunner(options, dataset_name, scorer)
        async with runner.opened():
            return await runner.run(item, run)

    record = asyncio.run(go())
    record["worker"] = f"{socket.gethostname()}:{os.getpid()}"
    return record


def local_cluster(n_workers: int = 2, threads_per_worker: int = 4) -> Any:
    """A Dask cluster of ``n_workers`` processes on the loopback interface (no dashboard)."""
    LocalCluster = require("distributed", "eval --dask").LocalCluster

    return LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                        host="127.0.0.1", dashboard_address=None, silence_logs=40)


def evaluate_distributed(options: EvalOptions, dataset: Dataset, *, scheduler: str | None = None,
                         client: Any = None, n_workers: int = 2) -> EvalResult:
    """Run the evaluation on a Dask cluster: ``client``, a ``scheduler`` address, or a new local cluster.

    ``options.context`` must be None (workers rebuild the context from ``options.context_values``).
    """
    distributed = require("distributed", "eval --dask")
    Client, as_completed = distributed.Client, distributed.as_completed
    if options.context is not None:
        raise ValueError("a distributed evaluation takes the context as plain values (context_values), "
                         "so that every worker can rebuild it")
    check_dataset(options.workflow, dataset, options)
    out_dir = Path(options.out_dir).resolve()
    options = dataclasses.replace(options, out_dir=out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _check_manifest(out_dir, make_manifest(options, dataset), dataset)
    scorer = build_scorer(options, dataset)  # fails early on an unknown scorer
    todo, skipped = pending_work(dataset, options.runs, read_results(out_dir), options.retry_failed)

    cluster = None
    own_client = client is None
    if client is None:
        if scheduler:
            client = Client(scheduler)
        else:
            cluster = local_cluster(n_workers, options.concurrency)
            client = Client(cluster)
    progress = _Progress(len(todo), options.progress, f"{options.workflow} on {dataset.name} (dask)")
    counts = {"ran": 0, "failed": 0, "resumed": 0}
    fatal: list[str] = []
    try:
        futures = [client.submit(run_pair, options, dataset.name, dataset.scorer, item, run, pure=False)
                   for item, run in todo]
        with open_for_append(out_dir / RESULTS_FILE, "the evaluation's results") as sink:
            for future in as_completed(futures):
                record = future.result()
                if record.pop("fatal", False):
                    fatal.append(str(record.get("error")))
                sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                sink.flush()
                counts["ran"] += 1
                counts["failed"] += bool(record.get("error"))
                counts["resumed"] += bool(record.get("resumed"))
                progress.update(record)
    finally:
        progress.close()
        if own_client:
            client.close()
        if cluster is not None:
            cluster.close()
    records = read_results(out_dir)
    result = EvalResult(out_dir=out_dir, records=records, metrics=summarize(records, scorer), skipped=skipped,
                        fatal=fatal[0] if fatal else None, ran=counts["ran"], failed=counts["failed"],
                        resumed=counts["resumed"])
    write_summary(out_dir, result.metrics)
    return result
