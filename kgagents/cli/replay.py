"""``--record``, ``kgagents replay`` and ``--cache``: runs whose model calls are kept and played back.

- ``kgagents ask ... --record`` keeps every model exchange of the run in ``RUNS_DIR/recordings/THREAD.sqlite``
  (beside the run's checkpoints), with the command that made it; ``kgagents eval ... --out DIR --record`` keeps
  them in ``DIR/recording.sqlite``.
- ``kgagents replay THREAD`` / ``kgagents replay DIR`` runs the recorded command again with every model call
  answered from the recording — no network, no key, $0 — into a new thread (``THREAD-replay``) or directory
  (``DIR/replay``), and compares: the answer, the task KG and the exit of a run; each item's answer and score
  of an evaluation. A request the recording lacks (the code, the data or the settings changed) stops the
  replay with the node and the request.
- ``--cache FILE`` (or ``KGAGENTS_CACHE``) keeps replies across runs and answers a request seen before from
  them; sampled calls (temperature above 0) are never served from it unless ``--cache-sampled``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import time
import zipfile
from collections.abc import Callable
from contextlib import ExitStack
from importlib import metadata
from pathlib import Path
from typing import Any

from kgagents.core.replay import RECORDING_NAME, Recording, check_replay, using
from kgagents.core.runs import RunRegistry, new_thread_id

RECORDED_COMMANDS = ("ask", "eval")
COMPARED_KEYS = ("final_answer", "exit_reason", "kg")
"""What must be identical between a run and its replay (the task KG: KGoT's writes)."""
COMPARED_RESULT_KEYS = ("answer", "correct", "score", "scores", "metrics", "error")
"""What must be identical between an evaluation item and its replay."""
PACKAGES = ("kgagents", "langgraph", "langchain-core", "langchain-openai", "openai")


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The recording flags of ``ask`` / ``eval``."""
    where = "RUNS_DIR/recordings/THREAD.sqlite" if command == "ask" else f"--out DIR/{RECORDING_NAME}"
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
    """``kgagents replay``."""
    rep = sub.add_parser("replay", help="run a recorded run or evaluation again from its recording, offline",
                         description=__doc__.split("\n\n")[0])
    rep.add_argument("target", metavar="THREAD|DIR", help="a recorded thread id, or a recorded evaluation's folder")
    rep.add_argument("--into", metavar="THREAD|DIR", help="where the replay goes (default THREAD-replay / DIR/replay)")
    rep.add_argument("--data", metavar="PATH",
                     help="an evaluation's data files on this machine (instead of the recorded --data path)")


def recording_path(args: argparse.Namespace, runs_dir: Path) -> Path:
    """Where ``--record`` keeps the exchanges of ``args`` (ask: the thread's; eval: the results folder's)."""
    if args.command == "ask":
        return runs_dir / "recordings" / f"{args.thread}.sqlite"
    if not getattr(args, "out", None):
        raise ValueError("eval --record needs --out DIR: the recording is kept in that folder")
    return Path(args.out) / RECORDING_NAME


def _write_meta(path: Path, values: dict[str, Any]) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                       [(k, json.dumps(v, ensure_ascii=False)) for k, v in values.items()])


def read_meta(path: Path) -> dict[str, Any]:
    """What a recording says about itself: the command (``argv``), when, with which package versions."""
    with sqlite3.connect(path) as db:
        try:
            rows = db.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.OperationalError as exc:
            raise ValueError(f"{path} is not a kgagents recording ({exc})") from exc
    return {k: json.loads(v) for k, v in rows}


def versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _without(argv: list[str], *, flags: tuple[str, ...] = (), options: tuple[str, ...] = ()) -> list[str]:
    """``argv`` without the ``flags`` and the ``options`` with their values (``--opt VALUE`` and
    ``--opt=VALUE``)."""
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token in options:
            skip = True
        elif token not in flags and not token.startswith(tuple(f"{o}=" for o in options)):
            out.append(token)
    return out


def recorded_argv(argv: list[str]) -> list[str]:
    """The command a replay runs: the recorded one without ``--record``, ``--cache``, ``--bundle`` and the
    thread id (the replay chooses its own)."""
    return _without(argv, flags=("--record", "--cache-sampled"), options=("--cache", "--thread", "--bundle"))


def run_recorded(args: argparse.Namespace, argv: list[str], runs_dir: Path,
                 command: Callable[[argparse.Namespace], int]) -> int:
    """Run ``command`` with ``--record`` / ``--cache`` in effect."""
    with ExitStack() as stack:
        if getattr(args, "record", False):
            if args.command == "ask" and not getattr(args, "thread", None):

                args.thread = new_thread_id()
            path = recording_path(args, runs_dir)
            recording = Recording(path, "record")
            stack.callback(recording.close)
            _write_meta(path, {"argv": recorded_argv(argv), "command": args.command,
                               "thread": getattr(args, "thread", None), "runs_dir": str(runs_dir),
                               "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": versions()})
            stack.enter_context(using(recording))
            code = command(args)
            print(f"recorded {len(recording)} model exchange(s) in {path} (kgagents replay "
                  f"{args.thread if args.command == 'ask' else args.out})", file=sys.stderr)
            recording.close()
            _bundle_if_asked(args, argv)
            return code
        if getattr(args, "cache", None):
            cache = Recording(Path(args.cache), "cache", cache_sampled=args.cache_sampled)
            stack.callback(cache.close)
            stack.enter_context(using(cache))
            code = command(args)
            print(f"cache {args.cache}: {cache.hits} reply(ies) served, {cache.misses} new", file=sys.stderr)
            _bundle_if_asked(args, argv)
            return code
        code = command(args)
        _bundle_if_asked(args, argv)
        return code


def _free(name: str, exists: Callable[[str], bool]) -> str:
    if not exists(name):
        return name
    n = 2
    while exists(f"{name}-{n}"):
        n += 1
    return f"{name}-{n}"


def cmd_replay(args: argparse.Namespace, runs_dir: Path, parse: Callable[[list[str]], argparse.Namespace],
               commands: dict[str, Callable[[argparse.Namespace], int]]) -> int:
    """``kgagents replay THREAD|DIR``: see the module docstring."""
    target = Path(args.target)
    if target.is_file() and zipfile.is_zipfile(target):
        target = unpack_bundle(target, Path(args.into) if args.into else None)
        args.into = None
        print(f"bundle unpacked into {target}", file=sys.stderr)
    path = target / RECORDING_NAME if target.is_dir() else runs_dir / "recordings" / f"{args.target}.sqlite"
    if not path.is_file():
        raise ValueError(f"no recording for {args.target!r} (looked for {path}; record with `kgagents ask ... "
                         "--record` or `kgagents eval ... --out DIR --record`)")
    meta = read_meta(path)
    argv = list(meta["argv"])
    if meta["command"] == "ask":

        registry = RunRegistry(runs_dir)
        into = args.into or _free(f"{meta['thread']}-replay", lambda t: registry.get(t) is not None)
        argv += ["--thread", into]
    else:
        into = args.into or _free(str(target / "replay"), lambda d: Path(d).exists())
        argv = _with_option(argv, "--out", into)
        if args.data:
            argv = _with_option(argv, "--data", args.data)
    replayed = parse(argv)
    recording = Recording(path, "replay")
    try:
        with using(recording):
            code = commands[meta["command"]](replayed)
        check_replay(recording)
        unused, total = recording.unused(), len(recording)
    finally:
        recording.close()
    differences = (_compare_runs(runs_dir, meta["thread"], into) if meta["command"] == "ask"
                   else _compare_results(target, Path(into)))
    print(f"replayed {total - unused} recorded exchange(s) into {into}"
          + (f"; {unused} recorded exchange(s) were not asked for" if unused else ""), file=sys.stderr)
    if differences:
        print("the replay differs from the recorded run:\n" + "\n".join(f"  {d}" for d in differences),
              file=sys.stderr)
        return 1
    print("the replay is identical to the recorded run", file=sys.stderr)
    return code


def _with_option(argv: list[str], option: str, value: str) -> list[str]:
    """``argv`` with ``option`` set to ``value`` (replacing what it had)."""
    return [*_without(argv, options=(option,)), option, value]


# --------------------------------------------------------------------------------------------------------------
# Evaluation bundles
# --------------------------------------------------------------------------------------------------------------
BUNDLE_INFO = "bundle.json"
BUNDLED_SUFFIXES = (".jsonl", ".json", ".md", ".png", ".sqlite")
"""What a bundle takes from a results folder: results, manifest, reports, plots, the recording (not the
checkpoints: they hold every state of every item and a replay makes its own)."""


def _bundle_if_asked(args: argparse.Namespace, argv: list[str]) -> None:
    if getattr(args, "bundle", None):
        if not getattr(args, "out", None):
            raise ValueError("eval --bundle needs --out DIR: the bundle packs that folder")
        path = write_bundle(Path(args.out), Path(args.bundle), recorded_argv(argv))
        print(f"bundle: {path}", file=sys.stderr)


def write_bundle(results: Path, bundle: Path, argv: list[str]) -> Path:
    """Pack a results folder into ``bundle`` (a zip): its results, manifest (settings and the data
    fingerprint), reports and plots, its recording if it has one, and ``bundle.json`` (the command, the
    package versions, what the bundle holds)."""
    from kgagents.evals.runner import MANIFEST_FILE  # the evaluation runner: loaded when a bundle is made

    if not (results / MANIFEST_FILE).is_file():
        raise ValueError(f"{results} is not an evaluation's results folder (no {MANIFEST_FILE})")
    files = sorted(p for p in results.iterdir() if p.is_file() and p.suffix in BUNDLED_SUFFIXES
                   and not p.name.startswith("checkpoints"))
    manifest = json.loads((results / MANIFEST_FILE).read_text(encoding="utf-8"))
    info = {"argv": argv, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": versions(),
            "data_fingerprint": manifest.get("data_fingerprint"), "files": [p.name for p in files],
            "replayable": (results / RECORDING_NAME).is_file()}
    bundle.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.name)
        archive.writestr(BUNDLE_INFO, json.dumps(info, indent=2, ensure_ascii=False))
    return bundle


def unpack_bundle(bundle: Path, into: Path | None = None) -> Path:
    """Unpack ``bundle`` into ``into`` (default: a folder named after it, beside it); returns the folder."""
    folder = into or bundle.with_suffix("")
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        if BUNDLE_INFO not in names:
            raise ValueError(f"{bundle} is not a kgagents evaluation bundle (no {BUNDLE_INFO})")
        unsafe = [n for n in names if Path(n).name != n]
        if unsafe:
            raise ValueError(f"{bundle} holds paths outside its folder: {unsafe[:3]}")
        folder.mkdir(parents=True, exist_ok=True)
        archive.extractall(folder)
    return folder


def _compare_runs(runs_dir: Path, recorded: str, replayed: str) -> list[str]:
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
            if _canonical(before[key].get(field)) != _canonical(after[key].get(field)):
                out.append(f"item {key[0]} (run {key[1]}) {field}: recorded {_short(before[key].get(field))}, "
                           f"replayed {_short(after[key].get(field))}")
    return out


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _short(value: Any, limit: int = 120) -> str:
    text = _canonical(value)
    return text if len(text) <= limit else text[:limit] + "…"
