"""Hundreds of hostile queries per query language, sent through the store API the graph executor uses, against
every database backend the project starts: run B never sees run A's secret, A's KG stays as it was, no host file
or environment is read and nothing reaches the network.

The corpus is :mod:`tests.kg.hostile` (the project's attack lists times the mutations). Each query goes through
the attacker's ``read`` and ``write``; every reply (result or error) is searched for the victim's secret, the host
file's marker and the environment canary; a loopback listener counts the connections the queries make.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from kgagents.graphs.io import final_state
from tests.kg import hostile
from tests.kg.conftest import CANARY, Backend, make_backend
from tests.kg.test_sparql_text import Listener

HOSTILE_CASES = ["neo4j", "neo4j-shared", "falkordb", "sparql", "sparql-http"]
#: The backends whose database (or sandbox) is a wall of its own: a database per run, a graph per run, a private
#: copy of the run's graph in a sandbox without network. The corpus runs there with the query checks switched off.
#: (The Oxigraph server is left out: LLM-written SPARQL never reaches a server, so ``sparql`` covers the path.)
WALLED_CASES = ["neo4j", "falkordb", "sparql"]
LISTENER = Listener()


@pytest.fixture(params=HOSTILE_CASES)
def hostile_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    from tests.kg.conftest import _apply_env

    b = make_backend(request.param, request)
    _apply_env(monkeypatch, b)
    return b


@pytest.fixture(params=WALLED_CASES)
def walled_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    from tests.kg.conftest import _apply_env

    b = make_backend(request.param, request)
    _apply_env(monkeypatch, b)
    return b


def switch_checks_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on the query checks let everything through: the model's text reaches the engine as it is."""
    from kgagents.tools.kg import cypher_store, falkordb_store, sparql_store

    for module in (cypher_store, falkordb_store):
        monkeypatch.setattr(module, "prepare", lambda statement, dialect, label=None, read_only=False: statement)
        monkeypatch.setattr(module, "split_statements", lambda code: [code])
    monkeypatch.setattr(sparql_store, "clean", lambda text: text)


def _victim_kg(language: str, secret: str) -> str:
    if language == "cypher":
        return (f"CREATE (:Victim {{id: 'victim', secret: '{secret}'}})-[:HOLDS]->"
                f"(:Vault {{id: 'vault', secret: '{secret}'}})")
    return (f"INSERT DATA {{ kg:victim a kg:Victim ; kg:secret \"{secret}\" ; kg:HOLDS kg:vault . "
            f"kg:vault a kg:Vault ; kg:secret \"{secret}\" . }}")


def _own_kg(language: str) -> str:
    if language == "cypher":
        return "CREATE (:Mine {id: 'mine', note: 'attacker'})"
    return "INSERT DATA { kg:mine a kg:Mine ; kg:note \"attacker\" . }"


@pytest.mark.slow
async def test_the_hostile_corpus_finds_no_way_out(hostile_backend: Backend, tmp_path: Path):
    await _corpus_holds(hostile_backend, tmp_path)


@pytest.mark.slow
async def test_the_database_walls_hold_without_the_query_checks(walled_backend: Backend, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch):
    """The checks are not the wall: with them switched off, a run's database (Bolt), graph (FalkorDB) or sandboxed
    private copy (SPARQL) still keeps every query of the corpus from other runs, host files and the network."""
    if walled_backend.language == "sparql":
        from kgagents.tools.sandbox import isolation_status

        if isolation_status()[0] != "bwrap":
            pytest.skip("the SPARQL sandbox needs bubblewrap")
    executed = await _corpus_holds(walled_backend, tmp_path, lambda: switch_checks_off(monkeypatch),
                                   only_refused=walled_backend.language == "sparql")
    assert executed >= 150  # the engine, not a refusal, answered these


async def _corpus_holds(b: Backend, tmp_path: Path, then: Callable[[], None] = lambda: None, *,
                        only_refused: bool = False) -> int:
    """Run the corpus for ``b``'s language against a victim and an attacker run (``then`` is called once both
    hold their KG); return how many queries the engine ran (answered or failed) rather than a check refusing
    them. ``only_refused``: just the queries the SPARQL check refuses (the others run through the sandbox in the
    checked test already, and each costs a sandbox start)."""
    suffix = uuid.uuid4().hex[:8]
    secret = f"SECRET-A-{suffix}"
    marker = f"HOSTFILE-{suffix}"
    host_file = tmp_path / "host-secret.csv"
    host_file.write_text(f"{marker}\n")
    victim = b.open(f"victim-{suffix}", None, tmp_path / "v")
    attacker = b.open(f"attacker-{suffix}", None, tmp_path / "a")
    assert (await victim.write(_victim_kg(b.language, secret))).ok
    assert (await attacker.write(_own_kg(b.language))).ok
    kept = b.db_snapshot(victim)
    assert secret in json.dumps(kept)
    then()
    url = f"http://127.0.0.1:{LISTENER.port}/data"
    if b.language == "cypher":
        queries = hostile.corpus(hostile.CYPHER_ATTACKS, hostile.CYPHER_MUTATIONS, url=url, file=str(host_file))
    else:
        endpoint = b.server.extra["query"] if b.server is not None else url
        queries = hostile.corpus(hostile.SPARQL_ATTACKS, hostile.SPARQL_MUTATIONS, url=url, file=str(host_file),
                                 victim=victim.graph, endpoint=endpoint)  # type: ignore[attr-defined]
    assert len(queries) >= 300
    if only_refused:
        queries = [(name, q) for name, q in queries if _refused(q)]
    hits = LISTENER.hits
    leaks: list[str] = []
    reached: list[str] = []
    executed = 0
    for name, query in queries:
        for op in _operations(attacker, b.language, query):
            before = LISTENER.hits
            result = await op(query)
            executed += not (result.error or "").startswith("Rejected")
            reply = json.dumps([getattr(result, "ok", None), getattr(result, "result", None), result.error],
                               default=str)
            for needle, what in ((secret, "the victim's secret"), (marker, "a host file"), (CANARY, "the env")):
                if needle in reply:
                    leaks.append(f"{name} ({op.__name__}) read {what}: {query!r}")
            if LISTENER.hits != before:
                reached.append(f"{name} ({op.__name__}) reached the network: {query!r}")
            if op is attacker.write and result.ok and b.db_snapshot(victim) != kept:
                leaks.append(f"{name} changed the victim's KG: {query!r}")
    assert not leaks, "\n".join(leaks[:20])
    assert not reached and LISTENER.hits == hits, "\n".join(reached[:20])
    assert b.db_snapshot(victim) == kept
    # the attacker's own KG is whatever its store says, and holds nothing of the victim's
    assert b.db_snapshot(attacker) == await attacker.snapshot()
    assert secret not in json.dumps(await attacker.snapshot())
    # and the victim goes on
    assert (await victim.read("MATCH (n:Victim) RETURN n.secret AS s" if b.language == "cypher" else
                              "SELECT ?s WHERE { ?v a kg:Victim ; kg:secret ?s }")).result
    return executed


@pytest.mark.slow
async def test_resource_bombs_never_reach_a_server_and_every_server_stays_up(hostile_backend: Backend,
                                                                            tmp_path: Path):
    """Every bomb of the corpus, under every mutation, through both operations: refused as it is; under a mutation
    refused, or made harmless (hidden in a string, or naming a variable that does not exist); the server is up
    and the victim's KG as it was."""
    b = hostile_backend
    if b.language != "cypher":
        pytest.skip("the SPARQL engine runs in the sandbox, under its time and memory limits")
    suffix = uuid.uuid4().hex[:8]
    secret = f"SECRET-A-{suffix}"
    victim = b.open(f"victim-{suffix}", None, tmp_path / "v")
    attacker = b.open(f"attacker-{suffix}", None, tmp_path / "a")
    assert (await victim.write(_victim_kg(b.language, secret))).ok
    assert (await attacker.write(_victim_kg(b.language, "attacker-own"))).ok
    kept = b.db_snapshot(victim)
    queries = hostile.corpus(hostile.CYPHER_BOMBS, hostile.CYPHER_MUTATIONS)
    assert len(queries) >= 300
    let_through = []
    for name, query in queries:
        for op in (attacker.read, attacker.write):
            result = await op(query)
            refused = (result.error or "").startswith("Rejected")
            if name.endswith("/as is"):
                assert refused, f"{name} ({op.__name__}) was not refused: {result}"
            elif not refused:
                let_through.append(name)
    assert all(name.endswith(("/string escape", "/mixed case")) for name in let_through), let_through
    assert b.server is None or b.server.alive()
    assert b.db_snapshot(victim) == kept
    assert (await victim.read("MATCH (n:Victim) RETURN n.secret AS s")).result == [{"s": secret}]


def _refused(query: str) -> bool:
    from kgagents.tools.kg.sparql_text import SparqlRejected, clean

    try:
        clean(query)
    except SparqlRejected:
        return True
    return False


_SPARQL_QUERY_FORMS = ("SELECT", "ASK", "CONSTRUCT", "DESCRIBE")


def _operations(store: object, language: str, query: str) -> list:
    """Both store operations for Cypher; for SPARQL the one the text is for (a query as a read, an update as a
    write: the other would only be a parse error, and each SPARQL operation starts a sandbox)."""
    if language == "cypher":
        return [store.read, store.write]  # type: ignore[attr-defined]
    words = [w.upper() for w in query.replace("{", " ").split()]
    form = next((w for w in words if w in _SPARQL_QUERY_FORMS or w in ("INSERT", "DELETE", "LOAD", "DROP", "CLEAR",
                                                                      "COPY", "ADD", "MOVE", "CREATE", "WITH")), "")
    return [store.read if form in _SPARQL_QUERY_FORMS else store.write]  # type: ignore[attr-defined]


def _environ(pid: int) -> str:
    return Path(f"/proc/{pid}/environ").read_bytes().replace(b"\0", b"\n").decode("utf-8", "replace")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_child_servers_hold_no_secret_of_the_application(arcadedb_server, falkordb_server, oxigraph_server):
    assert os.environ.get("KGAGENTS_CANARY_SECRET") == CANARY  # the tests' process has it ...
    for server in (arcadedb_server, falkordb_server, oxigraph_server):
        env = _environ(server.proc.pid)
        assert CANARY not in env, server.kind  # ... no child server does
        assert "KGAGENTS_" not in env and "OPENAI" not in env, server.kind
    assert arcadedb_server.extra["password"] not in _environ(arcadedb_server.proc.pid)
    assert arcadedb_server.extra["password"] not in Path(f"/proc/{arcadedb_server.proc.pid}/cmdline").read_text()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_the_arcadedb_child_runs_no_code_from_the_parents_interpreter_settings(tmp_path, monkeypatch):
    """A ``PYTHONPATH`` in kgagents' environment (a cloned folder's ``.env`` could set one) reaches no child: the
    ArcadeDB child is an isolated Python with a minimal environment, and a ``sitecustomize`` planted on that path
    never runs."""
    from kgagents.tools.kg.servers import start_arcadedb_bolt

    planted = tmp_path / "planted"
    planted.mkdir()
    ran = tmp_path / "ran"
    (planted / "sitecustomize.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(planted), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("PYTHONSTARTUP", str(planted / "sitecustomize.py"))
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dkgagents.planted=1")
    monkeypatch.setenv("PATH", f"{planted}{os.pathsep}{os.environ.get('PATH', '')}")
    server = start_arcadedb_bolt()
    try:
        env = _environ(server.proc.pid)
        for name in ("PYTHONPATH", "PYTHONSTARTUP", "JAVA_TOOL_OPTIONS", str(planted)):
            assert name not in env, name
        assert "-I" in Path(f"/proc/{server.proc.pid}/cmdline").read_text().split("\0")
        assert not ran.exists()  # the planted module never ran
    finally:
        server.stop()


@pytest.mark.slow
def test_the_arcadedb_engine_itself_refuses_file_and_url_reads_and_long_queries(arcadedb_server, tmp_path):
    """Below the query checks: the embedded server's own settings (a query sent straight through the driver)."""
    import neo4j

    host_file = tmp_path / "x.csv"
    host_file.write_text("HOST\n")
    auth = (arcadedb_server.extra["user"], arcadedb_server.extra["password"])
    with neo4j.GraphDatabase.driver(arcadedb_server.url, auth=auth) as driver, \
            driver.session(database=arcadedb_server.extra["database"]) as session:
        for query in (f"LOAD CSV FROM 'file://{host_file}' AS l RETURN l",
                      f"LOAD CSV FROM 'http://127.0.0.1:{LISTENER.port}/x' AS l RETURN l"):
            with pytest.raises(neo4j.exceptions.Neo4jError, match="disabled"):
                session.run(query).consume()
        with pytest.raises(neo4j.exceptions.Neo4jError, match="timeout"):
            session.run("UNWIND range(1, 20000) AS x UNWIND range(1, 20000) AS y WITH x, y WHERE x * y = -1 "
                        "RETURN count(*) AS c").consume()


#: One retrieve query per class of attack (the corpus's bases, in the forms that hide best).
RETRIEVE_ATTACKS = {
    "cypher": [
        "RETURN 1 AS x // hidden\r UNION MATCH (n) RETURN n.secret AS x",
        "MATCH (a)\u2014[:HOLDS]\u2192(b) RETURN b.secret AS s",
        "MATCH (n IS Victim) RETURN n.secret AS s",
        "MATCH TRAIL (a)-->(b) RETURN b.secret AS s",
        "FOREACH (x IN [1] | CREATE (:Planted)) WITH 1 AS one MATCH (n) RETURN n.secret AS s",
        "CALL { MATCH (n) RETURN n } RETURN n.secret AS s",
        "WITH '1' AS r MATCH (n) WHERE elementId(n) = r RETURN n.secret AS s",
        "LOAD CSV FROM 'file:///proc/self/environ' AS l RETURN l",
        "USE kgagents MATCH (n) RETURN n.secret AS s",
        "MATCH (n) RETURN n.secret AS s",
    ],
    "sparql": [
        "SELECT ?s WHERE { GRAPH ?g { ?v <urn:kg:secret> ?s } }",
        "SELECT ?s FROM NAMED <{victim}> WHERE { GRAPH ?g { ?v kg:secret ?s } }",
        "SELECT ?s FROM <{victim}> WHERE { ?v kg:secret ?s }",
        "PREFIX : <{endpoint}> SELECT ?s WHERE { SERVICE:x { ?v kg:secret ?s } }",
        "SELECT ?s WHERE { ?a ?b true SERVICE<{endpoint}?default-graph-uri={victim}>{ ?v kg:secret ?s } }",
        "SELECT ?s WHERE { # x\r SERVICE <{endpoint}> { GRAPH ?g { ?v kg:secret ?s } } }",
        "SELECT ?s WHERE { ?v kg:secret ?s }",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("number", range(10))
async def test_a_kgot_run_whose_retrieve_query_attacks_gets_nothing_of_another_run(
        hostile_backend: Backend, tmp_path: Path, number: int):
    from langgraph.checkpoint.memory import InMemorySaver

    from kgagents.core.scripted import ScriptedChatModel
    from kgagents.graphs.kgot import compile_graph
    from tests import kgot_script as S
    from tests.kg.conftest import CODE
    from tests.kg.helpers import SORT_CALL, context

    b = hostile_backend
    attacks = RETRIEVE_ATTACKS[b.language]
    if number >= len(attacks):
        pytest.skip("fewer attack classes for this language")
    suffix = uuid.uuid4().hex[:8]
    secret = f"SECRET-A-{suffix}"
    victim = b.open(f"victim-{suffix}", None, tmp_path / "v")
    assert (await victim.write(_victim_kg(b.language, secret))).ok
    kept = b.db_snapshot(victim)
    endpoint = b.server.extra["query"] if b.server is not None and b.language == "sparql" else \
        f"http://127.0.0.1:{LISTENER.port}/sparql"
    attack = attacks[number].replace("{victim}", getattr(victim, "graph", "")).replace("{endpoint}", endpoint)
    code = CODE[b.language]
    steps = [*S.votes("INSERT", 0, unless="SortedArray"), *S.votes("RETRIEVE", 0, when_extra="SortedArray"),
             *S.merge(times=0), S.step(S.DEFINE_TOOLS, times=0, tool_calls=[{"name": SORT_CALL[0],
                                                                              "args": SORT_CALL[1]}]),
             S.step(S.WRITE, times=0, structured={"code": code["write_array"]}),
             S.step(S.RETRIEVE, times=0, structured={"code": attack}), *S.fix(attack, times=0),
             *S.regenerate(attack, times=0), S.step(S.FORCED, times=0, structured={"solution": "unknown"}),
             *S.need_math(False, times=0), S.step(S.PARSE, times=0, structured={"final_answer": "unknown"})]
    model = ScriptedChatModel(steps=steps)
    hits = LISTENER.hits
    state = await final_state(
        compile_graph(InMemorySaver()),
        {"question": "What is the sorted array?"}, {"configurable": {"thread_id": f"attacker-{suffix}"},
        "recursion_limit": 200},
        context=context(b, model, tmp_path))
    attempts = [a for a in state["solve_attempts"] if a["query"] == attack]
    assert attempts, state["solve_attempts"]  # the attack ran as the retrieve query: refused, failed or empty
    assert all(not a["ok"] or a["empty"] or secret not in str(a["result"]) for a in attempts)
    assert state["final_answer"]
    everything = json.dumps(state, default=str) + "\n".join(model.calls)
    assert secret not in everything and CANARY not in everything
    assert b.db_snapshot(victim) == kept and LISTENER.hits == hits
