"""``--record``, ``kgagents replay`` and ``--cache``: runs whose model calls are kept and played back.

- ``kgagents ask ... --record`` keeps every model exchange of the run in ``RUNS_DIR/recordings/THREAD.sqlite``
  (beside the run's checkpoints), with the plain settings of the command that made it; ``kgagents eval ... --out
  DIR --record`` keeps them in ``DIR/recording.sqlite``.
- ``kgagents replay THREAD`` / ``kgagents replay DIR`` / ``kgagents replay BUNDLE.zip`` runs the recorded command
  again with every model call answered from the recording — no network, no key, $0 — into a new thread
  (``THREAD-replay``) or directory (``DIR/replay``), and compares: the answer, the task KG and the exit of a run;
  each item's answer and score of an evaluation. A request the recording lacks (the code, the data or the
  settings changed) stops the replay with the node and the request.
- ``--cache FILE`` (or ``KGAGENTS_CACHE``) keeps replies across runs and answers a request seen before from
  them; sampled calls (temperature above 0) are never served from it unless ``--cache-sampled``.

A recording is data, wherever it comes from: a replay rebuilds the command from the recording's plain settings
(:mod:`kgagents.cli.recorded`: the workflow, dataset and split names, presets, numbers, switches and choices) and
takes every path, URL, model server and graph from the flags of ``kgagents replay`` on this machine. A bundle is
unpacked with the checks of :mod:`kgagents.core.bundles` (only a bundle's own file names, size and zip-bomb
limits), and a recording's schema is checked before it is read (:func:`kgagents.core.replay.check_recording`)."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from contextlib import ExitStack, redirect_stderr, redirect_stdout
from importlib import metadata
from pathlib import Path
from typing import Any

from kgagents.cli.common import context_values_from_args
from kgagents.cli.recorded import ASK_OPTIONS, EVAL_OPTIONS, USER_FLAGS, Settings, settings_from
from kgagents.core.bundles import BUNDLE_INFO, RECORDING_FILE, bundled_name, unpack
from kgagents.core.printable import printable
from kgagents.core.redact import scrub, scrub_text
from kgagents.graphs import registry

RECORDED_COMMANDS = ("ask", "eval")
COMPARED_KEYS = ("final_answer", "exit_reason", "kg")
"""What must be identical between a run and its replay (the task KG: KGoT's writes)."""
COMPARED_RESULT_KEYS = ("answer", "correct", "score", "scores", "metrics", "error")
"""What must be identical between an evaluation item and its replay."""
PACKAGES = ("kgagents", "langgraph", "langchain-core", "langchain-openai", "openai")
#: The options a recorded command had that a replay cannot do without: the replaying user gives them again.
NEEDED_INPUTS = ("attach", "graph", "page", "kgot_thread", "data")
#: What a recording keeps of the user's own options: their names and values without credentials, never used.
USER_INPUTS = (*NEEDED_INPUTS, "checkpointer")
_THREAD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The recording flags of ``ask`` / ``eval``."""
    where = "RUNS_DIR/recordings/THREAD.sqlite" if command == "ask" else f"--out DIR/{RECORDING_FILE}"
    parser.add_argument("--record", action="store_true",
                        help=f"keep every model exchange ({where}) for `kgagents replay`")
    parser.add_argument("--cache", metavar="FILE", default=os.environ.get("KGAGENTS_CACHE"),
                        help="a persistent SQLite cache of model replies across runs (default KGAGENTS_CACHE; off)")
    parser.add_argument("--cache-sampled", action="store_true",
                        help="with --cache: also serve sampled calls (temperature > 0) from the cache")
    if command == "eval":
        parser.add_argument("--bundle", metavar="FILE.zip",
                            help="afterwards, pack the results, the recording (with --record), the settings, the "
                                 "package versions and the data fingerprint into one archive for `kgagents report` "
                                 "/ `kgagents replay` on another machine")


def add_parser(sub: Any) -> None:
    """``kgagents replay``: the target, and everything a replay takes from its user rather than from the recording
    (paths, URLs, models, graphs; see :mod:`kgagents.cli.recorded`)."""
    rep = sub.add_parser("replay", help="run a recorded run or evaluation again from its recording, offline",
                         description=__doc__.split("\n\n")[0])
    rep.add_argument("target", metavar="THREAD|DIR|BUNDLE.zip",
                     help="a recorded thread id, a recorded evaluation's folder, or a bundle (eval --bundle)")
    rep.add_argument("--into", metavar="THREAD|DIR", help="where the replay goes (default THREAD-replay / DIR/replay; "
                                                          "a bundle: the folder it is unpacked into)")
    mine = rep.add_argument_group("this machine's inputs (a recording names no path, URL, model or graph)")
    mine.add_argument("--data", metavar="PATH", help="an evaluation's data files")
    mine.add_argument("--graph", metavar="NAME_OR_PATH", help="a run's static knowledge graph")
    mine.add_argument("--attach", action="append", metavar="FILE", help="a run's attachment (repeat for more)")
    mine.add_argument("--page", action="append", metavar="FILE", help="agent-g: a run's web page (repeat for more)")
    mine.add_argument("--kgot-thread", metavar="THREAD", help="rag, kgot-graphrag: the KGoT run of the corpus")
    mine.add_argument("--model", help="provider:model for every role, when the recording's is not a plain name "
                                      "(e.g. a scripted:FILE model); it must be the recorded one for the requests "
                                      "to match")
    mine.add_argument("--base-url", help="the OpenAI-compatible server the recording was made with (its URL is part "
                                         "of every request)")
    mine.add_argument("--grader-model", help="an evaluation's LLM grader, when the recording's is not a plain name")
    mine.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="a context field of the workflow (paths, URLs, ...), over the recording's")
    mine.add_argument("--checkpointer", metavar="URL", help="keep the replay's checkpoints in PostgreSQL")
    mine.add_argument("--concurrency", type=int, help="an evaluation's items at a time (default 4)")


def recording_path(args: argparse.Namespace, runs_dir: Path) -> Path:
    """Where ``--record`` keeps the exchanges of ``args`` (ask: the thread's; eval: the results folder's)."""
    if args.command == "ask":
        return runs_dir / "recordings" / f"{args.thread}.sqlite"
    if not getattr(args, "out", None):
        raise ValueError("eval --record needs --out DIR: the recording is kept in that folder")
    return Path(args.out) / RECORDING_FILE


def _write_meta(path: Path, values: dict[str, Any]) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("DELETE FROM meta")
        db.executemany("INSERT INTO meta VALUES (?, ?)",
                       [(k, json.dumps(v, ensure_ascii=False)) for k, v in values.items()])


def read_meta(path: Path) -> dict[str, Any]:
    """What a recording says about itself (its schema checked first: :func:`check_recording`): the command's
    settings, when, with which package versions."""
    from kgagents.core.replay import check_recording, open_read_only
    check_recording(path)
    db = open_read_only(path)
    try:
        rows = db.execute("SELECT key, value FROM meta").fetchall()
    except sqlite3.Error as exc:
        raise ValueError(f"{path} is not a kgagents recording ({exc})") from exc
    finally:
        db.close()
    try:
        return {str(k): json.loads(v) for k, v in rows}
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path} is not a kgagents recording (its meta table is not JSON: {exc})") from exc


def versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _contexts() -> dict[str, type]:
    """Every workflow's context class, by the workflow's name."""
    return {spec.name: spec.context for spec in registry.workflows()}


def recorded_settings(args: argparse.Namespace) -> Settings:
    """What a recording of the command ``args`` keeps of it (:mod:`kgagents.cli.recorded`): its plain settings, and
    the names of the rest with their values without credentials."""
    names = ASK_OPTIONS if args.command == "ask" else EVAL_OPTIONS
    options = {name: getattr(args, name, None) for name in names}
    users = {name: getattr(args, name, None) for name in USER_INPUTS}
    return settings_from(args.command, getattr(args, "workflow", None), options, context_values_from_args(args),
                         _contexts(), users=users)


def run_recorded(args: argparse.Namespace, argv: list[str], runs_dir: Path,
                 command: Callable[[argparse.Namespace], int]) -> int:
    """Run ``command`` with ``--record`` / ``--cache`` in effect."""
    from kgagents.core.replay import Recording, using
    from kgagents.core.runs import new_thread_id
    with ExitStack() as stack:
        if getattr(args, "record", False):
            if args.command == "ask" and not getattr(args, "thread", None):

                args.thread = new_thread_id()
            path = recording_path(args, runs_dir)
            settings = recorded_settings(args)
            recording = Recording(path, "record")
            stack.callback(recording.close)
            _write_meta(path, {"command": args.command, "settings": settings.as_json(),
                               "thread": getattr(args, "thread", None),
                               "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": versions()})
            stack.enter_context(using(recording))
            code = command(args)
            print(f"recorded {len(recording)} model exchange(s) in {path} (kgagents replay "
                  f"{args.thread if args.command == 'ask' else args.out})", file=sys.stderr)
            recording.close()
            _bundle_if_asked(args)
            return code
        if getattr(args, "cache", None):
            cache = Recording(Path(args.cache), "cache", cache_sampled=args.cache_sampled)
            stack.callback(cache.close)
            stack.enter_context(using(cache))
            code = command(args)
            print(f"cache {args.cache}: {cache.hits} reply(ies) served, {cache.misses} new", file=sys.stderr)
            _bundle_if_asked(args)
            return code
        code = command(args)
        _bundle_if_asked(args)
        return code


def _free(name: str, exists: Callable[[str], bool]) -> str:
    if not exists(name):
        return name
    n = 2
    while exists(f"{name}-{n}"):
        n += 1
    return f"{name}-{n}"


def _parse_quietly(parse: Callable[[list[str]], argparse.Namespace], argv: list[str]) -> argparse.Namespace:
    """``parse(argv)`` with argparse's usage and help kept off the terminal; its refusal a ``ValueError``."""
    out = io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(out):
            return parse(argv)
    except SystemExit as exc:
        lines = [line for line in out.getvalue().splitlines() if line.strip()]
        raise ValueError(f"the recording's command cannot be read ({lines[-1] if lines else exc})") from exc


def settings_of(meta: dict[str, Any], parse: Callable[[list[str]], argparse.Namespace]) -> Settings:
    """The checked settings of a recording's ``meta``: its ``settings`` (this version's recordings), or the
    ``argv`` of an older recording, parsed (never run) and reduced to the same plain settings."""
    command = meta.get("command")
    recorded = meta.get("settings")
    if isinstance(recorded, dict):
        options, context = recorded.get("options"), recorded.get("context")
        settings = settings_from(str(command), recorded.get("workflow"), options if isinstance(options, dict) else {},
                                 context if isinstance(context, dict) else {}, _contexts())
        left = recorded.get("left_out")
        for name, what in (left.items() if isinstance(left, dict) else ()):
            if isinstance(what, dict) and str(name) not in settings.left_out:
                settings.left_out[str(name)[:80]] = {"recorded": str(what.get("recorded"))[:200],
                                                     "why": str(what.get("why"))[:200]}
        return settings
    argv = meta.get("argv")
    if not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise ValueError("the recording says nothing about the command that made it")
    args = _parse_quietly(parse, argv)
    if args.command != command:
        raise ValueError(f"the recording's command is {args.command!r}, not {command!r}")
    return recorded_settings(args)


def _replayed_args(settings: Settings, args: argparse.Namespace, into: str,
                   parse: Callable[[list[str]], argparse.Namespace]) -> argparse.Namespace:
    """The command a replay runs: the recording's checked settings, and everything else from the replaying user's
    flags (``args``)."""
    if settings.command == "ask":
        replayed = _parse_quietly(parse, ["ask", f"--workflow={settings.workflow}", "--",
                                          str(settings.options.get("question", ""))])
        replayed.thread = into
        for name in ("attach", "graph", "page", "kgot_thread"):
            setattr(replayed, name, getattr(args, name))
    else:
        if "dataset" not in settings.options:
            raise ValueError("the recording names no dataset (or none of kgagents' names)")
        replayed = _parse_quietly(parse, ["eval", settings.workflow, f"--dataset={settings.options['dataset']}"])
        replayed.out, replayed.data = into, args.data
        replayed.concurrency = args.concurrency or replayed.concurrency
    for name, value in settings.options.items():
        setattr(replayed, name, value)
    sets = [f"{name}={json.dumps(value)}" for name, value in settings.context.items()]
    sets += list(args.set or [])
    sets += [f"{name}={json.dumps(value)}" for name in ("model", "base_url")
             if (value := getattr(args, name)) is not None]
    replayed.set = sets
    replayed.checkpointer = args.checkpointer
    if args.grader_model is not None:
        replayed.grader_model = args.grader_model
    replayed.record, replayed.cache, replayed.cache_sampled = False, None, False
    return replayed


def cmd_replay(args: argparse.Namespace, runs_dir: Path, parse: Callable[[list[str]], argparse.Namespace],
               commands: dict[str, Callable[[argparse.Namespace], int]]) -> int:
    """``kgagents replay THREAD|DIR|BUNDLE``: see the module docstring. What runs is rebuilt from the recording's
    plain settings and this user's flags (:mod:`kgagents.cli.recorded`); the recording chooses no path, URL,
    model server or graph."""
    from kgagents.core.replay import Recording, check_replay, using
    from kgagents.core.runs import RunRegistry
    target = Path(args.target)
    if target.is_file() and zipfile.is_zipfile(target):
        target = unpack_bundle(target, Path(args.into) if args.into else None)
        args.into = None
        print(f"bundle unpacked into {target}", file=sys.stderr)
    if target.is_dir():
        path, expected = target / RECORDING_FILE, "eval"
    elif _THREAD.fullmatch(args.target) and ".." not in args.target:
        path, expected = runs_dir / "recordings" / f"{args.target}.sqlite", "ask"
    else:
        raise ValueError(f"{args.target!r} is neither a thread id, a results folder nor a bundle")
    if not path.is_file():
        raise ValueError(f"no recording for {args.target!r} (looked for {path}; record with `kgagents ask ... "
                         "--record` or `kgagents eval ... --out DIR --record`)")
    settings = settings_of(read_meta(path), parse)
    if settings.command != expected:
        raise ValueError(f"{path} records `kgagents {settings.command}`, which replays from "
                         f"{'a thread id' if settings.command == 'ask' else 'a results folder or bundle'}")
    _check_inputs(settings, args)
    given = _given(args)
    for name, what in sorted(settings.left_out.items()):
        if name not in given:
            print(printable(f"kgagents: replay: not taken from the recording: {name} = {what['recorded']} "
                             f"({what['why']})"), file=sys.stderr)
    if settings.command == "ask":
        registry_ = RunRegistry(runs_dir)
        into = args.into or _free(f"{args.target}-replay", lambda t: registry_.get(t) is not None)
    else:
        into = args.into or _free(str(target / "replay"), os.path.lexists)  # a link named replay is not free
    replayed = _replayed_args(settings, args, into, parse)
    recording = Recording(path, "replay")
    try:
        with using(recording):
            code = commands[settings.command](replayed)
        check_replay(recording)
        unused, total = recording.unused(), len(recording)
    finally:
        recording.close()
    differences = (_compare_runs(runs_dir, args.target, into) if settings.command == "ask"
                   else _compare_results(target, Path(into)))
    print(f"replayed {total - unused} recorded exchange(s) into {into}"
          + (f"; {unused} recorded exchange(s) were not asked for" if unused else ""), file=sys.stderr)
    if differences:
        print("the replay differs from the recorded run:\n" + "\n".join(f"  {d}" for d in differences),
              file=sys.stderr)
        return 1
    print("the replay is identical to the recorded run", file=sys.stderr)
    return code


def _given(args: argparse.Namespace) -> set[str]:
    """The settings the replaying user gave (flags of ``kgagents replay`` and its ``--set`` keys)."""
    flags = {name for name in (*USER_INPUTS, "model", "base_url", "grader_model") if getattr(args, name, None)}
    return flags | {item.partition("=")[0].strip() for item in args.set or []}


def _check_inputs(settings: Settings, args: argparse.Namespace) -> None:
    """Refuse a replay that lacks an input the recorded command had (a path, a graph): this machine's user gives
    it; the recording's is never used."""
    missing = [name for name in NEEDED_INPUTS if name in settings.left_out and not getattr(args, name, None)]
    if missing:
        recorded = "; ".join(f"{USER_FLAGS[name]} {settings.left_out[name]['recorded']}" for name in missing)
        raise ValueError(printable(f"the recorded command had {recorded}; a replay takes those from you, never from "
                                    f"the recording: give this machine's with `kgagents replay {args.target} "
                                    f"{' '.join(f'{USER_FLAGS[n]} ...' for n in missing)}`"))


# --------------------------------------------------------------------------------------------------------------
# Evaluation bundles
# --------------------------------------------------------------------------------------------------------------
def _bundle_if_asked(args: argparse.Namespace) -> None:
    if getattr(args, "bundle", None):
        if not getattr(args, "out", None):
            raise ValueError("eval --bundle needs --out DIR: the bundle packs that folder")
        path = write_bundle(Path(args.out), Path(args.bundle), recorded_settings(args))
        print(f"bundle: {path}", file=sys.stderr)


def write_bundle(results: Path, bundle: Path, settings: Settings) -> Path:
    """Pack a results folder into ``bundle`` (a zip): its results, manifest (settings and the data
    fingerprint), reports and plots, its recording if it has one, and ``bundle.json`` (the settings, the
    package versions, what the bundle holds). Only names a bundle may hold are packed
    (:func:`kgagents.core.bundles.bundled_name`: never the checkpoints), JSON files without credentials in their
    URLs, and the recording as this version writes them (:func:`_clean_recording`)."""
    from kgagents.evals.runner import MANIFEST_FILE  # the evaluation runner: loaded when a bundle is made

    if not (results / MANIFEST_FILE).is_file():
        raise ValueError(f"{results} is not an evaluation's results folder (no {MANIFEST_FILE})")
    files = sorted(p for p in results.iterdir() if p.is_file() and not p.is_symlink() and bundled_name(p.name)
                   and p.name != BUNDLE_INFO)
    manifest = json.loads((results / MANIFEST_FILE).read_text(encoding="utf-8"))
    info = {"settings": settings.as_json(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "versions": versions(), "data_fingerprint": manifest.get("data"),
            "files": [p.name for p in files], "replayable": (results / RECORDING_FILE).is_file()}
    bundle.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kgagents-bundle-") as tmp, \
            zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            if path.name == RECORDING_FILE:
                archive.write(_clean_recording(path, Path(tmp) / RECORDING_FILE, settings), path.name)
            elif path.suffix in (".json", ".jsonl"):
                archive.writestr(path.name, _scrubbed_json(path))
            else:
                archive.write(path, path.name)
        archive.writestr(BUNDLE_INFO, json.dumps(scrub(info), indent=2, ensure_ascii=False))
    return bundle


def _scrubbed_json(path: Path) -> str:
    """A JSON or JSON-lines file without credentials in its values (:func:`kgagents.core.redact.scrub`); lines that
    are not JSON are cleaned as text."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            return json.dumps(scrub(json.loads(text)), indent=2, ensure_ascii=False) + "\n"
        except ValueError:
            return scrub_text(text)
    lines = []
    for line in text.splitlines():
        try:
            lines.append(json.dumps(scrub(json.loads(line)), ensure_ascii=False))
        except ValueError:
            lines.append(scrub_text(line))
    return "\n".join(lines) + ("\n" if lines else "")


def _clean_recording(path: Path, copy: Path, settings: Settings) -> Path:
    """A copy of the recording at ``path`` as this version keeps one: its ``meta`` the checked settings (never a
    command line), its requests and failure messages without credentials."""
    from kgagents.core.replay import check_recording, open_read_only
    check_recording(path)
    source = open_read_only(path)
    try:
        with sqlite3.connect(copy) as target:
            source.backup(target)
    finally:
        source.close()
    meta = read_meta(copy)
    with sqlite3.connect(copy) as db:
        rows = db.execute("SELECT fingerprint, seq, request FROM exchanges").fetchall()
        db.executemany("UPDATE exchanges SET request = ? WHERE fingerprint = ? AND seq = ?",
                       [(scrub_text(request), key, seq) for key, seq, request in rows])
    _write_meta(copy, {"command": settings.command, "settings": settings.as_json(), "thread": meta.get("thread"),
                       "created": meta.get("created"), "versions": meta.get("versions")})
    with sqlite3.connect(copy, isolation_level=None) as db:
        db.execute("VACUUM")
    return copy


def unpack_bundle(bundle: Path, into: Path | None = None) -> Path:
    """Unpack ``bundle`` into ``into`` (default: a folder named after it, beside it) with the checks of
    :func:`kgagents.core.bundles.unpack`; returns the folder."""
    folder = into or bundle.with_suffix("")
    unpack(bundle, folder)
    return folder


def _compare_runs(runs_dir: Path, recorded: str, replayed: str) -> list[str]:
    from kgagents.core.runs import RunRegistry
    from kgagents.graphs.workflows import thread_state  # the workflows: loaded when a replay compares runs

    registry = RunRegistry(runs_dir)
    states = []
    for thread in (recorded, replayed):
        record = registry.get(thread)
        if record is None:
            return [f"thread {thread} is not in {runs_dir}"]
        state, _ = asyncio.run(thread_state(record.workflow, runs_dir, thread, None))
        states.append(state)
    return [f"{key}: recorded {_short(states[0].get(key))}, replayed {_short(states[1].get(key))}"
            for key in COMPARED_KEYS if _canonical(states[0].get(key)) != _canonical(states[1].get(key))]


def _compare_results(recorded: Path, replayed: Path) -> list[str]:
    from kgagents.evals.runner import read_results  # the evaluation runner: loaded when a replay compares results

    def keyed(folder: Path) -> dict[tuple[str, int], dict[str, Any]]:
        return {(str(r["id"]), int(r.get("run", 0))): r for r in read_results(folder)}

    before, after = keyed(recorded), keyed(replayed)
    out = [f"item {i} (run {r}): missing from the replay" for i, r in sorted(set(before) - set(after))]
    for key in sorted(set(before) & set(after)):
        for field in COMPARED_RESULT_KEYS:
            # a bundle's results keep their values as kgagents.core.redact.scrub leaves them: compared so, both
            if _canonical(scrub(before[key].get(field))) != _canonical(scrub(after[key].get(field))):
                out.append(f"item {key[0]} (run {key[1]}) {field}: recorded {_short(before[key].get(field))}, "
                           f"replayed {_short(after[key].get(field))}")
    return out


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _short(value: Any, limit: int = 120) -> str:
    text = _canonical(value)
    return text if len(text) <= limit else text[:limit] + "…"
