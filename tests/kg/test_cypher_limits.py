"""The size limits of LLM-written queries (nesting, literal ranges, values that grow from themselves, length), the
read-only rule and CALL {} IN TRANSACTIONS, and the work the checks do: in proportion to the text, not its square.

Work is counted as the lines of the checking modules that Python executes (a trace), never as seconds; work done in
C (a regular expression's backtracking) is watched where it happens (``tests/kg/test_sparql_text.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kgagents.tools.kg import cypher_limits
from kgagents.tools.kg.cypher_dialects import ARCADEDB, FALKORDB, NEO4J
from kgagents.tools.kg.cypher_limits import MAX_NESTING, MAX_RANGE_ELEMENTS, nesting_depth, range_size
from kgagents.tools.kg.cypher_scope import prepare
from kgagents.tools.kg.cypher_text import CypherRejected, split_statements, tokenize
from kgagents.tools.kg.query_text import MAX_QUERY_CHARS
from kgagents.tools.kg.sparql_text import SparqlRejected, clean


def refused(statement: str, *, dialect: Any = NEO4J, read_only: bool = False) -> str:
    with pytest.raises(CypherRejected) as info:
        prepare(statement, dialect, "KGScope_t", read_only=read_only)
    return str(info.value)


def accepted(statement: str, *, dialect: Any = NEO4J, read_only: bool = False) -> str:
    return prepare(statement, dialect, "KGScope_t", read_only=read_only)


# ---------------------------------------------------------------------------------------------------------
# nesting
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "depth"), [
    ("RETURN 1 AS x", 0),
    ("RETURN (1) AS x", 1),
    ("RETURN [[1], [2]] AS x", 2),
    ("RETURN {a: {b: [1]}} AS x", 3),
    ("MATCH (a)-[r:R]->(b) RETURN b", 1),  # patterns side by side, each one level
    ("MATCH (a)--(b)--(c)--(d)--(e)--(f)--(g) RETURN a", 2),
    ("MATCH (a)<--(b)<--(c)<--(d)<--(e)<--(f) RETURN a", 2),
    ("MATCH (a)-->(b)-->(c)<-[:R]-(d)-[:S]-(e) RETURN a", 1),
    ("RETURN 1 - -(1 - -(1)) AS x", 4),
    ("RETURN CASE WHEN true THEN CASE WHEN false THEN 1 END END AS x", 2),
    ("RETURN NOT NOT NOT true AS x", 3),
    ("RETURN - - -1 AS x", 3),
    ("RETURN NOT (NOT (true)) AS x", 4),
    ("RETURN -(-(1)) AS x", 4),
    ("RETURN NOT a AND NOT b AND NOT c AND NOT d AS x", 1),  # a NOT's operand ends at AND
    ("RETURN -1 + -1 + -1 + -1 + -1 AS x", 1),  # a sign's operand ends at the next operator
    ("RETURN x - 1 - 1 - 1 AS y", 0),  # subtraction, not signs
    ("RETURN [-1, -2, -3] AS x", 2),
    ("MATCH (n) WHERE n.x IS NOT NULL AND NOT n.y IS NOT NULL RETURN n", 1),  # IS NOT is no prefix
    ("MATCH (n) RETURN n.case AS x, {case: 1} AS m", 1),  # property and map keys are no CASE
    ("RETURN CASE WHEN NOT a THEN -1 ELSE -2 END AS x", 2),
    ("RETURN (((1) AS x", 3),  # unbalanced: the depth still counts (the walk refuses it)
    ("RETURN 1)) AS x", 0),
])
def test_nesting_depth_counts_brackets_case_not_and_signs(text, depth):
    assert nesting_depth(tokenize(text))[0] == depth


def test_nesting_is_refused_beyond_the_limit_in_every_form():
    for opener, closer in (("(", ")"), ("[", "]"), ("{a: ", "}"), ("CASE WHEN true THEN ", " END"),
                           ("NOT (", ")"), ("-(", ")")):
        levels = MAX_NESTING // (2 if opener in ("NOT (", "-(") else 1)
        accepted(f"RETURN {opener * levels}1{closer * levels} AS x")
        more = levels + 1
        message = refused(f"RETURN {opener * more}1{closer * more} AS x")
        assert f"at most {MAX_NESTING} are allowed" in message and "WITH" in message
    assert "nests 11 levels" in refused("RETURN " + "NOT " * 11 + "true AS x")
    assert "nests 11 levels" in refused("RETURN " + "- " * 11 + "1 AS x")


def test_a_long_flat_statement_is_not_nested():
    accepted("MATCH (n) WHERE " + " AND ".join(f"NOT n.p{i} = -{i}" for i in range(200)) + " RETURN n")
    accepted("RETURN " + " + ".join(["-1"] * 500) + " AS x")


# ---------------------------------------------------------------------------------------------------------
# ranges
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("start", "end", "step", "size"), [
    (10, 1, -4, 3), (1, 10, 1, 10), (0, 10, 1, 11), (10, 1, 1, 0), (1, 1, 1, 1), (1, 10, 3, 4), (10, 1, -3, 4),
    (10, 1, -1, 10), (-5, 5, 5, 3), (1, 10, 20, 1), (1, 10, -1, 0),
])
def test_range_size_is_exact(start, end, step, size):
    assert range_size(start, end, step) == size


def test_a_huge_literal_range_is_refused_with_its_size():
    message = refused("RETURN size(range(1, 3000000000)) AS n")
    assert "range(1, 3000000000)" in message and "3,000,000,000 elements" in message
    assert f"{MAX_RANGE_ELEMENTS:,}" in message
    assert "produces 1,000,001 elements" in refused("UNWIND range(0, 1000000) AS x RETURN count(x) AS n")
    accepted("UNWIND range(1, 1000000) AS x RETURN count(x) AS n")
    accepted("UNWIND range(1, 10000000, 10) AS x RETURN count(x) AS n")
    refused("UNWIND range(1, 10000000, 9) AS x RETURN count(x) AS n")
    refused("UNWIND range(-0x10000000, 0x10000000) AS x RETURN count(x) AS n")
    refused("UNWIND range(0o1, 0o7777777777) AS x RETURN count(x) AS n")
    refused("UNWIND `range`(1, 3000000000) AS x RETURN count(x) AS n")
    refused("UNWIND RANGE(1, 3000000000) AS x RETURN count(x) AS n")
    accepted("UNWIND range(3000000000, 1) AS x RETURN count(x) AS n")  # empty
    accepted("UNWIND range(-3000000000, -2999999999) AS x RETURN count(x) AS n")


def test_literal_ranges_multiply():
    accepted("UNWIND range(1, 1000) AS x UNWIND range(1, 1000) AS y RETURN count(*) AS n")
    message = refused("UNWIND range(1, 1000) AS x UNWIND range(1, 1001) AS y RETURN count(*) AS n")
    assert "with the statement's other ranges produces 1,001,000 elements" in message
    refused("RETURN reduce(s = 0, x IN range(1, 30000) | s + reduce(t = 0, y IN range(1, 30000) | t + y)) AS n")
    refused("RETURN [x IN range(1, 2000) | [y IN range(1, 2000) | x * y]] AS n")
    accepted("RETURN range(1, 0) + range(1, 1000000) AS n")  # an empty range counts as one


def test_a_zero_step_is_refused():
    assert "step of 0" in refused("UNWIND range(1, 10, 0) AS x RETURN x")
    assert "step of 0" in refused("UNWIND range(1, 10, -0) AS x RETURN x")


def test_bounds_known_only_when_the_query_runs_are_left_to_the_server():
    accepted("RETURN size(range(1, toInteger('3000000000'))) AS n")
    accepted("RETURN size(range(1, 3000000000.0)) AS n")
    accepted("RETURN size(range(1, 1e10)) AS n")
    accepted("MATCH (n) RETURN range(0, size(n.values) - 1) AS i")
    accepted("RETURN range(1) AS n")  # the server's error: range needs two arguments
    accepted("RETURN range(1, 2, 3, 4) AS n")


# ---------------------------------------------------------------------------------------------------------
# values that grow from themselves
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("step", [
    "s + s", "s + 'x' + s", "[s, s]", "s + substring(s, 0)", "{a: s, b: s}",
    "CASE WHEN x > 0 THEN s + s ELSE s END", "s + CASE WHEN x > 0 THEN s ELSE '' END",
    "CASE x WHEN 1 THEN s ELSE s + s END", "`s` + s",
])
def test_a_reduce_step_that_names_its_accumulator_twice_is_refused(step):
    message = refused(f"RETURN reduce(s = 'ab', x IN range(1, 40) | {step}) AS n")
    assert "accumulator s" in message and "once" in message


@pytest.mark.parametrize("step", [
    "s + x", "s + 'x'", "CASE WHEN x > s THEN x ELSE s END", "CASE WHEN x IN s THEN s ELSE s + [x] END",
    "CASE s WHEN 'a' THEN 'b' ELSE s END", "s + x.s + x.s", "s + [y IN x.items | y.s]",
    "CASE WHEN size(s) > 10 AND s <> '' THEN s ELSE s + 'x' END",
])
def test_a_reduce_step_that_names_its_accumulator_once_per_value_is_accepted(step):
    accepted(f"RETURN reduce(s = [], x IN [1, 2] | {step}) AS n")


def test_nested_reduces_are_checked_each():
    refused("RETURN reduce(s = '', x IN [1] | s + reduce(t = 'a', y IN range(1, 40) | t + t)) AS n")
    accepted("RETURN reduce(s = 0, x IN [1] | s + reduce(t = 0, y IN [1, 2] | t + y)) AS n")


@pytest.mark.parametrize("statement", [
    "MATCH (n:T) SET n.s = n.s + n.s",
    "MATCH (n:T) SET n:Label, n.s = n.s + n.s",
    "MATCH (n:T) SET n.a = 1, n.s = [n.s, n.s]",
    "MATCH (n:T) FOREACH (i IN range(1, 40) | SET n.s = n.s + n.s)",
    "MATCH (n:T) UNWIND range(1, 40) AS i SET n.s = n.s + n.s RETURN n",
    "MERGE (n:T {id: 'a'}) ON MATCH SET n.s = n.s + n.s",
])
def test_a_set_whose_value_names_its_property_twice_is_refused(statement):
    assert "more than once in its new value" in refused(statement, dialect=FALKORDB)


@pytest.mark.parametrize("statement", [
    "MATCH (n:T) SET n.s = n.s + 'x'",
    "MATCH (n:T) SET n.a = n.b + n.b",
    "MATCH (n:T), (m:T) SET n.s = m.s + m.s",
    "MATCH (n:T) SET n.s = n.s + 1, n.t = n.s + 2",
    "MERGE (n:T {id: 'a'}) ON CREATE SET n.s = CASE WHEN n.s IS NULL THEN 'a' ELSE n.s + 'a' END",
    "MATCH (n:T) SET n += {s: 1}",
    "MATCH (n:T) SET n.s = 1 WITH n MATCH (m:T) SET m.s = n.s + n.t",
])
def test_a_set_that_names_its_property_once_per_value_is_accepted(statement):
    accepted(statement, dialect=FALKORDB)


def test_growth_checks_survive_broken_statements():
    for text in ("RETURN reduce(s = 'a', x IN [1] | CASE WHEN true THEN s + s", "RETURN reduce(s", "RETURN reduce(",
                 "MATCH (n) SET n.s =", "MATCH (n) SET", "RETURN reduce(s = 'a' x IN [1] | s + s) AS n",
                 "RETURN END AS x", "RETURN reduce(1, x IN [1] | 1) AS n"):
        tokens = tokenize(text)
        for check in (cypher_limits.check_growth, cypher_limits.check_ranges, cypher_limits.check_nesting):
            try:  # refused or let through to the walk, which refuses it: never another error
                check(tokens)
            except CypherRejected:
                pass


# ---------------------------------------------------------------------------------------------------------
# reads cannot write, and CALL {} IN TRANSACTIONS
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("statement", [
    "CREATE (:Planted {id: 'x'})",
    "MATCH (n) SET n.x = 1 RETURN n",
    "MATCH (n) DETACH DELETE n",
    "MATCH (n) DELETE n",
    "MATCH (n) REMOVE n.x RETURN n",
    "MERGE (n:Planted {id: 'x'}) RETURN n",
    "FOREACH (x IN [1] | CREATE (:Planted))",
    "MATCH (n) CALL { WITH n CREATE (:Planted) } RETURN n",
    "MATCH (n) WITH n create (:Planted) RETURN n",
    "UNWIND [1] AS x CALL { MATCH (m) DETACH DELETE m } RETURN x",
])
def test_a_read_cannot_write(statement):
    message = refused(statement, read_only=True)
    assert "changes the knowledge graph" in message and "a query only reads it" in message
    accepted(statement.replace("CREATE (:Planted)", "CREATE (:Planted {id: 'y'})"))  # the same, as a write


@pytest.mark.parametrize("statement", [
    "MATCH (n) RETURN n.create AS c, n.set AS s, {delete: 1, merge: 2} AS m",
    "MATCH (n:Person) WHERE n.name STARTS WITH 'A' RETURN n",
    "MATCH (n) OPTIONAL MATCH (n)-->(m) WITH n, count(m) AS c UNWIND [c] AS x RETURN n, x ORDER BY x LIMIT 3",
    "MATCH (n) CALL { WITH n MATCH (n)-->(m) RETURN count(m) AS c } RETURN n, c",
])
def test_reads_that_only_read_are_accepted(statement):
    accepted(statement, read_only=True)


@pytest.mark.parametrize("statement", [
    "CALL { MATCH (n) DETACH DELETE n } IN TRANSACTIONS RETURN 1 AS one",
    "MATCH (n) CALL { WITH n SET n.x = 1 } IN TRANSACTIONS OF 2 ROWS",
    "CALL { CREATE (:P {id: 'p'}) } IN 2 CONCURRENT TRANSACTIONS",
    "CALL () { CREATE (:P {id: 'p'}) } in transactions",
    "CALL { RETURN 1 AS x } IN TRANSACTIONS RETURN x",
])
@pytest.mark.parametrize("dialect", [NEO4J, ARCADEDB])
def test_call_in_transactions_is_refused_in_reads_and_writes(statement, dialect):
    if "CALL ()" in statement and not dialect.call_variable_scope:
        pytest.skip("no CALL () here")
    assert "IN TRANSACTIONS" in refused(statement, dialect=dialect)
    refused(statement, dialect=dialect, read_only=True)


def test_in_after_other_brackets_is_an_operator():
    accepted("MATCH (n) WHERE n.x IN [1, 2] AND {a: 1}.a IN [1] RETURN n")
    accepted("MATCH (n) CALL { WITH n RETURN n.x AS x } WITH x WHERE x IN [1] RETURN x")


# ---------------------------------------------------------------------------------------------------------
# length, and work in proportion to the text
# ---------------------------------------------------------------------------------------------------------
_CHECK_FILES = {str(Path(m.__file__).resolve()) for m in (
    cypher_limits, sys.modules["kgagents.tools.kg.cypher_scope"], sys.modules["kgagents.tools.kg.cypher_text"],
    sys.modules["kgagents.tools.kg.sparql_text"], sys.modules["kgagents.tools.kg.query_text"])}


def lines_run(check: Callable[[str], object], text: str) -> int:
    """How many lines of the checking modules run while ``check(text)`` does (refused or not)."""
    count = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def start(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename in _CHECK_FILES else None

    sys.settrace(start)
    try:
        check(text)
    except ValueError:
        pass
    finally:
        sys.settrace(None)
    return count


def _repeat(unit: str, size: int, head: str = "", tail: str = "") -> str:
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


def _cypher(text: str) -> object:
    return [prepare(s, NEO4J, "KGScope_t") for s in split_statements(text)]


ADVERSARIAL = {
    "UNWIND without AS": (_cypher, lambda n: _repeat("UNWIND [1] ", n, tail="RETURN 1 AS x")),
    "WITH after WITH": (_cypher, lambda n: _repeat("WITH 1 AS x ", n, tail="RETURN x")),
    "CALL (*) after many variables": (_cypher, lambda n: "MATCH " + ", ".join(f"(a{i})" for i in range(n // 40))
                                      + _repeat(" CALL (*) { RETURN 1 AS q }", n // 2, tail=" RETURN 1 AS x")),
    "relationship brackets": (_cypher, lambda n: _repeat("-[:R]->(x)", n, head="MATCH (a)", tail=" RETURN a")),
    "nested maps": (_cypher, lambda n: _repeat("({a: ", n, head="MATCH ")),
    "SPARQL a.a.a": (clean, lambda n: _repeat("a.", n, head="SELECT * WHERE { ?s ?p ", tail=" }")),
    "SPARQL a-a-a": (clean, lambda n: _repeat("a-", n, head="SELECT * WHERE { ?s ?p ", tail=" }")),
}


@pytest.mark.parametrize("form", sorted(ADVERSARIAL))
def test_the_checks_work_in_proportion_to_the_text(form):
    """Eight times the text costs about eight times the work (a check that is quadratic costs 64 times)."""
    check, make = ADVERSARIAL[form]
    small, large = make(4_000), make(32_000)
    assert len(large) <= MAX_QUERY_CHARS
    ratio = lines_run(check, large) / lines_run(check, small)
    assert ratio < 12, f"{form}: 8 x the text cost {ratio:.1f} x the work"


def test_text_over_the_length_limit_is_refused_before_it_is_read():
    big = "CREATE " + ", ".join(["(:P {name: 'x'})"] * 70_000)
    assert len(big) > 1_000_000
    with pytest.raises(CypherRejected, match=rf"is {len(big):,} characters long; at most {MAX_QUERY_CHARS:,}"):
        split_statements(big)
    assert lines_run(_cypher, big) < 40  # nothing was tokenized
    sparql = "INSERT DATA { " + "kg:a kg:b kg:c . " * 70_000 + "}"
    with pytest.raises(SparqlRejected, match=f"at most {MAX_QUERY_CHARS:,} are read"):
        clean(sparql)
    assert lines_run(clean, sparql) < 40
    at_limit = "RETURN '" + "x" * (MAX_QUERY_CHARS - 15) + "' AS x"
    assert len(at_limit) == MAX_QUERY_CHARS - 1
    accepted(at_limit)


# ---------------------------------------------------------------------------------------------------------
# edges, one by one (each would let a bomb through or refuse a harmless statement if the rule were off by one)
# ---------------------------------------------------------------------------------------------------------
def test_the_length_limit_is_inclusive():
    exactly = "RETURN '" + "x" * (MAX_QUERY_CHARS - 14) + "' AS x"
    assert len(exactly) == MAX_QUERY_CHARS
    accepted(exactly)
    with pytest.raises(CypherRejected, match="characters long"):
        split_statements(exactly + " ")
    with pytest.raises(SparqlRejected, match="characters long"):
        clean("SELECT * WHERE { ?s ?p '" + "x" * MAX_QUERY_CHARS + "' }")


@pytest.mark.parametrize("statement", [
    "RETURN range(+1, +1000000) AS n", "RETURN range(-600000, 0) AS n", "RETURN range(1, 0xF4240) AS n",
    "RETURN range(1, 0o3641100) AS n", "RETURN range(1, 3000000000 * 0) AS n", "RETURN coalesce(1, 3000000000) AS n",
    "RETURN size(range(1, 10)) + size([3000000000, 1]) AS n",
])
def test_literal_ranges_at_the_limit_and_other_numbers_are_accepted(statement):
    accepted(statement)


@pytest.mark.parametrize(("statement", "message"), [
    ("RETURN range(+1, +3000000000) AS n", "produces 3,000,000,000 elements"),
    ("RETURN range(-1000000, 0) AS n", "produces 1,000,001 elements"),
    ("UNWIND range(1, 2) AS x UNWIND range(1, 1000000) AS y RETURN x",
     "with the statement's other ranges produces 2,000,000 elements"),
    ("WITH [1] AS x RETURN range(1, size(x)) + range(1, 3000000000) AS n", "produces 3,000,000,000"),
])
def test_literal_ranges_beyond_the_limit_are_refused_whatever_comes_before(statement, message):
    assert message in refused(statement)


def test_range_checks_look_past_unbalanced_and_method_calls():
    with pytest.raises(CypherRejected, match="3,000,000,000"):
        cypher_limits.check_ranges(tokenize("RETURN range(1, [range(1, 3000000000)] AS n"))
    cypher_limits.check_ranges(tokenize("RETURN x.range(1, 3000000000) AS n"))  # not the built-in range()
    cypher_limits.check_growth(tokenize("RETURN x.reduce(s = '', x IN [1] | s + s) AS n"))


@pytest.mark.parametrize("statement", [
    "WITH [1] AS s RETURN reduce(s = 0, x IN s | s + x) AS n",  # the list names an outer s: not the step
    "MATCH (n:T) WHERE n.s = 'a' SET n.s = n.s + 'x'",
    "MATCH (n:T) SET n.s = coalesce(n.s, '') + 'x' WITH n MATCH (m:T) SET m.t = n.s",
    "RETURN reduce(s = 0, x IN [1] | CASE WHEN x = 1 THEN s WHEN s = 2 THEN 0 ELSE s END) AS n",
    "RETURN reduce(s = 0, x IN [1] | CASE WHEN x > 0 THEN CASE WHEN s > 1 THEN s ELSE 0 END ELSE s END) AS n",
])
def test_growth_counts_only_the_value_that_replaces(statement):
    accepted(statement, dialect=FALKORDB)


@pytest.mark.parametrize("statement", [
    "RETURN reduce(s = '', x IN [[1], [2]] | s + s) AS n",
    "RETURN reduce(`s` = '', x IN [1] | `s` + `s`) AS n",
    "MATCH (n:T) SET `n`.`s` = `n`.`s` + `n`.`s`",
    "MATCH (n:T) SET n.s = toString(n.s) + n.s",
    "RETURN CASE WHEN size(reduce(s = '', x IN range(1, 40) | s + s)) > 0 THEN 1 END AS n",
    "RETURN reduce(s = '', x IN [1] | CASE WHEN x > 0 THEN s + 'a' ELSE 'b' END + CASE WHEN x > 1 THEN 'c' "
    "ELSE s END) AS n",
    "RETURN reduce(s = 0, x IN [1] | CASE WHEN x > 0 THEN CASE WHEN x > 1 THEN s + s ELSE s END ELSE s END) AS n",
])
def test_growth_finds_the_accumulator_twice_in_every_form(statement):
    assert "more than once" in refused(statement, dialect=FALKORDB)


@pytest.mark.parametrize("statement", [
    "WITH 'xxxxxxxxxx' AS s WITH replace(s, 'x', s) AS s WITH replace(s, 'x', s) AS s RETURN size(s) AS n",
    "WITH 'ab' AS s WITH s + s AS s WITH s + s AS s RETURN s",
    "WITH [1] AS l WITH l + l AS l RETURN l",
    "WITH [1] AS l WITH [l, l] AS l RETURN l",
    "WITH [1, 2] AS l WITH [x IN l | l] AS l RETURN l",
    "WITH 'a' AS s WITH DISTINCT toUpper(s) + s AS s RETURN s",
    "WITH 'a' AS s WITH 1 AS n, `s` + s AS `s` RETURN s",
    "WITH 'a' AS s WITH s + CASE WHEN size(s) > 1 THEN s ELSE '' END AS s RETURN s",
    "MATCH (n:T) WITH n.s AS s CALL { WITH s WITH s + s AS s RETURN s AS t } RETURN t",
])
def test_growth_finds_a_projection_that_names_itself_twice(statement):
    message = refused(statement, dialect=FALKORDB)
    assert "WITH ... AS" in message and "more than once" in message


@pytest.mark.parametrize("statement", [
    "WITH 'abc' AS s WITH s[0..size(s) - 1] AS s RETURN s",
    "WITH 'abc' AS s WITH substring(s, 0, size(s) - 1) AS s RETURN s",
    "WITH 3 AS x WITH x * x AS x RETURN x",
    "WITH 'a' AS s WITH s + '-' AS s RETURN s",
    "MATCH (n:T) WITH n, n.name + n.name AS name RETURN name",
    "WITH 1 AS s WITH CASE WHEN s > 1 THEN s ELSE 0 END AS s RETURN s",
    "WITH 1 AS a, 2 AS b WITH a + b AS a, b + a AS b RETURN a",
    "WITH 'a' AS s WITH s WHERE s + s <> '' RETURN s",
    "MATCH (n:T) WHERE n.s STARTS WITH 'a' RETURN n.s STARTS WITH n.s AS b",
    "WITH 'a' AS s WITH s, s AS t WITH replace(s, 'x', t) AS s RETURN s",  # a copy is not followed
])
def test_growth_lets_a_projection_name_itself_once_or_as_a_number(statement):
    accepted(statement, dialect=FALKORDB)


def test_an_unterminated_case_still_counts():
    for text in ("RETURN reduce(s = '', x IN [1] | s + CASE WHEN true THEN s) AS n",
                 "RETURN reduce(s = '', x IN [1] | CASE WHEN true THEN CASE WHEN true THEN s + s) AS n"):
        with pytest.raises(CypherRejected, match="more than once"):
            cypher_limits.check_growth(tokenize(text))
    cypher_limits.check_growth(tokenize("RETURN reduce(s = 0, x IN [1]) AS n"))  # no step: nothing to count


@pytest.mark.parametrize("statement", [
    "RETURN " + " + ".join(["(-1)"] * 12) + " AS x",
    "RETURN " + " + ".join(["[NOT true]"] * 12) + " AS x",
    "RETURN " + " + ".join(["CASE WHEN true THEN -1 ELSE 1 END"] * 12) + " AS x",
    "RETURN " + " AND ".join(["CASE WHEN true THEN NOT false END"] * 12) + " AS x",
])
def test_levels_end_where_their_operand_ends(statement):
    accepted(statement)


@pytest.mark.parametrize("statement", [
    "RETURN CASE WHEN true THEN 1 END AS a, ((((((((((((1)))))))))))) AS b",
    "RETURN [(1), [[[[[[[[[[1]]]]]]]]]]] AS x",
    "RETURN " + "+ " * 11 + "1 AS x",
])
def test_depth_after_a_finished_level_still_counts(statement):
    assert "at most 10 are allowed" in refused(statement)
