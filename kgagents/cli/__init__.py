"""The ``kgagents`` command line.

    kgagents ask "question" [--attach FILE ...] [--thread ID]   answer a question (KGoT by default)
    kgagents resume THREAD [--base-url URL] [--model M]        continue an interrupted run (its model elsewhere)
    kgagents runs                                               list threads with their status
    kgagents show THREAD                                        the final KG, votes, tool calls, writes, usage
    kgagents demo [--workflow W]                                an offline, scripted run of the paper's example
    kgagents workflows                                          the workflows, one line each
    kgagents tools                                              every tool with its status
    kgagents doctor                                             the models, keys, servers, sandbox and extras
    kgagents trust [DIR]                                        use a folder's own .env and .kgagents
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from kgagents.cli import replay
from kgagents.cli.common import (
    RunFailed,
    _print_answer,
    _run,
    _runs_dir,
    _warn_isolation,
    _workflow_in,
    add_context_flags,
    context_values_from_args,
    demo_intro,
    demo_outro,
    refuse_foreign_flags,
    start_checks,
)
from kgagents.cli.flags import workflow_flags
from kgagents.core.config import ConfigurationError, get_settings
from kgagents.core.endpoint_change import address_change, model_change_refusal, model_changes, run_models, same_model
from kgagents.core.nofollow import write_file
from kgagents.core.printable import printable, printable_json, printable_lines
from kgagents.graphs import registry

__all__ = ["COMMAND_MODULES", "RunFailed", "build_parser", "command", "context_values_from_args", "demo_intro",
           "demo_outro", "main", "start_checks"]

Command = Callable[[argparse.Namespace], int]
_commands: dict[str, Command] = {}

#: Modules that add sub-commands: each has ``add_commands(subparsers, command)`` which adds its parsers and
#: registers their handlers with the ``command(name)`` decorator.
COMMAND_MODULES: list[str] = ["kgagents.cli.eval", "kgagents.cli.graph", "kgagents.cli.clean",
                              "kgagents.cli.doctor", "kgagents.cli.agent_g", "kgagents.cli.trust"]


def command(name: str) -> Callable[[Command], Command]:
    def deco(fn: Command) -> Command:
        _commands[name] = fn
        return fn

    return deco
































@command("ask")
def cmd_ask(args: argparse.Namespace) -> int:
    from kgagents.cli.agent_g import pages_from_files
    from kgagents.core.runs import RunRegistry
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
    inputs = registry.get(workflow).input_keys()
    if getattr(args, "graph", None):
        if "graph" not in inputs:
            raise ValueError(f"the {workflow} workflow does not read a static knowledge graph (--graph is for "
                             f"the workflows whose input has a graph: {_workflows_reading('graph')})")
        task["graph"] = args.graph
    if getattr(args, "page", None) or getattr(args, "query_time", None):
        if "pages" not in inputs:
            raise ValueError(f"--page and --query-time are for the workflows that read web pages: "
                             f"{_workflows_reading('pages')}")

        task["pages"] = pages_from_files(args.page or [])
        if args.query_time:
            task["query_time"] = args.query_time
    if getattr(args, "kgot_thread", None):
        if "kgot_thread" not in inputs:
            raise ValueError(f"--kgot-thread is for {_workflows_reading('kgot_thread')} (their corpus is that KGoT "
                             "run's tool outputs)")

        task["kgot_thread"] = args.kgot_thread
        values.setdefault("kgot_checkpointer", RunRegistry(_runs_dir(args)).checkpointer_for(args.kgot_thread,
                                                                                               checkpointer))
    if variants:
        workflow, task["variants"] = "fusion", variants
    thread_id, state = _run(workflow, args, task, args.thread, values, checkpointer=checkpointer)
    return _print_answer(thread_id, state)


def _workflows_reading(key: str) -> str:
    """The registered workflows whose input has ``key``, for a message."""
    return ", ".join(spec.name for spec in registry.workflows() if key in spec.input_keys())


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
        hint = (" (an evaluation item? `kgagents show THREAD --eval RESULTS_DIR`)" if args.command == "show"
                else "")
        raise ValueError(f"no run with thread id {args.thread!r} in {_runs_dir(args)}{hint}")
    return record


@command("resume")
def cmd_resume(args: argparse.Namespace) -> int:
    from kgagents.core.runs import RunRegistry
    record = _known_run(args)
    values = resumed_context(record, _runs_dir(args))
    values, change = resumed_settings(record, values, base_url=args.base_url, model=args.model)
    if change:
        RunRegistry(_runs_dir(args)).record_change(record.thread_id, change, values if record.own else None)
        said = "; ".join(f"{name} {_shown(old)} -> {_shown(new)}" for name, (old, new) in change.items())
        kept = ("recorded in the run" if record.own else
                "noted in the run; the registry is not yours, so a later resume needs the flag again")
        print(printable(f"kgagents: resume: {said} ({kept}: kgagents show {record.thread_id})"), file=sys.stderr)
    thread_id, state = _run(record.workflow, args, None, record.thread_id, values, checkpointer=_checkpointer(args))
    return _print_answer(thread_id, state)


def _shown(value: Any) -> str:
    return "(the configuration's)" if value is None else str(value)


def resumed_settings(record: Any, values: dict[str, Any], *, base_url: str | None,
                     model: str | None) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """The context a resume runs with, given ``resume --base-url/--model`` over the run's ``values``, and what
    that changes (``name -> [before, after]``, empty when nothing): the same model at another address is the same
    run; a model other than the one the run started with (given, or named by the configuration now) is refused
    with what to do instead (:mod:`kgagents.core.endpoint_change`). The address given here is the user's own
    choice on the command line; the key that goes there is still only the one bound to it
    (:mod:`kgagents.core.keys`). A run whose models came from the configuration is compared with the models it
    started with too: a configuration that names another model now is refused the same way."""
    after = dict(values)
    if base_url is not None:
        after["base_url"] = base_url
    if model is not None:
        after["model"] = model
    roles = registry.get(record.workflow).context.ROLES
    configured = {role: _configured_model(role) for role in roles}
    # the models a row of the user's own says the run started with; a row from someone else is data: its run's
    # models are those its plain settings and the user's configuration give (as for the rest of its settings)
    started = {role: record.models.get(role) for role in roles} if record.own and record.models else \
        run_models(values, roles, configured)
    changed = model_changes(started, run_models(after, roles, configured))
    if changed:
        raise ValueError(model_change_refusal(record.thread_id, record.workflow, changed, given=model is not None))
    change = {name: [old, new] for name, (old, new) in address_change(values, after).items()}
    if model is not None and values.get("model") != model:
        old_model = values.get("model") or next((m for m in started.values() if same_model(m, model)), None)
        change["model"] = [old_model, model]
    return after, change


def _configured_model(role: str) -> str | None:
    """The model the user's configuration names for ``role`` now (a role it has no variable of its own for: its
    default model)."""
    settings = get_settings()
    try:
        return settings.model_for(role)
    except ValueError:
        return settings.model


def resumed_context(record: Any, runs_dir: Path) -> dict[str, Any]:
    """The context a resumed run gets from its registry row: the row's own when this user's kgagents wrote it;
    else only the plain settings a recording may carry (:func:`kgagents.cli.recorded.plain_context`), the paths,
    URLs, servers, model files and limits coming from the user's configuration (said on standard error). Either
    way, what the registry did not keep because it held credentials comes from the user's configuration too."""
    from kgagents.cli.recorded import plain_context

    values = dict(record.context)
    if not record.own:
        values, left = plain_context(registry.get(record.workflow).context, values)
        if left:
            print(printable(f"kgagents: resume: {runs_dir} holds a run registry your kgagents did not write (another "
                            "user's or machine's, or one from before registries were marked): not taken from it: "
                            f"{', '.join(sorted(left))}; the run resumes with your configuration for them"),
                  file=sys.stderr)
    if record.withheld:
        print(printable(f"kgagents: resume: the run registry keeps no credentials: "
                        f"{', '.join(record.withheld)} come from your configuration"), file=sys.stderr)
    return values


@command("runs")
def cmd_runs(args: argparse.Namespace) -> int:
    from kgagents.core.runs import RunRegistry
    records = RunRegistry(_runs_dir(args)).list()
    if not records:
        print(f"no runs in {_runs_dir(args)}")
        return 0
    print("\n".join(format_runs(records)))
    return 0


def format_runs(records: list[Any]) -> list[str]:
    """``kgagents runs``: one line per run, its columns as wide as their longest value (any workflow name); the
    registry's text on one line with what is not printable escaped (a registry can be someone else's: an escape
    sequence in a question would reach the terminal)."""
    rows = [(printable(r.thread_id), printable(r.workflow), printable(r.status),
             time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created)),
             printable(" ".join(r.question.split())[:60]) or "(no question recorded)",
             printable(f" -> {r.answer}") if r.answer else "") for r in records]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return [f"{thread:{widths[0]}}  {workflow:{widths[1]}}  {status:{widths[2]}}  {when}  {question}{answer}"
            for thread, workflow, status, when, question, answer in rows]


@command("show")
def cmd_show(args: argparse.Namespace) -> int:
    from kgagents.cli.report import format_run

    if isinstance(args.kg, str):  # --kg FILE
        args.out = args.out or args.kg
    if args.eval:
        from kgagents.cli.show import eval_item_state

        workflow, args.thread, state, nxt = eval_item_state(args.eval, args.thread, args.checkpointer)
    else:
        from kgagents.graphs.workflows import thread_state

        record = _known_run(args)
        workflow, changes = record.workflow, record.changes
        state, nxt = asyncio.run(thread_state(workflow, _runs_dir(args), args.thread, _checkpointer(args)))
    if args.kg:
        return _show_view(args, workflow, state)
    # the state is a checkpoint's, perhaps someone else's: nothing in it reaches the terminal as a control sequence
    if args.json:
        print(printable_json(json.dumps(state, indent=2, ensure_ascii=False, default=str)))
    else:
        print(printable_lines(format_run(workflow, args.thread, state, nxt)))
        if not args.eval and changes:
            print(printable_lines("\n".join(format_changes(changes))))
    return 0


def format_changes(changes: list[dict[str, Any]]) -> list[str]:
    """``show``: what resumes changed of the run's settings (:attr:`kgagents.core.runs.RunRecord.changes`), one
    line each; a registry can be someone else's, so every value is shown as text."""
    lines = ["Changed on resume:"]
    for change in changes:
        at = change.get("at")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if isinstance(at, (int, float)) else "?"
        what = "; ".join(f"{name} {_shown(pair[0])} -> {_shown(pair[1])}" for name, pair in change.items()
                         if name != "at" and isinstance(pair, list) and len(pair) == 2)
        lines.append(f"  {when}  {what}")
    return lines


def _show_view(args: argparse.Namespace, workflow: str, state: dict[str, Any]) -> int:
    """``show --kg``: the run's picture as a self-contained HTML page, or (``--format json``) its graph as JSON
    lines — KGoT's task KG (after each write), grounded's thought graph, ARK-V1's explored subgraph, Agent-G's
    retrieval."""
    from kgagents.cli import kgview  # Bokeh: loaded when a view is drawn
    from kgagents.tools.kg.base import snapshot_to_jsonl

    title = f"thread {args.thread}"
    question = str(state.get("question", ""))
    if workflow == "grounded":
        from kgagents.nodes.grounded import thought_graph

        graph, default = thought_graph(state), f"thoughts-{args.thread}.html"  # type: ignore[arg-type]
        if not graph["nodes"]:
            raise ValueError(f"thread {args.thread} has no thought graph yet")
        page = partial(kgview.render_thought_graph, graph, title=f"Thought graph of {title}", subtitle=question)
    elif workflow == "ark":
        graph, default = kgview.ark_graph(state), f"explored-{args.thread}.html"
        page = partial(kgview.render_ark, state, title=f"What ARK-V1 explored in {title}")
    elif workflow.startswith("agent-g") and state.get("iterations"):
        graph, default = kgview.agent_g_graph(state), f"retrieval-{args.thread}.html"
        page = partial(kgview.render_agent_g, state, title=f"What Agent-G retrieved in {title}")
    else:
        graphs = kgview.kgot_graphs(state, snapshot=args.snapshot)
        if not graphs:
            raise ValueError(f"thread {args.thread} has no knowledge graph yet")
        graph, default = graphs[-1][1], f"kg-{args.thread}.html"
        page = partial(kgview.render_html, graphs, title=f"Knowledge graph of {title}", subtitle=question)
    if args.format == "json":
        text = snapshot_to_jsonl(graph)
        if args.out:
            write_file(args.out, text)
            print(args.out)
        else:
            sys.stdout.write(text)
        return 0
    out = write_file(Path(args.out or default), page())  # in a folder that may be someone else's: no link followed
    print(out)
    return 0


@command("demo")
def cmd_demo(args: argparse.Namespace) -> int:
    """An offline, scripted run of the workflow's example (its spec's demo)."""
    return int(registry.demo_of(args.workflow)(args))


@command("workflows")
def cmd_workflows(args: argparse.Namespace) -> int:
    """Every registered workflow with its one-line description, and whether it has a demo."""
    for spec in registry.workflows():
        print(f"{spec.name:24} {spec.description}{'' if spec.demo is None else '  (demo)'}")
    return 0






@command("tools")
def cmd_tools(args: argparse.Namespace) -> int:
    # the KGoT graph registers the tools
    # that live next to the workflows
    import kgagents.graphs.kgot  # noqa: F401
    from kgagents.tools.manager import tool_statuses

    for status in tool_statuses():
        print(f"{status.name:24} {'available' if status.available else 'unavailable':12} {status.reason}")
    return 0


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``kgagents`` parser; ``ask`` and ``eval`` take the flags of the workflow ``argv`` names (kgot's for
    ``ask`` without one)."""
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
    ask.add_argument("--workflow", default="kgot", choices=registry.names(),
                     help="the workflow (default kgot); its context's settings are this command's flags "
                          "below (`kgagents ask --workflow W --help` lists W's)")
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
    resume.add_argument("--base-url", metavar="URL",
                        help="where the run's model is served now (an OpenAI-compatible server), when it moved or "
                             "the run was given a wrong one: recorded in the run; a key goes there only when its "
                             "variable names that server (KGAGENTS_BASE_URL for KGAGENTS_API_KEY)")
    resume.add_argument("--model", metavar="PROVIDER:MODEL",
                        help="the run's own model, spelt as it is served now (openai:NAME and NAME are the same "
                             "model); another model is refused: it would change what the run means")
    resume.add_argument("--checkpointer", metavar="URL",
                        help="the PostgreSQL URL the run was started with, when its password is needed (the "
                             "run registry keeps the URL without it)")

    sub.add_parser("runs", help="list runs")

    show = sub.add_parser("show", help="show a run")
    show.add_argument("thread")
    show.add_argument("--json", action="store_true", help="the whole state as JSON")
    show.add_argument("--kg", nargs="?", const=True, metavar="FILE",
                      help="write the knowledge graph (grounded: the thought graph) as an HTML page to FILE "
                           "(default kg-THREAD.html; see --format)")
    show.add_argument("--eval", metavar="RESULTS_DIR",
                      help="THREAD is an item of the evaluation in RESULTS_DIR (its thread or item id)")
    show.add_argument("--checkpointer", metavar="URL",
                      help="the PostgreSQL URL the run or evaluation kept its checkpoints in, when needed")
    show.add_argument("--format", choices=["html", "json"], default="html",
                      help="with --kg: html (a self-contained page) or json (the snapshot as JSON lines)")
    show.add_argument("--snapshot", type=int, metavar="N", help="with --kg: the KG after write N (or fusion variant N)")
    show.add_argument("--out", metavar="FILE", help="with --kg: where to write (html default: kg-THREAD.html)")

    sub.add_parser("workflows", help="list the workflows with a line on each")

    demo = sub.add_parser("demo", help="an offline, scripted run")
    demo.add_argument("--workflow", default="kgot", help="a workflow with a demo (`kgagents workflows` marks them)")
    demo.add_argument("--backend", default="networkx")
    demo.add_argument("--strategy", choices=["cot", "tot", "got"], help="grounded: the reasoning strategy (tot)")
    demo.add_argument("--interaction", choices=["agent", "explore"], help="grounded: the interaction method (agent)")
    demo.add_argument("--quiet", action="store_true")

    sub.add_parser("tools", help="list the tools and whether they can be used here")
    for module in COMMAND_MODULES:
        importlib.import_module(module).add_commands(sub, command)
    name, workflow = _workflow_in(list(sys.argv[1:] if argv is None else argv))
    if name is not None and workflow in registry.SPECS:
        add_context_flags(sub.choices[name], workflow_flags(workflow))
    for name in replay.RECORDED_COMMANDS:
        replay.add_arguments(sub.choices[name], name)
    replay.add_parser(sub)
    return parser


def _name_checkpointers(args: argparse.Namespace) -> None:
    """The PostgreSQL checkpointers the user typed on this command line (``--checkpointer``, ``--set
    kgot_checkpointer=``) may be opened (:func:`kgagents.core.checkpointer.name_checkpointer`); one a run registry
    or a recorded context names may not, unless it is one of these or ``KGAGENTS_CHECKPOINTER``."""
    from kgagents.core.checkpointer import name_checkpointer
    name_checkpointer(getattr(args, "checkpointer", None))
    name_checkpointer(context_values_from_args(args).get("kgot_checkpointer"))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args, extras = parser.parse_known_args(argv)  # --help ends here, before any workflow or client is imported
    from kgagents.core.replay import ReplayFailed

    try:
        if extras:
            if args.command == "resume":
                raise ValueError(f"unrecognized arguments: {' '.join(extras)} (a resumed run keeps the settings it "
                                 "started with; resume takes --base-url URL and --model, for its own model, to "
                                 "reach that model at another address)")
            refuse_foreign_flags(_workflow_in(argv)[1] or "kgot", extras)
        _name_checkpointers(args)
        if args.command == "replay":
            return replay.cmd_replay(args, _runs_dir(args), lambda again: build_parser(again).parse_args(again),
                                     _commands)
        if args.command in replay.RECORDED_COMMANDS:
            return replay.run_recorded(args, argv, _runs_dir(args), _commands[args.command])
        return _commands[args.command](args)
    except ConfigurationError as exc:
        print(f"kgagents: {exc}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as exc:
        print(f"kgagents: error: {exc}", file=sys.stderr)
        return 2
    except ReplayFailed as exc:
        print(f"kgagents: {exc}", file=sys.stderr)
        return 1
    except RunFailed as exc:
        print(f"kgagents: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        thread = getattr(exc, "thread", None)
        print(f"kgagents: interrupted; continue with `kgagents resume {thread}`" if thread
              else "kgagents: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
