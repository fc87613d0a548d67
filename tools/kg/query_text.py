"""What the Cypher and SPARQL query checks share: how they name a character and a place in the model's text."""

from __future__ import annotations

import unicodedata

__all__ = ["describe_char", "where"]


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
