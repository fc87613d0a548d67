"""Scoring an evaluation's stored answers again, with another scorer or another judge, into a folder of its own.

``kgagents eval W --dataset D --rescore DIR [--scorer S] [--grader-model M] [--out NEW]`` reads ``DIR``'s answers
(``results.jsonl``) and, where the scorer reads the run's trace (GRBench's error taxonomy), each run's final state
from ``DIR``'s checkpoints; no workflow runs again. Every answer is scored by the new scorer — an exact one at no
cost, an LLM-graded one with its judge's calls (``grader_usage``) — and written to ``NEW`` with a manifest that
names the new scorer and judge and where the answers came from (``rescored_from``). ``DIR`` is left as it was.
A run that failed keeps its error and gets the new scorer's score of a failed run. Running the same command again
goes on with the answers not yet scored.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from kgagents.core.checkpointer import read_only_sqlite_saver
from kgagents.core.errors import KGAgentsError
from kgagents.core.nofollow import open_for_append, own_folder
from kgagents.core.usage import merge_usage, total_cost
from kgagents.evals.datasets import Dataset
from kgagents.evals.runner import (
    CHECKPOINTS_FILE,
    EvalOptions,
    EvalResult,
    _check_manifest,
    _jsonable,
    build_scorer,
    failed_score,
    make_manifest,
    read_manifest,
    read_results,
    same_item,
    summarize,
    write_summary,
)
from kgagents.evals.scorers import Score, ScorerLike
from kgagents.graphs.workflows import load_workflow
from kgagents.nodes.runtime import gather_bounded

#: How a re-scored record that its scorer could not score starts its ``error``.
SCORING_FAILED = "scoring failed: "


def not_scored(record: dict[str, Any]) -> bool:
    """Whether a re-scored answer got no verdict: its scorer failed on it, or its judge did (``judge_error``)."""
    return str(record.get("error") or "").startswith(SCORING_FAILED) or \
        bool((record.get("details") or {}).get("judge_error"))


def nothing_scored(records: list[dict[str, Any]]) -> bool:
    """Whether a re-scoring scored none of its answers (there is at least one; a failed run's record is no answer):
    its numbers would then be those of no verdict at all."""
    answers = [r for r in records if not r.get("error") or not_scored(r)]
    return bool(answers) and all(not_scored(r) for r in answers)


class RescoreError(KGAgentsError, ValueError):
    """A re-scoring that cannot be done as asked; the message says why and what to give."""


def check_source(source: Path, out: Path, options: EvalOptions, dataset: Dataset) -> dict[str, Any]:
    """The manifest of the evaluation in ``source``, which must be this workflow on this dataset and split, and a
    folder other than ``out`` (its results are never rewritten)."""
    manifest = read_manifest(source)
    if manifest is None:
        raise RescoreError(f"{source} is not an evaluation's results folder (no manifest.json)")
    if Path(os.path.abspath(out)) == Path(os.path.abspath(source)):
        raise RescoreError(f"re-scoring writes to a folder of its own: give --out another folder than {source}")
    for key, now in (("workflow", options.workflow), ("dataset", dataset.name), ("split", dataset.split)):
        if manifest.get(key) != now:
            raise RescoreError(f"{source} holds an evaluation of {key} {manifest.get(key)!r}, not {now!r}: give "
                               f"the command its {key}")
    return manifest


async def _states(source: Path, workflow: str, threads: list[str]) -> dict[str, dict[str, Any]]:
    """Each thread's final state from ``source``'s checkpoints (none when the folder has none, e.g. a bundle)."""
    path = source / CHECKPOINTS_FILE
    if not path.is_file() and not path.is_symlink():
        return {}

    def read() -> dict[str, dict[str, Any]]:
        # read-only: DIR is someone's data and stays as it was (no setup, nothing made beside the file)
        with read_only_sqlite_saver(path, "the evaluation's checkpoints") as saver:
            graph = load_workflow(workflow).compile_graph(saver)
            return {thread: dict(graph.get_state({"configurable": {"thread_id": thread}}).values or {})
                    for thread in threads}

    return await asyncio.to_thread(read)


async def _score(scorer: ScorerLike, item: Any, record: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """``record`` scored again: its answer (or its failure) by ``scorer``, its variants' answers too."""
    error = record.get("error")
    if error:
        score = failed_score(scorer, item)
    else:
        try:
            score_run = getattr(scorer, "score_run", None)
            score = await (score_run(item, record.get("answer"), state) if score_run
                           else scorer.score(item, record.get("answer")))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - one answer that cannot be scored never stops the others
            error = f"{SCORING_FAILED}{type(exc).__name__}: {exc}"
            score = Score(correct=None)
    usage = dict(score.usage)
    out = {**record, "correct": score.correct, "grade": score.grade, "details": _jsonable(score.details),
           "error": error, "rescored": True}
    if record.get("variants") and not error:
        graded: dict[str, Score] = {str(record.get("answer")): dataclasses.replace(score, usage={})}
        variants = {}
        for name, variant in record["variants"].items():
            key = str(variant.get("answer"))
            if key not in graded:
                graded[key] = await scorer.score(item, variant.get("answer"))
                usage = merge_usage(usage, graded[key].usage)
            variants[name] = {"answer": variant.get("answer"), "correct": graded[key].correct,
                              "grade": graded[key].grade, "usage": {}}
        out["variants"] = variants
    out["grader_usage"], out["grader_cost_usd"] = usage, total_cost(usage)
    return out


async def rescore(source: Path, options: EvalOptions, dataset: Dataset) -> EvalResult:
    """Score the answers of the evaluation in ``source`` again with ``dataset``'s scorer and ``options``' judge,
    into ``options.out_dir`` (see the module's doc)."""
    out = options.out_dir
    old = check_source(source, out, options, dataset)
    items = {item.id: item for item in dataset.items}
    records = read_results(source)
    missing = sorted({str(r["id"]) for r in records if str(r["id"]) not in items})
    changed = sorted({str(r["id"]) for r in records if str(r["id"]) in items and r.get("item")
                      and not same_item(items[str(r["id"])], r["item"])})
    if missing or changed:
        names = ", ".join((missing or changed)[:5])
        raise RescoreError(f"{source} holds answers to items that the dataset given here "
                           f"{'lacks' if missing else 'has in another version'} ({names}): give the data it was "
                           "evaluated on (--data, --split)")
    done = {(str(r["id"]), int(r.get("run", 0))) for r in read_results(out)}
    todo = [r for r in records if (str(r["id"]), int(r.get("run", 0))) not in done]
    states = await _states(source, options.workflow, [str(r.get("thread_id")) for r in todo if not r.get("error")])
    own_folder(out, "the re-scored results")
    fresh = make_manifest(options, dataset)  # the run's settings stay the source's; the scoring is this one's
    manifest = {**old, **{key: fresh[key] for key in ("scorer", "grader_model", "judge", "created")},
                "rescored_from": {"folder": str(source), "scorer": old.get("scorer"),
                                  "judge": old.get("judge") or old.get("grader_model")}}
    _check_manifest(out, manifest, dataset)
    scorer = build_scorer(options, dataset)
    counts = {"ran": 0, "failed": 0}
    with open_for_append(out / "results.jsonl", "the re-scored results") as sink:
        async def one(record: dict[str, Any]) -> None:
            scored = await _score(scorer, items[str(record["id"])], record,
                                  states.get(str(record.get("thread_id")), {}))
            scored["finished_at"] = time.time()
            sink.write(json.dumps(scored, ensure_ascii=False) + "\n")
            sink.flush()
            counts["ran"] += 1
            counts["failed"] += bool(scored.get("error"))

        queue = list(todo)

        async def worker() -> None:
            while queue:
                await one(queue.pop(0))

        await gather_bounded(None, [worker() for _ in range(min(options.concurrency, len(todo)))])
    results = read_results(out)
    result = EvalResult(out_dir=out, records=results, metrics=summarize(results, scorer),
                        skipped=len(records) - len(todo), ran=counts["ran"], failed=counts["failed"])
    write_summary(out, result.metrics)
    return result
