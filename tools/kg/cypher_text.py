"""Reading LLM-written Cypher the way every server reads it: a strict tokenizer and the text rebuilt from its tokens.

A check of a query's text is only as good as the agreement between the checker's reading and the server's. Servers
disagree at the edges: ArcadeDB ends a ``//`` comment at a carriage return while FalkorDB reads on to the newline;
ArcadeDB accepts Unicode dashes as relationship arrows; lexers differ on escapes. So what reaches a server is never
the model's text but the statement **rebuilt from the tokens that were checked**:

- comments are dropped and every run of whitespace becomes one space (tokens that touched still touch), so no
  server can read as code what the checker read as a comment, or the other way round;
- outside string literals and backtick-quoted names only ASCII is accepted (letters, digits, the operators of
  Cypher); any other character is refused with a message the model can act on;
- string literals keep their text, but only with the escapes every server reads alike (``\\\\ \\' \\" \\b \\f \\n
  \\r \\t \\uXXXX \\UXXXXXXXX``; a ``\\u`` escape that spells a quote, a backslash or a backtick is refused);
  quoted names may not hold control characters or be empty;
- query parameters (``$x``) are refused: an LLM-written statement never gets any;
- text longer than :data:`~kgagents.tools.kg.query_text.MAX_QUERY_CHARS` is refused before it is read. Every pass
  over the text and its tokens takes time in proportion to their length.

:class:`CypherRejected` (a ``ValueError``) carries the refusal; its message is written for the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from kgagents.core.errors import KGAgentsError
from kgagents.tools.kg import query_text
from kgagents.tools.kg.query_text import describe_char, where

__all__ = ["CypherRejected", "Token", "render", "split_statements", "tokenize"]


class CypherRejected(KGAgentsError, ValueError):
    """An LLM-written statement that kgagents does not send to the server (the message says why)."""


@dataclass
class Token:
    """One significant token: ``kind`` is ``ident`` (names and keywords), ``qident`` (a `quoted name`),
    ``string``, ``number`` or ``punct``; ``spaced``: whitespace or a comment came before it."""

    kind: str
    text: str
    start: int
    spaced: bool = False

    @property
    def upper(self) -> str:
        """An unquoted identifier in upper case (keywords are case-insensitive); ``""`` for other tokens."""
        return self.text.upper() if self.kind == "ident" else ""

    @property
    def name(self) -> str:
        """An identifier's name (backticks removed and doubled backticks undone)."""
        if self.kind == "qident":
            return self.text[1:-1].replace("``", "`")
        return self.text


_SPACE = " \t\r\n"
_LINE_END = "\r\n"
_IDENT_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_IDENT_PART = _IDENT_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
#: Multi-character operators, longest first (as every Cypher lexer munches them).
_OPERATORS = ("<>", "<=", ">=", "=~", "->", "<-", "::", "+=", "..", "!=")
_PUNCT = frozenset("()[]{},.:;|+-*/%^=<>!&")
_SIMPLE_ESCAPES = frozenset("\\'\"bfnrt")
#: Characters a ``\\u`` escape may not spell: a lexer that decoded escapes before reading the string would end it.
_ESCAPE_SPELLS = frozenset("'\"\\`")


def _string_end(query: str, pos: int) -> int:
    """The index after the string literal that opens at ``pos``; refuses escapes servers read differently."""
    quote = query[pos]
    k = pos + 1
    n = len(query)
    while k < n:
        ch = query[k]
        if ch == quote:
            return k + 1
        if ch == "\\":
            nxt = query[k + 1] if k + 1 < n else ""
            if nxt in _SIMPLE_ESCAPES and nxt:
                k += 2
                continue
            if nxt in ("u", "U"):
                width = 4 if nxt == "u" else 8
                digits = query[k + 2:k + 2 + width]
                if len(digits) != width or not set(digits) <= _HEX:
                    raise CypherRejected(f"a \\{nxt} escape needs {width} hexadecimal digits {where(query, k)}")
                code = int(digits, 16)
                if code > 0x10FFFF or chr(code) in _ESCAPE_SPELLS:
                    raise CypherRejected(f"the escape \\{nxt}{digits} {where(query, k)} is not allowed: write "
                                         "quotes and backslashes as \\' \\\" \\\\")
                k += 2 + width
                continue
            raise CypherRejected(f"unknown escape {query[k:k + 2]!r} in a string {where(query, k)}: use \\\\ "
                                 "\\' \\\" \\n \\r \\t \\b \\f or \\uXXXX")
        k += 1
    raise CypherRejected(f"unterminated string starting at character {pos}")


def _name_end(query: str, pos: int) -> int:
    """The index after the backtick-quoted name that opens at ``pos``."""
    k = pos + 1
    n = len(query)
    while k < n:
        ch = query[k]
        if ch == "`":
            if k + 1 < n and query[k + 1] == "`":
                k += 2
                continue
            if k == pos + 1:
                raise CypherRejected(f"empty quoted name {where(query, pos)}")
            return k + 1
        if ord(ch) < 32 or ord(ch) == 127:
            raise CypherRejected(f"quoted names cannot hold {describe_char(ch)} {where(query, k)}")
        k += 1
    raise CypherRejected(f"unterminated quoted name starting at character {pos}")


def _number_end(query: str, pos: int) -> int:
    n = len(query)
    k = pos
    if query.startswith(("0x", "0X"), pos) and pos + 2 < n and query[pos + 2] in _HEX:
        k = pos + 2
        while k < n and query[k] in _HEX:
            k += 1
    elif query.startswith(("0o", "0O"), pos) and pos + 2 < n and query[pos + 2] in "01234567":
        k = pos + 2
        while k < n and query[k] in "01234567":
            k += 1
    else:
        while k < n and query[k] in _DIGITS:
            k += 1
        if k + 1 < n and query[k] == "." and query[k + 1] in _DIGITS:
            k += 1
            while k < n and query[k] in _DIGITS:
                k += 1
        if k < n and query[k] in "eE":
            j = k + 1
            if j < n and query[j] in "+-":
                j += 1
            if j < n and query[j] in _DIGITS:
                k = j
                while k < n and query[k] in _DIGITS:
                    k += 1
    if k < n and query[k] in _IDENT_PART:
        raise CypherRejected(f"a number runs into a name {where(query, pos)}: put a space between them")
    return k


def tokenize(query: str) -> list[Token]:
    """The significant tokens of ``query`` (comments and whitespace only mark the next token ``spaced``).

    Raises :class:`CypherRejected` for anything a server could read differently (see the module docstring), and
    for text longer than :data:`~kgagents.tools.kg.query_text.MAX_QUERY_CHARS`.
    """
    refusal = query_text.too_long(query, "Cypher code")
    if refusal:
        raise CypherRejected(refusal)
    tokens: list[Token] = []
    pos, n = 0, len(query)
    spaced = False
    while pos < n:
        ch = query[pos]
        if ch in _SPACE:
            spaced = True
            pos += 1
            continue
        if query.startswith("//", pos):
            end = pos + 2
            while end < n and query[end] not in _LINE_END:
                end += 1
            spaced, pos = True, end
            continue
        if query.startswith("/*", pos):
            end = query.find("*/", pos + 2)
            if end < 0:
                raise CypherRejected(f"unterminated /* comment starting at character {pos}")
            spaced, pos = True, end + 2
            continue
        if ch in ("'", '"'):
            end, kind = _string_end(query, pos), "string"
        elif ch == "`":
            end, kind = _name_end(query, pos), "qident"
        elif ch in _DIGITS:
            end, kind = _number_end(query, pos), "number"
        elif ch in _IDENT_START:
            end = pos + 1
            while end < n and query[end] in _IDENT_PART:
                end += 1
            kind = "ident"
        elif ch == "$":
            raise CypherRejected(f"query parameters ($...) are not supported {where(query, pos)}: write the values "
                                 "in the query")
        else:
            op = next((o for o in _OPERATORS if query.startswith(o, pos)), None)
            if op is not None:
                end, kind = pos + len(op), "punct"
            elif ch in _PUNCT:
                end, kind = pos + 1, "punct"
            elif ord(ch) > 127:
                raise CypherRejected(
                    f"{describe_char(ch)} {where(query, pos)} is outside a string or a `quoted name`: write Cypher's "
                    "keywords, operators and arrows in ASCII (-, ->, <-) and quote other names with backticks")
            else:
                raise CypherRejected(f"unexpected character {describe_char(ch)} {where(query, pos)}")
        tokens.append(Token(kind, query[pos:end], pos, spaced))
        spaced = False
        pos = end
    return tokens


def render(tokens: list[Token], inserts: dict[int, str] | None = None) -> str:
    """The statement rebuilt from ``tokens``: one space where the original had whitespace or comments, nothing
    where tokens touched; ``inserts`` maps a token index to text written right after that token."""
    inserts = inserts or {}
    parts: list[str] = []
    for k, tok in enumerate(tokens):
        if tok.spaced and parts:
            parts.append(" ")
        parts.append(tok.text)
        if k in inserts:
            parts.append(inserts[k])
    return "".join(parts)


def split_statements(query: str) -> list[str]:
    """The statements of ``query`` (split on ``;``), each rebuilt from its tokens; empty statements are dropped.

    Raises :class:`CypherRejected` when the text cannot be read (see :func:`tokenize`).
    """
    statements: list[list[Token]] = [[]]
    for tok in tokenize(query):
        if tok.kind == "punct" and tok.text == ";":
            statements.append([])
        else:
            statements[-1].append(tok)
    return [render(tokens) for tokens in statements if tokens]
