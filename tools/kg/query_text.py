"""What the Cypher and SPARQL query checks share: how they name a character and a place in the model's text."""

from __future__ import annotations

import unicodedata

__all__ = ["MAX_QUERY_CHARS", "describe_char", "too_long", "where"]

#: The longest LLM-written query or write kgagents reads (characters): far above what a model writes for a KG
#: (a write of a few hundred nodes is some 30,000), far below what could keep a check or a server's parser busy.
MAX_QUERY_CHARS = 100_000


def describe_char(ch: str) -> str:
    """A character as a refusal names it: ``'—' (U+2014 EM DASH)``."""
    try:
        name = unicodedata.name(ch)
    except ValueError:
        name = "a control character" if ord(ch) < 32 or ord(ch) == 127 else "an unnamed character"
    return f"{ch!r} (U+{ord(ch):04X} {name})"


def where(text: str, pos: int) -> str:
    """The place of character ``pos`` in ``text``, with a little context."""
    return f"at character {pos} ({text[max(0, pos - 15):pos + 15]!r})"


def too_long(text: str, what: str) -> str | None:
    """The refusal of a ``text`` longer than :data:`MAX_QUERY_CHARS` (``what``: "Cypher code", ...), or None."""
    if len(text) <= MAX_QUERY_CHARS:
        return None
    return (f"the {what} is {len(text):,} characters long; at most {MAX_QUERY_CHARS:,} are read: split it into "
            "several smaller parts")
