"""The ``kgagents`` command line.

    kgagents ask "question" [--attach FILE ...] [--thread ID]   answer a question (KGoT by default)
    kgagents resume THREAD                                      continue an interrupted run
    kgagents runs                                               list threads with their status
    kgagents show THREAD                                        the final KG, votes, tool calls, writes, usage
    kgagents demo [--workflow W]                                an offline, scripted run of the paper's example
    kgagents tools                                              every tool with its status
    kgagents doctor                                             the models, keys, servers, sandbox and extras
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from kgagents.core.config import ConfigurationError, get_settings
from kgagents.core.errors import KGAgentsError

__all__ = ["COMMAND_MODULES", "RunFailed", "build_parser", "command", "context_values_from_args", "main",
           "start_checks"]

Command = Callable[[argparse.Namespace], int]
_commands: dict[str, Command] = {}

#: Modules that add sub-commands: each has ``add_commands(subparsers, command)`` which adds its parsers and
#: registers their handlers with the ``command(name)`` decorator.
COMMAND_MODULES: list[str] = ["kgagents.cli.eval", "kgagents.cli.graph", "kgagents.cli.clean",
                              "kgagents.cli.doctor", "kgagents.cli.agent_g"]


def command(name: str) -> Callable[[Command], Command]:
    def deco(fn: Command) -> Command:
        _commands[name] = fn
        return fn

    return deco


def _runs_dir(args: argparse.Namespace) -> Path:
    return Path(args.runs_dir) if getattr(args, "runs_dir", None) else get_settings().runs_dir


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def context_values_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The context fields the user set on the command line (JSON values only, so they can be recorded)."""
    values: dict[str, Any] = {}
    for item in getattr(args, "set", None) or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set takes key=value, got {item!r}")
        values[key.strip()] = _parse_value(value)
    for field in ("model", "solve_mode", "backend", "answer_formatter", "max_iterations", "base_url"):
        value = getattr(args, field, None)
        if value is not None:
            values[field] = value
    return values


def start_checks(workflow: str, values: dict[str, Any], *, variants: list[str] | None = None,
                 graph: bool = False, dataset: str | None = None, scorer: str | None = None,
                 grader: Any = None) -> None:
    """Before a run starts: fail when no model is configured or a backend's extra is missing (the messages say
    what to set or install); print the models of every role with their URLs, and what this run cannot do."""
    from kgagents.cli.preflight import check_backends, models_line, role_models, run_limits

    models = role_models(values)
    check_backends(values, variants)
    print(models_line(models, grader), file=sys.stderr)
    for note in run_limits(workflow, values, dataset=dataset, graph=graph, grader=grader, scorer=scorer):
        print(f"kgagents: {note}", file=sys.stderr)


def _warn_isolation() -> None:
    """Say at start-up when LLM-written code cannot run under full isolation."""
    from kgagents.tools.sandbox import isolation_status

    kind, detail = isolation_status()
    if kind == "bwrap":
        return
    if get_settings().allow_weak_sandbox:
        print(f"kgagents: warning: {detail}; LLM-written code runs with weak isolation "
              "(KGAGENTS_ALLOW_WEAK_SANDBOX=1)", file=sys.stderr)
    else:
        print(f"kgagents: warning: {detail}; the Python tool and the embedded KG are unavailable. Install the "
              "Debian package `bubblewrap`, or accept weak isolation with KGAGENTS_ALLOW_WEAK_SANDBOX=1",
              file=sys.stderr)


def _print_answer(thread_id: str, state: dict[str, Any]) -> int:
    """Print a finished run's answer; its exit status: 1 when every model call of the run failed."""
    from kgagents.nodes.state import every_call_failed, failure_summary

    print(state.get("final_answer", "(no answer)"))
    print(f"thread: {thread_id} (details: kgagents show {thread_id})", file=sys.stderr)
    summary = failure_summary(state.get("failures"))
    if every_call_failed(state):
        kinds = ", ".join(f"{n} {kind}" for kind, n in summary["kinds"].items())
        print(f"kgagents: the run failed: every model call failed for good ({kinds}); it is listed as failed "
              f"(kgagents show {thread_id} lists the errors)", file=sys.stderr)
        return 1
    if summary["count"]:
        print(f"kgagents: {summary['count']} model call(s) failed for good and the run went on without them "
              f"(kgagents show {thread_id})", file=sys.stderr)
    return 0


class RunFailed(KGAgentsError, RuntimeError):
    """A run stopped with an error; its checkpoints are kept and it can be resumed."""


def _run(workflow: str, args: argparse.Namespace, task: dict[str, Any] | None, thread: str | None,
         values: dict[str, Any], context_override: Any = None,
         checkpointer: str | None = None) -> tuple[str, dict[str, Any]]:
    from kgagents.core.runs import new_thread_id
    from kgagents.graphs.workflows import run_thread, stderr_progress

    thread = thread or new_thread_id()
    print(f"thread: {thread}", file=sys.stderr, flush=True)
    try:
        return asyncio.run(run_thread(workflow, runs_dir=_runs_dir(args), thread_id=thread, task=task,
                                      context_values=values, context_override=context_override,
                                      progress=None if getattr(args, "quiet", False) else stderr_progress,
                                      checkpointer=checkpointer))
    except (ConfigurationError, ValueError, KeyboardInterrupt):
        raise
    except Exception as exc:  # any failure inside the graph: the checkpoints survive
        raise RunFailed(f"the run stopped: {type(exc).__name__}: {exc}\n"
                        f"Its checkpoints are kept; continue it with `kgagents resume {thread}`.") from exc


@command("ask")
def cmd_ask(args: argparse.Namespace) -> int:
    checkpointer = _checkpointer(args)
    values = context_values_from_args(args)
    if getattr(args, "preset", None):
        from kgagents.graphs.workflows import preset

        values = {**preset(args.workflow, args.preset), **values}
    variants = None
    if getattr(args, "fusion", None):
        from kgagents.nodes.fusion import parse_variants

        variants = parse_variants(args.fusion)
    start_checks("fusion" if variants else args.workflow, values, variants=variants,
                 graph=bool(getattr(args, "graph", None)))
    _warn_isolation()
    attachments = []
    for path in args.attach or []:
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"attachment not found: {path}")
        attachments.append(str(p.resolve()))
    task: dict[str, Any] = {"question": args.question, "attachments": attachments}
    workflow = args.workflow
    if getattr(args, "graph", None):
        from kgagents.graphs.workflows import load_workflow

        if "graph" not in getattr(load_workflow(workflow).build(), "input_schema", dict).__annotations__:
            raise ValueError(f"the {workflow} workflow does not read a static knowledge graph (--graph is for "
                             "ark and the other graph-exploring workflows)")
        task["graph"] = args.graph
    if getattr(args, "page", None) or getattr(args, "query_time", None):
        if not workflow.startswith("agent-g"):
            raise ValueError("--page and --query-time are for the agent-g workflows (web pages for their text "
                             "module)")
        from kgagents.cli.agent_g import pages_from_files

        task["pages"] = pages_from_files(args.page or [])
        if args.query_time:
            task["query_time"] = args.query_time
    if getattr(args, "kgot_thread", None):
        if workflow not in ("rag", "kgot-graphrag"):
            raise ValueError("--kgot-thread is for the rag and kgot-graphrag baselines (their corpus is that KGoT "
                             "run's tool outputs)")
        from kgagents.core.runs import RunRegistry

        task["kgot_thread"] = args.kgot_thread
        values.setdefault("kgot_checkpointer", RunRegistry(_runs_dir(args)).checkpointer_for(args.kgot_thread,
                                                                                               checkpointer))
    if variants:
        workflow, task["variants"] = "fusion", variants
    thread_id, state = _run(workflow, args, task, args.thread, values, checkpointer=checkpointer)
    return _print_answer(thread_id, state)


def _checkpointer(args: argparse.Namespace) -> str | None:
    """``--checkpointer`` or ``KGAGENTS_CHECKPOINTER``: a PostgreSQL URL (None: SQLite in the runs dir)."""
    from kgagents.core.runs import configured_checkpointer, is_postgres_url

    url = getattr(args, "checkpointer", None) or configured_checkpointer()
    if url and not is_postgres_url(url):
        raise ValueError(f"--checkpointer / KGAGENTS_CHECKPOINTER takes a postgresql:// URL, got {url!r} "
                         "(runs without one are checkpointed in SQLite in the runs directory)")
    return url


def _known_run(args: argparse.Namespace) -> Any:
    """The registry record of ``args.thread``, or a clear error."""
    from kgagents.core.runs import RunRegistry

    record = RunRegistry(_runs_dir(args)).get(args.thread)
    if record is None:
        raise ValueError(f"no run with thread id {args.thread!r} in {_runs_dir(args)}")
    return record


@command("resume")
def cmd_resume(args: argparse.Namespace) -> int:
    record = _known_run(args)
    thread_id, state = _run(record.workflow, args, None, record.thread_id, record.context,
                            checkpointer=_checkpointer(args))
    return _print_answer(thread_id, state)


@command("runs")
def cmd_runs(args: argparse.Namespace) -> int:
    from kgagents.core.runs import RunRegistry

    records = RunRegistry(_runs_dir(args)).list()
    if not records:
        print(f"no runs in {_runs_dir(args)}")
        return 0
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created))
        answer = f" -> {r.answer}" if r.answer else ""
        print(f"{r.thread_id}  {r.workflow:6} {r.status:11} {when}  {r.question[:60]}{answer}")
    return 0


@command("show")
def cmd_show(args: argparse.Namespace) -> int:
    from kgagents.cli.report import format_run
    from kgagents.graphs.workflows import thread_state

    record = _known_run(args)
    state, nxt = asyncio.run(thread_state(record.workflow, _runs_dir(args), args.thread, _checkpointer(args)))
    if args.kg and record.workflow == "grounded":
        return _show_thought_graph(args, state)
    if args.kg:
        return _show_kg(args, state)
    if args.json:
        print(json.dumps(state, indent=2, ensure_ascii=False, default=str))
    else:
        print(format_run(record.workflow, args.thread, state, nxt))
    return 0


def _show_thought_graph(args: argparse.Namespace, state: dict[str, Any]) -> int:
    """``show --kg`` of a grounded run: its thought graph (HTML page, or JSON lines with ``--format json``)."""
    from kgagents.cli.kgview import render_html
    from kgagents.nodes.grounded import thought_graph
    from kgagents.tools.kg.base import snapshot_to_jsonl

    graph = thought_graph(state)  # type: ignore[arg-type]
    if not graph["nodes"]:
        raise ValueError(f"thread {args.thread} has no thought graph yet")
    if args.format == "json":
        text = snapshot_to_jsonl(graph)  # type: ignore[arg-type]
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
            print(args.out)
        else:
            sys.stdout.write(text)
        return 0
    out = Path(args.out or f"thoughts-{args.thread}.html")
    out.write_text(render_html([("thought graph", graph)], title=f"Thought graph of thread {args.thread}",  # type: ignore[list-item]
                               subtitle=state.get("question", "")), encoding="utf-8")
    print(out)
    return 0


def _show_kg(args: argparse.Namespace, state: dict[str, Any]) -> int:
    """``show --kg``: the run's KG as a self-contained HTML page, or (``--format json``) as JSON lines."""
    from kgagents.cli.kgview import kgot_graphs, render_html
    from kgagents.tools.kg.base import snapshot_to_jsonl

    graphs = kgot_graphs(state, snapshot=args.snapshot)
    if not graphs:
        raise ValueError(f"thread {args.thread} has no knowledge graph yet")
    if args.format == "json":
        text = snapshot_to_jsonl(graphs[-1][1])
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
            print(args.out)
        else:
            sys.stdout.write(text)
        return 0
    out = Path(args.out or f"kg-{args.thread}.html")
    out.write_text(render_html(graphs, title=f"Knowledge graph of thread {args.thread}",
                               subtitle=state.get("question", "")), encoding="utf-8")
    print(out)
    return 0


@command("demo")
def cmd_demo(args: argparse.Namespace) -> int:
    from kgagents.nodes.context import Context

    if args.workflow == "ark":
        from kgagents.cli.ark import run_demo

        return run_demo(args)
    if args.workflow == "grounded":
        from kgagents.cli.grounded import run_demo as run_grounded_demo

        return run_grounded_demo(args)
    if args.workflow == "agent-g":
        from kgagents.cli.agent_g import run_demo as run_agent_g_demo

        return run_agent_g_demo(args)
    if args.workflow != "kgot":
        raise ValueError(f"no demo for workflow {args.workflow!r}")
    from kgagents.tools.kg.stores import backend_language

    suffix = {"python": ""}.get(backend_language(args.backend), f"_{backend_language(args.backend)}")
    script = resources.files("kgagents") / "data" / f"demo_kgot_figure9{suffix}.json"
    question = ("A C++ script holds the array [42, 23, 2, 88, 37, 15]. Sort the array and return the sum of the "
                "third and fifth integers of the sorted list.")
    print("Scripted demo: the KGoT paper's Figure 9 task, run through the real graph, knowledge graph, sandbox and "
          "SQLite checkpoints with a scripted chat model (no LLM is called).", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="kgagents-demo-") as tmp, resources.as_file(script) as path:
        values = {"model": f"scripted:{path}", "backend": args.backend, "num_next_steps_decision": 5}
        args.runs_dir = args.runs_dir or tmp
        ctx = Context.from_mapping({**values, "work_dir": str(Path(tmp) / "work")})
        _, state = _run("kgot", args, {"question": question}, None, values, context_override=ctx)
        print(state.get("final_answer", "(no answer)"))
    return 0


@command("tools")
def cmd_tools(args: argparse.Namespace) -> int:
    import kgagents.graphs.kgot  # noqa: F401  (registers the tools that live next to the workflows)
    from kgagents.tools.manager import tool_statuses

    for status in tool_statuses():
        print(f"{status.name:24} {'available' if status.available else 'unavailable':12} {status.reason}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgagents", description="Knowledge-graph reasoning agents.")
    parser.add_argument("--runs-dir", help="where checkpoints and the run registry live (KGAGENTS_RUNS_DIR)")
    sub = parser.add_subparsers(dest="command", required=True)

    ask = sub.add_parser("ask", help="answer a question")
    ask.add_argument("question")
    ask.add_argument("--attach", action="append", metavar="FILE", help="a file the question refers to")
    ask.add_argument("--graph", metavar="NAME_OR_PATH",
                     help="the static knowledge graph to explore (ark, ...): an imported graph's name or a path")
    ask.add_argument("--page", action="append", metavar="FILE",
                     help="agent-g: a web page (HTML or text file) for the text module; repeat for more")
    ask.add_argument("--query-time", help="agent-g: when the question is asked (CRAG: mm/dd/yyyy, hh:mm:ss PT)")
    ask.add_argument("--preset", help="a named context of the workflow (e.g. grounded: tot-agent-select)")
    ask.add_argument("--thread", help="thread id (default: a new one)")
    ask.add_argument("--workflow", default="kgot")
    ask.add_argument("--model", help="provider:model for every role (default: KGAGENTS_MODEL)")
    ask.add_argument("--base-url", help="an OpenAI-compatible server for the model")
    ask.add_argument("--solve-mode", choices=["query", "direct"])
    ask.add_argument("--backend", help="task-KG backend (default networkx)")
    ask.add_argument("--formatter", dest="answer_formatter", choices=["gaia", "default"])
    ask.add_argument("--max-iterations", type=int)
    ask.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="any context field, e.g. --set temperature=0.7")
    ask.add_argument("--quiet", action="store_true", help="no progress lines")
    ask.add_argument("--checkpointer", metavar="URL",
                     help="keep the checkpoints in PostgreSQL (postgresql://user:password@host/db; default: "
                          "KGAGENTS_CHECKPOINTER, else SQLite in the runs directory)")
    ask.add_argument("--kgot-thread", metavar="THREAD",
                     help="rag, kgot-graphrag: the finished KGoT run whose tool outputs are the corpus")
    ask.add_argument("--fusion", metavar="BACKEND:MODE,...",
                     help="run several KGoT variants and combine their answers, e.g. networkx:query,falkordb:direct")

    resume = sub.add_parser("resume", help="continue an interrupted run")
    resume.add_argument("thread")
    resume.add_argument("--quiet", action="store_true")
    resume.add_argument("--checkpointer", metavar="URL",
                        help="the PostgreSQL URL the run was started with, when its password is needed (the "
                             "run registry keeps the URL without it)")

    sub.add_parser("runs", help="list runs")

    show = sub.add_parser("show", help="show a run")
    show.add_argument("thread")
    show.add_argument("--json", action="store_true", help="the whole state as JSON")
    show.add_argument("--kg", action="store_true", help="write the knowledge graph as an HTML page (see --format)")
    show.add_argument("--format", choices=["html", "json"], default="html",
                      help="with --kg: html (a self-contained page) or json (the snapshot as JSON lines)")
    show.add_argument("--snapshot", type=int, metavar="N", help="with --kg: the KG after write N (or fusion variant N)")
    show.add_argument("--out", metavar="FILE", help="with --kg: where to write (html default: kg-THREAD.html)")

    demo = sub.add_parser("demo", help="an offline, scripted run")
    demo.add_argument("--workflow", default="kgot")
    demo.add_argument("--backend", default="networkx")
    demo.add_argument("--strategy", choices=["cot", "tot", "got"], help="grounded: the reasoning strategy (tot)")
    demo.add_argument("--interaction", choices=["agent", "explore"], help="grounded: the interaction method (agent)")
    demo.add_argument("--quiet", action="store_true")

    sub.add_parser("tools", help="list the tools and whether they can be used here")
    for module in COMMAND_MODULES:
        importlib.import_module(module).add_commands(sub, command)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _commands[args.command](args)
    except ConfigurationError as exc:
        print(f"kgagents: {exc}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as exc:
        print(f"kgagents: error: {exc}", file=sys.stderr)
        return 2
    except RunFailed as exc:
        print(f"kgagents: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kgagents: interrupted; continue with `kgagents resume THREAD`", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
