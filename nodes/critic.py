"""The verify-and-retry decision that several workflows share: a candidate is checked, and the workflow accepts
it, tries again with feedback, or stops at its attempt limit.

ARK-V1 checks the limit first (its equations (3), (7) and (10) list ``c ≥ C_max`` before validity: the last
attempt ends the run even when it is valid); Agent-G's critic accepts a valid answer first and stops only when
the iterations are spent (Algorithm 1, lines 7–12). :func:`verdict` is that decision with the order as a
parameter, so each router reads like its paper.
"""

from __future__ import annotations

from typing import Literal

Verdict = Literal["accept", "retry", "stop"]


def verdict(valid: bool, attempts: int, limit: int, *, limit_first: bool) -> Verdict:
    """``accept`` a valid candidate, ``retry`` an invalid one while attempts are left, ``stop`` at the limit.

    With ``limit_first`` the limit is checked before validity (``attempts >= limit`` stops even a valid
    candidate); without it a valid candidate is accepted whatever the count.
    """
    exhausted = attempts >= limit
    if limit_first and exhausted:
        return "stop"
    if valid:
        return "accept"
    return "stop" if exhausted else "retry"
