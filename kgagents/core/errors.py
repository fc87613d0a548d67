"""The root of every exception kgagents raises.

Every error class the project defines derives from :class:`KGAgentsError`, so a caller can catch all of them
at once (``except KGAgentsError``) and tell them from a library's or Python's own. Each class keeps the built-in
base that says what kind of failure it is as well — ``ValueError`` for bad input (a graph file in the wrong
format, a rejected query, a malformed dataset), ``RuntimeError`` for a failure while running (a model that cannot
be reached, a tool that failed) — so ``except ValueError`` and ``except RuntimeError`` go on catching what they
caught before. A test walks every module of the project and checks this.

This module is a leaf: it imports nothing, and every package may import it.
"""

from __future__ import annotations

__all__ = ["KGAgentsError"]


class KGAgentsError(Exception):
    """The base class of every exception kgagents defines."""
