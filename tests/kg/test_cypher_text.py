"""The strict Cypher tokenizer: what it refuses, and that the text it rebuilds is the text it checked (no server)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgagents.tools.kg.cypher_text import CypherRejected, render, split_statements, tokenize


def kinds(query: str) -> list[tuple[str, str]]:
    return [(t.kind, t.text) for t in tokenize(query)]


def test_tokens_and_their_kinds():
    assert kinds("MATCH (n:`My Label` {v: 'it\\'s', w: 1.5e3})-->(m) RETURN n.v <> 0x1F") == [
        ("ident", "MATCH"), ("punct", "("), ("ident", "n"), ("punct", ":"), ("qident", "`My Label`"),
        ("punct", "{"), ("ident", "v"), ("punct", ":"), ("string", "'it\\'s'"), ("punct", ","), ("ident", "w"),
        ("punct", ":"), ("number", "1.5e3"), ("punct", "}"), ("punct", ")"), ("punct", "-"), ("punct", "->"),
        ("punct", "("), ("ident", "m"), ("punct", ")"), ("ident", "RETURN"), ("ident", "n"), ("punct", "."),
        ("ident", "v"), ("punct", "<>"), ("number", "0x1F")]
    assert kinds("[*1..3]") == [("punct", "["), ("punct", "*"), ("number", "1"), ("punct", ".."), ("number", "3"),
                                ("punct", "]")]
    assert tokenize("`a``b`")[0].name == "a`b"


@pytest.mark.parametrize("query, rebuilt", [
    ("RETURN 1 // a comment\nLIMIT 1", "RETURN 1 LIMIT 1"),
    # ArcadeDB ends a line comment at a carriage return, FalkorDB reads on to the newline: what follows the \r is
    # code here (and checked as code), and every server gets it without the comment
    ("RETURN 1 // c\r MATCH (n) DETACH DELETE n\nLIMIT 1", "RETURN 1 MATCH (n) DETACH DELETE n LIMIT 1"),
    ("MATCH/* x */(n)RETURN n", "MATCH (n)RETURN n"),
    ("MATCH (n)\n\t\tRETURN   n", "MATCH (n) RETURN n"),
    ("RETURN 'a // not a comment' AS s", "RETURN 'a // not a comment' AS s"),
    ("RETURN 'Skłodowska–Curie' AS s, `Straße` AS t", "RETURN 'Skłodowska–Curie' AS s, `Straße` AS t"),
])
def test_the_statement_is_rebuilt_from_its_tokens(query, rebuilt):
    assert render(tokenize(query)) == rebuilt


@pytest.mark.parametrize("query, message", [
    ("MATCH (a)\u2014[:R]->(b) RETURN b", "EM DASH"),
    ("MATCH (a)-[:R]\u2192(b) RETURN b", "RIGHTWARDS ARROW"),
    ("MATCH (a)\u2013\u2013(b) RETURN b", "EN DASH"),
    ("M\u0410TCH (n) RETURN n", "CYRILLIC CAPITAL LETTER A"),
    ("MATCH (n)\u00a0RETURN n", "NO-BREAK SPACE"),
    ("MATCH (n) RETURN n\u2028", "LINE SEPARATOR"),
    ("MATCH (n) RETURN n\x0b", "control character"),
    ("MATCH (n) RETURN $p", "parameters"),
    ("MATCH (n) SET n:$('X')", "parameters"),
    ("RETURN 'unterminated", "unterminated string"),
    ("RETURN `unterminated", "unterminated quoted name"),
    ("RETURN 1 /* open", "unterminated /*"),
    ("RETURN 'a\\qb'", "unknown escape"),
    ("RETURN 'a\\u0027 MATCH (n) DETACH DELETE n //'", "not allowed"),
    ("RETURN 'a\\u005c'", "not allowed"),
    ("RETURN 'a\\u12'", "hexadecimal"),
    ("RETURN ``", "empty quoted name"),
    ("RETURN `a\nb`", "control character"),
    ("RETURN 5MATCH", "runs into a name"),
    ("RETURN 1 # comment", "unexpected character"),
    ("RETURN a @ b", "unexpected character"),
    ("RETURN a \\ b", "unexpected character"),
])
def test_what_a_server_could_read_differently_is_refused(query, message):
    with pytest.raises(CypherRejected, match=message):
        tokenize(query)


def test_statements_split_on_semicolons_outside_strings_and_comments():
    assert split_statements("CREATE (a {x: ';'}); // c;\nCREATE (b);  ;") == ["CREATE (a {x: ';'})", "CREATE (b)"]
    assert split_statements("  // only a comment\n") == []
    with pytest.raises(CypherRejected):
        split_statements("CREATE (a {x: 'x});")


_ALPHABET = st.sampled_from(list("()[]{}:;,.-<>=|*'\"`\\/ \n\r\tMATCHRETURNnmab0123456789$#\u2014é") +
                            ["//", "/*", "*/", "\\'", "``", "->", "<-", "MATCH ", "RETURN ", "CREATE "])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_any_text_is_read_or_refused_never_crashes_and_rebuilds_to_itself(text):
    try:
        tokens = tokenize(text)
    except CypherRejected:
        return
    rebuilt = render(tokens)
    again = tokenize(rebuilt)
    assert [(t.kind, t.text) for t in again] == [(t.kind, t.text) for t in tokens]
    assert render(again) == rebuilt
    assert all(ord(ch) < 128 for t in tokens if t.kind not in ("string", "qident") for ch in t.text)


def spans(query: str) -> list[tuple[str, str, int, bool]]:
    return [(t.kind, t.text, t.start, t.spaced) for t in tokenize(query)]


def test_positions_and_spacing_are_exact():
    assert spans("MATCH (n)/*c*/RETURN n//x") == [
        ("ident", "MATCH", 0, False), ("punct", "(", 6, True), ("ident", "n", 7, False), ("punct", ")", 8, False),
        ("ident", "RETURN", 14, True), ("ident", "n", 21, True)]
    assert spans("  a") == [("ident", "a", 2, True)]
    # several block comments: each ends at its own */
    assert render(tokenize("RETURN 1 /*a*/ + /*b*/ 2")) == "RETURN 1 + 2"
    assert render(tokenize("RETURN 1/*a*//*b*/+2")) == "RETURN 1 +2"
    assert render(tokenize("/**/RETURN 1")) == "RETURN 1"
    assert render(tokenize("RETURN 1 //\r\n+ 2")) == "RETURN 1 + 2"
    assert render(tokenize("RETURN 1 // no end")) == "RETURN 1"


@pytest.mark.parametrize("query, texts", [
    ("RETURN '\\u0041' AS x", ["RETURN", "'\\u0041'", "AS", "x"]),
    ("RETURN '\\u0041\\u00e9' + 'b' AS x", ["RETURN", "'\\u0041\\u00e9'", "+", "'b'", "AS", "x"]),
    ("RETURN '\\U0001F600' AS x", ["RETURN", "'\\U0001F600'", "AS", "x"]),
    ("RETURN '\\U0010FFFF' AS x", ["RETURN", "'\\U0010FFFF'", "AS", "x"]),
    ("RETURN '\\'' AS x, \"it's\" AS y", ["RETURN", "'\\''", "AS", "x", ",", '"it\'s"', "AS", "y"]),
    ("RETURN 'a\\n\\t\\\\' AS x", ["RETURN", "'a\\n\\t\\\\'", "AS", "x"]),
    ("RETURN 'line\nbreak' AS x", ["RETURN", "'line\nbreak'", "AS", "x"]),
    ("RETURN `a``b` AS x", ["RETURN", "`a``b`", "AS", "x"]),
    ("RETURN ````, 1", ["RETURN", "````", ",", "1"]),
    ("RETURN 0x1F, 0X1f, 0o17, 0O17, 12.5e3, 1E-5, 1e+5, 7", ["RETURN", "0x1F", ",", "0X1f", ",", "0o17", ",",
                                                             "0O17", ",", "12.5e3", ",", "1E-5", ",", "1e+5", ",",
                                                             "7"]),
    ("RETURN 1. AS x", ["RETURN", "1", ".", "AS", "x"]),
    ("RETURN [1..3]", ["RETURN", "[", "1", "..", "3", "]"]),
    ("RETURN 0x1F", ["RETURN", "0x1F"]),
    ("RETURN 0o17", ["RETURN", "0o17"]),
    ("RETURN 12.5", ["RETURN", "12.5"]),
    ("RETURN 2e3", ["RETURN", "2e3"]),
    ("RETURN a<>b, a<=b, a>=b, a=~b, a+=b, a!=b, a::b", ["RETURN", "a", "<>", "b", ",", "a", "<=", "b", ",", "a",
                                                         ">=", "b", ",", "a", "=~", "b", ",", "a", "+=", "b", ",",
                                                         "a", "!=", "b", ",", "a", "::", "b"]),
])
def test_literals_and_operators_are_read_whole(query, texts):
    assert [t.text for t in tokenize(query)] == texts


@pytest.mark.parametrize("query, message", [
    ("RETURN 'ab\\", "unknown escape|unterminated"),
    ("RETURN 'ab\\'", "unterminated string"),
    ("RETURN 'a\\u12", "hexadecimal"),
    ("RETURN 'a\\u12G4'", "hexadecimal"),
    ("RETURN 'a\\U0011000'", "hexadecimal"),
    ("RETURN 'a\\U00110000'", "not allowed"),
    ("RETURN 'a\\u0060'", "not allowed"),
    ("RETURN 'a\\u0022'", "not allowed"),
    ("RETURN '\\q'", "unknown escape '\\\\\\\\q'"),
    ("RETURN `a``", "unterminated quoted name"),
    ("RETURN `a\x7fb`", "control character"),
    ("RETURN `a\x1fb`", "control character"),
    ("RETURN 0x", "runs into a name"),
    ("RETURN 0xG", "runs into a name"),
    ("RETURN 0o8", "runs into a name"),
    ("RETURN 1e", "runs into a name"),
    ("RETURN 1e+", "runs into a name"),
    ("RETURN 1.5e3x", "runs into a name"),
    ("RETURN 0x1Fg", "runs into a name"),
    ("RETURN 0o17a", "runs into a name"),
    ("RETURN a \x7f b", "unexpected character"),
    ("RETURN a \x80 b", "outside a string"),
    ("RETURN a \u00e9 b", "outside a string"),
    ("RETURN $", "parameters"),
])
def test_edges_of_the_literals_are_refused_cleanly(query, message):
    with pytest.raises(CypherRejected, match=message):
        tokenize(query)


def test_render_inserts_after_tokens():
    tokens = tokenize("MATCH (n) RETURN n")
    assert render(tokens, {2: ":`L`"}) == "MATCH (n:`L`) RETURN n"
    assert render(tokens, {0: "!", 5: "?"}) == "MATCH! (n) RETURN n?"


@pytest.mark.parametrize("query, texts", [
    ("RETURN 0x1F1, 2", ["RETURN", "0x1F1", ",", "2"]),
    ("RETURN 0o177, 2", ["RETURN", "0o177", ",", "2"]),
    ("RETURN 1.234 AS x", ["RETURN", "1.234", "AS", "x"]),
    ("RETURN 0o7", ["RETURN", "0o7"]),
    ("RETURN 0x7", ["RETURN", "0x7"]),
    ("RETURN `a```", ["RETURN", "`a```"]),
    ("RETURN 1 //\n+ 2", ["RETURN", "1", "+", "2"]),
    ("RETURN 1 //\r+ 2", ["RETURN", "1", "+", "2"]),
])
def test_more_literal_edges(query, texts):
    assert [t.text for t in tokenize(query)] == texts
