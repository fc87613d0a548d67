"""ARK-V1 on the command line.

    kgagents demo --workflow ark      the paper's example question over its real subgraph, scripted; prints False
    kgagents ask --workflow ark "question" --attach graph.json
                                      a question over any graph file in ARK-V1 format (``{"question", "graph":
                                      [[head, tail, {"relation": r}], ...]}``, a list of them, or JSON lines)
    kgagents eval ark --dataset cr-lt --runs R --temperature T
                                      the general evaluation command, through the CR-LT / CoLoTa plug-ins of
                                      :mod:`kgagents.evals.colota` (answer rate, accuracies, reliability)

:func:`add_eval_arguments` and :func:`run_eval` are the ARK-V1 evaluation as the paper runs it
(``--dataset cr-lt --runs R --temperature T``, packaged data by default, the paper's table as output), ready to
be offered by a command (e.g. ``kgagents eval ark``) without more code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from importlib import resources
from pathlib import Path

from kgagents.cli.common import _run, context_values_from_args, demo_intro, demo_model, demo_outro

DEMO_SCRIPT = "demo_ark_yui.json"
DEMO_GRAPH = "example_data.json"
DEFAULT_OUT = ".eval-results"


def run_demo(args: argparse.Namespace) -> int:
    """``kgagents demo --workflow ark``: CoLoTa S2 over its 32-edge subgraph with a scripted model; prints False."""
    from kgagents.cli.report import format_ark
    from kgagents.nodes.ark import ArkContext

    data = resources.files("kgagents") / "data" / "ark"
    with resources.as_file(data / DEMO_SCRIPT) as script, resources.as_file(data / DEMO_GRAPH) as graph:
        question = json.loads(graph.read_text(encoding="utf-8"))["question"]
        demo_intro("Scripted demo: the ARK-V1 paper's example question (CoLoTa S2) over its real 32-edge "
                   "Wikidata subgraph, run through the real ARK-V1 graph, property-graph store, embedding "
                   "index and SQLite checkpoints with a scripted chat model (no LLM is called).", question)
        values = {"model": f"scripted:{script}"}
        ctx = ArkContext.from_mapping({**values, "model": demo_model(script)})
        thread_id, state = _run("ark", args, {"question": question, "kg_file": str(graph)}, None, values,
                                context_override=ctx)
        if not getattr(args, "quiet", False):
            print("\n".join(format_ark(state)), file=sys.stderr)
        print(state.get("final_answer", "(no answer)"))
    demo_outro(thread_id, picture=True)
    return 0


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of the ARK-V1 evaluation (also for a general ``kgagents eval ark``)."""
    parser.add_argument("--dataset", default="cr-lt", choices=["cr-lt"],
                        help="cr-lt: the 200 CR-LT-KGQA / CoLoTa questions with their Wikidata subgraphs")
    parser.add_argument("--data", help="folder (or .jsonl file) of the CR-LT subgraphs (default: the packaged copy)")
    parser.add_argument("--runs", type=int, default=1, help="stochastic runs per question (the paper: 30 at T=0.7)")
    parser.add_argument("--temperature", type=float, help="sampling temperature (the paper: 0.7, or 0 for one run)")
    parser.add_argument("--model", help="provider:model (default: KGAGENTS_MODEL)")
    parser.add_argument("--base-url", help="an OpenAI-compatible server for the model")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="any ARK context field, e.g. --set c_max=5 --set k_max=8")
    parser.add_argument("--ids", help="comma-separated question ids (e.g. S1,S2)")
    parser.add_argument("--limit", type=int, help="only the first N questions")
    parser.add_argument("--concurrency", type=int, default=1, help="(question, run) pairs at a time")
    parser.add_argument("--out", help=f"results folder; running again resumes it (default: {DEFAULT_OUT}/ark-<dataset>"
                                      "-T<temperature>-R<runs>)")
    parser.add_argument("--json", action="store_true", help="print the metrics and answers as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run_eval(args: argparse.Namespace) -> int:
    """Run the ARK-V1 evaluation from parsed :func:`add_eval_arguments` options; prints the paper's metrics."""
    from kgagents.core.usage import format_cost
    from kgagents.evals.colota import data_issues, evaluate_ark, format_metrics, load_cr_lt
    from kgagents.nodes.ark import ROLE, ArkContext
    from kgagents.nodes.models import configured_model_string

    values = context_values_from_args(args)
    ctx = ArkContext.from_mapping({**values, **({"temperature": args.temperature} if args.temperature is not None
                                                else {})})
    configured_model_string(ROLE, ctx)  # fails early, naming the variables to set
    if args.runs < 1:
        raise ValueError("--runs must be at least 1")
    temp = "default" if args.temperature is None else f"{args.temperature:g}"
    out = Path(args.out) if args.out else Path(DEFAULT_OUT) / f"ark-{args.dataset}-T{temp}-R{args.runs}"
    ids = [i.strip() for i in args.ids.split(",") if i.strip()] if args.ids else None
    notes = data_issues(load_cr_lt(args.data, ids=ids, limit=args.limit))
    if notes and not args.json:
        print(f"{len(notes)} data note(s) on the selected questions, e.g. {notes[0]}", file=sys.stderr)
    result = asyncio.run(evaluate_ark(out_dir=out, runs=args.runs, temperature=args.temperature,
                                      context_values=values, data=args.data, ids=ids, limit=args.limit,
                                      concurrency=args.concurrency, progress=not args.quiet))
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return 0
    print(format_metrics(result["metrics"]))
    if result["errors"]:
        print(f"the failed runs' errors are in {out}/results.jsonl (`--retry-failed` runs them again)")
    print(f"results: {out}  (cost {format_cost(result['cost_usd'])})")
    return 0
