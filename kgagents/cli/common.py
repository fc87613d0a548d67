"""What the command line's commands share: the run of a workflow thread (progress, interruption, failure), the
context values from a command's flags (and refusing another workflow's), the checks before a run, the demos'
first and last lines. The CLI's package and its sub-command modules import it; it imports none of them."""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from kgagents.cli.flags import ContextFlags, converter, parse_value
from kgagents.core.config import ConfigurationError, configuration_line, get_settings
from kgagents.core.errors import KGAgentsError
from kgagents.graphs import registry


def _runs_dir(args: argparse.Namespace) -> Path:
    return Path(args.runs_dir) if getattr(args, "runs_dir", None) else get_settings().runs_dir


def parse_settings(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``--set key=value`` items as context values (a value that is JSON as its JSON value, else as text)."""
    values: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set takes key=value, got {item!r}")
        values[key.strip()] = parse_value(value)
    return values


def context_values_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The context fields the user set on the command line (JSON values only, so they can be recorded):
    ``--set key=value``, the flags derived from the workflow's context (:func:`add_context_flags`), and the
    few a command declares itself (``--model``, ``--base-url``, ``--max-iterations``)."""
    values = parse_settings(getattr(args, "set", None) or [])
    for name, value in vars(args).items():
        if name.startswith(CONTEXT_DEST) and value is not None:
            values[name[len(CONTEXT_DEST):]] = value
    for field in ("model", "max_iterations", "base_url"):
        value = getattr(args, field, None)
        if value is not None:
            values[field] = value
    return values


#: The ``argparse`` destination prefix of the flags derived from a context's fields.
CONTEXT_DEST = "context__"


def add_context_flags(parser: argparse.ArgumentParser, context: ContextFlags) -> None:
    """A flag per field of the workflow's context (``--c-max``, ``--backend``, ...; :mod:`kgagents.cli.flags`),
    typed by the field and described by its metadata, for the fields the command has no option of its own for."""
    group = parser.add_argument_group(f"settings of the workflow's context ({context.context}; also --set "
                                      "KEY=VALUE)")
    for spec in context.flags:
        flag = "--" + spec.name.replace("_", "-")
        if flag in parser._option_string_actions:
            continue
        is_bool = spec.kind == "bool"
        names = [flag, "--formatter"] if spec.name == "answer_formatter" else [flag]
        group.add_argument(*names, dest=CONTEXT_DEST + spec.name, type=converter(spec), choices=spec.choices,
                           nargs="?" if is_bool else None, const=True if is_bool else None,
                           metavar=None if spec.choices else spec.name.upper(), help=spec.help)


def _workflow_in(argv: list[str]) -> tuple[str | None, str | None]:
    """``(command, workflow)`` as far as ``argv`` tells them before parsing: ``ask``'s ``--workflow W``
    (``--fusion``: fusion; none: kgot), ``eval``'s positional workflow (the first bare word that names a
    workflow, wherever it stands among the options; else the first bare word, which the parser then refuses)."""
    command = next((a for a in argv if a in ("ask", "eval")), None)
    if command is None:
        return None, None
    rest = argv[argv.index(command) + 1:]
    if command == "eval":
        bare = [a for a in rest if not a.startswith("-")]
        return command, next((a for a in bare if a in registry.SPECS), bare[0] if bare else None)
    for i, arg in enumerate(rest):
        if arg == "--workflow" and i + 1 < len(rest):
            return command, rest[i + 1]
        if arg.startswith("--workflow="):
            return command, arg.partition("=")[2]
    return command, "fusion" if any(a == "--fusion" or a.startswith("--fusion=") for a in rest) else "kgot"


def refuse_foreign_flags(workflow: str, extras: list[str]) -> None:
    """Refuse flags the command line has left over: a setting of another workflow's context names the
    workflow's own settings; anything else is an unknown argument."""
    flags = [a.partition("=")[0] for a in extras if a.startswith("--")]
    if not flags:
        raise ValueError(f"unrecognized arguments: {' '.join(extras)}")

    own = sorted(f.name for f in fields(registry.get(workflow).context))
    for flag in flags:
        name = flag[2:].replace("-", "_")
        owners = [spec.name for spec in registry.workflows()
                  if name in {f.name for f in fields(spec.context)}]
        if owners:
            raise ValueError(f"{flag} does not apply to the {workflow} workflow (it is a setting of "
                             f"{', '.join(owners)}); the {workflow} workflow's settings: {', '.join(own)}")
    raise ValueError(f"unrecognized arguments: {' '.join(extras)}")


def start_checks(workflow: str, values: dict[str, Any], *, variants: list[str] | None = None,
                 graph: bool = False, dataset: str | None = None, scorer: str | None = None,
                 grader: Any = None) -> None:
    """Before a run starts: fail when no model is configured or a backend's extra is missing (the messages say
    what to set or install); print which configuration and data home are in use, the models of every role with
    their URLs, and what this run cannot do."""
    from kgagents.cli.preflight import check_backends, models_line, role_models, run_limits

    print(f"kgagents: {configuration_line()}", file=sys.stderr)
    models = role_models(values, workflow)
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
    if state.get("budget_stop"):
        print(f"kgagents: the run ended at its budget ({state['budget_stop']})", file=sys.stderr)
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


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: its checkpoints are kept, ``thread`` says which run to resume."""

    def __init__(self, thread: str) -> None:
        super().__init__(thread)
        self.thread = thread


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
    except RunInterrupted:
        raise
    except KeyboardInterrupt as exc:
        raise RunInterrupted(thread) from exc
    except (ConfigurationError, ValueError):
        raise
    except Exception as exc:  # any failure inside the graph: the checkpoints survive
        raise RunFailed(stopped_text(exc, thread)) from exc


def stopped_text(exc: BaseException, thread: str) -> str:
    """What a user is told about a run that stopped with ``exc``: the failure and how to continue the run. A step
    that ran past its time limit (LangGraph's ``NodeTimeoutError``, graphs/policies.py) is named with its limit
    and the likely cause: a graph server that does not answer."""
    # loaded by the failure that needs it (every command starts without LangGraph)
    from langgraph.errors import NodeTimeoutError

    if isinstance(exc, NodeTimeoutError):
        what = (f"the step {exc.node} ran past its time limit of {exc.timeout:g} s (NodeTimeoutError): its "
                "knowledge graph did not answer in time; check the graph's server (KGAGENTS_KG_QUERY_TIMEOUT_S "
                "sets how long one of its queries may take)")
        how = f"continue it with `kgagents resume {thread}` once the graph answers again (the step runs again)."
    else:
        what = f"{type(exc).__name__}: {exc}"
        how = (f"continue it with `kgagents resume {thread}` (with `--base-url URL` when its model is served at "
               "another address).")
    return f"the run stopped: {what}\nIts checkpoints are kept; {how}"


def demo_model(script: Any) -> Any:
    """A demo's scripted model, new for each run: a script's steps are used up as the run goes, so a second demo in
    the same process must not meet the first one's (a model string would find the first run's model in the cache
    of built models). The run registry keeps the ``scripted:`` string, which a resume builds again."""
    from kgagents.core.scripted import ScriptedChatModel  # only the demos build one

    return ScriptedChatModel.from_file(script, lazy=True)


def demo_intro(what: str, question: str) -> None:
    """A demo's first lines: what runs, which configuration and data home are in use, and the question it asks."""
    print(what, file=sys.stderr)
    print(f"kgagents: {configuration_line()}", file=sys.stderr)
    print(f"question: {question}", file=sys.stderr, flush=True)


def demo_outro(thread_id: str, *, picture: bool = False) -> None:
    """A demo's last lines: where its run is kept and how to look at it (``runs``, ``show``, ``--kg``)."""
    look = f", its picture with `kgagents show {thread_id} --kg`" if picture else ""
    print(f"the run is kept as thread {thread_id} (`kgagents runs` lists it): its trace with "
          f"`kgagents show {thread_id}`{look}", file=sys.stderr)
