"""How much work an LLM-written Cypher statement may ask of a shared server: its nesting, its literal ranges, and
values that grow from themselves.

The servers' own caps are the wall (:mod:`kgagents.tools.kg.servers`: each query's memory and time on FalkorDB,
the JVM heap and ``range()`` cap on ArcadeDB, a deadline on every connection). These checks come before them and
give the model an early refusal it can act on, for the forms the text shows; what only a run can show (a bound
computed at run time, ``range(1, toInteger('3000000000'))``) is left to the servers. Each rule is exact on the
checked tokens (:mod:`kgagents.tools.kg.cypher_text`), and each pass over them is linear:

- **nesting**: at most :data:`MAX_NESTING` levels, counting brackets ``( [ {``, ``CASE ... END``, and ``NOT`` or a
  unary ``-``/``+`` until its operand ends. FalkorDB's parser takes about twice as long for every further level
  (measured on 4.22: 20 levels 10 s, 30 levels hours, outside any time limit);
- **ranges**: a ``range()`` whose two or three arguments are integer literals has a known size; the sizes of all of
  them in one statement, multiplied (nested ranges multiply, and ranges side by side are counted as if nested), may
  be at most :data:`MAX_RANGE_ELEMENTS`; a literal step of 0 is refused;
- **growth**: a value computed from itself may name itself once: the step of ``reduce(acc = init, x IN list |
  step)`` names ``acc``, the value of ``SET a.p = value`` names ``a.p``, and the value of a ``WITH value AS s``
  projection names ``s``, at most once. Inside a ``CASE`` each ``THEN``/``ELSE`` branch counts on its own (only
  one of them is the value) and its ``WHEN`` conditions not at all, so ``CASE WHEN x > m THEN x ELSE m END`` is
  fine and ``s + s`` (which doubles ``s`` at every step: 40 steps reach a terabyte) is not. In a ``WITH``
  projection a name inside ``size()`` and the like, or next to an arithmetic or comparison operator, does not
  count (``s[0..size(s) - 1]``, ``x * x``): it cannot grow a string or list, while ``replace(s, 'x', s)`` squares
  the length of ``s`` (four such WITH clauses turn 10 characters into 10^16). A copy under another name (``WITH s,
  s AS t``) is not followed: the servers' caps stop what these checks miss.

:func:`check_limits` applies all three; :func:`bracket_pairs` is the matching of brackets the checks share.
"""

from __future__ import annotations

from dataclasses import dataclass

from kgagents.tools.kg.cypher_text import CypherRejected, Token

__all__ = ["MAX_NESTING", "MAX_RANGE_ELEMENTS", "bracket_pairs", "check_growth", "check_limits", "check_nesting",
           "check_ranges", "nesting_depth", "range_size"]

#: The deepest nesting a statement may have (brackets, CASE, NOT and unary signs; see the module docstring).
MAX_NESTING = 10
#: The most elements the literal ranges of one statement may produce together (their sizes multiplied).
MAX_RANGE_ELEMENTS = 1_000_000

_OPENERS = frozenset("([{")
_CLOSERS = frozenset(")]}")
#: Keywords after which an expression starts (a ``-`` or ``+`` after them is a sign, not a subtraction).
_EXPRESSION_KEYWORDS = frozenset({
    "MATCH", "OPTIONAL", "CREATE", "MERGE", "WITH", "UNWIND", "RETURN", "WHERE", "SET", "REMOVE", "DELETE", "DETACH",
    "FOREACH", "ORDER", "BY", "SKIP", "LIMIT", "OFFSET", "UNION", "CALL", "AND", "OR", "XOR", "NOT", "IN", "IS",
    "CASE", "WHEN", "THEN", "ELSE", "CONTAINS", "STARTS", "ENDS", "DISTINCT", "AS", "ON", "YIELD"})
#: Words that start a clause (they end a ``SET`` item's value, and every operand).
_CLAUSE_WORDS = frozenset({"MATCH", "OPTIONAL", "CREATE", "MERGE", "WITH", "UNWIND", "RETURN", "WHERE", "SET",
                           "REMOVE", "DELETE", "DETACH", "FOREACH", "ORDER", "SKIP", "LIMIT", "OFFSET", "UNION", "ON",
                           "CALL", "FINISH"})
#: What ends the operand of a ``NOT`` (and of a sign) at its own level, besides separators and ``END``.
_OPERAND_ENDS = frozenset({"AND", "OR", "XOR", "WHEN", "THEN", "ELSE", "AS"}) | _CLAUSE_WORDS
_SEPARATORS = frozenset({",", "|", ";"})
#: Binary operators: they end the operand of a sign (``-a * b`` is ``(-a) * b``); so do the arrows of a pattern
#: (in ``(a)<--(b)`` the second ``-`` reads as a sign of ``(b)``, which the next arrow ends).
_BINARY = frozenset({"+", "-", "*", "/", "%", "^", "=", "<>", "!=", "<", ">", "<=", ">=", "=~", "..", "<-", "->"})
_BINARY_WORDS = frozenset({"IN", "IS", "CONTAINS", "STARTS", "ENDS"})


def _keyword(tokens: list[Token], k: int) -> str:
    """The keyword at ``k`` (upper case), or ``""`` where the word is a property key (``n.case``), a map key
    (``{case: 1}``) or not a bare word."""
    tok = tokens[k]
    if tok.kind != "ident":
        return ""
    if k > 0 and tokens[k - 1].text == ".":
        return ""
    if k + 1 < len(tokens) and tokens[k + 1].text == ":":
        return ""
    return tok.upper


def bracket_pairs(tokens: list[Token]) -> list[int]:
    """For every opening bracket, the index of the bracket that closes it (``len(tokens)`` when none does); other
    entries are ``len(tokens)``. Brackets pair whatever their kind, as a depth count does: the walk refuses a
    statement whose kinds do not match."""
    n = len(tokens)
    pairs = [n] * n
    open_at: list[int] = []
    for k, tok in enumerate(tokens):
        if tok.kind != "punct":
            continue
        if tok.text in _OPENERS:
            open_at.append(k)
        elif tok.text in _CLOSERS and open_at:
            pairs[open_at.pop()] = k
    return pairs


def _function_at(tokens: list[Token], k: int, name: str) -> bool:
    """Whether ``tokens[k]`` calls the built-in function ``name`` (a bare or quoted name, then ``(``)."""
    tok = tokens[k]
    return tok.kind in ("ident", "qident") and tok.name.lower() == name and k + 1 < len(tokens) \
        and tokens[k + 1].text == "(" and not (k > 0 and tokens[k - 1].text == ".")


def _operand_ended(tokens: list[Token], k: int) -> bool:
    """Whether the token before ``k`` ends an operand (so a ``-``/``+`` at ``k`` is a binary operator)."""
    if k == 0:
        return False
    prev = tokens[k - 1]
    if prev.kind == "punct":
        return prev.text in _CLOSERS
    if prev.kind == "ident":
        return _keyword(tokens, k - 1) not in _EXPRESSION_KEYWORDS
    return True  # a name in backticks, a number or a string


def nesting_depth(tokens: list[Token]) -> tuple[int, int]:
    """The deepest nesting of ``tokens`` and the index of the token where it is reached (``(0, 0)`` when flat).

    A level is an open bracket, an open ``CASE``, or a ``NOT`` or sign whose operand has not ended: a sign's
    operand ends at the next binary operator, separator or clause word of its level, a ``NOT``'s at ``AND``,
    ``OR``, ``XOR``, a separator or a clause word; a closing bracket or ``END`` ends everything opened inside it.
    """
    stack: list[str] = []  # "(" "[" "{" "CASE", or "NOT" / "SIGN"
    deepest, where = 0, 0

    def pop_prefixes(kinds: tuple[str, ...]) -> None:
        while stack and stack[-1] in kinds:
            stack.pop()

    for k, tok in enumerate(tokens):
        text = tok.text
        word = _keyword(tokens, k)
        if tok.kind == "punct" and text in _CLOSERS:
            while stack and stack[-1] not in _OPENERS:
                stack.pop()
            if stack:
                stack.pop()
            continue
        if word == "END":
            while stack and stack[-1] in ("NOT", "SIGN"):
                stack.pop()
            if stack and stack[-1] == "CASE":
                stack.pop()
            continue
        if (tok.kind == "punct" and text in _SEPARATORS) or word in _OPERAND_ENDS:
            pop_prefixes(("NOT", "SIGN"))
        elif word in _BINARY_WORDS or (tok.kind == "punct" and text in _BINARY and _operand_ended(tokens, k)):
            pop_prefixes(("SIGN",))
        if tok.kind == "punct" and text in _OPENERS:
            stack.append(text)
        elif word == "CASE":
            stack.append("CASE")
        elif word == "NOT" and not (k > 0 and _keyword(tokens, k - 1) == "IS"):
            stack.append("NOT")
        elif tok.kind == "punct" and text in ("-", "+") and not _operand_ended(tokens, k):
            stack.append("SIGN")
        if len(stack) > deepest:
            deepest, where = len(stack), k
    return deepest, where


def check_nesting(tokens: list[Token]) -> None:
    """Refuse a statement nested deeper than :data:`MAX_NESTING` levels."""
    depth, k = nesting_depth(tokens)
    if depth > MAX_NESTING:
        raise CypherRejected(
            f"the statement nests {depth} levels deep near {_excerpt(tokens, k)!r}; at most {MAX_NESTING} are "
            "allowed (brackets, CASE, NOT and signs count): compute inner parts first in a WITH clause")


def _integer(tokens: list[Token], start: int, end: int) -> int | None:
    """The integer literal that ``tokens[start:end]`` spells (an optional sign, then a decimal, hexadecimal or
    octal integer), or None."""
    sign = 1
    if end - start == 2 and tokens[start].text in ("-", "+"):
        sign = -1 if tokens[start].text == "-" else 1
        start += 1
    if end - start != 1 or tokens[start].kind != "number":
        return None
    text = tokens[start].text.lower()
    try:
        if text.startswith("0x"):
            return sign * int(text[2:], 16)
        if text.startswith("0o"):
            return sign * int(text[2:], 8)
        return sign * int(text, 10)
    except ValueError:  # a decimal fraction or an exponent: not an integer literal
        return None


def range_size(start: int, end: int, step: int) -> int:
    """How many elements ``range(start, end, step)`` produces (``step`` is not 0)."""
    if step > 0:
        return max(0, (end - start) // step + 1)
    return max(0, (start - end) // -step + 1)


def _arguments(tokens: list[Token], open_at: int, close_at: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` token spans of the arguments of the call whose parentheses are at ``open_at`` and
    ``close_at`` (commas inside nested brackets do not split)."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start = open_at + 1
    for k in range(open_at + 1, close_at):
        text = tokens[k].text if tokens[k].kind == "punct" else ""
        if text in _OPENERS:
            depth += 1
        elif text in _CLOSERS:
            depth -= 1
        elif text == "," and depth == 0:
            spans.append((start, k))
            start = k + 1
    spans.append((start, close_at))
    return spans


def check_ranges(tokens: list[Token], pairs: list[int] | None = None) -> None:
    """Refuse literal ranges that produce more than :data:`MAX_RANGE_ELEMENTS` elements together (their sizes
    multiplied), and a literal step of 0."""
    pairs = pairs if pairs is not None else bracket_pairs(tokens)
    n = len(tokens)
    total = 1
    for k in range(n - 1):
        if not _function_at(tokens, k, "range"):
            continue
        close_at = pairs[k + 1]
        if close_at >= n:
            continue  # unbalanced: the walk refuses it
        values = [_integer(tokens, a, b) for a, b in _arguments(tokens, k + 1, close_at)]
        known = [v for v in values if v is not None]
        if len(values) not in (2, 3) or len(known) != len(values):
            continue  # a bound known only when the query runs: the server's cap
        start, end, step = known[0], known[1], known[2] if len(known) == 3 else 1
        if step == 0:
            raise CypherRejected(f"range() with a step of 0 near {_excerpt(tokens, k)!r} never ends")
        size = range_size(start, end, step)
        total *= max(size, 1)
        if total > MAX_RANGE_ELEMENTS:
            what = f"produces {size:,} elements" if size > MAX_RANGE_ELEMENTS else \
                f"with the statement's other ranges produces {total:,} elements"
            raise CypherRejected(
                f"{_excerpt(tokens, k)!r} {what}; the ranges of one statement may produce at most "
                f"{MAX_RANGE_ELEMENTS:,} together (their sizes multiplied): use a smaller range")


@dataclass
class _Case:
    current: int = 0  # mentions in the branch being read
    best: int = 0  # the most mentions of a finished branch
    condition: bool = True  # reading the subject or a WHEN condition (not counted)


def _mentions(tokens: list[Token], start: int, end: int, at: list[int]) -> int:
    """How many of the positions ``at`` (sorted) one evaluation of ``tokens[start:end]`` can use at once: a
    ``CASE`` counts its branch with the most, its ``WHEN`` conditions and subject not at all."""
    stack = [_Case(condition=False)]
    marks = iter(at)
    mark = next(marks, end)
    for k in range(start, end):
        while mark < k:
            mark = next(marks, end)
        word = _keyword(tokens, k)
        if word == "CASE":
            stack.append(_Case())
        elif len(stack) > 1 and word in ("WHEN", "ELSE"):
            top = stack[-1]
            top.best, top.current, top.condition = max(top.best, top.current), 0, word == "WHEN"
        elif len(stack) > 1 and word == "THEN":
            stack[-1].condition = False
        elif len(stack) > 1 and word == "END":
            done = stack.pop()
            if not stack[-1].condition:
                stack[-1].current += max(done.best, done.current)
        elif k == mark and not stack[-1].condition:
            stack[-1].current += 1
    while len(stack) > 1:  # an unterminated CASE (the walk refuses it)
        done = stack.pop()
        if not stack[-1].condition:
            stack[-1].current += max(done.best, done.current)
    return stack[0].current


def _name_at(tokens: list[Token], k: int, name: str) -> bool:
    """Whether ``tokens[k]`` names the variable ``name`` (not a property key after ``.``)."""
    tok = tokens[k]
    return tok.kind in ("ident", "qident") and tok.name == name and not (k > 0 and tokens[k - 1].text == ".")


def _check_reduce(tokens: list[Token], k: int, pairs: list[int]) -> None:
    """``reduce(acc = init, x IN list | step)`` at ``k``: ``step`` names ``acc`` at most once."""
    n = len(tokens)
    open_at = k + 1
    close_at = pairs[open_at]
    if close_at >= n or open_at + 2 >= close_at or tokens[open_at + 2].text != "=" \
            or tokens[open_at + 1].kind not in ("ident", "qident"):
        return  # not the reduce form: the server's parse error
    acc = tokens[open_at + 1].name
    depth = 0
    bar = None
    for j in range(open_at + 1, close_at):
        text = tokens[j].text if tokens[j].kind == "punct" else ""
        if text in _OPENERS:
            depth += 1
        elif text in _CLOSERS:
            depth -= 1
        elif text == "|" and depth == 0:
            bar = j
            break
    if bar is None:
        return
    at = [j for j in range(bar + 1, close_at) if _name_at(tokens, j, acc)]
    if _mentions(tokens, bar + 1, close_at, at) > 1:
        raise CypherRejected(
            f"reduce() near {_excerpt(tokens, k)!r} uses its accumulator {acc} more than once in the value of a "
            f"step, so the value can double at every step (s + s, [s, s], l + l) and exhaust the server's memory: "
            f"name {acc} once per step (a CASE may name it once in each THEN and ELSE)")


def _item_end(tokens: list[Token], j: int, pairs: list[int]) -> tuple[int, int]:
    """Where the list item that starts at ``j`` ends (the next top-level ``,``, closing bracket, ``;`` or clause),
    and its last top-level ``AS`` (``-1``: none)."""
    n = len(tokens)
    end, alias = j, -1
    while end < n:
        tok = tokens[end]
        if tok.kind == "punct" and tok.text in _OPENERS:
            end = pairs[end] + 1 if pairs[end] < n else n
            continue
        if (tok.kind == "punct" and tok.text in (")", "]", "}", ",", ";")) \
                or (end > j and _keyword(tokens, end) in _CLAUSE_WORDS):
            break
        if _keyword(tokens, end) == "AS":
            alias = end
        end += 1
    return end, alias


def _set_items(tokens: list[Token], k: int, pairs: list[int]) -> list[tuple[str, str, int, int]]:
    """The ``a.p = value`` items of the ``SET`` at ``k``: ``(a, p, start of value, end of value)``; other items
    (``n:Label``, ``n += {...}``) are passed over."""
    n = len(tokens)
    items: list[tuple[str, str, int, int]] = []
    j = k + 1
    while j < n:
        end, _ = _item_end(tokens, j, pairs)
        if j + 3 < end and tokens[j].kind in ("ident", "qident") and tokens[j + 1].text == "." \
                and tokens[j + 2].kind in ("ident", "qident") and tokens[j + 3].text == "=":
            items.append((tokens[j].name, tokens[j + 2].name, j + 4, end))
        if end >= n or tokens[end].text != ",":
            break
        j = end + 1
    return items


def _check_set(tokens: list[Token], k: int, pairs: list[int]) -> None:
    """``SET a.p = value`` at ``k``: ``value`` names ``a.p`` at most once."""
    for var, prop, start, end in _set_items(tokens, k, pairs):
        at = [j for j in range(start, end - 2) if _name_at(tokens, j, var) and tokens[j + 1].text == "."
              and tokens[j + 2].kind in ("ident", "qident") and tokens[j + 2].name == prop]
        if _mentions(tokens, start, end, at) > 1:
            raise CypherRejected(
                f"SET {var}.{prop} near {_excerpt(tokens, k)!r} names {var}.{prop} more than once in its new value, "
                f"so a repeated SET can double it every time and exhaust the server's memory: name {var}.{prop} "
                "once (a CASE may name it once in each THEN and ELSE)")


#: Functions whose value is a number or a boolean: a variable named in their arguments does not grow the value
#: around them (``s[0..size(s) - 1]`` names ``s`` once in what it keeps).
_SCALAR_FUNCTIONS = frozenset({"size", "length", "isempty", "exists", "count", "tointeger", "tofloat", "toboolean",
                               "tointegerornull", "tofloatornull", "tobooleanornull", "id", "abs", "sign"})
#: Operators whose operands are numbers or whose value is a boolean: a variable next to one does not grow a string
#: or list (``x * x`` is a number).
_SCALAR_OPERATORS = frozenset({"*", "/", "%", "^", "-", "=", "<>", "!=", "<", ">", "<=", ">="})


def _scalar_calls(tokens: list[Token], pairs: list[int]) -> list[bool]:
    """For every token, whether it lies inside the arguments of a call of a :data:`_SCALAR_FUNCTIONS` function
    (one pass: a running count of the calls open at each token)."""
    n = len(tokens)
    change = [0] * (n + 1)
    for k in range(n - 1):
        tok = tokens[k]
        if tok.kind in ("ident", "qident") and tok.name.lower() in _SCALAR_FUNCTIONS \
                and tokens[k + 1].text == "(" and not (k > 0 and tokens[k - 1].text == ".") and pairs[k + 1] < n:
            change[k + 1] += 1
            change[pairs[k + 1]] -= 1
    inside: list[bool] = []
    open_calls = 0
    for k in range(n):
        open_calls += change[k]
        inside.append(open_calls > 0)
    return inside


def _next_to_scalar_operator(tokens: list[Token], k: int) -> bool:
    """Whether the token at ``k`` is an operand of one of :data:`_SCALAR_OPERATORS`."""
    return any(0 <= j < len(tokens) and tokens[j].kind == "punct" and tokens[j].text in _SCALAR_OPERATORS
               for j in (k - 1, k + 1))


def _projection_items(tokens: list[Token], k: int, pairs: list[int]) -> list[tuple[str, int, int]]:
    """The ``value AS name`` items of the ``WITH`` at ``k``: ``(name, start of value, end of value)``;
    items without ``AS`` (``WITH s``, ``*``) are passed over. The items end at ``WHERE``, ``ORDER``, ``SKIP``,
    ``LIMIT``, the next clause or a closing bracket."""
    n = len(tokens)
    items: list[tuple[str, int, int]] = []
    j = k + 1
    if j < n and _keyword(tokens, j) == "DISTINCT":
        j += 1
    while j < n:
        end, alias = _item_end(tokens, j, pairs)
        if j < alias and alias + 2 == end and tokens[alias + 1].kind in ("ident", "qident"):
            items.append((tokens[alias + 1].name, j, alias))
        if end >= n or tokens[end].text != ",":
            break
        j = end + 1
    return items


def _check_projection(tokens: list[Token], k: int, pairs: list[int], scalar: list[bool]) -> None:
    """``WITH value AS s`` at ``k``: ``value`` names ``s`` at most once where it can grow the value (not inside
    ``size()`` and the like, not next to an arithmetic or comparison operator)."""
    for name, start, end in _projection_items(tokens, k, pairs):
        at = [j for j in range(start, end) if _name_at(tokens, j, name) and not scalar[j]
              and not _next_to_scalar_operator(tokens, j)]
        if _mentions(tokens, start, end, at) > 1:
            raise CypherRejected(
                f"WITH ... AS {name} near {_excerpt(tokens, start)!r} builds {name} from itself more than once "
                f"(s + s, [s, s], replace(s, 'x', s)), so a chain of such WITH clauses can double or square it at "
                f"every step and exhaust the server's memory: name {name} once in its new value (a CASE may name "
                "it once in each THEN and ELSE)")


def check_growth(tokens: list[Token], pairs: list[int] | None = None) -> None:
    """Refuse a ``reduce()`` step, ``SET`` value or ``WITH`` projection that names what it replaces more than
    once."""
    pairs = pairs if pairs is not None else bracket_pairs(tokens)
    scalar: list[bool] | None = None
    for k in range(len(tokens) - 1):
        if _function_at(tokens, k, "reduce"):
            _check_reduce(tokens, k, pairs)
        elif _keyword(tokens, k) == "SET":
            _check_set(tokens, k, pairs)
        elif _keyword(tokens, k) == "WITH" and not (k > 0 and _keyword(tokens, k - 1) in ("STARTS", "ENDS")):
            scalar = scalar if scalar is not None else _scalar_calls(tokens, pairs)
            _check_projection(tokens, k, pairs, scalar)


def check_limits(tokens: list[Token]) -> list[int]:
    """Every rule of this module (nesting first: the others take time in proportion to it); returns the
    statement's :func:`bracket_pairs`."""
    check_nesting(tokens)
    pairs = bracket_pairs(tokens)
    check_ranges(tokens, pairs)
    check_growth(tokens, pairs)
    return pairs


def _excerpt(tokens: list[Token], k: int) -> str:
    """A few tokens from ``k`` on, as the statement spells them."""
    parts: list[str] = []
    for tok in tokens[k:k + 6]:
        if tok.spaced and parts:
            parts.append(" ")
        parts.append(tok.text)
    return "".join(parts)
