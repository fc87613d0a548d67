"""Text from files someone else made, for a terminal or a Markdown file: every character that is not printable
escaped.

A run registry, a checkpoint, a recording or a results folder can come from someone else, and their text with
them: an escape sequence sets the terminal's clipboard (OSC 52, which the user may then paste into a shell), its
title, or moves the cursor to overwrite what was printed; a line break in a value becomes a line of its own in a
report (a line of Python, should that file ever be read as a ``.pth``); a bidirectional override reorders what the
reader sees. :func:`printable` writes each such character as its Python escape (``\\x1b``, ``\\n``, ``\\u202e``),
so that what is shown is the text, never an instruction to the terminal or a new line. :func:`printable_json`
does the same inside JSON text, with JSON's own escapes.

These are pure functions; the modules that print or write foreign text call them.
"""

from __future__ import annotations

import json
import re

__all__ = ["printable", "printable_json", "printable_lines"]

#: What :func:`printable_json` escapes: any character that is not printable, except the line breaks and the
#: indentation that ``json.dumps`` writes itself (a string's own control characters are escaped by JSON already).
_NOT_PRINTABLE_IN_JSON = re.compile(r"[^\n\t ]")


def printable(text: str) -> str:
    """``text`` on one line, with every character that is not printable (controls, line breaks, tabs, format
    characters such as bidirectional overrides) written as its escape."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def printable_lines(text: str) -> str:
    """``text`` with its line breaks kept and every other character that is not printable escaped (a value's own
    line breaks then stand as lines of their own: what is shown is still only text)."""
    return "\n".join(printable(line) for line in text.split("\n"))


def printable_json(text: str) -> str:
    """JSON text (as ``json.dumps(..., ensure_ascii=False)`` writes it) with every character that is not printable
    written as JSON's ``\\uXXXX`` escape; the result is the same JSON value."""
    return "".join(ch if ch.isprintable() or not _NOT_PRINTABLE_IN_JSON.match(ch)
                   else json.dumps(ch, ensure_ascii=True)[1:-1] for ch in text)
