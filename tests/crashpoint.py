"""Crash a real ``kgagents`` process at a seeded superstep: count its checkpoints, SIGKILL it at one of them.

LangGraph saves one checkpoint per superstep (``aput``; a subgraph's supersteps have their own), while the
next superstep already runs (durability ``"async"``). A *kill point* is a checkpoint number and a moment:
``before`` (the process dies as that checkpoint is about to be saved: the superstep it closes is lost, except
the task results already saved) or ``after`` (it dies right after the save, with the next superstep's tasks in
flight). :func:`kill_point` draws one from a seed, among the checkpoints an uninterrupted run saves.

Run as a program, this module is ``kgagents`` with the kill point armed::

    python -m tests.crashpoint CHECKPOINT before|after -- ask "question" --model scripted:...
"""

from __future__ import annotations

import os
import random
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

#: The checkpointers ``kgagents ask`` / ``resume`` use.
SAVERS = (AsyncSqliteSaver, AsyncPostgresSaver)
MOMENTS = ("before", "after")

#: Called with (checkpoint number, 1-based, counted over the process; moment) around every checkpoint save.
Hook = Callable[[int, str], None]


@contextmanager
def checkpoint_hook(hook: Hook) -> Iterator[None]:
    """Call ``hook`` before and after every checkpoint save of the checkpointers in :data:`SAVERS`."""
    originals = {saver: saver.aput for saver in SAVERS}
    count = 0

    def wrap(original: Any) -> Any:
        async def aput(self: Any, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            nonlocal count
            count += 1
            number = count
            hook(number, "before")
            saved = await original(self, config, checkpoint, metadata, new_versions)
            hook(number, "after")
            return saved

        return aput

    for saver, original in originals.items():
        saver.aput = wrap(original)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for saver, original in originals.items():
            saver.aput = original  # type: ignore[method-assign]


@contextmanager
def counting_checkpoints() -> Iterator[list[int]]:
    """Count checkpoint saves: the list holds the count when the block ends."""
    saved = [0]

    def count(number: int, moment: str) -> None:
        if moment == "after":
            saved[0] = number

    with checkpoint_hook(count):
        yield saved


def kill_point(seed: int | str, checkpoints: int) -> tuple[int, str]:
    """A kill point drawn from ``seed`` among a run of ``checkpoints`` saves.

    Dying before the first save leaves nothing to resume, so that point is not drawn.
    """
    points = [(n, moment) for n in range(1, checkpoints + 1) for moment in MOMENTS]
    points.remove((1, "before"))
    return random.Random(seed).choice(points)


def main(argv: list[str]) -> int:
    number, moment, separator, *cli_args = argv
    if moment not in MOMENTS or separator != "--":
        raise SystemExit("usage: python -m tests.crashpoint CHECKPOINT before|after -- KGAGENTS-ARGS...")

    def kill(at: int, when: str) -> None:
        if (at, when) == (int(number), moment):
            os.kill(os.getpid(), signal.SIGKILL)

    from kgagents import cli

    with checkpoint_hook(kill):
        return cli.main(cli_args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
