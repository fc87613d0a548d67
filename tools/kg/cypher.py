"""What the Cypher backends (Bolt servers through the ``neo4j`` driver, FalkorDB) share.

- the node-id convention: every node carries a unique string property ``id`` (the id the prompt shows);
  nodes written without one get a readable id (``person_1``) right after the write, in a deterministic way;
- the snapshot export and restore queries, written in the Cypher subset that Neo4j, Memgraph, ArcadeDB and
  FalkorDB all accept (no APOC, no ``elementId()`` on FalkorDB, no ``EXISTS {}``);
- the **dialects** (:class:`CypherDialect`): what each server accepts beyond that subset -- Neo4j the whole
  language the KGoT paper's prompts allow (subqueries, ``CALL {}``, APOC functions where installed), ArcadeDB and
  FalkorDB their subsets; a Bolt server is recognised by the agent string it announces (:func:`bolt_dialect`);
- the **scope rewrite** that confines LLM-written Cypher to one run's KG on a shared Bolt database
  (:func:`scope_query`);
- turning driver values (nodes, relationships, paths, temporal values) into compact JSON for the LLM.

The scope rewrite
-----------------
On a Bolt server every node of a run carries a scope label (``KGScope_<hash of the run>``). Before an
LLM-written statement runs, :func:`scope_query` tokenizes it and

1. adds the scope label to every node pattern -- in ``MATCH``/``OPTIONAL MATCH``/``CREATE``/``MERGE``
   patterns, in pattern predicates and comprehensions, and in ``EXISTS``/``COUNT``/``COLLECT`` subqueries;
   only a bare ``(a)`` in ``CREATE``/``MERGE`` that names a variable already bound by the statement is left
   alone (it *is* a scoped node, and re-labelling it is an error);
2. rejects what could reach past node patterns: procedure calls and ``CALL {}`` subqueries, ``LOAD CSV``,
   ``USE``, administration commands (indexes, constraints, databases, users, triggers), dynamic labels
   (``:$(...)``), the GQL ``(n IS Label)`` form, label expressions with ``|``/``&``/``!``, and any name
   starting with the scope prefix (so no query can add, remove or name another run's scope label).

Relationships need no label: they are only reachable through their end nodes, and no statement can bind a
node of another scope, so none can connect two scopes either.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tools.kg.base import KGSnapshot, NodeRecord, RelationshipRecord

SCOPE_PREFIX = "KGScope_"
MAX_RESULT_ROWS = 200


class CypherScopeError(ValueError):
    """An LLM-written statement uses something the scoped backend does not allow (the message says what)."""


# ------------------------------------------------------------------------------------------------------------
# Dialects
# ------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CypherDialect:
    """What one Cypher server accepts beyond the subset all of them share (the prompts describe it per server)."""

    server: str
    subqueries: bool = False
    """``EXISTS { }``, ``COUNT { }`` and ``COLLECT { }`` subqueries."""
    call_subqueries: bool = False
    """``CALL { WITH x ... }`` subqueries."""
    call_variable_scope: bool = False
    """``CALL (x) { ... }``, the subquery form with a variable scope clause."""
    apoc: bool = False
    """APOC's pure functions (``apoc.text.join``, ``apoc.coll.sum``, ...)."""
    notes: tuple[str, ...] = ()
    """Further rules of this server, for the prompts."""


#: The subset every supported server shares (Memgraph and Bolt servers that are not recognised).
COMMON_CYPHER = CypherDialect("a Cypher server")
#: Neo4j 5: the paper's dialect ("You can use ALL Cypher/Neo4j functionalities"); ``apoc`` where the plugin is in.
NEO4J = CypherDialect("Neo4j", subqueries=True, call_subqueries=True, call_variable_scope=True)
#: ArcadeDB's native Cypher engine over Bolt (measured on 26.10: subqueries and ``CALL {}`` work; only some APOC
#: functions exist, so the prompts offer none).
ARCADEDB = CypherDialect("ArcadeDB", subqueries=True, call_subqueries=True, call_variable_scope=True)
#: FalkorDB 4 (measured with falkordblite 0.11): no ``EXISTS``/``COUNT``/``COLLECT`` subqueries, no APOC,
#: ``CALL {}`` only with an importing ``WITH``.
FALKORDB = CypherDialect("FalkorDB", call_subqueries=True, notes=(
    "shortestPath() is allowed only in WITH and RETURN clauses, not in MATCH",
    "elementId() does not exist; nodes are told apart by their properties"))

#: APOC namespaces whose functions only compute on their arguments: allowed where the server has APOC. Namespaces
#: that run Cypher (``apoc.cypher``), load or export data, or change the schema stay rejected.
APOC_NAMESPACES = frozenset({"agg", "any", "bitwise", "coll", "convert", "date", "hashing", "json", "label", "map",
                             "math", "meta", "node", "nodes", "number", "path", "rel", "scoring", "temporal", "text",
                             "util"})


def bolt_dialect(agent: str, *, apoc: bool = False) -> CypherDialect:
    """The dialect of a Bolt server, from the agent string it announces on connecting.

    Neo4j says ``Neo4j/5.26.0``; servers that speak Bolt in Neo4j's stead say so (``Neo4j/5.26.0 compatible
    (ArcadeDB 26.10.2)``, ``Neo4j/v5.11.0 compatible graph database server - Memgraph``). ``CALL
    dbms.components()`` cannot tell them apart: ArcadeDB answers it as "Neo4j Kernel". ``apoc``: the server
    answered ``apoc.version()`` (Neo4j only).
    """
    text = agent.strip()
    if "arcadedb" in text.lower():
        return ARCADEDB
    if text.lower().startswith("neo4j/") and "compatible" not in text.lower():
        return dataclasses.replace(NEO4J, apoc=apoc) if apoc else NEO4J
    return COMMON_CYPHER


def scope_label_for(thread_id: str) -> str:
    """The scope label of one run: readable prefix, then a hash of the thread id (any characters are fine)."""
    return SCOPE_PREFIX + hashlib.sha256(thread_id.encode("utf-8")).hexdigest()[:20]


def quote_name(name: str) -> str:
    """A label, relationship type or property key as a backtick-quoted Cypher name."""
    return "`" + str(name).replace("`", "``") + "`"


# ------------------------------------------------------------------------------------------------------------
# Tokenizer
# ------------------------------------------------------------------------------------------------------------
@dataclass
class Token:
    kind: str  # "ident" (also keywords), "qident" (`quoted`), "string", "number", "param", "punct", "ws", "comment"
    text: str
    start: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "ident" else ""

    @property
    def name(self) -> str:
        """An identifier's name (backticks removed)."""
        if self.kind == "qident":
            return self.text[1:-1].replace("``", "`")
        return self.text


_TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<qident>`(?:[^`]|``)*`)
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<param>\$(?:\w+|`(?:[^`]|``)*`)?)
  | (?P<ident>[^\W\d]\w*)
  | (?P<punct><>|<=|>=|=~|->|<-|::|\+=|\.\.|\S)
""", re.VERBOSE | re.DOTALL)


def tokenize(query: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(query):
        match = _TOKEN_RE.match(query, pos)
        if match is None or match.end() == pos:
            raise CypherScopeError(f"cannot read the query at character {pos}: {query[pos:pos + 20]!r} "
                                   "(an unterminated string or comment?)")
        kind = match.lastgroup or "punct"
        text = match.group()
        if kind == "punct" and text in {"'", '"', "`"}:
            raise CypherScopeError(f"unterminated quote at character {pos}")
        if kind == "comment" and text.startswith("/*") and not text.endswith("*/"):
            raise CypherScopeError("unterminated /* comment")
        tokens.append(Token(kind, text, pos))
        pos = match.end()
    return tokens


def split_statements(query: str) -> list[str]:
    """Split on top-level ``;`` (outside strings and comments); empty statements are dropped."""
    parts, start = [], 0
    for tok in tokenize(query):
        if tok.kind == "punct" and tok.text == ";":
            parts.append(query[start:tok.start])
            start = tok.start + 1
    parts.append(query[start:])
    return [p.strip() for p in parts if p.strip() and any(t.kind not in ("ws", "comment") for t in tokenize(p))]


# ------------------------------------------------------------------------------------------------------------
# The scope rewrite
# ------------------------------------------------------------------------------------------------------------
_PATTERN_CLAUSES = {"MATCH", "CREATE", "MERGE"}
_CLAUSES = {"MATCH", "OPTIONAL", "CREATE", "MERGE", "WITH", "UNWIND", "RETURN", "WHERE", "SET", "REMOVE", "DELETE",
            "DETACH", "FOREACH", "ORDER", "SKIP", "LIMIT", "UNION", "ON", "CALL", "LOAD", "USE", "FINISH", "OFFSET"}
_FIRST = {"MATCH", "OPTIONAL", "CREATE", "MERGE", "WITH", "UNWIND", "RETURN", "FOREACH", "EXPLAIN", "PROFILE"}
_SUBQUERY_KEYWORDS = {"EXISTS", "COUNT", "COLLECT"}
_ADMIN = {"DROP", "SHOW", "ALTER", "GRANT", "DENY", "REVOKE", "START", "STOP", "TERMINATE", "ENABLE", "DISABLE",
          "RENAME", "DUMP", "FREE", "STORAGE", "ANALYZE", "REGISTER", "ADD", "CHECK", "ALLOW"}
_NOT_FUNCTIONS = _CLAUSES | {"IN", "AND", "OR", "NOT", "XOR", "WHEN", "THEN", "ELSE", "CASE", "DISTINCT", "BY",
                               "CONTAINS", "STARTS", "ENDS", "ASC", "DESC", "ASCENDING", "DESCENDING", "AS", "IS"}
_ALLOWED_NAMESPACES = {"date", "datetime", "localdatetime", "time", "localtime", "duration", "point", "vector",
                       "string", "math"}


@dataclass
class _Frame:
    bracket: str  # "", "(", "[", "{"
    clause: str | None
    pattern: bool  # node patterns here bind variables / get the label whatever their neighbours
    scope: bool  # variables bound in here are local to this frame
    bound: set[str]
    foreach_var: bool = False
    call: bool = False  # a CALL { } body: sees only what it imports; what it RETURNs is bound after it
    returns: set[str] = dataclasses.field(default_factory=set)


def _significant(tokens: list[Token]) -> list[Token]:
    return [t for t in tokens if t.kind not in ("ws", "comment")]


def scope_query(statement: str, scope_label: str, dialect: CypherDialect = COMMON_CYPHER) -> str:
    """Rewrite one Cypher statement so that it only sees and changes nodes carrying ``scope_label``; what the
    server's ``dialect`` adds (``CALL {}`` subqueries, APOC functions) is allowed and scoped too."""
    tokens = _significant(tokenize(statement))
    if not tokens:
        raise CypherScopeError("the statement is empty")
    for tok in tokens:
        if tok.kind in ("ident", "qident") and tok.name.lower().startswith(SCOPE_PREFIX.lower()):
            raise CypherScopeError(f"names starting with {SCOPE_PREFIX!r} are reserved")
    first = tokens[0].upper
    if first not in _FIRST and not (first == "CALL" and dialect.call_subqueries):
        raise CypherScopeError(
            f"the statement starts with {tokens[0].text!r}: only MATCH, OPTIONAL MATCH, CREATE, MERGE, WITH, "
            "UNWIND, RETURN and FOREACH statements are allowed (no administration commands)")
    label = ":" + quote_name(scope_label)
    inserts: dict[int, str] = {}  # token index -> text inserted after it
    frames = [_Frame("", None, False, True, set())]
    i = 0
    n = len(tokens)

    def upper(k: int) -> str:
        return tokens[k].upper if 0 <= k < n else ""

    def text(k: int) -> str:
        return tokens[k].text if 0 <= k < n else ""

    def is_bound(name: str) -> bool:
        for f in reversed(frames):
            if name in f.bound:
                return True
            if f.call:  # a subquery body sees only what it imported
                return False
        return False

    def bind(name: str) -> None:
        for f in reversed(frames):
            if f.scope:
                f.bound.add(name)
                return

    def set_clause(clause: str) -> None:
        top = frames[-1]
        top.clause = clause
        top.pattern = clause in _PATTERN_CLAUSES

    while i < n:
        tok = tokens[i]
        up = tok.upper
        top = frames[-1]
        if tok.kind == "ident" and up in _CLAUSES and text(i + 1) not in (".", ":") and text(i - 1) != "." \
                and not (up == "WITH" and upper(i - 1) in ("STARTS", "ENDS")):
            prev = upper(i - 1)
            if up == "CALL":
                i = _open_subquery(tokens, i, frames, dialect)
                continue
            if up in ("LOAD", "USE"):
                raise CypherScopeError(f"{up} is not allowed in this knowledge graph")
            if up == "CREATE" and prev == "ON" or up == "MATCH" and prev == "ON":
                top.pattern = False
            elif up == "CREATE" and tokens[i + 1:i + 2] and tokens[i + 1].kind == "ident":
                raise CypherScopeError(f"CREATE {tokens[i + 1].text} is not allowed (administration commands "
                                       "and triggers are rejected)")
            elif up == "OPTIONAL":
                pass
            elif up == "ON":
                top.pattern = False
            elif up == "WITH":
                _project_with(tokens, i, frames)
                set_clause("WITH")
            elif up == "RETURN" and frames[-1].call:
                frames[-1].returns.update(_projection(tokens, i)[0])
                set_clause("RETURN")
            elif up == "UNION":
                top.bound.clear()
                set_clause("UNION")
            elif up == "DETACH":
                set_clause("DELETE")
            else:
                set_clause(up)
            if up == "UNWIND":
                alias = _unwind_alias(tokens, i)
                if alias:
                    bind(alias)
            i += 1
            continue
        if tok.kind == "ident" and up in _ADMIN and (i == 0 or text(i - 1) in (";",)):
            raise CypherScopeError(f"{up} commands are not allowed")
        if tok.kind in ("ident", "qident") and text(i + 1) == "." and text(i - 1) != ".":
            k = i
            while text(k + 1) == "." and k + 2 < n and tokens[k + 2].kind in ("ident", "qident"):
                k += 2
            name = "".join(t.text for t in tokens[i:k + 1])
            if text(k + 1) == "(" and not _function_allowed(name, dialect):
                raise CypherScopeError(f"the function {name}() is not allowed (no database procedures"
                                       f"{'; APOC only for its pure functions' if dialect.apoc else ' or APOC'})")
        if tok.kind == "punct" and tok.text == ":" and text(i + 1).startswith("$"):
            raise CypherScopeError("dynamic labels (:$(...)) are not allowed")
        if tok.kind == "punct" and tok.text == "(":
            node = _node_pattern(tokens, i)
            prev = text(i - 1)
            func_call = tokens[i - 1].kind in ("ident", "qident") if i > 0 else False
            if func_call and upper(i - 1) in _NOT_FUNCTIONS:
                func_call = False
            if node is not None and not func_call:
                end, var, labels_end, simple = node
                arrow_next = text(end + 1) in ("-", "<-", "<", "->")
                arrow_prev = prev in ("-", "->", ">")
                in_pattern = top.pattern or arrow_next or arrow_prev
                if in_pattern:
                    if not simple:
                        raise CypherScopeError("label expressions with |, &, ! or % are not allowed here; "
                                               "write labels as (n:Label) or (n:Label1:Label2)")
                    bare = labels_end == (i + 1 if var is None else i + 2) and end == labels_end
                    creating = top.clause in ("CREATE", "MERGE") and top.pattern
                    if creating and var is not None and bare and is_bound(var):
                        pass  # an already-bound (hence scoped) node: re-labelling it here is an error
                    else:
                        inserts[labels_end - 1] = label
                    if var is not None and top.pattern:
                        bind(var)
                    # go on inside the pattern: its property map or WHERE may hold patterns of their own
                    frames.append(_Frame("(", top.clause, False, False, set()))
                    i = labels_end
                    continue
            elif node is None and top.pattern and not func_call and text(i + 1) not in ("(", ")"):
                # in a pattern every parenthesis is a node pattern or a group of them
                if i + 2 < n and tokens[i + 1].kind in ("ident", "qident") and upper(i + 2) == "IS":
                    raise CypherScopeError("write labels as (n:Label), not (n IS Label)")
                raise CypherScopeError(f"unsupported pattern syntax near {statement[tok.start:tok.start + 40]!r}")
            frames.append(_Frame("(", top.clause, top.pattern, upper(i - 1) == "FOREACH", set()))
            if upper(i - 1) == "FOREACH" and i + 1 < n and tokens[i + 1].kind in ("ident", "qident"):
                frames[-1].bound.add(tokens[i + 1].name)
                frames[-1].foreach_var = True
                frames[-1].pattern = False
            i += 1
            continue
        if tok.kind == "punct" and tok.text in ("[", "{"):
            if tok.text == "{" and upper(i - 1) in _SUBQUERY_KEYWORDS:
                frames.append(_Frame("{", None, True, True, set()))
            elif tok.text == "[" and prev_is_arrow(tokens, i):
                # a relationship pattern: its variable is bound in pattern clauses
                if top.pattern and i + 1 < n and tokens[i + 1].kind in ("ident", "qident"):
                    bind(tokens[i + 1].name)
                frames.append(_Frame("[", top.clause, False, False, set()))
            else:
                frames.append(_Frame(tok.text, top.clause, False, False, set()))
            i += 1
            continue
        if tok.kind == "punct" and tok.text in (")", "]", "}"):
            if len(frames) > 1:
                closed = frames.pop()
                for name in closed.returns if closed.call else ():
                    bind(name)
            i += 1
            continue
        if tok.kind == "punct" and tok.text == "|" and frames[-1].foreach_var:
            frames[-1].pattern = False
        if tok.kind == "punct" and tok.text == "=" and top.pattern and i > 0 and tokens[i - 1].kind in (
                "ident", "qident"):
            bind(tokens[i - 1].name)  # a path variable: p = (a)-->(b)
        i += 1
    # rebuild from the original text, so spacing and comments stay
    result, last = [], 0
    for k in sorted(inserts):
        tok = tokens[k]
        end = tok.start + len(tok.text)
        result.append(statement[last:end])
        result.append(inserts[k])
        last = end
    result.append(statement[last:])
    return "".join(result)


def prev_is_arrow(tokens: list[Token], i: int) -> bool:
    return i > 0 and tokens[i - 1].text in ("-", "<-")


def _node_pattern(tokens: list[Token], i: int) -> tuple[int, str | None, int, bool] | None:
    """If ``tokens[i]`` (a ``(``) opens a node pattern, return ``(index of ')', variable, index after the labels,
    simple labels?)``; otherwise None.

    Grammar: ``( [var] [:Label[:Label...] | label expression] [{map} | $param] [WHERE expr] )``.
    """
    n = len(tokens)
    k = i + 1
    var = None
    if k < n and tokens[k].kind in ("ident", "qident") and tokens[k].upper not in ("WHERE",):
        var = tokens[k].name
        k += 1
    simple = True
    if k < n and tokens[k].text == ":":
        while k < n and tokens[k].text in (":", "|", "&", "!", "%"):
            if tokens[k].text != ":":
                simple = False
            k += 1
            if k < n and tokens[k].text == "(":
                return None
            while k < n and tokens[k].text == "!":
                simple = False
                k += 1
            if k < n and (tokens[k].kind in ("ident", "qident") or tokens[k].text == "%"):
                k += 1
            else:
                return None
    labels_end = k
    if k < n and tokens[k].text == "{":
        depth = 0
        while k < n:
            if tokens[k].text in ("{", "(", "["):
                depth += 1
            elif tokens[k].text in ("}", ")", "]"):
                depth -= 1
                if depth == 0:
                    k += 1
                    break
            k += 1
    elif k < n and tokens[k].kind == "param":
        k += 1
    if k < n and tokens[k].upper == "WHERE":
        depth = 1
        k += 1
        while k < n and depth:
            if tokens[k].text in ("(", "[", "{"):
                depth += 1
            elif tokens[k].text in (")", "]", "}"):
                depth -= 1
                if depth == 0:
                    break
            k += 1
    if k < n and tokens[k].text == ")":
        return k, var, labels_end, simple
    return None


def _unwind_alias(tokens: list[Token], i: int) -> str | None:
    depth = 0
    for k in range(i + 1, len(tokens)):
        t = tokens[k]
        if t.text in ("(", "[", "{"):
            depth += 1
        elif t.text in (")", "]", "}"):
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and t.upper == "AS" and k + 1 < len(tokens):
            return tokens[k + 1].name
    return None


def _function_allowed(name: str, dialect: CypherDialect) -> bool:
    """A namespaced function: temporal and spatial ones everywhere, APOC's pure ones where the server has APOC."""
    parts = [p.strip("`").lower() for p in name.split(".")]
    if parts[0] in _ALLOWED_NAMESPACES:
        return True
    return dialect.apoc and parts[0] == "apoc" and len(parts) > 2 and parts[1] in APOC_NAMESPACES


def _open_subquery(tokens: list[Token], i: int, frames: list[_Frame], dialect: CypherDialect) -> int:
    """``CALL { ... }`` or ``CALL (a, b) { ... }`` at ``tokens[i]``: open the body's frame (it sees ``a, b`` or what
    its own ``WITH`` imports) and return the index after its ``{``. Procedure calls are rejected."""
    k = i + 1
    imported: set[str] = set()
    if k < len(tokens) and tokens[k].text == "(" and dialect.call_variable_scope:
        while k + 1 < len(tokens) and tokens[k + 1].text != ")":
            k += 1
            if tokens[k].kind in ("ident", "qident"):
                imported.add(tokens[k].name)
            elif tokens[k].text not in (",", "*"):
                break
        k += 2
    if not dialect.call_subqueries or k >= len(tokens) or tokens[k].text != "{":
        raise CypherScopeError("CALL is not allowed here: no procedures"
                               + ("; subqueries are written CALL { WITH x ... }" if dialect.call_subqueries else
                                  f", and {dialect.server} has no CALL {{}} subqueries"))
    if any(t.text == "*" for t in tokens[i + 1:k]):
        imported = {n for f in frames for n in f.bound}
    frames.append(_Frame("{", None, False, True, imported, call=True))
    return k + 1


def _projection(tokens: list[Token], i: int) -> tuple[set[str], bool]:
    """The names a ``WITH`` or ``RETURN`` at ``tokens[i]`` projects (``a, b AS c``), and whether it keeps all
    (``*``)."""
    names: set[str] = set()
    keep_all = False
    item: list[Token] = []
    depth = 0
    stop = {"WHERE", "ORDER", "SKIP", "LIMIT", "OFFSET"} | _CLAUSES
    items: list[list[Token]] = []
    for k in range(i + 1, len(tokens)):
        t = tokens[k]
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
        if t.upper == "DISTINCT" and not item:
            continue
        item.append(t)
    if item:
        items.append(item)
    for it in items:
        if len(it) == 1 and it[0].text == "*":
            keep_all = True
        elif len(it) >= 3 and it[-2].upper == "AS":
            names.add(it[-1].name)
        elif len(it) == 1 and it[0].kind in ("ident", "qident"):
            names.add(it[0].name)
    return names, keep_all


def _project_with(tokens: list[Token], i: int, frames: list[_Frame]) -> None:
    """``WITH a, b AS c, *``: the frame's bound variables become the projected names."""
    scope = next(f for f in reversed(frames) if f.scope)
    names, keep_all = _projection(tokens, i)
    if not keep_all:
        scope.bound.clear()
    scope.bound.update(names)


# ------------------------------------------------------------------------------------------------------------
# Node ids, snapshots, restore
# ------------------------------------------------------------------------------------------------------------
def slug(text: str) -> str:
    value = re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower()
    return value[:30] or "node"


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def plain_value(value: Any) -> Any:
    """A property value as JSON (temporal and spatial values become strings)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain_value(v) for k, v in value.items()}
    iso = getattr(value, "iso_format", None) or getattr(value, "isoformat", None)
    if callable(iso):
        return iso()
    return str(value)


@dataclass
class NodeRow:
    iid: Any  # the database's own id (elementId on Bolt, id() on FalkorDB)
    id: Any
    labels: list[str]
    props: dict[str, Any]


@dataclass
class RelRow:
    source: Any  # internal ids
    target: Any
    type: str
    props: dict[str, Any]


def plan_ids(nodes: list[NodeRow], hidden_labels: Iterable[str] = ()) -> tuple[dict[Any, str], list[str]]:
    """Which nodes need their ``id`` set (internal id -> new id) and the problems that forbid the write.

    Nodes without an ``id`` get ``<first label>_<n>`` (the smallest unused n), in a deterministic order; a
    non-string id becomes its string form; two nodes with one id is an error.
    """
    assign: dict[Any, str] = {}
    used: dict[str, int] = {}
    for row in nodes:
        if row.id is None:
            continue
        ident = row.id if isinstance(row.id, str) else (canonical(row.id) if isinstance(row.id, (list, dict))
                                                        else str(plain_value(row.id)))
        if ident != row.id:
            assign[row.iid] = ident
        used[ident] = used.get(ident, 0) + 1
    problems = [f"{count} nodes have the id {ident!r}: ids must be unique (reuse the existing node instead)"
                for ident, count in used.items() if count > 1]
    hidden = set(hidden_labels)
    missing = sorted((r for r in nodes if r.id is None),
                     key=lambda r: (sorted(lb for lb in r.labels if lb not in hidden), canonical(r.props), str(r.iid)))
    counters: dict[str, int] = {}
    for row in missing:
        labels = sorted(lb for lb in row.labels if lb not in hidden)
        base = slug(labels[0]) if labels else "node"
        k = counters.get(base, 0)
        while True:
            k += 1
            candidate = f"{base}_{k}"
            if candidate not in used:
                break
        counters[base] = k
        used[candidate] = 1
        assign[row.iid] = candidate
    return assign, problems


def build_snapshot(nodes: list[NodeRow], rels: list[RelRow], assign: dict[Any, str] | None = None,
                   hidden_labels: Iterable[str] = ()) -> KGSnapshot:
    """The snapshot of exported rows (``assign`` gives the ids planned by :func:`plan_ids`), in a canonical
    order: nodes by id, relationships by (source, type, target, properties)."""
    assign = assign or {}
    hidden = set(hidden_labels)
    ids: dict[Any, str] = {}
    out_nodes: list[NodeRecord] = []
    for row in nodes:
        ident = assign.get(row.iid, row.id if isinstance(row.id, str) else str(row.id))
        ids[row.iid] = ident
        props = {str(k): plain_value(v) for k, v in row.props.items() if k != "id" and v is not None}
        out_nodes.append({"id": ident, "labels": sorted(lb for lb in row.labels if lb not in hidden),
                          "properties": dict(sorted(props.items()))})
    out_rels: list[RelationshipRecord] = []
    for rel in rels:
        if rel.source not in ids or rel.target not in ids:
            continue
        props = {str(k): plain_value(v) for k, v in rel.props.items() if v is not None}
        out_rels.append({"type": rel.type, "source": ids[rel.source], "target": ids[rel.target],
                         "properties": dict(sorted(props.items()))})
    out_nodes.sort(key=lambda r: r["id"])
    out_rels.sort(key=lambda r: (r["source"], r["type"], r["target"], canonical(r["properties"])))
    return {"nodes": out_nodes, "relationships": out_rels}


def snapshot_digest(snapshot: KGSnapshot) -> str:
    """A digest of a snapshot's content, independent of the order of its nodes and relationships."""
    nodes = sorted(canonical([n["id"], sorted(n["labels"]), n["properties"]]) for n in snapshot["nodes"])
    rels = sorted(canonical([r["source"], r["type"], r["target"], r["properties"]]) for r in snapshot["relationships"])
    return hashlib.sha256(canonical([nodes, rels]).encode("utf-8")).hexdigest()


def restore_statements(snapshot: KGSnapshot, scope_label: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Statements that create ``snapshot`` in an empty graph (or scope): nodes grouped by label set,
    relationships grouped by type, each group one ``UNWIND``."""
    scope = ":" + quote_name(scope_label) if scope_label else ""
    statements: list[tuple[str, dict[str, Any]]] = []
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for node in snapshot["nodes"]:
        props = {k: v for k, v in node["properties"].items() if v is not None}
        props["id"] = node["id"]
        groups.setdefault(tuple(node["labels"]), []).append(props)
    for labels, rows in groups.items():
        label_text = "".join(":" + quote_name(lb) for lb in labels)
        statements.append((f"UNWIND $rows AS row CREATE (n{label_text}{scope}) SET n = row", {"rows": rows}))
    by_type: dict[str, list[dict[str, Any]]] = {}
    for rel in snapshot["relationships"]:
        by_type.setdefault(rel["type"], []).append({"s": rel["source"], "t": rel["target"],
                                                    "props": dict(rel["properties"])})
    for rel_type, rows in by_type.items():
        query = (f"UNWIND $rows AS row MATCH (a{scope} {{id: row.s}}), (b{scope} {{id: row.t}}) "
                 f"CREATE (a)-[r:{quote_name(rel_type)}]->(b) SET r = row.props")
        statements.append((query, {"rows": rows}))
    return statements


# ------------------------------------------------------------------------------------------------------------
# Read results for the LLM
# ------------------------------------------------------------------------------------------------------------
def compact_result(rows: list[dict[str, Any]], convert: Any) -> Any:
    """Rows as a list of ``{column: value}`` with driver objects converted by ``convert``; long results are
    cut to :data:`MAX_RESULT_ROWS` rows with a note."""
    out = [{k: convert(v) for k, v in row.items()} for row in rows[:MAX_RESULT_ROWS]]
    if len(rows) > MAX_RESULT_ROWS:
        out.append({"note": f"{len(rows) - MAX_RESULT_ROWS} more rows were cut"})
    return out

