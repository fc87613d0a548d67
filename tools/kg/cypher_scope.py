"""The checks every LLM-written Cypher statement passes, and the scope label that confines it to one run's KG.

:func:`prepare` is the one gate between the model's text and a Cypher server (Bolt servers and FalkorDB alike).
It reads the statement with the strict tokenizer of :mod:`kgagents.tools.kg.cypher_text`, walks it clause by clause and
returns it **rebuilt from the checked tokens** (comments dropped), so the server runs exactly what was checked.

Refused on every server (the message says what to write instead):

- what reaches files, the network or other databases: ``LOAD CSV``, ``USE``, procedure calls (``CALL x.y()``),
  administration commands (indexes, constraints, databases, users, triggers);
- functions that are not Cypher's own: a function must be one of Cypher's built-in functions (Neo4j 5, plus the
  few FalkorDB adds), a temporal, spatial, vector, string, list or math namespace function, or -- where the server
  has APOC -- one of APOC's pure functions; internal ids (``id()``, ``elementId()``) are not offered (the prompts
  ask the model to match nodes by their labels and properties);
- a word before a pattern other than ``shortestPath``/``allShortestPaths`` (GQL path modes and selectors such as
  ``TRAIL``, ``WALK``, ``ANY SHORTEST``), the GQL ``n IS Label`` form, label expressions with ``|``/``&``/``!``/``%``
  in node patterns, and any name starting with the scope prefix (no statement can add, remove or name a scope
  label).

With a ``scope_label`` (Bolt databases) the label is added to every node pattern: in ``MATCH``/``OPTIONAL
MATCH``/``CREATE``/``MERGE``, in pattern predicates and comprehensions and in ``EXISTS``/``COUNT``/``COLLECT``
subqueries; only a bare ``(a)`` in ``CREATE``/``MERGE`` that names a variable already bound by the statement is
left alone (it is a scoped node, and re-labelling it is an error). Variables follow ``WITH`` projections,
``UNWIND``, ``FOREACH``, ``CALL {}`` imports and returns, and ``UNION``; when the walk is unsure whether a
variable is bound it labels the pattern (a new node in the scope, or a server error), never the other way round.

The label is defence in depth: on the embedded ArcadeDB server and on Neo4j servers with several databases each
run has a database of its own (:mod:`kgagents.tools.kg.cypher_store`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

from kgagents.tools.kg.cypher_dialects import APOC_NAMESPACES, COMMON_CYPHER, CypherDialect
from kgagents.tools.kg.cypher_limits import bracket_pairs, check_limits
from kgagents.tools.kg.cypher_text import CypherRejected, Token, render, tokenize

__all__ = ["SCOPE_PREFIX", "prepare", "scope_label_for", "scope_query"]

SCOPE_PREFIX = "KGScope_"

_PATTERN_CLAUSES = frozenset({"MATCH", "CREATE", "MERGE"})
_CLAUSES = frozenset({"MATCH", "OPTIONAL", "CREATE", "MERGE", "WITH", "UNWIND", "RETURN", "WHERE", "SET", "REMOVE",
                      "DELETE", "DETACH", "FOREACH", "ORDER", "SKIP", "LIMIT", "UNION", "ON", "CALL", "LOAD", "USE",
                      "FINISH", "OFFSET"})
_FIRST = frozenset({"MATCH", "OPTIONAL", "CREATE", "MERGE", "WITH", "UNWIND", "RETURN", "FOREACH", "EXPLAIN",
                    "PROFILE"})
_SUBQUERY_KEYWORDS = frozenset({"EXISTS", "COUNT", "COLLECT"})
#: Clauses that change the graph: refused in a read (ArcadeDB commits some writes of a read transaction).
_WRITE_CLAUSES = frozenset({"CREATE", "MERGE", "SET", "REMOVE", "DELETE", "DETACH", "FOREACH"})
_NOT_FUNCTIONS = _CLAUSES | {"IN", "AND", "OR", "NOT", "XOR", "WHEN", "THEN", "ELSE", "CASE", "DISTINCT", "BY",
                             "CONTAINS", "STARTS", "ENDS", "ASC", "DESC", "ASCENDING", "DESCENDING", "AS", "IS"}
#: Cypher's built-in functions (Neo4j 5 and Cypher 25), and the ones FalkorDB adds; lower case.
FUNCTIONS = frozenset(name.lower() for name in """
    avg collect count max min percentileCont percentileDisc stDev stDevP sum
    keys labels nodes range reduce relationships reverse tail head last size length
    toBooleanList toFloatList toIntegerList toStringList
    e exp log log10 sqrt acos asin atan atan2 cos cot degrees haversin pi radians sin tan
    abs ceil floor isNaN rand round sign
    all any exists isEmpty none single
    char_length character_length coalesce endNode startNode nullIf properties randomUUID timestamp
    toBoolean toBooleanOrNull toFloat toFloatOrNull toInteger toIntegerOrNull type valueType
    btrim left lower ltrim normalize replace right rtrim split substring toLower toString toStringOrNull toUpper
    trim upper
    date datetime localdatetime localtime time duration point vector
    vector_dimension_count vector_distance vector_norm
    shortestPath allShortestPaths
    toJSON indegree outdegree hasLabels typeOf
""".split())
#: Namespaces of pure built-in functions (``date.truncate``, ``point.distance``, ``vector.similarity.cosine``, ...).
NAMESPACES = frozenset({"date", "datetime", "localdatetime", "time", "localtime", "duration", "point", "vector",
                        "string", "math", "coll", "list"})
#: What may follow ``IS`` (and ``IS NOT``): null and type predicates, normal forms -- not labels.
_AFTER_IS = frozenset({"NULL", "NOT", "TYPED", "NORMALIZED", "NFC", "NFD", "NFKC", "NFKD", "::"})
_PATTERN_FUNCTIONS = frozenset({"shortestpath", "allshortestpaths"})


def scope_label_for(thread_id: str) -> str:
    """The scope label of one run: readable prefix, then a hash of the thread id (any characters are fine)."""
    return SCOPE_PREFIX + hashlib.sha256(thread_id.encode("utf-8")).hexdigest()[:20]


@dataclass
class _Frame:
    bracket: str  # "", "(", "[", "{"
    clause: str | None
    pattern: bool  # node patterns here bind variables / get the label whatever their neighbours
    scope: bool  # variables bound in here are local to this frame
    bound: set[str]
    call: bool = False  # a CALL { } body: sees only what it imports; what it RETURNs is bound after it
    every: bool = False  # a CALL (*) { } body: imports every variable bound where it opens
    returns: set[str] = dataclasses.field(default_factory=set)


class _Walk:
    """One statement's walk: the checks, the variables in scope and where the label goes."""

    def __init__(self, tokens: list[Token], dialect: CypherDialect, label: str | None, *, read_only: bool = False,
                 pairs: list[int] | None = None) -> None:
        self.tokens = tokens
        self.n = len(tokens)
        self.dialect = dialect
        self.label = label
        self.read_only = read_only
        self.pairs = pairs if pairs is not None else bracket_pairs(tokens)
        self.inserts: dict[int, str] = {}
        self.frames = [_Frame("", None, False, True, set())]
        self.relationship_ends: set[int] = set()  # the ']' of relationship patterns

    # -- reading tokens ------------------------------------------------------------------------------------
    def text(self, k: int) -> str:
        return self.tokens[k].text if 0 <= k < self.n else ""

    def upper(self, k: int) -> str:
        return self.tokens[k].upper if 0 <= k < self.n else ""

    def is_name(self, k: int) -> bool:
        return 0 <= k < self.n and self.tokens[k].kind in ("ident", "qident")

    def near(self, k: int) -> str:
        return render(self.tokens[max(0, k - 2):k + 4])

    # -- variables -------------------------------------------------------------------------------------------
    def is_bound(self, name: str) -> bool:
        for f in reversed(self.frames):
            if name in f.bound:
                return True
            if f.call and not f.every:  # a subquery body sees only what it imported
                return False
        return False

    def bind(self, name: str) -> None:
        for f in reversed(self.frames):
            if f.scope:
                f.bound.add(name)
                return

    def set_clause(self, clause: str) -> None:
        top = self.frames[-1]
        top.clause = clause
        top.pattern = clause in _PATTERN_CLAUSES

    # -- arrows around a node pattern ------------------------------------------------------------------------
    def closing(self, k: int) -> int:
        """The index of the bracket that closes the opening one at ``k`` (``self.n`` when it is not closed)."""
        return self.pairs[k]

    def arrow_after(self, k: int) -> bool:
        """Whether a relationship pattern starts at token ``k``: ``<-``, ``->``, ``--``, ``-->``, or ``-[...]``
        followed by ``-`` or ``->`` (``- [1][0]`` is a subtraction)."""
        nxt = self.text(k)
        if nxt in ("<-", "->"):
            return True
        if nxt != "-":
            return False
        if self.text(k + 1) in ("-", "->", ">"):
            return True
        return self.text(k + 1) == "[" and self.text(self.closing(k + 1) + 1) in ("-", "->")

    def arrow_before(self, k: int) -> bool:
        """Whether a relationship pattern ends at token ``k``: ``->``, ``--``, ``<--``, ``- >``, or ``-`` after the
        ``]`` of a relationship pattern (``[1] - (x)`` is a subtraction)."""
        prev = self.text(k)
        if prev == "->":
            return True
        if prev == ">":
            return self.text(k - 1) == "-"
        if prev != "-":
            return False
        return self.text(k - 1) in ("-", "<-") or k - 1 in self.relationship_ends

    # -- the walk ----------------------------------------------------------------------------------------------
    def run(self) -> str:
        tokens = self.tokens
        if not tokens:
            raise CypherRejected("the statement is empty")
        for tok in tokens:
            if tok.kind in ("ident", "qident") and tok.name.lower().startswith(SCOPE_PREFIX.lower()):
                raise CypherRejected(f"names starting with {SCOPE_PREFIX!r} are reserved")
        first = tokens[0].upper
        if first not in _FIRST and not (first == "CALL" and self.dialect.call_subqueries):
            raise CypherRejected(
                f"the statement starts with {tokens[0].text!r}: only MATCH, OPTIONAL MATCH, CREATE, MERGE, WITH, "
                "UNWIND, RETURN and FOREACH statements are allowed (no procedures, LOAD CSV or administration "
                "commands)")
        i = 0
        while i < self.n:
            i = self.step(i)
        if len(self.frames) != 1:
            raise CypherRejected("unbalanced brackets: the statement ends inside ( [ or {")
        return render(tokens, self.inserts)

    def is_clause(self, i: int) -> bool:
        """Whether token ``i`` starts a clause (not a property key, a label, a map key or ``STARTS WITH``)."""
        tok = self.tokens[i]
        up = tok.upper
        return tok.kind == "ident" and up in _CLAUSES and self.text(i + 1) not in (".", ":") \
            and self.text(i - 1) not in (".", ":") and not (up == "WITH" and self.upper(i - 1) in ("STARTS", "ENDS"))

    def step(self, i: int) -> int:
        tok = self.tokens[i]
        up = tok.upper
        if self.is_clause(i):
            return self.clause(i, up)
        if self.frames[-1].pattern and tok.kind in ("ident", "qident", "number", "string") \
                and not (tok.kind in ("ident", "qident") and self.text(i + 1) in ("=", "(")):
            # between the patterns of MATCH/CREATE/MERGE: only path variables (p = ...) and shortestPath(...)
            raise CypherRejected(f"unexpected {tok.text!r} in a pattern near {self.near(i)!r} (no path modes or "
                                 "selectors such as TRAIL, WALK, ANY SHORTEST or DIFFERENT RELATIONSHIPS)")
        if up == "IS":
            self.check_is(i)
        if self.is_name(i) and self.text(i + 1) == "." and self.text(i - 1) != ".":
            self.check_namespaced(i)
        if tok.kind == "punct":
            if tok.text == "(":
                return self.open_paren(i)
            if tok.text in ("[", "{"):
                return self.open_bracket(i)
            if tok.text in (")", "]", "}"):
                return self.close(i)
            if tok.text == "=" and self.frames[-1].pattern and self.is_name(i - 1):
                self.bind(self.tokens[i - 1].name)  # a path variable: p = (a)-->(b)
        return i + 1

    def clause(self, i: int, up: str) -> int:
        top = self.frames[-1]
        prev = self.upper(i - 1)
        if up == "CALL":
            return self.open_subquery(i)
        if up in ("LOAD", "USE"):
            raise CypherRejected(f"{up} is not allowed in this knowledge graph (no files, network or other "
                                 "databases)")
        if self.read_only and up in _WRITE_CLAUSES:
            raise CypherRejected(f"{up} changes the knowledge graph, and a query only reads it: write the query with "
                                 "MATCH, OPTIONAL MATCH, WITH, UNWIND and RETURN")
        if up == "ON" or (up in ("CREATE", "MATCH") and prev == "ON"):
            pass  # ON CREATE SET / ON MATCH SET: the SET that follows ends the MERGE pattern
        elif up == "CREATE" and self.tokens[i + 1:i + 2] and self.tokens[i + 1].kind == "ident":
            raise CypherRejected(f"CREATE {self.tokens[i + 1].text} is not allowed (administration commands "
                                 "and triggers are rejected)")
        elif up == "OPTIONAL":
            pass
        elif up == "WITH":
            self.project_with(i)
            self.set_clause("WITH")
        elif up == "RETURN" and top.call:
            top.returns.update(self.projection(i)[0])
            self.set_clause("RETURN")
        elif up == "UNION":
            top.bound.clear()
            self.set_clause("UNION")
        elif up == "DETACH":
            self.set_clause("DELETE")
        else:
            self.set_clause(up)
        if up == "UNWIND":
            alias = self.unwind_alias(i)
            if alias:
                self.bind(alias)
        return i + 1

    def check_is(self, i: int) -> None:
        nxt = self.upper(i + 1) or self.text(i + 1)
        if nxt == "NOT":
            nxt = self.upper(i + 2) or self.text(i + 2)
            if nxt == "NOT":
                nxt = ""
        if nxt not in _AFTER_IS:
            raise CypherRejected(f"{self.near(i)!r}: write label checks as n:Label, not n IS Label")

    def check_namespaced(self, i: int) -> None:
        k = i
        while self.text(k + 1) == "." and self.is_name(k + 2):
            k += 2
        name = "".join(t.text for t in self.tokens[i:k + 1])
        if self.text(k + 1) == "(" and not self.namespaced_allowed(name):
            raise CypherRejected(f"the function {name}() is not allowed (no database procedures"
                                 f"{'; APOC only for its pure functions' if self.dialect.apoc else ' or APOC'})")

    def namespaced_allowed(self, name: str) -> bool:
        parts = [p.strip("`").lower() for p in name.split(".")]
        if parts[0] in NAMESPACES:
            return True
        return self.dialect.apoc and parts[0] == "apoc" and len(parts) > 2 and parts[1] in APOC_NAMESPACES

    def function_name(self, i: int) -> tuple[str, bool] | None:
        """The function a ``(`` at ``i`` calls -- its name, and whether it is namespaced (``date.truncate``) --
        or None when the parenthesis opens no call."""
        if not self.is_name(i - 1) or self.upper(i - 1) in _NOT_FUNCTIONS:
            return None
        return self.tokens[i - 1].name, self.text(i - 2) == "."

    def open_paren(self, i: int) -> int:
        top = self.frames[-1]
        call = self.function_name(i)
        node = _node_pattern(self.tokens, i, self.pairs)
        if call is not None:
            function, namespaced = call
            lowered = function.lower() if not namespaced else ""
            if lowered in ("id", "elementid"):
                raise CypherRejected(f"{function}() is not available: omit internal ids and match nodes by their "
                                     "labels and properties")
            wraps = lowered in _PATTERN_FUNCTIONS
            if (top.pattern and not wraps) or (node is not None and self.arrow_after(node[0] + 1)):
                raise CypherRejected(f"{self.near(i)!r}: only shortestPath() and allShortestPaths() may wrap a "
                                     "pattern (no path modes or selectors such as TRAIL, WALK or ANY SHORTEST)")
            if not namespaced and lowered not in FUNCTIONS:
                raise CypherRejected(f"{function}() is not a Cypher function here (no procedures, path modes such "
                                     "as TRAIL or WALK, or server extensions)")
            self.frames.append(_Frame("(", top.clause, top.pattern and wraps, False, set()))
            return i + 1
        if node is not None:
            end, var, labels_end, simple = node
            if top.pattern or self.arrow_after(end + 1) or self.arrow_before(i - 1):
                return self.node_pattern(i, end, var, labels_end, simple)
        elif top.pattern and self.text(i + 1) not in ("(", ")"):
            # in a pattern every parenthesis is a node pattern or a group of them
            raise CypherRejected(f"unsupported pattern syntax near {self.near(i)!r}")
        foreach = self.upper(i - 1) == "FOREACH"
        frame = _Frame("(", top.clause, top.pattern, foreach, set())
        self.frames.append(frame)
        if foreach and self.is_name(i + 1):
            frame.bound.add(self.tokens[i + 1].name)
            frame.pattern = False
        return i + 1

    def node_pattern(self, i: int, end: int, var: str | None, labels_end: int, simple: bool) -> int:
        top = self.frames[-1]
        if not simple:
            raise CypherRejected("label expressions with |, &, ! or % are not allowed here; write labels as "
                                 "(n:Label) or (n:Label1:Label2)")
        bare = labels_end == (i + 1 if var is None else i + 2) and end == labels_end
        creating = top.clause in ("CREATE", "MERGE") and top.pattern
        if not (creating and var is not None and bare and self.is_bound(var)) and self.label:
            self.inserts[labels_end - 1] = ":`" + self.label + "`"
        if var is not None and top.pattern:
            self.bind(var)
        # go on inside the pattern: its property map or WHERE may hold patterns of their own
        self.frames.append(_Frame("(", top.clause, False, False, set()))
        return labels_end

    def open_bracket(self, i: int) -> int:
        top = self.frames[-1]
        tok = self.tokens[i]
        if tok.text == "{" and self.upper(i - 1) in _SUBQUERY_KEYWORDS:
            if not self.dialect.subqueries:
                raise CypherRejected(f"{self.dialect.server} has no {self.upper(i - 1)} {{ }} subqueries")
            self.frames.append(_Frame("{", None, True, True, set()))
        elif tok.text == "[" and self.text(i - 1) in ("-", "<-") and self.text(self.closing(i) + 1) in ("-", "->"):
            # a relationship pattern: its variable is bound in pattern clauses
            if top.pattern and self.is_name(i + 1):
                self.bind(self.tokens[i + 1].name)
            self.relationship_ends.add(self.closing(i))
            self.frames.append(_Frame("[", top.clause, False, False, set()))
        else:
            self.frames.append(_Frame(tok.text, top.clause, False, False, set()))
        return i + 1

    def close(self, i: int) -> int:
        closing = {")": "(", "]": "[", "}": "{"}[self.tokens[i].text]
        if len(self.frames) == 1 or self.frames[-1].bracket != closing:
            raise CypherRejected(f"unbalanced {self.tokens[i].text!r} near {self.near(i)!r}")
        closed = self.frames.pop()
        if closed.call and self.upper(i + 1) == "IN":
            raise CypherRejected("CALL { ... } IN TRANSACTIONS is not allowed: it commits its parts outside the "
                                 "statement's transaction, so they cannot be checked or undone; write CALL { ... }")
        for name in closed.returns if closed.call else ():
            self.bind(name)
        return i + 1

    def open_subquery(self, i: int) -> int:
        """``CALL { ... }`` or ``CALL (a, b) { ... }`` at ``i``: open the body's frame (it sees ``a, b`` or what
        its own ``WITH`` imports) and return the index after its ``{``. Procedure calls are rejected."""
        tokens = self.tokens
        k = i + 1
        imported: set[str] = set()
        every = False
        if self.text(k) == "(" and self.dialect.call_variable_scope:
            k += 1
            while self.text(k) != ")":
                if self.is_name(k):
                    imported.add(tokens[k].name)
                elif self.text(k) == "*":
                    every = True
                elif self.text(k) != ",":
                    raise CypherRejected(f"unexpected {self.text(k)!r} in CALL ( ... ): list the variables the "
                                         "subquery imports")
                k += 1
            k += 1
        if not self.dialect.call_subqueries or self.text(k) != "{":
            raise CypherRejected("CALL is not allowed here: no procedures"
                                 + ("; subqueries are written CALL { WITH x ... }" if self.dialect.call_subqueries
                                    else f", and {self.dialect.server} has no CALL {{}} subqueries"))
        self.frames.append(_Frame("{", None, False, True, imported, call=True, every=every))
        return k + 1

    def projection(self, i: int) -> tuple[set[str], bool]:
        """The names a ``WITH`` or ``RETURN`` at ``i`` projects (``a, b AS c``), and whether it keeps all (``*``)."""
        names: set[str] = set()
        keep_all = False
        item: list[Token] = []
        depth = 0
        stop = _CLAUSES  # WHERE, ORDER BY, SKIP, LIMIT, OFFSET and every clause end a projection
        items: list[list[Token]] = []
        for k in range(i + 1, self.n):
            t = self.tokens[k]
            if depth == 0 and t.kind == "ident" and t.upper in stop and item:
                break
            if t.text in ("(", "[", "{"):
                depth += 1
            elif t.text in (")", "]", "}"):
                depth -= 1
                if depth < 0:
                    break
            if depth == 0 and t.text == ",":
                items.append(item)
                item = []
                continue
            if t.upper == "DISTINCT" and not item and not items:
                continue
            item.append(t)
        if item:
            items.append(item)
        for it in items:
            if len(it) == 1 and it[0].text == "*":
                keep_all = True
            elif len(it) >= 3 and it[-2].upper == "AS" and it[-1].kind in ("ident", "qident"):
                names.add(it[-1].name)
            elif len(it) == 1 and it[0].kind in ("ident", "qident"):
                names.add(it[0].name)
        return names, keep_all

    def project_with(self, i: int) -> None:
        """``WITH a, b AS c, *``: the frame's bound variables become the projected names."""
        scope = next(f for f in reversed(self.frames) if f.scope)
        names, keep_all = self.projection(i)
        if not keep_all:
            scope.bound.clear()
        scope.bound.update(names)

    def unwind_alias(self, i: int) -> str | None:
        """The alias of the ``UNWIND`` at ``i``: the name after its ``AS`` (None when the clause has none)."""
        depth = 0
        for k in range(i + 1, self.n):
            t = self.tokens[k]
            if t.text in ("(", "[", "{"):
                depth += 1
            elif t.text in (")", "]", "}"):
                depth -= 1
                if depth < 0:
                    return None
            elif depth == 0 and t.upper == "AS" and self.is_name(k + 1):
                return self.tokens[k + 1].name
            elif depth == 0 and self.is_clause(k):
                return None
        return None


def _node_pattern(tokens: list[Token], i: int, pairs: list[int]) -> tuple[int, str | None, int, bool] | None:
    """If ``tokens[i]`` (a ``(``) opens a node pattern, return ``(index of ')', variable, index after the labels,
    simple labels?)``; otherwise None. ``pairs``: the statement's
    :func:`~kgagents.tools.kg.cypher_limits.bracket_pairs`.

    Grammar: ``( [var] [:Label[:Label...] | label expression] [{map} | $param] [WHERE expr] )``.
    """
    n = len(tokens)
    k = i + 1
    var = None
    if k < n and tokens[k].kind in ("ident", "qident") and tokens[k].upper != "WHERE":
        var = tokens[k].name
        k += 1
    simple = True
    if k < n and tokens[k].text == ":":
        while k < n and tokens[k].text in (":", "|", "&", "!", "%"):
            if tokens[k].text != ":":
                simple = False
            k += 1
            while k < n and tokens[k].text == "!":
                simple = False
                k += 1
            if k < n and tokens[k].text == "%":  # the wildcard label matches any label
                simple = False
                k += 1
            elif k < n and tokens[k].kind in ("ident", "qident"):
                k += 1
            else:
                return None
    labels_end = k
    if k < n and tokens[k].text == "{":
        k = pairs[k] + 1 if pairs[k] < n else n  # past the property map
    if k < n and tokens[k].upper == "WHERE":
        k = pairs[i]  # the WHERE runs to the parenthesis that closes the pattern
    if k < n and tokens[k].text == ")":
        return k, var, labels_end, simple
    return None


def prepare(statement: str, dialect: CypherDialect = COMMON_CYPHER, scope_label: str | None = None, *,
            read_only: bool = False) -> str:
    """The statement as it may reach the server: checked (the size limits of
    :mod:`~kgagents.tools.kg.cypher_limits` first), rebuilt from its tokens, with ``scope_label`` on every node
    pattern when one is given. ``read_only``: a query, which may not change the graph (no ``CREATE``, ``MERGE``,
    ``SET``, ``REMOVE``, ``DELETE``, ``FOREACH``). Raises :class:`~kgagents.tools.kg.cypher_text.CypherRejected`
    with a message for the model."""
    tokens = tokenize(statement)
    pairs = check_limits(tokens)
    return _Walk(tokens, dialect, scope_label, read_only=read_only, pairs=pairs).run()


def scope_query(statement: str, scope_label: str, dialect: CypherDialect = COMMON_CYPHER) -> str:
    """:func:`prepare` with the run's scope label (the form the Bolt store uses)."""
    return prepare(statement, dialect, scope_label)
