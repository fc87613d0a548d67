"""Reading LLM-written SPARQL as the engine reads it, and refusing what reaches the network.

The tokenizer follows the terminals of the SPARQL 1.1 grammar (section 19.8) as Oxigraph reads them: comments run
to the end of a line, which a carriage return ends as well as a newline; ``\\u`` escapes are decoded inside IRIs
and string literals only, never before the query is read; keywords are matched without a word boundary
(``SERVICE:x`` is the keyword ``SERVICE`` followed by the name ``:x`` to Oxigraph, and ``trueSERVICE`` the
literal ``true`` followed by the keyword). What runs is the query
**rebuilt from the checked tokens** (comments dropped, whitespace folded), so nothing the checker took for a
comment reaches the engine.

Refused, with a message the model can act on:

- ``SERVICE`` and ``LOAD`` -- any word, prefixed-name prefix or language tag that holds either, in any case (the
  only ways a query reaches the network; Oxigraph reads ``trueSERVICE<x>{}`` as ``true SERVICE <x> {}``);
- any character outside string literals and ``<IRI>``\\ s that is not ASCII (prefixed names, variables and
  keywords are written in ASCII here; other names go in ``<...>``), backslash escapes in prefixed names, and
  anything the grammar has no token for;
- text longer than :data:`~kgagents.tools.kg.query_text.MAX_QUERY_CHARS`. The tokenizer takes time in proportion
  to the length of the text (a prefixed name's prefix is measured once per run of name characters).

The engine then parses the rebuilt text itself; with bubblewrap it runs in the sandbox, which has no network at
all (:mod:`kgagents.tools.kg.sparql_store`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kgagents.core.errors import KGAgentsError
from kgagents.tools.kg import query_text
from kgagents.tools.kg.query_text import describe_char, where

__all__ = ["SparqlRejected", "SparqlToken", "clean", "tokenize"]


class SparqlRejected(KGAgentsError, ValueError):
    """An LLM-written query or update that kgagents does not run (the message says why)."""


@dataclass
class SparqlToken:
    """One significant token (``kind``: iri, string, var, pname, bnode, langtag, number, word, punct)."""

    kind: str
    text: str
    start: int
    spaced: bool = False


_SPACE = " \t\r\n"
_LINE_END = "\r\n"
#: Keywords that reach the network; Oxigraph matches keywords without a word boundary, so a prefix is enough.
NETWORK_KEYWORDS = ("SERVICE", "LOAD")
_IRI_FORBIDDEN = frozenset('<>"{}|^`\\')
_ECHAR = frozenset("tbnrf\"'\\")
_HEX = frozenset("0123456789abcdefABCDEF")
_PN_PREFIX = r"[A-Za-z](?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?"
_PLX = r"(?:%[0-9A-Fa-f]{2})"
_PN_LOCAL = rf"(?:[A-Za-z0-9_:]|{_PLX})(?:(?:[A-Za-z0-9_.:-]|{_PLX})*(?:[A-Za-z0-9_:-]|{_PLX}))?"
_PNAME = re.compile(rf"(?:{_PN_PREFIX})?:(?:{_PN_LOCAL})?")
_BNODE = re.compile(r"_:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?")
_VAR = re.compile(r"[?$][A-Za-z0-9_]+")
_LANGTAG = re.compile(r"@[A-Za-z]+(?:-[A-Za-z0-9]+)*")
_NUMBER = re.compile(r"\d+\.\d*[eE][+-]?\d+|\.\d+[eE][+-]?\d+|\d+[eE][+-]?\d+|\d*\.\d+|\d+")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PREFIX_RUN = re.compile(r"[A-Za-z0-9_.-]*")
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_OPERATORS = ("^^", "&&", "||", "!=", "<=", ">=")
_PUNCT = frozenset("{}()[],;.*/+-!=<>^|?")


def _uchar(text: str, k: int) -> int:
    """The index after a ``\\u``/``\\U`` escape at ``k``."""
    width = 4 if text[k + 1] == "u" else 8
    digits = text[k + 2:k + 2 + width]
    if len(digits) != width or not set(digits) <= _HEX or int(digits, 16) > 0x10FFFF:
        raise SparqlRejected(f"a \\{text[k + 1]} escape needs {width} hexadecimal digits {where(text, k)}")
    return k + 2 + width


def _iri_end(text: str, pos: int) -> int | None:
    """The index after the ``<IRI>`` that opens at ``pos``, or None when ``<`` is an operator there."""
    k = pos + 1
    n = len(text)
    while k < n:
        ch = text[k]
        if ch == ">":
            return k + 1
        if ch == "\\":
            if k + 1 < n and text[k + 1] in "uU":
                k = _uchar(text, k)
                continue
            return None
        if ch in _IRI_FORBIDDEN or ord(ch) <= 0x20:
            return None
        k += 1
    return None


def _string_end(text: str, pos: int) -> int:
    quote = text[pos]
    long = text.startswith(quote * 3, pos)
    k = pos + (3 if long else 1)
    n = len(text)
    while k < n:
        ch = text[k]
        if ch == "\\":
            nxt = text[k + 1] if k + 1 < n else ""
            if nxt and nxt in _ECHAR:
                k += 2
                continue
            if nxt in ("u", "U"):
                k = _uchar(text, k)
                continue
            raise SparqlRejected(f"unknown escape {text[k:k + 2]!r} in a string {where(text, k)}")
        if long:
            if text.startswith(quote * 3, k):
                if text.startswith(quote * 4, k):
                    raise SparqlRejected(f"a long string ends with a quote {where(text, k)}: escape it (\\{quote})")
                return k + 3
        elif ch == quote:
            return k + 1
        elif ch in _LINE_END:
            raise SparqlRejected(f"a line break inside a short string {where(text, k)}: use \\n or a long string")
        k += 1
    raise SparqlRejected(f"unterminated string starting at character {pos}")


def _may_be_pname(text: str, pos: int, run_end: int) -> bool:
    """Whether a prefixed name can start at ``pos``, where the run of prefix characters (letters, digits, ``_``,
    ``.``, ``-``) from ``pos`` ends at ``run_end``. A prefix is such a run that starts with a letter and does not
    end with ``.``, and the ``:`` after it is not a run character: so the prefix is the whole run, followed by
    ``:``, or empty with ``:`` at ``pos``. Answering this first keeps the pattern from trying every shorter
    prefix at every position of ``a.a.a.a...`` (quadratic); where it answers yes, the pattern matches."""
    if run_end >= len(text) or text[run_end] != ":":
        return False
    return run_end == pos or (text[pos] in _LETTERS and text[run_end - 1] != ".")


def _network_keyword(word: str) -> str | None:
    upper = word.upper()
    return next((kw for kw in NETWORK_KEYWORDS if kw in upper), None)


def tokenize(text: str) -> list[SparqlToken]:
    """The significant tokens of ``text``; raises :class:`SparqlRejected` (see the module docstring)."""
    refusal = query_text.too_long(text, "SPARQL text")
    if refusal:
        raise SparqlRejected(refusal)
    tokens: list[SparqlToken] = []
    pos, n = 0, len(text)
    spaced = False
    run_end = 0  # where the run of prefix characters that holds pos ends (see _may_be_pname)
    while pos < n:
        ch = text[pos]
        if ch in _SPACE:
            spaced, pos = True, pos + 1
            continue
        if ch == "#":
            stop = pos + 1
            while stop < n and text[stop] not in _LINE_END:
                stop += 1
            spaced, pos = True, stop
            continue
        end: int | None = None
        kind = ""
        if pos >= run_end:  # inside a run measured before, the run from here ends where it ends
            run_end = _PREFIX_RUN.match(text, pos).end()  # type: ignore[union-attr]  # matches the empty run too
        if ch == "<":
            end = _iri_end(text, pos)
            kind = "iri"
        if end is None and ch in ("'", '"'):
            end, kind = _string_end(text, pos), "string"
        if end is None:
            for name, pattern in (("var", _VAR), ("bnode", _BNODE), ("pname", _PNAME), ("langtag", _LANGTAG),
                                  ("number", _NUMBER), ("word", _WORD)):
                if name == "pname" and not _may_be_pname(text, pos, run_end):
                    continue  # skipped, not tried: the regular expression would backtrack over the whole run
                match = pattern.match(text, pos)
                if match:
                    end, kind = match.end(), name
                    break
        if end is None:
            op = next((o for o in _OPERATORS if text.startswith(o, pos)), None)
            if op is not None:
                end, kind = pos + len(op), "punct"
            elif ch in _PUNCT:
                end, kind = pos + 1, "punct"
            elif ch == "\\":
                raise SparqlRejected(f"a backslash {where(text, pos)}: escapes in prefixed names are not allowed "
                                     "here; write the IRI in full as <...>")
            elif ord(ch) > 127:
                raise SparqlRejected(f"{describe_char(ch)} {where(text, pos)} is outside a string or an <IRI>: write "
                                     "keywords, variables and prefixed names in ASCII (other names as <...>)")
            else:
                raise SparqlRejected(f"unexpected character {describe_char(ch)} {where(text, pos)}")
        if end < n and ord(text[end]) > 127 and kind in ("pname", "var", "word", "langtag", "bnode"):
            raise SparqlRejected(f"{describe_char(text[end])} {where(text, end)} in a name: write prefixed names and "
                                 "variables in ASCII (other names as <...>)")
        token = SparqlToken(kind, text[pos:end], pos, spaced)
        if kind in ("word", "pname", "langtag"):
            keyword = _network_keyword(token.text.split(":", 1)[0] if kind == "pname" else token.text)
            if keyword:
                raise SparqlRejected(f"{keyword} is not allowed in this knowledge graph (no network access from a "
                                     f"query) {where(text, pos)}")
        tokens.append(token)
        spaced = False
        pos = end
    return tokens


def clean(text: str) -> str:
    """The query or update as it may run: checked, then rebuilt from its tokens (see the module docstring)."""
    tokens = tokenize(text)
    if not tokens:
        raise SparqlRejected("the query is empty")
    parts: list[str] = []
    for tok in tokens:
        if tok.spaced and parts:
            parts.append(" ")
        parts.append(tok.text)
    return "".join(parts)
