"""Agent-G on the command line.

    kgagents ask "question" --workflow agent-g --page a.html --page b.txt [--query-time "03/10/2024, 23:34:42
        PT"] a question answered from the given web pages (the text module) and, with --set crag_api_url=URL,
        CRAG's knowledge graphs (the graph module) kgagents ask "question" --workflow agent-g --graph NAME
        --set task=retrieval STaRK-style retrieval over a knowledge base whose nodes have documents: the
        answer is a ranked id list kgagents demo --workflow agent-g an offline, scripted run of a CRAG sample
        question through the real retriever bank (the question's real web pages, the mock KG API serving
        CRAG's saved calls): one rejection, corrective feedback, an accepted second answer kgagents agent-g
        examples --dataset stark-mag --data DIR --split train --n 25 in-context examples for the agent and the
        commentor, collected from a training split and verified by its gold (the runs use the oracle critic)

The demo's script makes the decisions a model would make, but every answer in it is conditioned on what the
real retriever bank returned (the generator's second answer is only given when the ranked pages that reach it
hold the fact), so the run gets to the gold answer only if the retrieval, the critic loop and the checkpoints
behave. """

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from kgagents.cli.common import _run, context_values_from_args, demo_intro, demo_model, demo_outro, start_checks
from kgagents.cli.eval import DEFAULT_RESULTS_DIR

#: The demo's question, one of the CRAG sample's ten (found by its text).
DEMO_QUERY = "is dreamworks animation owned by time warner or universal pictures?"

PAGE_SUFFIXES_HTML = (".html", ".htm", ".xhtml")


def pages_from_files(paths: list[str]) -> list[dict[str, Any]]:
    """Web pages for Agent-G's text module from local files: HTML (converted to text by the run) or text; the
    page's name is its HTML title, else the file name. A missing or unreadable file is a clear error."""
    pages = []
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"page not found: {path}")
        try:
            content = p.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            raise ValueError(f"cannot read the page {path}: {exc}") from exc
        page: dict[str, Any] = {"name": p.name, "url": p.resolve().as_uri()}
        if p.suffix.lower() in PAGE_SUFFIXES_HTML or content.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
            title = re.search(r"<title[^>]*>(.*?)</title>", content, re.IGNORECASE | re.DOTALL)
            if title and title.group(1).strip():
                page["name"] = " ".join(title.group(1).split())
            page["html"] = content
        else:
            page["text"] = content
        pages.append(page)
    return pages


def _s(when: str, **reply: Any) -> dict[str, Any]:
    return {"when": when, "times": 1, **reply}


def demo_steps() -> list[dict[str, Any]]:
    """The scripted decisions of the demo (see the module docstring)."""
    question = re.escape(f"<question>{DEMO_QUERY}</question>")
    return [
        # iteration 1: the agent reads the question as a relational one about a film company
        _s(r"\[stage: agent, iteration 1\].*" + question,
           structured={"domain": "movie", "question_type": "comparison", "dynamism": "static",
                       "entities": [{"name": "dreamworks animation", "type": "movie"}],
                       "relations": ["movie_get_movie_info"], "source": "knowledge graph"}),
        # the knowledge graph has no record of it: nothing to answer from
        _s(r"\[stage: generator, iteration 1\].*<references>\s*\(no reference",
           content="1. Which company owns DreamWorks Animation? The references give nothing about it.\n"
                   "Final answer: I don't know"),
        _s(r"\[stage: validator, iteration 1\]", content="no"),
        _s(r"\[stage: commentor, iteration 1\].*movie_get_movie_info",
           structured={"error_type": "incorrect retrieval module",
                       "reason": "the knowledge graph holds films, not the owners of studios; the web pages "
                                 "describe the company"}),
        # iteration 2: the feedback sends the agent to the question's web pages
        _s(r"\[stage: agent, iteration 2\].*reference does not contain useful information",
           structured={"domain": "movie", "question_type": "comparison", "dynamism": "static",
                       "entities": [{"name": "dreamworks animation", "type": "company"}], "relations": [],
                       "source": "text documents"}),
        # answered only when the ranked pages that reach the generator name Universal as the owner
        _s(r"\[stage: generator, iteration 2\].*<references>.*Universal Pictures \| Dreamworks Animation Wiki"
           r".*</references>",
           content="1. Who owns DreamWorks Animation? The pages list it under Universal Pictures (NBCUniversal "
                   "bought it in 2016).\n2. Is that Time Warner or Universal Pictures? Universal Pictures.\n"
                   "Final answer: universal pictures"),
        _s(r"\[stage: validator, iteration 2\].*<prediction>universal pictures</prediction>", content="yes"),
    ]


def _demo_item() -> Any:
    from kgagents.evals.datasets import load_dataset

    for item in load_dataset("crag", None).items:
        if item.question.strip().lower() == DEMO_QUERY:
            return item
    raise ValueError("the demo's CRAG sample question is missing from the packaged CRAG data")


def run_demo(args: argparse.Namespace) -> int:
    """``kgagents demo --workflow agent-g``: a CRAG sample question, scripted decisions, real retrieval."""
    from kgagents.cli.report import format_agent_g
    from kgagents.nodes.agent_g import AgentGContext
    from kgagents.tools.crag_api import CragMockServer

    item = _demo_item()
    demo_intro("Scripted demo: a CRAG sample question with its five real web pages and the mock KG API "
               "(CRAG's saved calls on a loopback server), through the real Agent-G graph, retriever bank "
               "and SQLite checkpoints with a scripted chat model (no LLM is called).", item.question)
    with tempfile.TemporaryDirectory(prefix="kgagents-demo-") as tmp, CragMockServer() as server:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps({"name": "agent-g-demo", "steps": demo_steps()}), encoding="utf-8")
        values = {"model": f"scripted:{script}", "task": "generation", "crag_api_url": server.url}
        task = {"question": item.question, **{k: v for k, v in item.inputs.items() if k != "question"}}
        thread_id, state = _run("agent-g", args, task, None, values,
                                context_override=AgentGContext.from_mapping({**values, "model": demo_model(script)}))
        if not getattr(args, "quiet", False):
            print("\n".join(format_agent_g(state)), file=sys.stderr)
            print(f"gold answer: {item.gold if isinstance(item.gold, str) else json.dumps(item.gold)}",
                  file=sys.stderr)
        print(state.get("final_answer", "(no answer)"))
    demo_outro(thread_id, picture=True)
    return 0


# --------------------------------------------------------------------------------------------------------------
# kgagents agent-g examples
# --------------------------------------------------------------------------------------------------------------
def add_commands(sub: Any, command: Any) -> None:
    """Add ``agent-g examples`` to the ``kgagents`` parser."""
    group = sub.add_parser("agent-g", help="Agent-G's own commands (in-context examples)")
    gsub = group.add_subparsers(dest="agent_g_command", required=True)
    ex = gsub.add_parser("examples", help="collect in-context examples from a training split, verified by its gold")
    ex.add_argument("--dataset", required=True, help="stark-mag, stark-amazon, stark-prime, stark or crag")
    ex.add_argument("--data", help="the dataset's files (as for kgagents eval)")
    ex.add_argument("--split", help="default: train (STaRK), validation (CRAG), as the paper")
    ex.add_argument("--n", type=int, default=25, help="questions to run (the first N of the split; default 25)")
    ex.add_argument("--out", help="where the runs and the example files go (default .eval-results/"
                                  "agent-g-examples-DATASET-SPLIT)")
    ex.add_argument("--model", help="provider:model for every role (default: KGAGENTS_MODEL)")
    ex.add_argument("--base-url", help="an OpenAI-compatible server for the model")
    ex.add_argument("--max-iterations", type=int)
    ex.add_argument("--set", action="append", metavar="KEY=VALUE", help="any context field")
    ex.add_argument("--concurrency", "-c", type=int, default=4)
    ex.add_argument("--no-progress", action="store_true")
    command("agent-g")(cmd_agent_g)


def cmd_agent_g(args: argparse.Namespace) -> int:
    """``kgagents agent-g examples``: run Agent-G with the oracle critic over the first ``--n`` questions of a
    training split, then keep what the gold verifies: each action whose output it accepts (agent examples) and
    each rejected action with the oracle's feedback whose next action did better (commentor examples), the
    paper's "successful experiences"; the files go to ``--set agent_examples=FILE --set
    commentor_examples=FILE``."""
    from kgagents.evals import event_loop
    from kgagents.evals.agent_g import EXAMPLE_SPLITS, collect_examples
    from kgagents.evals.datasets import load_dataset
    from kgagents.evals.runner import EvalOptions

    if args.n < 1:
        raise ValueError("--n must be at least 1")
    split = args.split or EXAMPLE_SPLITS.get(args.dataset, "train")
    dataset = load_dataset(args.dataset, args.data, split=split, limit=args.n)
    if not dataset.items:
        raise ValueError(f"{args.dataset} {split}: no questions")
    values = {**context_values_from_args(args), "oracle_validator": True, "oracle_commentor": True}
    start_checks("agent-g", values, dataset=dataset.name, graph=True)
    out = Path(args.out) if args.out else DEFAULT_RESULTS_DIR / f"agent-g-examples-{dataset.name}-{split}"
    options = EvalOptions(workflow="agent-g", out_dir=out, concurrency=args.concurrency, context_values=values,
                          progress=not args.no_progress)
    summary = event_loop.run(collect_examples(options, dataset))
    print(f"{summary['questions']} question(s) of {dataset.name} {split} run with the oracle critic "
          f"({summary['failed']} failed) in {out}", file=sys.stderr)
    print(f"{summary['agent_examples']} agent example(s): {summary['agent_file']}")
    print(f"{summary['commentor_examples']} commentor example(s): {summary['commentor_file']}")
    print(f"use them: --set agent_examples={summary['agent_file']} "
          f"--set commentor_examples={summary['commentor_file']}")
    return 0
