"""The SPARQL query check: SERVICE and LOAD refused however they are spelled, the query rebuilt from its tokens, and
the reading checked against Oxigraph's own (no server)."""

from __future__ import annotations

import os
import re
import socket
import threading

import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgagents.tools import sandbox as sb
from kgagents.tools.kg.sparql_store import PREFIXES, SparqlRunner
from kgagents.tools.kg.sparql_text import SparqlRejected, clean, tokenize
from kgagents.tools.sandbox import SandboxLimits
from kgagents.tools.sandbox import bwrap as sb_bwrap


@pytest.mark.parametrize("query", [
    "SELECT * WHERE { SERVICE <http://127.0.0.1:9/q> { ?s ?p ?o } }",
    "select * where { service silent <http://x/> { ?s ?p ?o } }",
    "SELECT * WHERE { SeRvIcE <http://x/> { } }",
    # Oxigraph reads keywords without a word boundary: these reach the network there
    "PREFIX : <http://x/> SELECT * WHERE { SERVICE:q { ?s ?p ?o } }",
    "PREFIX : <http://x/> SELECT * WHERE { SERVICESILENT:q { ?s ?p ?o } }",
    "SELECT * WHERE { ?s ?p trueSERVICE<http://x/>{} }",
    "SELECT * WHERE { ?s ?p falseSERVICE SILENT<http://x/>{} }",
    "SELECT * WHERE { ?s ?p 1SERVICE<http://x/>{} }",
    "SELECT * WHERE { ?s ?p ?o BIND(1 AS ?x)SERVICE<http://x/>{} }",
    "SELECT * WHERE { ?s ?p \"x\"@enSERVICE<http://x/>{} }",
    # a carriage return ends a comment for the engine: what follows it is code
    "SELECT * WHERE { ?s ?p ?o # hidden\r SERVICE <http://x/> { } }",
    "LOAD <http://127.0.0.1:9/data.ttl>",
    "load silent <file:///etc/passwd> INTO GRAPH <urn:g>",
    "INSERT DATA { kg:a kg:b 1 } ; LOAD<http://x/>",
    "PREFIX load: <http://x/> SELECT * WHERE { ?s load:p ?o }",
])
def test_network_keywords_are_refused_however_spelled(query):
    with pytest.raises(SparqlRejected, match=r"SERVICE|LOAD"):
        clean(query)


@pytest.mark.parametrize("query, message", [
    ("SELECT * WHERE { ?s kg:p\u00e9 ?o }", "in a name"),
    ("SELECT ?\u00e9 WHERE { ?\u00e9 ?p ?o }", "ASCII"),
    ("SELECT * WHERE {\u00a0?s ?p ?o }", "NO-BREAK SPACE"),
    ("SELECT * WHERE { ?s ?p ?o }\u2003", "EM SPACE"),
    ("SELECT * WHERE { kg:a\\#b ?p ?o }", "backslash"),
    ("SELECT * WHERE { ?s ?p \"unterminated }", "line break|unterminated"),
    ("SELECT * WHERE { ?s ?p \"a\\qb\" }", "unknown escape"),
    ("SELECT * WHERE { ?s ?p \"a\nb\" }", "line break"),
    ("SELECT * WHERE { ?s ?p '''a'''' }", "ends with a quote"),
    ("SELECT * WHERE { ?s ?p ?o } ~", "unexpected character"),
    ("  # only a comment", "empty"),
])
def test_what_the_engine_could_read_otherwise_is_refused(query, message):
    with pytest.raises(SparqlRejected, match=message):
        clean(query)


@pytest.mark.parametrize("query, rebuilt", [
    ("SELECT * WHERE { ?s ?p ?o } # c\r LIMIT 1", "SELECT * WHERE { ?s ?p ?o } LIMIT 1"),
    ("SELECT * WHERE {\n  ?s a kg:T .\n}", "SELECT * WHERE { ?s a kg:T . }"),
    ("SELECT ?x WHERE { BIND(<http://a/\u2003b> AS ?x) }", "SELECT ?x WHERE { BIND(<http://a/\u2003b> AS ?x) }"),
    ('INSERT DATA { kg:a kg:name "Marie Curié # not a comment"@fr }',
     'INSERT DATA { kg:a kg:name "Marie Curié # not a comment"@fr }'),
    ("SELECT * WHERE { ?s kg:SERVICE_LEVEL ?o ; kg:note 'SERVICE LOAD' }",
     "SELECT * WHERE { ?s kg:SERVICE_LEVEL ?o ; kg:note 'SERVICE LOAD' }"),
    ("SELECT * WHERE { ?o kg:v ?v FILTER(?v<3&&?v>=1) }", "SELECT * WHERE { ?o kg:v ?v FILTER(?v<3&&?v>=1) }"),
])
def test_the_query_is_rebuilt_from_its_tokens(query, rebuilt):
    assert clean(query) == rebuilt


class Listener:
    """A loopback TCP listener that counts the connections it gets."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()


LISTENER = Listener()
_TARGET = f"<http://127.0.0.1:{LISTENER.port}/sparql>"
_PIECES = st.sampled_from(["SELECT", "*", "WHERE", "{", "}", "?s", "?p", "?o", "kg:a", "<urn:x>", _TARGET, _TARGET,
                           '"s"', "'t'", "1", "1.5", ".", ";", ",", "(", ")", "FILTER", "BIND", "AS", "?x", "#",
                           "\r", "\n", " ", "a", "OPTIONAL", "SERVICE", "Service", "SILENT", "true", "@en", "^^",
                           "xsd:int", "\\", "'\'\''", '"""', "<", ">", "=", "&&", "_:b", "$v", ":", "PREFIX"])


_HEAD = st.sampled_from(["", f"PREFIX : <http://127.0.0.1:{LISTENER.port}/> ", "PREFIX p: <urn:p:> "])
_BEFORE = st.sampled_from(["", " ", "\n", "?s ?p ?o ", "?s ?p ?o . ", "?s ?p true", "?s ?p 1", "?s ?p ?o BIND(1 AS ?x)",
                           "OPTIONAL { ?s ?p ?o } ", "# c\r", "# c\n", "{ } ", "FILTER(true)", '?s ?p "x"@en'])
_KEYWORD = st.sampled_from(["SERVICE", "service", "SeRvIcE", "SERVICE SILENT", "SERVICESILENT", "SERVICE  SILENT",
                            "\rSERVICE", "OPTIONAL SERVICE", "MINUS", "OPTIONAL", ""])
_TARGETS = st.sampled_from([_TARGET, " " + _TARGET, ":sparql", " :sparql", "?x", "p:x"])
_AFTER = st.sampled_from(["{}", " { ?a ?b ?c }", "{ }", "{?a ?b ?c}"])


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(
    st.lists(_PIECES, max_size=30).map("".join),
    st.tuples(_HEAD, _BEFORE, _KEYWORD, _TARGETS, _AFTER).map(
        lambda t: f"{t[0]}SELECT * WHERE {{ {t[1]}{t[2]}{t[3]}{t[4]} }}")))
def test_a_query_that_passes_never_reaches_the_network(text):
    """Whatever passes the check reads the same when rebuilt, and Oxigraph, running it, connects to nothing (the
    only address in reach is a loopback listener that counts connections)."""
    try:
        rebuilt = clean(text)
    except SparqlRejected:
        return
    assert clean(rebuilt) == rebuilt
    assert [t.text for t in tokenize(rebuilt)] == [t.text for t in tokenize(text)]
    before = LISTENER.hits
    try:
        result = ox.Store().query(rebuilt, prefixes=PREFIXES)
        if not isinstance(result, ox.QueryBoolean):
            list(result)
    except (SyntaxError, ValueError, OSError, RuntimeError):
        pass
    assert LISTENER.hits == before, rebuilt


def test_token_kinds_positions_and_spacing():
    assert [(t.kind, t.text, t.start, t.spaced) for t in tokenize(
        "SELECT ?x $y WHERE{<urn:a> kg:p _:b . ?x kg:q 'v'@en , 1.5e3 ; ^^xsd:int}#c")] == [
        ("word", "SELECT", 0, False), ("var", "?x", 7, True), ("var", "$y", 10, True), ("word", "WHERE", 13, True),
        ("punct", "{", 18, False), ("iri", "<urn:a>", 19, False), ("pname", "kg:p", 27, True),
        ("bnode", "_:b", 32, True), ("punct", ".", 36, True), ("var", "?x", 38, True), ("pname", "kg:q", 41, True),
        ("string", "'v'", 46, True), ("langtag", "@en", 49, False), ("punct", ",", 53, True),
        ("number", "1.5e3", 55, True), ("punct", ";", 61, True), ("punct", "^^", 63, True),
        ("pname", "xsd:int", 65, False), ("punct", "}", 72, False)]
    assert [t.text for t in tokenize("FILTER(?a<=1&&?b!=2||?c>=3)")] == [
        "FILTER", "(", "?a", "<=", "1", "&&", "?b", "!=", "2", "||", "?c", ">=", "3", ")"]
    assert [t.kind for t in tokenize("<http://a/\\u0041b> <a b>")] == ["iri", "punct", "word", "word", "punct"]


@pytest.mark.parametrize("query, texts", [
    ("<http://a/\\u0041>kg:p<http://b/\\U0001F600>", ["<http://a/\\u0041>", "kg:p", "<http://b/\\U0001F600>"]),
    ('"a\\u0041b" "\\U0001F600" "q\\"q" "t\\tt"', ['"a\\u0041b"', '"\\U0001F600"', '"q\\"q"', '"t\\tt"']),
    ("'''a\nb''' 'c'", ["'''a\nb'''", "'c'"]),
    ("'''it's''' \"\"\"say \"hi\"\"\"\" x", None),
    ('"""a""" """b"""', ['"""a"""', '"""b"""']),
    ("'''a\\'''' x", ["'''a\\''''", "x"]),
    ("<urn:x>", ["<urn:x>"]),
    ("?a<?b", ["?a", "<", "?b"]),
    ("kg:a.", ["kg:a", "."]),
    ("kg:a.b kg: :x", ["kg:a.b", "kg:", ":x"]),
])
def test_literals_iris_and_names_are_read_whole(query, texts):
    if texts is None:
        with pytest.raises(SparqlRejected):
            tokenize(query)
        return
    assert [t.text for t in tokenize(query)] == texts


@pytest.mark.parametrize("query, message", [
    ("<http://a/\\u004>", "hexadecimal|unexpected character"),
    ("<http://a/\\q>", "backslash"),
    ("SELECT * { ?s ?p 'a\\", "unknown escape|unterminated"),
    ("SELECT * { ?s ?p 'a\\u00'", "hexadecimal"),
    ("SELECT * { ?s ?p '\\U00110000' }", "hexadecimal"),
    ("SELECT * { ?s ?p 'a\\qb' }", r"unknown escape '\\\\q'"),
    ("SELECT * { ?s ?p '''abc", "unterminated"),
    ("SELECT * { ?s ?p 'a\rb' }", "line break"),
    ("SELECT * { ?s ?p \x7f }", "unexpected character"),
    ("SELECT * { ?s ?p \x80 }", "outside a string"),
    ("SELECT * { ?s kg:p\x80 ?o }", "in a name"),
    ("SELECT * { ?s ?p 'v'@en\u00e9 }", "in a name"),
    ("SELECT * { _:b\u00e9 ?p ?o }", "in a name"),
    ("SELECT * { ?s ?p ?o } LIMIT 1\u00e9", "outside a string"),
    ("PREFIX service2: <urn:x:> SELECT * { ?s service2:p ?o }", "SERVICE"),
    ("SELECT * { ?s ?p ?o } ORDERLOAD", "LOAD"),
    ("SELECT * { ?s ?p 'x'@load }", "LOAD"),
])
def test_edges_of_the_sparql_literals_are_refused_cleanly(query, message):
    with pytest.raises(SparqlRejected, match=message):
        tokenize(query)


def test_local_names_may_hold_the_network_words_prefixes_may_not():
    assert clean("SELECT * { ?s kg:service_level kg:download ; kg:x:load ?o }") == \
        "SELECT * { ?s kg:service_level kg:download ; kg:x:load ?o }"
    with pytest.raises(SparqlRejected, match="SERVICE"):
        clean("SELECT * { ?s myservice:p ?o }")


@pytest.mark.parametrize("query, kinds", [
    ("?a < b>", ["var", "punct", "word", "punct"]),
    ("<urn:a!b>", ["iri"]),
    ("SELECT * WHERE { ?s ?p '\\U0010FFFF' }", ["word", "punct", "word", "punct", "var", "var", "string", "punct"]),
    ("SELECT * WHERE { ?s kg:service:x ?o }", ["word", "punct", "word", "punct", "var", "pname", "var", "punct"]),
])
def test_more_sparql_token_edges(query, kinds):
    assert [t.kind for t in tokenize(query)] == kinds


def test_a_comment_ends_at_its_own_line_break():
    assert clean("SELECT * WHERE { ?s ?p ?o } #\nLIMIT 1") == "SELECT * WHERE { ?s ?p ?o } LIMIT 1"


@pytest.mark.parametrize("query, message", [
    ("<a\\u", "hexadecimal"),
    ("SELECT * { kg:a\x7f ?p ?o }", "unexpected character"),
    ("SELECT * { ?x\u00e9 ?p ?o }", "in a name"),
    ("SELECT\u00e9 * { ?s ?p ?o }", "in a name"),
])
def test_more_sparql_refusals(query, message):
    with pytest.raises(SparqlRejected, match=message):
        tokenize(query)


@pytest.mark.slow
async def test_without_bubblewrap_the_engine_runs_where_it_cannot_reach_the_network(tmp_path, monkeypatch):
    """The wall under the query check: without bubblewrap the engine still runs in a process of its own with no
    network, so even a SERVICE the check would have refused (sent to the engine directly here) connects to
    nothing."""
    if not sb.weak_network_isolation():
        if os.environ.get("KGAGENTS_CI"):
            pytest.fail("this machine gives no unprivileged network namespace")
        pytest.skip("no unprivileged network namespace here")
    monkeypatch.setattr(sb_bwrap, "_find_bwrap", lambda: None)
    runner = SparqlRunner(tmp_path / "work", SandboxLimits(timeout_s=20))
    assert runner.sandbox is not None and runner.sandbox.isolation == "weak"
    before = LISTENER.hits
    outcome, error = await runner.run("", f"SELECT * WHERE {{ SERVICE {_TARGET} {{ ?s ?p ?o }} }}", update=False)
    assert outcome is None and error, outcome
    outcome, error = await runner.run("", f"LOAD <http://127.0.0.1:{LISTENER.port}/x.ttl>", update=True)
    assert outcome is None and error
    assert LISTENER.hits == before
    outcome, error = await runner.run("<urn:a> <urn:p> <urn:b> .\n", "SELECT ?o WHERE { <urn:a> <urn:p> ?o }",
                                      update=False)
    assert error is None and outcome is not None  # the engine itself works there


@pytest.mark.parametrize("text", [
    "SELECT * WHERE { ?s ?p " + "a." * 5000 + " }",
    "SELECT * WHERE { ?s ?p " + "a-" * 5000 + " }",
    "SELECT * WHERE { ?s ?p " + "a1_-." * 2000 + "b }",
    "SELECT * WHERE { ?s kg:p ex:o . ?s a kg:T ; rdfs:label 'x' . _:b1 ex:p.q ?o . ?o :x :y } LIMIT 5",
    "PREFIX a.b: <urn:x> SELECT * WHERE { ?s a.b:c a.b: . ?s a.:x ?o }",
])
def test_the_prefixed_name_pattern_is_tried_only_where_it_matches(text, monkeypatch):
    """A failed try of the prefixed-name pattern costs the length of the run of name characters where it starts (it
    backtracks through every shorter prefix): tried at every position of ``a.a.a...``, it made the tokenizer
    quadratic (an 80 KB query: a minute). It is tried only where it matches, and the tokens are the same."""
    from kgagents.tools.kg import sparql_text

    real = sparql_text._PNAME
    tries: list[bool] = []

    class Counting:
        def match(self, string: str, pos: int = 0) -> re.Match[str] | None:
            found = real.match(string, pos)
            tries.append(found is not None)
            return found

    try:
        expected = [(t.kind, t.text) for t in tokenize(text)]
    except SparqlRejected as exc:
        expected = [("refused", str(exc))]
    monkeypatch.setattr(sparql_text, "_PNAME", Counting())
    try:
        got = [(t.kind, t.text) for t in tokenize(text)]
    except SparqlRejected as exc:
        got = [("refused", str(exc))]
    assert got == expected
    assert all(tries), f"{tries.count(False)} tries of the prefixed-name pattern failed"
