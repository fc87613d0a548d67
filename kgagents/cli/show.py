"""``kgagents show THREAD --eval RESULTS_DIR``: an evaluation item's run, from the evaluation's checkpoints.

An evaluation keeps every (item, run) as a thread of its own in its results folder (``checkpoints.sqlite``, or
the PostgreSQL database it was given); ``results.jsonl`` names each item's thread and ``manifest.json`` the
workflow, so the item opens like any run of ``kgagents ask``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from kgagents.core.runs import open_checkpointer


def _results(out_dir: Path) -> list[dict[str, Any]]:
    path = out_dir / "results.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a killed evaluation
    return rows


def item_thread(out_dir: Path, wanted: str) -> tuple[str, str | None]:
    """The thread of ``wanted`` (a thread id, or an item id with one run) in the evaluation at ``out_dir``,
    and the workflow its results line names; a clear error listing a few threads when there is none."""
    rows = _results(out_dir)
    for row in rows:
        if row.get("thread_id") == wanted:
            return wanted, row.get("workflow")
    runs = [row for row in rows if str(row.get("id")) == wanted]
    if len({row.get("thread_id") for row in runs}) == 1:
        return runs[0]["thread_id"], runs[0].get("workflow")
    if runs:
        threads = ", ".join(sorted({str(row.get("thread_id")) for row in runs}))
        raise ValueError(f"item {wanted!r} of {out_dir} has several runs; name one of its threads: {threads}")
    sample = ", ".join(str(row.get("thread_id")) for row in rows[:3])
    raise ValueError(f"no item or thread {wanted!r} in {out_dir}/results.jsonl"
                     + (f" (its threads look like {sample})" if sample else " (no finished items there yet)"))


def eval_item_state(results_dir: str, wanted: str,
                    checkpointer: str | None = None) -> tuple[str, str, dict[str, Any], tuple[str, ...]]:
    """``(workflow, thread id, latest state, next nodes)`` of an evaluation item; ``checkpointer``: the
    PostgreSQL URL the evaluation ran with (default: its ``checkpoints.sqlite``)."""
    from kgagents.evals.runner import CHECKPOINTS_FILE, read_manifest
    from kgagents.graphs.workflows import load_workflow

    out_dir = Path(results_dir)
    manifest = read_manifest(out_dir)
    if manifest is None:
        raise ValueError(f"{out_dir} is not an evaluation's results folder (no manifest.json)")
    thread, workflow = item_thread(out_dir, wanted)
    workflow = workflow or manifest["workflow"]
    location = checkpointer or out_dir / CHECKPOINTS_FILE
    if not checkpointer and not Path(location).is_file():
        raise ValueError(f"{out_dir} has no {CHECKPOINTS_FILE}: give the evaluation's --checkpointer URL")

    async def latest() -> tuple[dict[str, Any], tuple[str, ...]]:
        async with open_checkpointer(location) as saver:
            snap = await load_workflow(workflow).compile_graph(saver).aget_state(
                {"configurable": {"thread_id": thread}})
        return dict(snap.values), tuple(snap.next) or tuple(task.name for task in snap.tasks)

    state, nxt = asyncio.run(latest())
    if not state:
        raise ValueError(f"thread {thread} has no checkpoint in {location}")
    return workflow, thread, state, nxt
