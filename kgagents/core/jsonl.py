"""JSON-lines files: one reader for every dataset, graph and results file kgagents reads.

Blank lines are skipped; a line that is not JSON is an error naming the file and the line, raised as the caller's
own error class (a dataset's, a graph format's), so that each reader keeps its own clear message type.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["json_lines"]


def json_lines(lines: Iterable[str], where: str, error: type[Exception] = ValueError, *, objects: bool = False,
               what: str = "a record") -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of ``lines``, numbered from 1.

    A line that is not JSON raises ``error("<where>, line <n>: not valid JSON: ...")``; with ``objects``, a value
    that is not a JSON object raises ``error("<where>, line <n>: <what> must be a JSON object")``.
    """
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise error(f"{where}, line {number}: not valid JSON: {exc}") from exc
        if objects and not isinstance(value, dict):
            raise error(f"{where}, line {number}: {what} must be a JSON object")
        yield number, value
