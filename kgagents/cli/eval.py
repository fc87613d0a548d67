"""The ``eval`` and ``report`` commands.

    kgagents eval WORKFLOW --dataset NAME [--data PATH] [--split S] [--limit N] [--ids ID ...]
                  [--sample FRACTION [--sample-seed N]] [--concurrency C] [--runs R]
                  [--temperature T] [--seed S] [--protocol NAME] [--out DIR] [--model provider:model]
                  [--grader-model provider:model] [--scorer NAME] [--retry-failed] [--processes N|auto]
                  [--dask [SCHEDULER]] [--workers N]
    kgagents report DIR [DIR ...] [--out DIR] [--label NAME ...] [--ideal-fusion]

Running the same ``eval`` command again resumes the evaluation: finished items are skipped, interrupted ones
continue from their checkpoints. Datasets whose files ship with kgagents (``cr-lt``, ``colota``) need no
``--data``; ``kgagents eval ark --dataset cr-lt --runs R --temperature T`` prints the ARK-V1 paper's metrics
(answer rate, conditional and overall accuracy as mean ± std over the runs, reliability), and
``kgagents eval ark --dataset cr-lt --protocol paper`` runs the paper's whole protocol and prints its Table III.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kgagents.cli.common import context_values_from_args, start_checks
from kgagents.cli.replay import unpack_bundle
from kgagents.core.config import get_settings
from kgagents.core.nofollow import write_file
from kgagents.evals.workers import auto_processes, processes_argument

DEFAULT_RESULTS_DIR = Path(".eval-results")


def add_commands(sub: Any, command: Callable[[str], Callable[[Any], Any]]) -> None:
    """Add ``eval`` and ``report`` to the ``kgagents`` parser."""
    ev = sub.add_parser("eval", help="evaluate a workflow on a dataset (concurrent, resumable)")
    ev.add_argument("workflow", help="the workflow (`kgagents workflows` lists them); its context's settings are "
                                     "this command's flags (`kgagents eval W --dataset D --help` lists W's)")
    ev.add_argument("--dataset", required=True, help="gaia, simpleqa, ... (see docs/evals.md)")
    ev.add_argument("--data", help="the dataset's local files (GAIA folder, SimpleQA CSV, ...); "
                                   "default for cr-lt and colota: the copy that ships with kgagents")
    ev.add_argument("--split", "--domain", dest="split",
                    help="dataset split (GAIA: validation or test; GRBench: the domain, e.g. dblp)")
    ev.add_argument("--preset", help="a named context of the workflow (e.g. grounded: graph-cot, tot-agent-select; "
                                     "see docs/grounded.md); --set values override it")
    ev.add_argument("--limit", type=int, help="only the first N items")
    ev.add_argument("--ids", nargs="+", metavar="ID", help="only these item ids")
    ev.add_argument("--sample", type=float, metavar="FRACTION",
                    help="a seeded random fraction of the items, e.g. 0.1 for the KGoT paper's 10%% of SimpleQA")
    ev.add_argument("--sample-seed", type=int, default=0, help="the seed of --sample (default 0)")
    ev.add_argument("--concurrency", "-c", type=int, default=4, help="items at a time (default 4)")
    ev.add_argument("--runs", type=int, help="repetitions of every item (default 1)")
    ev.add_argument("--temperature", type=float, help="the models' sampling temperature (e.g. 0.7 for --runs > 1)")
    ev.add_argument("--seed", type=int, help="base sampling seed: run r gets seed + r, for providers that take a "
                                             "seed (OpenAI and compatible servers, Ollama)")
    ev.add_argument("--protocol", help="a paper's protocol on the dataset, which sets runs and temperatures (cr-lt: "
                                       "paper = ARK-V1's Table III, T=0.7 x 30 runs and T=0 x 1 run)")
    ev.add_argument("--out", help=f"results directory (default {DEFAULT_RESULTS_DIR}/WORKFLOW-DATASET-SPLIT)")
    ev.add_argument("--model", help="provider:model for every role (default: KGAGENTS_MODEL)")
    ev.add_argument("--base-url", help="an OpenAI-compatible server for the model")
    ev.add_argument("--max-iterations", type=int)
    ev.add_argument("--budget-usd", dest="eval_budget_usd", type=float,
                    help="the evaluation's budget: no item starts once this call's items have cost this much (USD)")
    ev.add_argument("--budget-tokens", dest="eval_budget_tokens", type=int,
                    help="as --budget-usd, in tokens (a run's own budget: --set budget_tokens=N)")
    ev.add_argument("--set", action="append", metavar="KEY=VALUE", help="any context field")
    ev.add_argument("--grader-model", help="the LLM grader's model (SimpleQA, GRBench's GPT4Score; 'none': no "
                    "judge); default: the benchmark's own judge (GRBench: the paper's, openai:gpt-4o), else --model")
    ev.add_argument("--grader-base-url", help="the OpenAI-compatible server of the grader (default: "
                    "KGAGENTS_GRADER_BASE_URL; else the run's server only when the grader is the run's model or a "
                    "bare name, a provider's model its provider's API)")
    ev.add_argument("--scorer", help="another of the dataset's scorers (crag: crag, crag-alternatives, agent-g-paper; "
                                     "stark: stark, stark-torchmetrics-1.7.4; see docs/evals.md)")
    ev.add_argument("--rescore", metavar="DIR",
                    help="score the answers stored in the results folder DIR again, with --scorer and/or "
                         "--grader-model, into --out (default DIR-rescored-SCORER-GRADER); nothing runs again")
    ev.add_argument("--retry-failed", action="store_true",
                    help="run items that ended with an error again (from their checkpoints; with --base-url: the "
                         "same model at another address, recorded in the results folder's manifest.json)")
    ev.add_argument("--checkpointer", help="checkpointer URL (default: the SQLite file in --out; "
                                           "postgresql://... for a cluster)")
    ev.add_argument("--processes", type=processes_argument, default=1,
                    help="worker processes on this machine sharing the --concurrency items (default 1; auto: one "
                         "per 64 items in flight, at most one per CPU)")
    ev.add_argument("--dask", nargs="?", const="local", metavar="SCHEDULER",
                    help="distribute items with Dask: a scheduler address, or nothing for a local cluster")
    ev.add_argument("--workers", type=int, default=2, help="processes of the local Dask cluster (default 2)")
    ev.add_argument("--estimate", action="store_true",
                    help="print the expected calls, tokens and cost of the items still to do, and run nothing: from "
                         "recorded runs of the workflow where there are some, else from its call structure")
    ev.add_argument("--estimate-from", action="append", metavar="DIR", default=[],
                    help="more results folders (or folders of them) whose runs --estimate may use (default: --out "
                         "and the folders beside it)")
    ev.add_argument("--no-progress", action="store_true")
    ev.add_argument("--no-report", action="store_true", help="do not write report.md and the plots")
    command("eval")(cmd_eval)

    rep = sub.add_parser("report", help="Markdown report and plots comparing result directories")
    rep.add_argument("dirs", nargs="+", metavar="DIR", help="results folders, or bundles (eval --bundle)")
    rep.add_argument("--out", help="where report.md and the plots go (default: the first DIR)")
    rep.add_argument("--label", action="append", help="a name per DIR, in order")
    rep.add_argument("--no-plots", action="store_true")
    rep.add_argument("--ideal-fusion", action="store_true",
                     help="also the ideal fusion of the directories: an item solved when any of them solved it "
                          "(the KGoT paper's fusion of single runs)")
    command("report")(cmd_report)


def cmd_eval(args: argparse.Namespace) -> int:
    from kgagents.evals.datasets import dataset_protocol, load_dataset
    from kgagents.graphs.workflows import load_workflow

    load_workflow(args.workflow)  # an unknown workflow is an error before anything else
    dataset = load_dataset(args.dataset, args.data, split=args.split, limit=args.limit, ids=args.ids,
                           sample=args.sample, sample_seed=args.sample_seed)
    default_scorer = dataset.scorer
    if getattr(args, "scorer", None):
        from kgagents.evals.scorers import SCORERS

        if args.scorer not in SCORERS:
            raise ValueError(f"unknown scorer {args.scorer!r}; available: {', '.join(sorted(SCORERS))}")
        dataset.scorer = args.scorer
    if args.dask and args.processes != 1:
        raise ValueError("--processes and --dask are two ways to use several processes: choose one")
    if args.dask and (args.eval_budget_usd is not None or args.eval_budget_tokens is not None):
        raise ValueError("an evaluation budget is kept by one process: leave out --dask")
    values = context_values_from_args(args)
    if args.preset:
        from kgagents.graphs.workflows import preset

        values = {**preset(args.workflow, args.preset), **values}
    protocol = None
    if args.protocol:
        if args.runs is not None or args.temperature is not None:
            raise ValueError(f"--protocol {args.protocol} sets the runs and temperatures itself: leave out --runs "
                             "and --temperature")
        protocol = dataset_protocol(dataset.name, args.protocol)
    if args.temperature is not None:
        if args.temperature < 0:
            raise ValueError("--temperature must be at least 0")
        values["temperature"] = args.temperature
    if getattr(args, "rescore", None):
        return _rescore(args, dataset, values)
    if args.estimate:  # before the checks of keys and servers: an estimate calls no model
        return _estimate(args, dataset, values, protocol, default_scorer)
    judge = judge_for(args, values, dataset.scorer)
    check_judge(judge)
    start_checks(args.workflow, values, dataset=dataset.name, graph=dataset.name != "crag",
                 scorer=dataset.scorer, grader=None if judge is None else judge.name)
    _check_agent_g(args, values, dataset.name)
    if protocol is not None:
        return _run_protocol(args, dataset, values, protocol)
    out = _out_dir(args, dataset, default_scorer)
    result = _evaluate(args, dataset, out, values, runs=1 if args.runs is None else args.runs, seed=args.seed)
    _print_result(result, dataset)
    if not args.no_report and result.records:
        from kgagents.evals.report import build_report

        print(f"report: {build_report([out])}", file=sys.stderr)
    return _exit_status([result])


def _check_agent_g(args: argparse.Namespace, values: dict[str, Any], dataset: str) -> None:
    """Agent-G's checks before any item runs: its embedding models load here; on CRAG's own data, its CRAG API
    answers (a warning on the sample that ships with kgagents) (:mod:`kgagents.cli.preflight`)."""
    from kgagents.cli.preflight import check_crag_api, check_embedders

    check_embedders(args.workflow, values)
    for note in check_crag_api(args.workflow, values, dataset=dataset, own_data=args.data is not None):
        print(f"kgagents: {note}", file=sys.stderr)


def _rescore(args: argparse.Namespace, dataset: Any, own: dict[str, Any]) -> int:
    """``--rescore DIR``: DIR's answers scored again by this command's scorer and grader, into a folder of their
    own (:mod:`kgagents.evals.rescore`). The grader comes from the user's own flags and environment (``own``: this
    command's context values), never from DIR's manifest: a results folder is data and does not choose where the
    user's judge sends. ``--estimate`` prices the judge's calls over DIR's answers and calls nothing."""
    from kgagents.evals import event_loop
    from kgagents.evals.estimate import estimate_rescore, format_estimate
    from kgagents.evals.rescore import nothing_scored, rescore
    from kgagents.evals.runner import read_manifest

    source = Path(args.rescore)
    manifest = read_manifest(source)
    if manifest is None:
        raise ValueError(f"{source} is not an evaluation's results folder (no manifest.json)")
    if args.preset or args.set or args.runs is not None or args.seed is not None or args.temperature is not None:
        raise ValueError("--rescore scores stored answers: the run's settings (--preset, --set, --runs, --seed, "
                         "--temperature) are those of the evaluation in DIR")
    judge = judge_for(args, own, dataset.scorer)
    label = "none" if judge is None or judge.model is None else str(judge.model)
    out = Path(args.out) if args.out else source.parent / re.sub(
        r"[^A-Za-z0-9_.-]+", "_", f"{source.name}-rescored-{dataset.scorer}-{label}")
    if args.estimate:  # before the checks of keys and servers: an estimate calls no model
        grader = None if judge is None or judge.model is None else str(judge.model)
        print(format_estimate(estimate_rescore(source, out, args.workflow, dataset, grader=grader)))
        return 0
    check_judge(judge)
    print(f"kgagents: re-scoring the answers in {source} with {dataset.scorer}"
          f"{'' if judge is None else f', grader {judge.name}'} into {out}", file=sys.stderr)
    values = dict(manifest.get("context") or {})  # the run's settings, recorded again in the new manifest
    options = dataclasses.replace(
        _options(args, out, values, runs=int(manifest.get("runs") or 1), seed=manifest.get("seed")), judge=judge)
    result = event_loop.run(rescore(source, options, dataset))
    _print_result(result, dataset)
    if not args.no_report and result.records:
        from kgagents.evals.report import build_report

        print(f"report: {build_report([out])}", file=sys.stderr)
    if nothing_scored(result.records):
        print(f"kgagents: none of the answers in {source} was scored again (every judgement or scoring failed; "
              f"see the errors in {out / 'results.jsonl'}): fix the grader, then run the same command again",
              file=sys.stderr)
        return 1
    return _exit_status([result])


def _exit_status(results: list[Any]) -> int:
    """1 (with the reason) when items of this call met a fault no item can get past, or when every item of the
    evaluation failed (nothing was scored: its numbers would be those of no answer at all), else 0."""
    fatal = next((result.fatal for result in results if result.fatal), None)
    if fatal is not None:
        print(f"kgagents: the evaluation's items failed: {fatal}\nFix it, then run the same command with "
              "--retry-failed (and --base-url URL where the same model is served at another address): those items "
              "resume from their checkpoints.", file=sys.stderr)
        return 1
    failed = next((result for result in results if all_failed(result.records)), None)
    if failed is None:
        return 0
    first = next(str(r.get("error")) for r in failed.records)
    print(f"kgagents: every item of the evaluation in {failed.out_dir} failed ({len(failed.records)} of "
          f"{len(failed.records)}; the first: {first[:300]}): nothing was scored. Fix it, then run the same "
          "command with --retry-failed (and --base-url URL where the same model is served at another address).",
          file=sys.stderr)
    return 1


def all_failed(records: list[dict[str, Any]]) -> bool:
    """Whether an evaluation's records are all failed runs (and there is at least one)."""
    return bool(records) and all(r.get("error") for r in records)


def judge_for(args: argparse.Namespace, values: dict[str, Any], scorer: str) -> Any:
    """The evaluation's LLM grader (:class:`kgagents.evals.judges.Judge`; None when the scorer has none): the
    one setting that the start line shows, the start checks, ``--estimate`` prices and the scorer calls."""
    from kgagents.evals.runner import evaluation_judge

    return evaluation_judge(_options(args, Path("."), values, runs=1, seed=None), scorer)


def check_judge(judge: Any) -> None:
    """Refuse a grader that cannot judge before anything runs (:func:`kgagents.evals.judges.check_judge`)."""
    from kgagents.evals.judges import check_judge as check

    check(judge)


def _process_count(args: argparse.Namespace) -> int:
    if args.processes != "auto":
        return int(args.processes)

    return auto_processes(args.concurrency)


def _options(args: argparse.Namespace, out: Path, values: dict[str, Any], *, runs: int, seed: int | None) -> Any:
    """The evaluation the options describe, into ``out``."""
    from kgagents.evals.runner import EvalOptions

    return EvalOptions(workflow=args.workflow, out_dir=out, concurrency=args.concurrency, runs=runs,
                       context_values=values, preset=args.preset, seed=seed,
                       grader_model=args.grader_model, grader_base_url=getattr(args, "grader_base_url", None),
                       retry_failed=args.retry_failed, progress=not args.no_progress,
                       checkpointer=args.checkpointer, processes=_process_count(args),
                       budget_usd=args.eval_budget_usd, budget_tokens=args.eval_budget_tokens)


def _out_dir(args: argparse.Namespace, dataset: Any, default_scorer: str) -> Path:
    """``--out``, else the default results folder of this evaluation."""
    if args.out:
        return Path(args.out)
    return DEFAULT_RESULTS_DIR / default_out_name(
        args.workflow, dataset.name, dataset.split, args.temperature,
        None if dataset.scorer == default_scorer else dataset.scorer)


def _protocol_dir(args: argparse.Namespace, dataset: Any) -> Path:
    """``--out``, else the default folder of a protocol's evaluation (its legs are folders in it)."""
    if args.out:
        return Path(args.out)
    return DEFAULT_RESULTS_DIR / f"{default_out_name(args.workflow, dataset.name, dataset.split, None)}-{args.protocol}"


def _estimate(args: argparse.Namespace, dataset: Any, values: dict[str, Any], protocol: Any,
              default_scorer: str) -> int:
    """``--estimate``: the expected cost of what is still to do (every leg of a protocol), and nothing run."""
    from kgagents.evals.estimate import estimate, format_estimate

    if protocol is None:
        legs = [(_out_dir(args, dataset, default_scorer), values, 1 if args.runs is None else args.runs)]
    else:
        base = _protocol_dir(args, dataset)
        legs = [(base / leg.name, {**values, "temperature": leg.temperature}, leg.runs) for leg in protocol.legs]
    judge = judge_for(args, values, dataset.scorer)
    grader = None if judge is None or judge.model is None else str(judge.model)
    for out, leg_values, runs in legs:
        options = _options(args, out, leg_values, runs=runs, seed=args.seed)
        print(format_estimate(estimate(options, dataset, grader=grader,
                                       recorded=[Path(p) for p in args.estimate_from])))
    return 0


def _evaluate(args: argparse.Namespace, dataset: Any, out: Path, values: dict[str, Any], *, runs: int,
              seed: int | None) -> Any:
    """One evaluation into ``out``, in this process, in worker processes or on Dask as the options say."""
    from kgagents.evals.runner import run_evaluation

    options = _options(args, out, values, runs=runs, seed=seed)
    if args.dask:
        from kgagents.evals.distributed import evaluate_distributed

        return evaluate_distributed(options, dataset, scheduler=None if args.dask == "local" else args.dask,
                                    n_workers=args.workers)
    return run_evaluation(options, dataset)


def _print_result(result: Any, dataset: Any) -> None:
    """What an evaluation did (stderr) and its metrics: the scorer's, then the dataset's own table if it has one."""
    print(f"{len(result.records)} results in {result.out_dir} (this run: {result.ran} ran, {result.resumed} "
          f"resumed, {result.skipped} skipped, {result.failed} failed)", file=sys.stderr)
    if result.budget_stop:
        print(f"{result.budget_stop}: {result.budget_skipped} item run(s) not started (the same command goes on "
              "with them)", file=sys.stderr)

    def shown(key: str, value: Any) -> str:
        if value is None:
            return f"{key} {'unknown' if 'cost' in key else 'n/a'}"
        return f"{key} {value:.4f}" if isinstance(value, float) else f"{key} {value}"

    print(", ".join(shown(k, v) for k, v in result.metrics.items() if k != "n"))
    if dataset.scorer == "colota":
        from kgagents.evals.colota import colota_metrics, format_metrics, records_to_answers

        print(format_metrics(colota_metrics(*records_to_answers(result.records))))


def _run_protocol(args: argparse.Namespace, dataset: Any, values: dict[str, Any], protocol: Any) -> int:
    """Every leg of a paper's protocol (its temperature × runs, seeds from the protocol's or ``--seed``), each in
    its own folder under ``--out``, then the paper's table of them (printed and written to ``table.md``)."""
    from kgagents.evals.report import build_report

    base = _protocol_dir(args, dataset)
    seed = protocol.seed if args.seed is None else args.seed
    legs = []
    results = []
    for leg in protocol.legs:
        print(f"{args.protocol} protocol: temperature {leg.temperature:g}, {leg.runs} run(s), seeds {seed}"
              f"{f'..{seed + leg.runs - 1}' if leg.runs > 1 else ''}", file=sys.stderr)
        result = _evaluate(args, dataset, base / leg.name, {**values, "temperature": leg.temperature},
                           runs=leg.runs, seed=seed)
        _print_result(result, dataset)
        legs.append((leg, result.records))
        results.append(result)
    label = str(values.get("model") or get_settings().model_for("graph_executor") or args.workflow)
    table = protocol.table(label, legs)
    base.mkdir(parents=True, exist_ok=True)
    write_file(base / "table.md", f"# {protocol.description}\n\n{table}\n")  # never through a link there
    print(f"\n{protocol.description}\n\n{table}")
    if not args.no_report and any(records for _, records in legs):
        print(f"report: {build_report([base / leg.name for leg in protocol.legs], base)}", file=sys.stderr)
    return _exit_status(results)


def default_out_name(workflow: str, dataset: str, split: str, temperature: float | None,
                     scorer: str | None = None) -> str:
    """``WORKFLOW-DATASET-SPLIT``, with ``-T<temperature>`` when one is given (runs at another temperature are
    another evaluation, not a continuation of this one) and ``-<scorer>`` for a scorer other than the dataset's."""
    name = f"{workflow}-{dataset}-{split}"
    name = name if temperature is None else f"{name}-T{temperature:g}"
    return name if scorer is None else f"{name}-{scorer}"


def cmd_report(args: argparse.Namespace) -> int:
    from kgagents.evals.report import build_report

    dirs = [unpack_bundle(Path(d)) if Path(d).is_file() and zipfile.is_zipfile(d) else d for d in args.dirs]
    path = build_report(dirs, args.out, labels=args.label, plots=not args.no_plots,
                        ideal_fusion=args.ideal_fusion)
    print(path)
    return 0
