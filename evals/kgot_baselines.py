"""The KGoT paper's RAG baselines in batch evaluations: their adapter, and the check that refuses an evaluation
whose tasks have no KGoT tool outputs to read.

The paper's comparison (§5) runs KGoT first, then the baselines over the same tool outputs::

    kgagents eval kgot          --dataset gaia --data data/GAIA --out .eval-results/kgot-gaia
    kgagents eval rag           --dataset gaia --data data/GAIA --set kgot_results=.eval-results/kgot-gaia
    kgagents eval kgot-graphrag --dataset gaia --data data/GAIA --set kgot_results=.eval-results/kgot-gaia

Each baseline item is the thread ``{dataset}-{item}-run{r}`` of its own evaluation and reads KGoT's thread of
the same id from the KGoT evaluation's checkpoints (see :mod:`kgagents.nodes.baselines`). Before anything runs, the
check makes sure that evaluation is KGoT's, on the same dataset and split, and finished every (item, run) the
baseline will ask for; the items that carry their own ``tool_calls`` or ``kgot_thread`` need none of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgagents.evals.datasets import DatasetError
from kgagents.evals.runner import CHECKPOINTS_FILE, Adapter, read_manifest, read_results

#: The workflows whose evaluation results the baselines may read.
KGOT_WORKFLOWS = ("kgot",)


def _context_value(options: Any, name: str) -> Any:
    if options.context is not None:
        return getattr(options.context, name, None)
    return (options.context_values or {}).get(name)


def check_kgot_results(dataset: Any, options: Any) -> None:
    """Refuse an evaluation of a RAG baseline whose items have no KGoT tool outputs to read (raises
    :class:`~kgagents.evals.datasets.DatasetError` saying which and what to do)."""

    workflow = options.workflow
    need = [item for item in dataset.items if "tool_calls" not in item.inputs and "kgot_thread" not in item.inputs]
    if not need:
        return
    results = _context_value(options, "kgot_results")
    how = (f"run KGoT on the same dataset first (kgagents eval kgot --dataset {dataset.name} ... --out DIR), then "
           f"this baseline with --set kgot_results=DIR")
    if not results:
        raise DatasetError(f"the {workflow} baseline answers from KGoT's tool outputs of each task (KGoT paper §5) "
                           f"and {len(need)} of the {len(dataset.items)} questions of {dataset.name!r} have none: "
                           f"{how}")
    out_dir = Path(str(results))
    try:
        manifest = read_manifest(out_dir) if out_dir.is_dir() else None
    except ValueError as exc:
        raise DatasetError(str(exc)) from exc
    if manifest is None:
        raise DatasetError(f"kgot_results={out_dir} is not an evaluation's results directory (no manifest.json): "
                           f"{how}")
    if manifest.get("workflow") not in KGOT_WORKFLOWS:
        raise DatasetError(f"kgot_results={out_dir} holds an evaluation of {manifest.get('workflow')!r}, not of "
                           f"KGoT: {how}")
    if (manifest.get("dataset"), manifest.get("split")) != (dataset.name, dataset.split):
        raise DatasetError(f"kgot_results={out_dir} evaluated {manifest.get('dataset')!r} "
                           f"({manifest.get('split')}), not {dataset.name!r} ({dataset.split}): the baseline reads "
                           "each question's KGoT run by its dataset, item and run")
    if not _context_value(options, "kgot_checkpointer") and not (out_dir / CHECKPOINTS_FILE).is_file():
        raise DatasetError(f"kgot_results={out_dir} has no {CHECKPOINTS_FILE}: if that evaluation kept its "
                           "checkpoints elsewhere (--checkpointer), pass it as --set kgot_checkpointer=URL")
    finished = {(str(r["id"]), int(r.get("run", 0))) for r in read_results(out_dir) if not r.get("error")}
    missing = [f"{item.id}" + (f" (run {run})" if run else "") for run in range(options.runs) for item in need
               if (item.id, run) not in finished]
    if missing:
        raise DatasetError(f"the KGoT evaluation in {out_dir} has not finished {len(missing)} of the "
                           f"{len(need) * options.runs} (question, run) pairs this {workflow} evaluation needs "
                           f"(e.g. {', '.join(missing[:3])}): run or resume it on them first (kgagents eval kgot "
                           f"... --out {out_dir}, --retry-failed for failed ones), or evaluate fewer questions or "
                           "runs")


def baseline_stats(state: dict[str, Any]) -> dict[str, Any]:
    """A RAG baseline iterates and calls no tool; its corpus is KGoT's."""
    return {"iterations": 0, "tool_calls": 0}


def rag_baseline_adapter() -> Adapter:
    """How the evaluation runner talks to the KGoT paper's RAG baselines (named by their workflow specs): no
    iterations, and the items whose KGoT run the evaluation did not finish refused."""
    return Adapter(stats=baseline_stats, check_options=check_kgot_results)
